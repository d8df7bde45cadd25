//! TLS layer end to end over loopback TCP: rcgen self-signed certificates, TlsServer and
//! TlsClient, every step bounded by a timeout.

use std::future::poll_fn;
use std::io;
use std::task::Poll;
use std::time::Duration;

use sha2::{Digest, Sha256};
use skiff_core::{BoxStream, ProxyStream};
use skiff_transport::tls::{
    RECORD_LAYER_TAKEOVERS, TlsClient, TlsClientOptions, TlsServer, TlsServerOptions, TlsSession,
    TlsVersion,
};
use std::sync::atomic::Ordering;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::timeout;

const LIMIT: Duration = Duration::from_secs(20);

struct TestCert {
    cert_pem: String,
    key_pem: String,
    sha256: [u8; 32],
}

fn make_cert(names: &[&str]) -> TestCert {
    let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    let ck = rcgen::generate_simple_self_signed(names).expect("rcgen");
    TestCert {
        cert_pem: ck.cert.pem(),
        key_pem: ck.signing_key.serialize_pem(),
        sha256: Sha256::digest(ck.cert.der().as_ref()).into(),
    }
}

fn server_opts(certs: &[&TestCert]) -> TlsServerOptions {
    TlsServerOptions {
        certificates: certs
            .iter()
            .map(|c| (c.cert_pem.clone(), c.key_pem.clone()))
            .collect(),
        ..Default::default()
    }
}

fn insecure_client(name: &str) -> TlsClientOptions {
    TlsClientOptions {
        server_name: name.into(),
        allow_insecure: true,
        ..Default::default()
    }
}

fn pinned_client(name: &str, pin: [u8; 32]) -> TlsClientOptions {
    TlsClientOptions {
        server_name: name.into(),
        pinned_sha256: vec![pin],
        ..Default::default()
    }
}

type Outcome = (io::Result<(BoxStream, TlsSession)>, io::Result<BoxStream>);

/// Runs one handshake over a fresh loopback TCP connection; both results.
async fn handshake(server: &TlsServer, client: &TlsClient) -> Outcome {
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
        .expect("handshake timed out")
}

async fn expect_ok(server: &TlsServer, client: &TlsClient) -> (BoxStream, TlsSession, BoxStream) {
    match handshake(server, client).await {
        (Ok((s, session)), Ok(c)) => (s, session, c),
        (s, c) => panic!(
            "handshake failed: server {:?}, client {:?}",
            s.err(),
            c.err()
        ),
    }
}

async fn expect_client_fails(server: &TlsServer, client: &TlsClient) -> io::Error {
    let (s, c) = handshake(server, client).await;
    assert!(s.is_err(), "server side should fail too");
    match c {
        Ok(_) => panic!("client handshake should fail"),
        Err(e) => e,
    }
}

/// Deterministic, incompressible-looking bytes.
fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Echo round trip proving the stream carries data.
async fn ping(server: &mut BoxStream, client: &mut BoxStream) {
    timeout(LIMIT, async {
        client.write_all(b"ping").await.unwrap();
        client.flush().await.unwrap();
        let mut buf = [0u8; 4];
        server.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"ping");
    })
    .await
    .expect("ping timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_16_mib_each_way_with_alpn() {
    let cert = make_cert(&["a.test"]);
    let server = TlsServer::new(&TlsServerOptions {
        alpn: vec!["h2".into(), "http/1.1".into()],
        ..server_opts(&[&cert])
    })
    .unwrap();
    let client = TlsClient::new(&TlsClientOptions {
        alpn: vec!["http/1.1".into()],
        ..pinned_client("a.test", cert.sha256)
    })
    .unwrap();
    let before = RECORD_LAYER_TAKEOVERS.load(Ordering::Relaxed);
    let (server_stream, session, client_stream) = expect_ok(&server, &client).await;
    // Both ends negotiated TLS 1.3 and moved to Skiff's own record layer.
    assert!(RECORD_LAYER_TAKEOVERS.load(Ordering::Relaxed) >= before + 2);
    assert_eq!(session.sni.as_deref(), Some("a.test"));
    assert_eq!(session.alpn.as_deref(), Some("http/1.1"));
    assert!(server_stream.raw_tcp().is_none());
    assert!(client_stream.raw_tcp().is_none());

    const LEN: usize = 16 << 20;
    let up = pattern(LEN, 0x1234_5678);
    let down = pattern(LEN, 0x9abc_def0);
    let up_hash: [u8; 32] = Sha256::digest(&up).into();
    let down_hash: [u8; 32] = Sha256::digest(&down).into();

    async fn send(mut w: tokio::io::WriteHalf<BoxStream>, data: Vec<u8>) {
        for chunk in data.chunks(100_000) {
            w.write_all(chunk).await.unwrap();
        }
        w.shutdown().await.unwrap();
    }
    async fn receive(mut r: tokio::io::ReadHalf<BoxStream>) -> ([u8; 32], usize) {
        let mut hasher = Sha256::new();
        let mut total = 0;
        let mut buf = vec![0u8; 32 * 1024];
        loop {
            let n = r.read(&mut buf).await.unwrap();
            if n == 0 {
                break;
            }
            total += n;
            hasher.update(&buf[..n]);
        }
        (hasher.finalize().into(), total)
    }

    let (sr, sw) = tokio::io::split(server_stream);
    let (cr, cw) = tokio::io::split(client_stream);
    let (_, _, at_server, at_client) = timeout(Duration::from_secs(120), async {
        tokio::join!(send(cw, up), send(sw, down), receive(sr), receive(cr))
    })
    .await
    .expect("bulk transfer timed out");
    assert_eq!(at_server, (up_hash, LEN));
    assert_eq!(at_client, (down_hash, LEN));
}

