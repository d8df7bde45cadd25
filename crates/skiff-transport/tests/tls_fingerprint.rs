//! `tlsSettings.fingerprint`: our TLS client sends a browser's ClientHello through our own
//! TLS 1.3 handshake to our rustls-based TLS server (ECDSA and Ed25519 certificates), then
//! carries data both ways through the record layer; pins are enforced as on the rustls path.

use std::time::Duration;

use sha2::{Digest, Sha256};
use skiff_core::BoxStream;
use skiff_transport::fingerprint::Fingerprint;
use skiff_transport::tls::{TlsClient, TlsClientOptions, TlsServer, TlsServerOptions, TlsSession};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::timeout;

const LIMIT: Duration = Duration::from_secs(20);

struct Cert {
    pem: String,
    key: String,
    sha256: [u8; 32],
}

fn cert(alg: &'static rcgen::SignatureAlgorithm) -> Cert {
    let key = rcgen::KeyPair::generate_for(alg).unwrap();
    let cert = rcgen::CertificateParams::new(vec!["fp.example".into()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    Cert {
        pem: cert.pem(),
        key: key.serialize_pem(),
        sha256: Sha256::digest(cert.der().as_ref()).into(),
    }
}

fn server(c: &Cert) -> TlsServer {
    TlsServer::new(&TlsServerOptions {
        certificates: vec![(c.pem.clone(), c.key.clone())],
        alpn: vec!["h2".into(), "http/1.1".into()],
        ..Default::default()
    })
    .unwrap()
}

async fn run(
    server: &TlsServer,
    client: &TlsClient,
) -> (
    std::io::Result<(BoxStream, TlsSession)>,
    std::io::Result<BoxStream>,
) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accept = async {
        let (tcp, _) = listener.accept().await?;
        server.accept(Box::new(tcp)).await
    };
    let connect = async {
        let tcp = TcpStream::connect(addr).await?;
        client.connect(Box::new(tcp)).await
    };
    timeout(LIMIT, async { tokio::join!(accept, connect) })
        .await
        .expect("handshake in time")
}

fn client(fingerprint: Fingerprint, pins: Vec<[u8; 32]>) -> TlsClient {
    TlsClient::new(&TlsClientOptions {
        server_name: "fp.example".into(),
        allow_insecure: pins.is_empty(),
        pinned_sha256: pins,
        fingerprint: Some(fingerprint),
        ..Default::default()
    })
    .unwrap()
}

async fn exchange(mut a: BoxStream, mut b: BoxStream) {
    let data: Vec<u8> = (0..1u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
        .collect();
    let want = Sha256::digest(&data);
    let sent = data.clone();
    let writer = tokio::spawn(async move {
        a.write_all(&sent).await.unwrap();
        a.flush().await.unwrap();
        let mut back = vec![0u8; 5];
        a.read_exact(&mut back).await.unwrap();
        back
    });
    let mut got = vec![0u8; data.len()];
    timeout(LIMIT, b.read_exact(&mut got))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(Sha256::digest(&got), want);
    b.write_all(b"reply").await.unwrap();
    b.flush().await.unwrap();
    assert_eq!(timeout(LIMIT, writer).await.unwrap().unwrap(), b"reply");
}

#[tokio::test]
async fn chrome_hello_with_a_pinned_ecdsa_certificate() {
    let c = cert(&rcgen::PKCS_ECDSA_P256_SHA256);
    let (s, cl) = run(&server(&c), &client(Fingerprint::Chrome, vec![c.sha256])).await;
    let (s, session) = s.unwrap();
    assert_eq!(session.sni.as_deref(), Some("fp.example"));
    assert_eq!(session.alpn.as_deref(), Some("h2"));
    exchange(cl.unwrap(), s).await;
}

#[tokio::test]
async fn firefox_safari_and_randomized_hellos() {
    let c = cert(&rcgen::PKCS_ECDSA_P256_SHA256);
    for fp in [
        Fingerprint::Firefox,
        Fingerprint::Safari,
        Fingerprint::Randomized,
    ] {
        let (s, cl) = run(&server(&c), &client(fp, vec![])).await;
        exchange(cl.unwrap(), s.unwrap().0).await;
    }
}

/// No browser offers Ed25519 in signature_algorithms, so a server with only an Ed25519
/// certificate refuses the hello, as it would refuse the browser.
#[tokio::test]
async fn an_ed25519_only_server_refuses_a_browser_hello() {
    let c = cert(&rcgen::PKCS_ED25519);
    let (_, cl) = run(&server(&c), &client(Fingerprint::Chrome, vec![])).await;
    let err = cl.err().expect("no common signature scheme");
    assert!(err.to_string().contains("alert 40"), "{err}");
}

#[tokio::test]
async fn a_wrong_pin_fails_the_client() {
    let c = cert(&rcgen::PKCS_ECDSA_P384_SHA384);
    let (_, cl) = run(&server(&c), &client(Fingerprint::Chrome, vec![[7; 32]])).await;
    let err = cl.err().expect("a wrong pin must fail");
    assert!(err.to_string().contains("pinnedPeerCertSha256"), "{err}");
}

#[test]
fn fingerprints_need_tls_1_3() {
    let err = TlsClient::new(&TlsClientOptions {
        server_name: "fp.example".into(),
        allow_insecure: true,
        max_version: Some(skiff_transport::tls::TlsVersion::V1_2),
        fingerprint: Some(Fingerprint::Chrome),
        ..Default::default()
    })
    .unwrap_err();
    assert!(err.contains("TLS 1.3"), "{err}");
}
