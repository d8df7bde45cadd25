//! XTLS Vision interop with Xray-core 26.7 (XRAY_BIN, else `../shared/peers/bin/xray`; outside
//! CI a machine without either skips, under CI that fails). A (inner TLS 1.3 client) →
//! B (dokodemo-door → VLESS Vision out) → C (VLESS Vision in → freedom) → D (inner TLS 1.3
//! server), with B or C being Xray: 64 MiB each way at once, SHA-256 checked, and both
//! sides' debug logs must show the direct switch in both directions. Every case also runs
//! with `fallbacks` on the server, as the README's Vision example has them: a server that
//! reads ahead to spot probes must still let Vision clients go direct, and a probe must still
//! reach the fallback.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use sha2::{Digest, Sha256};
use skiff_transport::tls::{TlsClient, TlsClientOptions, TlsServer, TlsServerOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const BULK: u64 = 64 << 20;
const DEADLINE: Duration = Duration::from_secs(120);

/// Xray-core from XRAY_BIN or `../shared/peers/bin/xray` (a failure under CI when absent).
fn xray() -> Option<PathBuf> {
    shared_peer("xray", "XRAY_BIN")
}

/// One case at a time: eight pairs of proxies moving 64 MiB each way at once on two cores
/// change how Xray's reads fall on the inner TLS records, and Xray only goes direct on a
/// write that starts with a whole application-data record.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Hex SHA-256 of the certificate's DER: what Xray 26 pins instead of allowInsecure.
fn pin(cert: &Path) -> String {
    let out = Command::new("openssl")
        .args(["x509", "-noout", "-fingerprint", "-sha256", "-in"])
        .arg(cert)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let hex = text.split('=').nth(1).unwrap_or_default().trim();
    hex.replace(':', "").to_ascii_lowercase()
}

fn server_config(port: u16, cert: &Path, key: &Path, log: &Path, fallback: Option<u16>) -> String {
    let mut settings = serde_json::json!({
        "clients": [{ "id": UUID, "flow": "xtls-rprx-vision" }],
        "decryption": "none"
    });
    if let Some(dest) = fallback {
        settings["fallbacks"] = serde_json::json!([{ "dest": dest }]);
    }
    serde_json::json!({
        "log": { "loglevel": "debug", "error": log, "access": "none" },
        "inbounds": [{ "listen": "127.0.0.1", "port": port, "protocol": "vless",
            "settings": settings,
            "streamSettings": { "network": "tcp", "security": "tls",
                "tlsSettings": { "certificates": [{ "certificateFile": cert, "keyFile": key }] } } }],
        "outbounds": [{ "protocol": "freedom",
            "settings": { "finalRules": [{ "action": "allow", "ip": ["127.0.0.0/8"] }] } }]
    })
    .to_string()
}

fn client_config(listen: u16, target: u16, server: u16, pin: &str, log: &Path) -> String {
    client_config_for("tcp", listen, target, server, pin, log)
}

fn client_config_for(
    network: &str,
    listen: u16,
    target: u16,
    server: u16,
    pin: &str,
    log: &Path,
) -> String {
    serde_json::json!({
        "log": { "loglevel": "debug", "error": log, "access": "none" },
        "inbounds": [{ "listen": "127.0.0.1", "port": listen, "protocol": "dokodemo-door",
            "settings": { "address": "127.0.0.1", "port": target, "network": network } }],
        "outbounds": [{ "protocol": "vless",
            "settings": { "vnext": [{ "address": "127.0.0.1", "port": server,
                "users": [{ "id": UUID, "encryption": "none", "flow": "xtls-rprx-vision" }] }] },
            "streamSettings": { "network": "tcp", "security": "tls",
                "tlsSettings": { "serverName": "localhost", "pinnedPeerCertSha256": pin } } }]
    })
    .to_string()
}

/// Starts `xray run -c` on `config` (written to DIR/NAME.json), waits for TCP `port`, or for
/// UDP `port` when `udp` (a UDP-only dokodemo-door has no TCP listener).
fn start_xray(xray: &Path, dir: &Path, name: &str, config: &str, port: u16, udp: bool) -> Proc {
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, config).unwrap();
    let out = dir.join(format!("{name}.out"));
    let file = std::fs::File::create(&out).unwrap();
    let child = Command::new(xray)
        .arg("run")
        .arg("-c")
        .arg(&path)
        .stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .unwrap();
    let mut proc = Proc {
        child,
        what: "xray",
    };
    if udp {
        wait_udp(&mut proc, port, &out);
    } else {
        wait_ports(&mut proc, &[port], &out);
    }
    proc
}