#[tokio::test]
async fn tls_alpn_none_when_not_configured() {
    let cert = make_cert(&["a.test"]);
    let server = TlsServer::new(&server_opts(&[&cert])).unwrap();
    let client = TlsClient::new(&TlsClientOptions {
        alpn: vec!["h2".into()],
        ..insecure_client("a.test")
    })
    .unwrap();
    let (_, session, _) = expect_ok(&server, &client).await;
    assert_eq!(session.alpn, None);
}

#[tokio::test]
async fn tls_poll_read_ready_tracks_plaintext() {
    let cert = make_cert(&["a.test"]);
    let server = TlsServer::new(&server_opts(&[&cert])).unwrap();
    let client = TlsClient::new(&insecure_client("a.test")).unwrap();
    let (mut s, _, mut c) = expect_ok(&server, &client).await;
    ping(&mut s, &mut c).await;

    // Idle: not ready (TLS 1.3 session tickets were consumed by the client side only).
    let idle = poll_fn(|cx| Poll::Ready(s.poll_read_ready(cx).is_pending())).await;
    assert!(idle, "idle server stream must not be read-ready");

    c.write_all(b"hello").await.unwrap();
    c.flush().await.unwrap();
    timeout(LIMIT, poll_fn(|cx| s.poll_read_ready(cx)))
        .await
        .expect("never became ready")
        .unwrap();
    let mut buf = [0u8; 2];
    s.read_exact(&mut buf).await.unwrap();
    // Three plaintext bytes are still buffered inside rustls: ready without touching the socket.
    let ready = poll_fn(|cx| Poll::Ready(s.poll_read_ready(cx).is_ready())).await;
    assert!(ready, "buffered plaintext must make the stream read-ready");
    let mut rest = [0u8; 3];
    s.read_exact(&mut rest).await.unwrap();
    assert_eq!(&rest, b"llo");
}

#[tokio::test]
async fn tls_two_certificates_selected_by_sni() {
    let a = make_cert(&["a.test"]);
    let b = make_cert(&["*.b.test"]);
    let server = TlsServer::new(&server_opts(&[&a, &b])).unwrap();

    // Each name gets its own certificate: the pin for the expected leaf succeeds…
    for (name, cert) in [("a.test", &a), ("x.b.test", &b), ("A.TEST", &a)] {
        let client = TlsClient::new(&pinned_client(name, cert.sha256)).unwrap();
        let (mut s, session, mut c) = expect_ok(&server, &client).await;
        assert_eq!(
            session.sni.map(|s| s.to_ascii_lowercase()),
            Some(name.to_ascii_lowercase())
        );
        ping(&mut s, &mut c).await;
    }
    // …and the pin for the other leaf fails, so the selection really differs.
    for (name, other) in [("a.test", &b), ("x.b.test", &a)] {
        let client = TlsClient::new(&pinned_client(name, other.sha256)).unwrap();
        expect_client_fails(&server, &client).await;
    }
    // Wildcards are one label deep; unknown names, and no SNI (IP literal), get the first.
    for name in ["y.x.b.test", "b.test", "unknown.test", "127.0.0.1"] {
        let client = TlsClient::new(&pinned_client(name, a.sha256)).unwrap();
        let (_, session, _) = expect_ok(&server, &client).await;
        if name == "127.0.0.1" {
            assert_eq!(session.sni, None);
        }
    }
}

