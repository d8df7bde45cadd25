//! Our REALITY client against Xray 26.7's REALITY server, at the transport level: a VLESS
//! request written by hand over the REALITY stream to an echo server behind Xray, 8 MiB
//! checked by SHA-256 both ways; and with a wrong public key, Xray forwards us to its target
//! (an `openssl s_server`) and our client fails quietly as Xray's does.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use sha2::{Digest, Sha256};
use skiff_transport::fingerprint::Fingerprint;
use skiff_transport::reality::client::{RealityClient, RealityClientOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const PRIVATE_KEY: &str = "CNq5Rkb1Prq12hWTXBQDHhUR2krYbd8vwKFIC90SIGQ";
const PUBLIC_KEY: [u8; 32] = [
    105, 187, 149, 123, 54, 249, 251, 12, 34, 88, 111, 95, 163, 187, 136, 41, 233, 194, 227, 45,
    225, 148, 72, 49, 180, 210, 202, 87, 155, 54, 12, 93,
];
const UUID: &str = "b831381d-6324-4d53-ad4f-8cda48b30811";
const UUID_BYTES: [u8; 16] = [
    0xb8, 0x31, 0x38, 0x1d, 0x63, 0x24, 0x4d, 0x53, 0xad, 0x4f, 0x8c, 0xda, 0x48, 0xb3, 0x08, 0x11,
];

fn xray() -> Option<PathBuf> {
    let found = std::env::var_os("XRAY_BIN")
        .map(PathBuf::from)
        .filter(|p| p.is_file())
        .or_else(|| {
            Some(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/peers/bin/xray"))
                .filter(|p| p.is_file())
        });
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must find xray (XRAY_BIN)"
        );
        eprintln!("skipped: xray not found (set XRAY_BIN)");
    }
    found
}

/// Kills the child it holds (by PID, through the handle) when dropped.
struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn wait_for_port(port: u16) {
    for _ in 0..100 {
        if TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("nothing listens on port {port} after 10 s");
}

/// The target: openssl s_server with a fresh certificate, TLS 1.3, HTTP/1.1 status page.
fn start_target(dir: &std::path::Path, port: u16) -> Killed {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["example.com".into()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    std::fs::write(dir.join("cert.pem"), cert.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), key.serialize_pem()).unwrap();
    Killed(
        Command::new("openssl")
            .args(["s_server", "-quiet", "-www", "-tls1_3", "-alpn", "http/1.1"])
            .arg("-accept")
            .arg(format!("127.0.0.1:{port}"))
            .arg("-cert")
            .arg(dir.join("cert.pem"))
            .arg("-key")
            .arg(dir.join("key.pem"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("openssl s_server"),
    )
}

fn start_xray(bin: &PathBuf, dir: &std::path::Path, port: u16, target: u16) -> Killed {
    let config = format!(
        r#"{{"log":{{"loglevel":"warning"}},
"inbounds":[{{"listen":"127.0.0.1","port":{port},"protocol":"vless",
  "settings":{{"clients":[{{"id":"{UUID}"}}],"decryption":"none"}},
  "streamSettings":{{"network":"tcp","security":"reality","realitySettings":{{
    "dest":"127.0.0.1:{target}","serverNames":["example.com"],
    "privateKey":"{PRIVATE_KEY}","shortIds":["0123abcd"]}}}}}}],
"outbounds":[{{"protocol":"freedom","settings":{{"finalRules":[{{"action":"allow","ip":["127.0.0.0/8"]}}]}}}}]}}"#
    );
    let path = dir.join("xray.json");
    std::fs::write(&path, config).unwrap();
    Killed(
        Command::new(bin)
            .arg("run")
            .arg("-c")
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("xray"),
    )
}

/// An echo server for one connection at a time, bounded in time by the test's timeout.
async fn start_echo() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut r, mut w) = s.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    port
}