/// Deterministic payload bytes (xorshift64*) for `seed`.
fn fill(state: &mut u64, buf: &mut [u8]) {
    for chunk in buf.chunks_mut(8) {
        *state ^= *state >> 12;
        *state ^= *state << 25;
        *state ^= *state >> 27;
        let word = state.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes();
        chunk.copy_from_slice(&word[..chunk.len()]);
    }
}

fn digest(seed: u64) -> [u8; 32] {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    for _ in 0..BULK / (1 << 16) {
        fill(&mut state, &mut buf);
        hasher.update(&buf);
    }
    hasher.finalize().into()
}

/// A short request/response first, as an application protocol has (HTTPS: request, then
/// response): Xray only goes direct on a write of whole inner records, which a bulk write read
/// in pieces never is. Then BULK bytes of `seed` each way, hashing what comes back until EOF.
async fn exchange(mut stream: skiff_core::BoxStream, seed: u64, asks: bool) -> (u64, [u8; 32]) {
    let mut word = [0u8; 5];
    if asks {
        stream.write_all(b"hello").await.unwrap();
        stream.flush().await.unwrap();
        stream.read_exact(&mut word).await.unwrap();
        assert_eq!(&word, b"howdy");
        stream.write_all(b"ready").await.unwrap();
        // As an application's request leaves a round trip before the bulk answer: the
        // "ready" record then reaches Xray in a read of its own, a whole record, and Xray
        // goes direct on it (merged with the bulk's first bytes it never would).
        tokio::time::sleep(Duration::from_millis(100)).await;
    } else {
        stream.read_exact(&mut word).await.unwrap();
        assert_eq!(&word, b"hello");
        stream.write_all(b"howdy").await.unwrap();
        stream.flush().await.unwrap();
        // The answer leaves alone, not merged with the bulk that follows.
        stream.read_exact(&mut word).await.unwrap();
        assert_eq!(&word, b"ready");
    }
    let (mut r, mut w) = tokio::io::split(stream);
    let send = tokio::spawn(async move {
        let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut buf = vec![0u8; 1 << 16];
        for _ in 0..BULK / (1 << 16) {
            fill(&mut state, &mut buf);
            w.write_all(&buf).await.unwrap();
        }
        w.shutdown().await.unwrap();
        w
    });
    let mut hasher = Sha256::new();
    let mut total = 0u64;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = r.read(&mut buf).await.unwrap();
        if n == 0 {
            break;
        }
        total += n as u64;
        hasher.update(&buf[..n]);
    }
    drop(send.await.unwrap());
    (total, hasher.finalize().into())
}

/// A web server behind the Vision server's fallback: answers each of up to `visits`
/// connections (accepted within 60 s) with a page carrying [`FALLBACK_PAGE`].
struct Web {
    port: u16,
    thread: std::thread::JoinHandle<usize>,
}

const FALLBACK_PAGE: &str = "fallback-page-8c1f";

impl Web {
    fn start(visits: usize) -> Web {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let thread = std::thread::spawn(move || {
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            let mut served = 0;
            while served < visits && std::time::Instant::now() < deadline {
                let Ok((mut s, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                };
                s.set_nonblocking(false).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf);
                let body = FALLBACK_PAGE;
                let _ = write!(
                    s,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                served += 1;
            }
            served
        });
        Web { port, thread }
    }
}

/// A browser-like visitor (TLS, then a plain HTTP GET) to the Vision server on `port` must be
/// answered by the fallback's page.
fn probe_fallback(port: u16) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = TlsClient::new(&TlsClientOptions {
        server_name: "localhost".into(),
        allow_insecure: true,
        ..Default::default()
    })
    .unwrap();
    let page = rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(20), async {
            let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .unwrap();
            let mut stream = client.connect(Box::new(tcp)).await.unwrap();
            stream
                .write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
                .await
                .unwrap();
            stream.flush().await.unwrap();
            let mut page = Vec::new();
            let _ = stream.read_to_end(&mut page).await;
            page
        })
        .await
        .expect("the fallback answered in time")
    });
    let page = String::from_utf8_lossy(&page);
    assert!(
        page.contains(FALLBACK_PAGE),
        "a plain HTTP visitor got this instead of the fallback's page: {page:?}"
    );
}