#[tokio::test]
async fn tls_reject_unknown_sni() {
    let a = make_cert(&["a.test"]);
    let b = make_cert(&["*.b.test"]);
    let server = TlsServer::new(&TlsServerOptions {
        reject_unknown_sni: true,
        ..server_opts(&[&a, &b])
    })
    .unwrap();
    for name in ["a.test", "z.b.test"] {
        let client = TlsClient::new(&insecure_client(name)).unwrap();
        expect_ok(&server, &client).await;
    }
    for name in ["unknown.test", "b.test", "127.0.0.1"] {
        let client = TlsClient::new(&insecure_client(name)).unwrap();
        expect_client_fails(&server, &client).await;
    }
}

#[tokio::test]
async fn tls_pinned_hash_mismatch_fails() {
    let cert = make_cert(&["a.test"]);
    let server = TlsServer::new(&server_opts(&[&cert])).unwrap();
    let mut wrong = cert.sha256;
    wrong[0] ^= 1;
    let client = TlsClient::new(&pinned_client("a.test", wrong)).unwrap();
    let err = expect_client_fails(&server, &client).await;
    assert!(err.to_string().contains("pinnedPeerCertSha256"), "{err}");
    // Pins win over allowInsecure.
    let client = TlsClient::new(&TlsClientOptions {
        allow_insecure: true,
        ..pinned_client("a.test", wrong)
    })
    .unwrap();
    expect_client_fails(&server, &client).await;
    // One matching pin among several is enough.
    let client = TlsClient::new(&TlsClientOptions {
        pinned_sha256: vec![wrong, cert.sha256],
        ..pinned_client("a.test", wrong)
    })
    .unwrap();
    expect_ok(&server, &client).await;
}

#[tokio::test]
async fn tls_allow_insecure_accepts_any_certificate() {
    let cert = make_cert(&["a.test"]);
    let server = TlsServer::new(&server_opts(&[&cert])).unwrap();
    // Name mismatch and an untrusted self-signed certificate: accepted.
    let client = TlsClient::new(&insecure_client("other.example")).unwrap();
    let (mut s, session, mut c) = expect_ok(&server, &client).await;
    assert_eq!(session.sni.as_deref(), Some("other.example"));
    ping(&mut s, &mut c).await;
}

#[tokio::test]
async fn tls_version_bounds() {
    let cert = make_cert(&["a.test"]);
    let tls12_only = TlsServer::new(&TlsServerOptions {
        min_version: Some(TlsVersion::V1_2),
        max_version: Some(TlsVersion::V1_2),
        ..server_opts(&[&cert])
    })
    .unwrap();
    let tls13_client = TlsClient::new(&TlsClientOptions {
        min_version: Some(TlsVersion::V1_3),
        ..insecure_client("a.test")
    })
    .unwrap();
    expect_client_fails(&tls12_only, &tls13_client).await;

    // Default client meets a 1.2-only server at 1.2 (pins and ALPN work there too).
    let client = TlsClient::new(&TlsClientOptions {
        alpn: vec!["h2".into()],
        ..pinned_client("a.test", cert.sha256)
    })
    .unwrap();
    let tls12_server = TlsServer::new(&TlsServerOptions {
        alpn: vec!["h2".into()],
        max_version: Some(TlsVersion::V1_2),
        ..server_opts(&[&cert])
    })
    .unwrap();
    let (mut s, session, mut c) = expect_ok(&tls12_server, &client).await;
    assert_eq!(session.alpn.as_deref(), Some("h2"));
    ping(&mut s, &mut c).await;

    // 1.3-only on both ends works; 1.3-only server vs 1.2-only client fails.
    let tls13_server = TlsServer::new(&TlsServerOptions {
        min_version: Some(TlsVersion::V1_3),
        ..server_opts(&[&cert])
    })
    .unwrap();
    expect_ok(&tls13_server, &tls13_client).await;
    let tls12_client = TlsClient::new(&TlsClientOptions {
        max_version: Some(TlsVersion::V1_2),
        ..insecure_client("a.test")
    })
    .unwrap();
    expect_client_fails(&tls13_server, &tls12_client).await;

    // min > max is a configuration error on both sides.
    let err = TlsServer::new(&TlsServerOptions {
        min_version: Some(TlsVersion::V1_3),
        max_version: Some(TlsVersion::V1_2),
        ..server_opts(&[&cert])
    })
    .unwrap_err();
    assert!(err.contains("minVersion"), "{err}");
    let err = TlsClient::new(&TlsClientOptions {
        min_version: Some(TlsVersion::V1_3),
        max_version: Some(TlsVersion::V1_2),
        ..insecure_client("a.test")
    })
    .unwrap_err();
    assert!(err.contains("minVersion"), "{err}");
}

