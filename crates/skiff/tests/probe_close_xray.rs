//! How a refused or aborted connection ends, Skiff against Xray 26.7 on the same config: a
//! prober that can tell the two apart by the way they hang up has found Skiff.
//!
//! * VMess over raw TCP, random probes of several sizes: Xray reads in 8 KiB reads, so a probe
//!   past its drain that fits the first read ends with a FIN, a larger one with a reset (the
//!   kernel's answer to a close over unread bytes), a probe shorter than the drain with no end
//!   before the handshake timeout.
//! * VLESS over TLS, connections aborted after the TLS handshake (silence until the handshake
//!   timeout, a fallback whose destination is down, a WebSocket upgrade to the wrong path):
//!   Xray (Go's TLS) says close_notify before it closes.
//!
//! Xray comes from XRAY_BIN or `../shared/peers/bin/xray` (a failure under CI when absent).

mod common;

use std::io::{Read, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    /// Nothing came back and the connection stayed open for the whole wait.
    StillOpen,
    /// A FIN (inside TLS: close_notify, then the FIN).
    Clean,
    /// Inside TLS: the FIN without a close_notify before it.
    NoCloseNotify,
    /// A reset.
    Reset,
}

/// Sends `probe` on a fresh TCP connection to `port` and says how the connection ended
/// within `wait` (bytes that came back are returned too).
fn raw_probe(port: u16, probe: &[u8], wait: Duration) -> (End, usize) {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(wait)).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
    // A large probe may be cut by the reset while it is still being written.
    let _ = s.write_all(probe);
    let mut got = 0;
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return (End::Clean, got),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return (End::Reset, got),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return (End::StillOpen, got);
            }
            Err(e) => panic!("probe read failed: {e}"),
        }
    }
}

/// Accepts any certificate: these probes only look at how the connection ends.
#[derive(Debug)]
struct AnyCert;

impl ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        rustls::crypto::aws_lc_rs::default_provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// TLS 1.3 to `port` (rustls itself, which tells a close_notify from a bare FIN), then
/// `request` (if any), then reads until the end or `wait`: how it ended, and what came back.
fn tls_probe(port: u16, request: &[u8], wait: Duration) -> (End, Vec<u8>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13])
    .unwrap()
    .dangerous()
    .with_custom_certificate_verifier(Arc::new(AnyCert))
    .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    rt.block_on(async {
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        let name = ServerName::try_from("localhost").unwrap();
        let mut tls = tokio::time::timeout(Duration::from_secs(10), connector.connect(name, tcp))
            .await
            .expect("TLS handshake in time")
            .expect("TLS handshake");
        if !request.is_empty() {
            tls.write_all(request).await.unwrap();
        }
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            match tokio::time::timeout_at(deadline, tls.read(&mut buf)).await {
                Err(_) => return (End::StillOpen, got),
                Ok(Ok(0)) => return (End::Clean, got),
                Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
                Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                    return (End::NoCloseNotify, got);
                }
                Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                    return (End::Reset, got);
                }
                Ok(Err(e)) => panic!("TLS probe read failed: {e}"),
            }
        }
    })
}