fn run_case(xray: &Path, xray_is_client: bool, fallbacks: bool) {
    let dir = TempDir::new(match (xray_is_client, fallbacks) {
        (true, false) => "vision-xray-client",
        (false, false) => "vision-xray-server",
        (true, true) => "vision-fb-xray-client",
        (false, true) => "vision-fb-xray-server",
    });
    let web = fallbacks.then(|| Web::start(1));
    let (cert, key) = certificate(dir.path());
    let (b_port, c_port) = (free_port(), free_port());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let d = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let d_port = d.local_addr().unwrap().port();
    let (c_log, b_log) = (dir.path().join("c.log"), dir.path().join("b.log"));
    let server = server_config(c_port, &cert, &key, &c_log, web.as_ref().map(|w| w.port));
    let client = client_config(b_port, d_port, c_port, &pin(&cert), &b_log);
    // Skiff logs to stdout (start_skiff's log file); Xray to the `error` file.
    let (_c, c_out, _b, b_out);
    if xray_is_client {
        (_c, c_out) = start_skiff(dir.path(), "c", &server, &[c_port]);
        _b = start_xray(xray, dir.path(), "b", &client, b_port, false);
        b_out = b_log.clone();
    } else {
        _c = start_xray(xray, dir.path(), "c", &server, c_port, false);
        c_out = c_log.clone();
        (_b, b_out) = start_skiff(dir.path(), "b", &client, &[b_port]);
    }
    let pem = |p: &Path| std::fs::read_to_string(p).unwrap();
    let inner_server = TlsServer::new(&TlsServerOptions {
        certificates: vec![(pem(&cert), pem(&key))],
        ..Default::default()
    })
    .unwrap();
    let inner_client = TlsClient::new(&TlsClientOptions {
        server_name: "localhost".into(),
        allow_insecure: true,
        ..Default::default()
    })
    .unwrap();
    let (up, down) = rt.block_on(async {
        tokio::time::timeout(DEADLINE, async {
            let target = tokio::spawn(async move {
                let (tcp, _) = d.accept().await.unwrap();
                let (stream, _) = inner_server.accept(Box::new(tcp)).await.unwrap();
                exchange(stream, 2, false).await
            });
            let tcp = tokio::net::TcpStream::connect(("127.0.0.1", b_port))
                .await
                .unwrap();
            let stream = inner_client.connect(Box::new(tcp)).await.unwrap();
            let down = exchange(stream, 1, true).await;
            (target.await.unwrap(), down)
        })
        .await
        .expect("transfer deadline")
    });
    assert_eq!(up, (BULK, digest(1)), "uplink length and SHA-256");
    assert_eq!(down, (BULK, digest(2)), "downlink length and SHA-256");
    // Both directions went direct on both sides.
    std::thread::sleep(Duration::from_millis(200));
    for (side, log) in [("client B", &b_out), ("server C", &c_out)] {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let skiff_reads = text.contains("Vision: the peer went direct");
        let skiff_writes = text.contains("Vision: inner TLS 1.3 application data");
        let xray_reads = text
            .lines()
            .any(|l| l.contains("Xtls Unpadding new block") && l.ends_with("command 2"));
        let xray_writes = text
            .lines()
            .any(|l| l.contains("XtlsPadding") && l.trim_end().ends_with(" 2"));
        assert!(
            (skiff_reads || xray_reads) && (skiff_writes || xray_writes),
            "{side} did not go direct both ways; log:\n{}",
            text.lines().rev().take(60).collect::<Vec<_>>().join("\n")
        );
    }
    // Skiff's side relayed the connection through splice(2) (its debug log says so per
    // connection once the relay ends).
    let skiff_log = if xray_is_client { &c_out } else { &b_out };
    let text = std::fs::read_to_string(skiff_log).unwrap_or_default();
    assert!(
        text.lines()
            .any(|l| l.contains("connection finished") && l.contains("spliced=true")),
        "Skiff's side did not splice; log:\n{}",
        text.lines().rev().take(60).collect::<Vec<_>>().join("\n")
    );
    if let Some(web) = web {
        probe_fallback(c_port);
        assert_eq!(
            web.thread.join().unwrap(),
            1,
            "the fallback served the probe"
        );
    }
}