#[test]
fn tls_bad_configuration_gives_clear_errors() {
    let a = make_cert(&["a.test"]);
    let b = make_cert(&["b.test"]);
    let err = |opts: TlsServerOptions| TlsServer::new(&opts).unwrap_err();

    let e = err(TlsServerOptions::default());
    assert!(e.contains("no certificate"), "{e}");

    let e = err(TlsServerOptions {
        certificates: vec![("not a pem".into(), a.key_pem.clone())],
        ..Default::default()
    });
    assert!(e.starts_with("certificate 1: no certificate found"), "{e}");

    let e = err(TlsServerOptions {
        certificates: vec![
            (a.cert_pem.clone(), a.key_pem.clone()),
            (b.cert_pem.clone(), "garbage".into()),
        ],
        ..Default::default()
    });
    assert!(e.starts_with("certificate 2: no private key found"), "{e}");

    // A key PEM holding only a certificate has no private key either.
    let e = err(TlsServerOptions {
        certificates: vec![(a.cert_pem.clone(), a.cert_pem.clone())],
        ..Default::default()
    });
    assert!(e.starts_with("certificate 1: no private key found"), "{e}");

    let e = err(TlsServerOptions {
        certificates: vec![(a.cert_pem.clone(), b.key_pem.clone())],
        ..Default::default()
    });
    assert!(
        e.starts_with("certificate 1: private key does not match"),
        "{e}"
    );

    // Corrupt base64 inside a well-framed PEM block.
    let broken = "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n";
    let e = err(TlsServerOptions {
        certificates: vec![(broken.into(), a.key_pem.clone())],
        ..Default::default()
    });
    assert!(e.starts_with("certificate 1: bad certificate PEM"), "{e}");

    let e = err(TlsServerOptions {
        alpn: vec![String::new()],
        ..server_opts(&[&a])
    });
    assert!(e.contains("ALPN"), "{e}");

    let e = TlsClient::new(&TlsClientOptions {
        server_name: "a.test".into(),
        ..Default::default()
    })
    .unwrap_err();
    assert_eq!(
        e,
        "set allowInsecure or pinnedPeerCertSha256 (no system root store yet)"
    );

    let e = TlsClient::new(&insecure_client("bad name!")).unwrap_err();
    assert!(e.contains("invalid server name"), "{e}");
}

/// The privateKey OCTET STRING of a PKCS#8 PrivateKeyInfo: PKCS#1 for RSA, SEC1 for EC.
fn unwrap_pkcs8(der: &[u8]) -> Vec<u8> {
    fn tlv(input: &[u8]) -> (u8, &[u8], &[u8]) {
        let tag = input[0];
        let (len, hdr) = match input[1] {
            l if l < 0x80 => (usize::from(l), 2),
            0x81 => (usize::from(input[2]), 3),
            0x82 => (usize::from(input[2]) << 8 | usize::from(input[3]), 4),
            other => panic!("unexpected DER length byte {other:#x}"),
        };
        (tag, &input[hdr..hdr + len], &input[hdr + len..])
    }
    let (_, info, _) = tlv(der);
    let (_, _, rest) = tlv(info); // version
    let (_, _, rest) = tlv(rest); // algorithm
    let (tag, key, _) = tlv(rest);
    assert_eq!(tag, 0x04);
    key.to_vec()
}

fn pem_block(label: &str, der: &[u8]) -> String {
    let b64 = skiff_transport::base64::encode_std(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).unwrap());
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

#[tokio::test]
async fn tls_pkcs1_and_sec1_private_keys() {
    let ec = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let rsa = rcgen::KeyPair::generate_for(&rcgen::PKCS_RSA_SHA256).unwrap();
    let cases = [
        (ec, "EC PRIVATE KEY", "ec.test"),
        (rsa, "RSA PRIVATE KEY", "rsa.test"),
    ];
    for (key, label, name) in cases {
        let cert = rcgen::CertificateParams::new(vec![name.to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let key_pem = pem_block(label, &unwrap_pkcs8(&key.serialize_der()));
        assert!(key_pem.starts_with(&format!("-----BEGIN {label}-----")));
        let server = TlsServer::new(&TlsServerOptions {
            certificates: vec![(cert.pem(), key_pem)],
            ..Default::default()
        })
        .unwrap_or_else(|e| panic!("{label}: {e}"));
        let pin: [u8; 32] = Sha256::digest(cert.der().as_ref()).into();
        for version in [TlsVersion::V1_2, TlsVersion::V1_3] {
            let client = TlsClient::new(&TlsClientOptions {
                min_version: Some(version),
                max_version: Some(version),
                ..pinned_client(name, pin)
            })
            .unwrap();
            let (mut s, _, mut c) = expect_ok(&server, &client).await;
            ping(&mut s, &mut c).await;
        }
    }
}