/// Runs the same config (without `log`) under Xray and under Skiff and returns their
/// processes, Xray's first: each listens on `ports.0` (Xray) and `ports.1` (Skiff).
fn pair(
    xray: &Path,
    dir: &Path,
    config: impl Fn(u16) -> serde_json::Value,
) -> ((Proc, u16), (Proc, u16)) {
    let (xp, sp) = (free_port(), free_port());
    let mut x = config(xp);
    x["outbounds"] = serde_json::json!([{ "protocol": "freedom",
        "settings": { "finalRules": [{ "action": "allow", "ip": ["127.0.0.0/8"] }] } }]);
    x["log"] = serde_json::json!({ "loglevel": "warning" });
    let path = dir.join("xray.json");
    std::fs::write(&path, x.to_string()).unwrap();
    let out = dir.join("xray.out");
    let child = std::process::Command::new(xray)
        .arg("run")
        .arg("-c")
        .arg(&path)
        .stdin(std::process::Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut xray_proc = Proc {
        child,
        what: "xray",
    };
    wait_ports(&mut xray_proc, &[xp], &out);
    let mut s = config(sp);
    s["outbounds"] = serde_json::json!([{ "protocol": "freedom" }]);
    let (skiff, _) = start_skiff(dir, "skiff", &s.to_string(), &[sp]);
    ((xray_proc, xp), (skiff, sp))
}

fn xray() -> Option<std::path::PathBuf> {
    shared_peer("xray", "XRAY_BIN")
}

#[test]
fn vmess_probes_end_as_xray_s_do() {
    let Some(xray) = xray() else { return };
    let dir = TempDir::new("probe-close-vmess");
    let config = |port: u16| {
        serde_json::json!({
            "inbounds": [{ "listen": "127.0.0.1", "port": port, "protocol": "vmess",
                "settings": { "clients": [{ "id": UUID }] } }]
        })
    };
    let ((_x, xp), (_s, sp)) = pair(&xray, dir.path(), config);
    // Below the drain (at least 54 bytes in both): both wait. Past the largest drain
    // (3383) and within one 8 KiB read: FIN. Past the read: reset.
    let cases = [
        (40, End::StillOpen),
        (5_000, End::Clean),
        (8_000, End::Clean),
        (9_000, End::Reset),
        (70_000, End::Reset),
        (200_000, End::Reset),
    ];
    let mut report = Vec::new();
    for (size, expected) in cases {
        let probe = noise(size as u64, size);
        let wait = Duration::from_millis(if expected == End::StillOpen {
            1500
        } else {
            5000
        });
        let started = Instant::now();
        let (x_end, _) = raw_probe(xp, &probe, wait);
        let x_ms = started.elapsed().as_millis();
        let started = Instant::now();
        let (s_end, _) = raw_probe(sp, &probe, wait);
        let s_ms = started.elapsed().as_millis();
        report.push(format!(
            "{size} B: xray {x_end:?} ({x_ms} ms), skiff {s_end:?} ({s_ms} ms)"
        ));
        assert_eq!(x_end, expected, "Xray, {size} bytes: {report:#?}");
        assert_eq!(s_end, x_end, "{size} bytes: {report:#?}");
    }
    eprintln!("{}", report.join("\n"));
}

/// VLESS + TLS inbound settings for both: a 2 s handshake timeout, optional fallbacks and
/// WebSocket.
fn vless_tls(
    port: u16,
    cert: &Path,
    key: &Path,
    fallback: Option<u16>,
    ws: bool,
) -> serde_json::Value {
    let mut settings = serde_json::json!({ "clients": [{ "id": UUID }], "decryption": "none" });
    if let Some(dest) = fallback {
        settings["fallbacks"] = serde_json::json!([{ "dest": dest }]);
    }
    let mut stream = serde_json::json!({ "network": if ws { "ws" } else { "tcp" },
        "security": "tls",
        "tlsSettings": { "certificates": [{ "certificateFile": cert, "keyFile": key }] } });
    if ws {
        stream["wsSettings"] = serde_json::json!({ "path": "/ws" });
    }
    serde_json::json!({
        "policy": { "levels": { "0": { "handshake": 2 } } },
        "inbounds": [{ "listen": "127.0.0.1", "port": port, "protocol": "vless",
            "settings": settings, "streamSettings": stream }]
    })
}

#[test]
fn aborted_tls_connections_end_as_xray_s_do() {
    let Some(xray) = xray() else { return };
    let dir = TempDir::new("probe-close-tls");
    let (cert, key) = certificate(dir.path());
    let get = b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n".to_vec();
    // A port nothing listens on.
    let down = free_port();
    let (long, short) = (Duration::from_secs(6), Duration::from_millis(1500));
    // (what, fallback, WebSocket, request, how long to wait, how Xray ends it). Xray's
    // WebSocket listener (Go's web server) waits for the next request after a refusal with
    // no time limit; Skiff waits until the handshake timeout (2 s here, 60 s by default) and
    // then closes with close_notify, so those cases look only within the timeout.
    type Case = (&'static str, Option<u16>, bool, Vec<u8>, Duration, End);
    let cases: [Case; 5] = [
        (
            "silent until the handshake timeout",
            None,
            false,
            Vec::new(),
            long,
            End::Clean,
        ),
        (
            "fallback destination down",
            Some(down),
            false,
            get.clone(),
            long,
            End::Clean,
        ),
        (
            "WebSocket, a plain request to the wrong path",
            None,
            true,
            get,
            short,
            End::StillOpen,
        ),
        (
            "WebSocket, the right path without an upgrade",
            None,
            true,
            b"GET /ws HTTP/1.1\r\nHost: localhost\r\n\r\n".to_vec(),
            short,
            End::StillOpen,
        ),
        (
            "WebSocket, not HTTP at all",
            None,
            true,
            b"hello\r\n\r\n".to_vec(),
            long,
            End::Clean,
        ),
    ];
    let mut report = Vec::new();
    for (name, fallback, ws, request, wait, expected) in cases {
        let sub = dir.path().join(name.replace([' ', ','], "-"));
        std::fs::create_dir_all(&sub).unwrap();
        let ((x, xp), (s, sp)) = pair(&xray, &sub, |port| {
            vless_tls(port, &cert, &key, fallback, ws)
        });
        let (x_end, x_bytes) = tls_probe(xp, &request, wait);
        let (s_end, s_bytes) = tls_probe(sp, &request, wait);
        drop((x, s));
        report.push(format!(
            "{name}: xray {x_end:?} {:?}, skiff {s_end:?} {:?}",
            String::from_utf8_lossy(&x_bytes),
            String::from_utf8_lossy(&s_bytes)
        ));
        assert_eq!(x_end, expected, "{name}: Xray's end: {report:#?}");
        assert_eq!(s_end, x_end, "{name}: {report:#?}");
        assert_eq!(undated(&s_bytes), undated(&x_bytes), "{name}: {report:#?}");
    }
    eprintln!("{}", report.join("\n"));
}