fn options(public_key: [u8; 32], fingerprint: Fingerprint) -> RealityClientOptions {
    RealityClientOptions {
        server_name: "example.com".into(),
        public_key,
        short_id: vec![0x01, 0x23, 0xab, 0xcd],
        spider_x: "/".into(),
        spider_y: [0; 10],
        fingerprint,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vless_over_our_reality_client_through_xray() {
    let Some(bin) = xray() else { return };
    let dir = tempdir();
    let (target_port, xray_port) = (free_port(), free_port());
    let _target = start_target(&dir, target_port);
    let _xray = start_xray(&bin, &dir, xray_port, target_port);
    wait_for_port(target_port).await;
    wait_for_port(xray_port).await;
    let echo = start_echo().await;

    for fingerprint in [
        Fingerprint::Chrome,
        Fingerprint::Firefox,
        Fingerprint::Safari,
    ] {
        let client = RealityClient::new(options(PUBLIC_KEY, fingerprint)).unwrap();
        let tcp = TcpStream::connect(("127.0.0.1", xray_port)).await.unwrap();
        let stream = client
            .connect(Box::new(tcp))
            .await
            .unwrap_or_else(|e| panic!("{fingerprint:?}: REALITY handshake with Xray failed: {e}"));
        let (mut reader, mut writer) = tokio::io::split(stream);
        // VLESS request: version 0, user id, no addons, TCP to 127.0.0.1:echo.
        let mut request = vec![0u8];
        request.extend_from_slice(&UUID_BYTES);
        request.extend_from_slice(&[0, 1]);
        request.extend_from_slice(&echo.to_be_bytes());
        request.extend_from_slice(&[1, 127, 0, 0, 1]);
        let payload: Vec<u8> = (0..8u32 << 20)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let sent = Sha256::digest(&payload);
        let write = tokio::spawn(async move {
            writer.write_all(&request).await.unwrap();
            writer.write_all(&payload).await.unwrap();
            writer.flush().await.unwrap();
            writer
        });
        let mut head = [0u8; 2];
        tokio::time::timeout(Duration::from_secs(30), reader.read_exact(&mut head))
            .await
            .expect("VLESS response in time")
            .unwrap();
        assert_eq!(head, [0, 0], "VLESS response header");
        let mut got = vec![0u8; 8 << 20];
        tokio::time::timeout(Duration::from_secs(60), reader.read_exact(&mut got))
            .await
            .expect("echo in time")
            .unwrap();
        assert_eq!(
            Sha256::digest(&got),
            sent,
            "{fingerprint:?}: echoed bytes differ"
        );
        let _ = write.await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_public_key_reaches_the_real_site_and_fails_quietly() {
    let Some(bin) = xray() else { return };
    let dir = tempdir();
    let (target_port, xray_port) = (free_port(), free_port());
    let _target = start_target(&dir, target_port);
    let _xray = start_xray(&bin, &dir, xray_port, target_port);
    wait_for_port(target_port).await;
    wait_for_port(xray_port).await;
    let mut wrong = PUBLIC_KEY;
    wrong[0] ^= 1;
    let client = RealityClient::new(options(wrong, Fingerprint::Chrome)).unwrap();
    let tcp = TcpStream::connect(("127.0.0.1", xray_port)).await.unwrap();
    let err = match tokio::time::timeout(Duration::from_secs(20), client.connect(Box::new(tcp)))
        .await
        .expect("bounded")
    {
        Ok(_) => panic!("a server without our key must not be accepted"),
        Err(e) => e,
    };
    assert!(
        err.to_string().contains("processed invalid connection"),
        "unexpected error: {err}"
    );
}

fn tempdir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "skiff-reality-client-{}-{}",
        std::process::id(),
        free_port()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A figure, not a check (run with `--ignored --nocapture`): sequential REALITY handshakes
/// per second from our client to Xray's server, each with a one-byte VLESS exchange so Xray
/// has done its part, for `chrome` (X25519MLKEM768 chosen by Xray) and `firefox`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn handshake_rate_against_xray() {
    let Some(bin) = xray() else { return };
    let dir = tempdir();
    let (target_port, xray_port) = (free_port(), free_port());
    let _target = start_target(&dir, target_port);
    let _xray = start_xray(&bin, &dir, xray_port, target_port);
    wait_for_port(target_port).await;
    wait_for_port(xray_port).await;
    let echo = start_echo().await;
    for fingerprint in [Fingerprint::Chrome, Fingerprint::Firefox] {
        let client = RealityClient::new(options(PUBLIC_KEY, fingerprint)).unwrap();
        let n = 300;
        let start = std::time::Instant::now();
        for _ in 0..n {
            let tcp = TcpStream::connect(("127.0.0.1", xray_port)).await.unwrap();
            // As the app's TCP dialer does: no Nagle wait between our Finished and the request.
            tcp.set_nodelay(true).unwrap();
            let mut s = client.connect(Box::new(tcp)).await.unwrap();
            let mut request = vec![0u8];
            request.extend_from_slice(&UUID_BYTES);
            request.extend_from_slice(&[0, 1]);
            request.extend_from_slice(&echo.to_be_bytes());
            request.extend_from_slice(&[1, 127, 0, 0, 1, b'x']);
            s.write_all(&request).await.unwrap();
            s.flush().await.unwrap();
            let mut back = [0u8; 3];
            tokio::time::timeout(Duration::from_secs(10), s.read_exact(&mut back))
                .await
                .unwrap()
                .unwrap();
            assert_eq!(back, [0, 0, b'x']);
        }
        let secs = start.elapsed().as_secs_f64();
        println!(
            "{fingerprint:?}: {n} handshakes + 1-byte round trips in {secs:.2} s = {:.0}/s",
            n as f64 / secs
        );
    }
}