/// UDP under Vision: Xray's client sends it as XUDP (Mux), Skiff's as VLESS UDP without the
/// flow; either server takes the other's. 200 datagrams to a local echo come back intact.
fn run_udp_case(xray: &Path, xray_is_client: bool, fallbacks: bool) {
    let dir = TempDir::new(match (xray_is_client, fallbacks) {
        (true, false) => "vision-udp-xray-client",
        (false, false) => "vision-udp-xray-server",
        (true, true) => "vision-udp-fb-xray-client",
        (false, true) => "vision-udp-fb-xray-server",
    });
    let web = fallbacks.then(|| Web::start(1));
    let (cert, key) = certificate(dir.path());
    let echo = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    echo.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let echo_port = echo.local_addr().unwrap().port();
    let echo_thread = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        for _ in 0..1000 {
            let Ok((n, from)) = echo.recv_from(&mut buf) else {
                return;
            };
            let _ = echo.send_to(&buf[..n], from);
        }
    });
    let (b_port, c_port) = (free_port(), free_port());
    let (c_log, b_log) = (dir.path().join("c.log"), dir.path().join("b.log"));
    let server = server_config(c_port, &cert, &key, &c_log, web.as_ref().map(|w| w.port));
    let client = client_config_for("udp", b_port, echo_port, c_port, &pin(&cert), &b_log);
    let (_c, _b);
    if xray_is_client {
        (_c, _) = start_skiff(dir.path(), "c", &server, &[c_port]);
        _b = start_xray(xray, dir.path(), "b", &client, b_port, true);
    } else {
        _c = start_xray(xray, dir.path(), "c", &server, c_port, false);
        let (mut b, b_log) = start_skiff(dir.path(), "b", &client, &[]);
        wait_udp(&mut b, b_port, &b_log);
        _b = b;
    }
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    let mut echoed = 0;
    let mut buf = [0u8; 2048];
    for i in 0..200u32 {
        let datagram: Vec<u8> = (0..(1 + i * 7 % 1200)).map(|j| (i + j) as u8).collect();
        socket.send_to(&datagram, ("127.0.0.1", b_port)).unwrap();
        if let Ok(n) = socket.recv(&mut buf) {
            assert_eq!(&buf[..n], &datagram[..], "datagram {i} came back changed");
            echoed += 1;
        }
        // A broken path fails in seconds, not after 200 read timeouts.
        assert!(i < 5 || echoed > 0, "no datagram came back");
    }
    assert_eq!(echoed, 200, "datagrams echoed intact");
    drop(socket);
    let _ = echo_thread;
    if let Some(web) = web {
        probe_fallback(c_port);
        assert_eq!(
            web.thread.join().unwrap(),
            1,
            "the fallback served the probe"
        );
    }
}

#[test]
fn xray_client_skiff_server_vision_udp() {
    let _serial = one_at_a_time();
    if let Some(xray) = xray() {
        run_udp_case(&xray, true, false);
    }
}

#[test]
fn skiff_client_xray_server_vision_udp() {
    let _serial = one_at_a_time();
    if let Some(xray) = xray() {
        run_udp_case(&xray, false, false);
    }
}

#[test]
fn xray_client_skiff_server_vision() {
    let _serial = one_at_a_time();
    if let Some(xray) = xray() {
        run_case(&xray, true, false);
    }
}

#[test]
fn skiff_client_xray_server_vision() {
    let _serial = one_at_a_time();
    if let Some(xray) = xray() {
        run_case(&xray, false, false);
    }
}

#[test]
fn xray_client_skiff_server_vision_with_fallbacks() {
    let _serial = one_at_a_time();
    if let Some(xray) = xray() {
        run_case(&xray, true, true);
    }
}

#[test]
fn skiff_client_xray_server_vision_with_fallbacks() {
    let _serial = one_at_a_time();
    if let Some(xray) = xray() {
        run_case(&xray, false, true);
    }
}

#[test]
fn xray_client_skiff_server_vision_udp_with_fallbacks() {
    let _serial = one_at_a_time();
    if let Some(xray) = xray() {
        run_udp_case(&xray, true, true);
    }
}

#[test]
fn skiff_client_xray_server_vision_udp_with_fallbacks() {
    let _serial = one_at_a_time();
    if let Some(xray) = xray() {
        run_udp_case(&xray, false, true);
    }
}
