//! Skiff's REALITY client against Xray 26.7's REALITY server (XRAY_BIN, else
//! `../shared/peers/bin/xray`; outside CI a machine without either skips, under CI that
//! fails): A → B (Skiff: dokodemo-door → VLESS out over REALITY) → C (Xray: VLESS in over
//! REALITY → freedom) → D. TCP with and without Vision, 16 MiB each way at once, SHA-256
//! checked; UDP, 512 datagrams echoed one by one, SHA-256 checked. Xray's REALITY target is
//! a local `openssl s_server`. With a wrong publicKey the same chain carries nothing: Xray
//! hands us to its target and Skiff's client gives up as Xray's does. Also: Skiff's client
//! against Skiff's own REALITY server, and `tlsSettings.fingerprint` against Xray's TLS.

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use sha2::{Digest, Sha256};

const BULK: u64 = 16 << 20;
const PRIVATE_KEY: &str = "CNq5Rkb1Prq12hWTXBQDHhUR2krYbd8vwKFIC90SIGQ";
const PUBLIC_KEY: &str = "abuVezb5-wwiWG9fo7uIKenC4y3hlEgxtNLKV5s2DF0";
/// The same key with its first character changed: a valid key the server does not hold.
const WRONG_PUBLIC_KEY: &str = "bbuVezb5-wwiWG9fo7uIKenC4y3hlEgxtNLKV5s2DF0";
const SHORT_ID: &str = "0123abcd";

fn xray() -> Option<PathBuf> {
    shared_peer("xray", "XRAY_BIN")
}

/// The REALITY target: openssl's TLS 1.3 test server with a local certificate.
fn start_target(dir: &Path, port: u16) -> Proc {
    let (cert, key) = certificate(dir);
    let child = Command::new("openssl")
        .args(["s_server", "-quiet", "-www", "-tls1_3", "-alpn", "http/1.1"])
        .arg("-accept")
        .arg(format!("127.0.0.1:{port}"))
        .arg("-cert")
        .arg(cert)
        .arg("-key")
        .arg(key)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut proc = Proc {
        child,
        what: "openssl s_server",
    };
    wait_ports(&mut proc, &[port], &dir.join("none.log"));
    proc
}

fn server_config(port: u16, target: u16, flow: &str) -> String {
    serde_json::json!({
        "log": { "loglevel": "warning" },
        "inbounds": [{ "listen": "127.0.0.1", "port": port, "protocol": "vless",
            "settings": { "clients": [{ "id": UUID, "flow": flow }], "decryption": "none" },
            "streamSettings": { "network": "tcp", "security": "reality",
                "realitySettings": { "target": format!("127.0.0.1:{target}"),
                    "serverNames": ["example.com"], "privateKey": PRIVATE_KEY,
                    "shortIds": [SHORT_ID] } } }],
        // Xray 26 refuses private destinations in freedom unless a final rule allows them.
        "outbounds": [{ "protocol": "freedom",
            "settings": { "finalRules": [{ "action": "allow", "ip": ["127.0.0.0/8"] }] } }]
    })
    .to_string()
}

fn client_config(
    listen: u16,
    target: u16,
    network: &str,
    server: u16,
    flow: &str,
    key: &str,
    fingerprint: &str,
) -> String {
    serde_json::json!({
        "log": { "loglevel": "debug" },
        "inbounds": [{ "listen": "127.0.0.1", "port": listen, "protocol": "dokodemo-door",
            "settings": { "address": "127.0.0.1", "port": target, "network": network } }],
        "outbounds": [{ "protocol": "vless",
            "settings": { "vnext": [{ "address": "127.0.0.1", "port": server,
                "users": [{ "id": UUID, "encryption": "none", "flow": flow }] }] },
            "streamSettings": { "network": "tcp", "security": "reality",
                "realitySettings": { "serverName": "example.com", "publicKey": key,
                    "shortId": SHORT_ID, "fingerprint": fingerprint, "spiderX": "/" } } }]
    })
    .to_string()
}

/// `xray run -c DIR/NAME.json`, waiting for `port`.
fn start_xray(xray: &Path, dir: &Path, name: &str, config: &str, port: u16) -> Proc {
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
    wait_ports(&mut proc, &[port], &out);
    proc
}

/// Deterministic bytes (xorshift) of `seed`, in chunks.
fn payload_chunks(seed: u64, mut f: impl FnMut(&[u8])) {
    let mut state = seed | 1;
    let mut buf = vec![0u8; 64 * 1024];
    for _ in 0..BULK / buf.len() as u64 {
        for chunk in buf.chunks_mut(8) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            chunk.copy_from_slice(&state.to_le_bytes()[..chunk.len()]);
        }
        f(&buf);
    }
}

fn digest(seed: u64) -> Vec<u8> {
    let mut h = Sha256::new();
    payload_chunks(seed, |c| h.update(c));
    h.finalize().to_vec()
}

/// Sends `seed`'s payload while hashing what arrives; the write side is shut once the whole
/// opposite payload is in (or after 60 s), so neither direction ends before both are done.
fn exchange(s: TcpStream, seed: u64) -> (u64, Vec<u8>) {
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut writer = s.try_clone().unwrap();
    let (all_in, wait_all_in) = std::sync::mpsc::channel::<()>();
    let sender = std::thread::spawn(move || {
        payload_chunks(seed, |c| writer.write_all(c).unwrap());
        let _ = wait_all_in.recv_timeout(Duration::from_secs(60));
        let _ = writer.shutdown(Shutdown::Write);
    });
    let mut reader = s;
    let mut h = Sha256::new();
    let mut total = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = reader.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        total += n as u64;
        h.update(&buf[..n]);
        if total >= BULK {
            let _ = all_in.send(());
        }
    }
    drop(all_in);
    sender.join().unwrap();
    (total, h.finalize().to_vec())
}

fn tcp_case(flow: &str, fingerprint: &str) {
    let Some(xray) = xray() else { return };
    tcp_case_with(Some(&xray), flow, fingerprint);
}

/// C is Xray, or with `xray` None Skiff's own REALITY server.
fn tcp_case_with(xray: Option<&Path>, flow: &str, fingerprint: &str) {
    let dir = TempDir::new(&format!(
        "reality-client-{}-{fingerprint}-{}",
        flow.len(),
        xray.is_some()
    ));
    let sink = TcpListener::bind("127.0.0.1:0").unwrap();
    let d = sink.local_addr().unwrap().port();
    let (b, c, t) = (free_port(), free_port(), free_port());
    let _target = start_target(dir.path(), t);
    let server_json = server_config(c, t, flow);
    let _server = match xray {
        Some(xray) => start_xray(xray, dir.path(), "c", &server_json, c),
        None => start_skiff(dir.path(), "c", &server_json, &[c]).0,
    };
    let client_json = client_config(b, d, "tcp", c, flow, PUBLIC_KEY, fingerprint);
    let (mut skiff, log) = start_skiff(dir.path(), "b", &client_json, &[b]);
    let d_side = std::thread::spawn(move || {
        let (s, _) = sink.accept().unwrap();
        exchange(s, 2)
    });
    let (down_len, down_digest) = exchange(TcpStream::connect(("127.0.0.1", b)).unwrap(), 1);
    let (up_len, up_digest) = d_side.join().unwrap();
    let who = format!("flow {flow:?}, fingerprint {fingerprint}");
    assert_eq!((up_len, down_len), (BULK, BULK), "{who}: lengths");
    assert_eq!(up_digest, digest(1), "{who}: uplink SHA-256");
    assert_eq!(down_digest, digest(2), "{who}: downlink SHA-256");
    assert_healthy(&mut skiff, &log);
}

#[test]
fn tcp_without_flow() {
    tcp_case("", "chrome");
}

#[test]
fn tcp_with_vision() {
    tcp_case("xtls-rprx-vision", "chrome");
}

/// Both ends Skiff: our client against our own REALITY server.
#[test]
fn skiff_client_to_skiff_reality_server() {
    tcp_case_with(None, "", "chrome");
    tcp_case_with(None, "xtls-rprx-vision", "firefox");
}

#[test]
fn tcp_with_firefox_and_safari_hellos() {
    tcp_case("", "firefox");
    tcp_case("xtls-rprx-vision", "safari");
}

fn udp_case(flow: &str) {
    let Some(xray) = xray() else { return };
    let dir = TempDir::new(&format!("reality-client-udp-{}", flow.len()));
    let echo = UdpSocket::bind("127.0.0.1:0").unwrap();
    let d = echo.local_addr().unwrap().port();
    echo.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let (b, c, t) = (free_port(), free_port(), free_port());
    let _target = start_target(dir.path(), t);
    let _server = start_xray(&xray, dir.path(), "c", &server_config(c, t, flow), c);
    let client_json = client_config(b, d, "udp", c, flow, PUBLIC_KEY, "chrome");
    let (mut skiff, log) = start_skiff(dir.path(), "b", &client_json, &[]);
    wait_udp(&mut skiff, b, &log);
    let echo_side = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        for _ in 0..512 {
            let Ok((n, from)) = echo.recv_from(&mut buf) else {
                return;
            };
            echo.send_to(&buf[..n], from).unwrap();
        }
    });
    let a = UdpSocket::bind("127.0.0.1:0").unwrap();
    a.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let (mut sent, mut got) = (Sha256::new(), Sha256::new());
    let mut buf = [0u8; 2048];
    for i in 0..512u64 {
        let datagram = noise(i + 7, 1200);
        sent.update(&datagram);
        a.send_to(&datagram, ("127.0.0.1", b)).unwrap();
        let n = a.recv(&mut buf).expect("echo within 10 s");
        got.update(&buf[..n]);
    }
    assert_eq!(
        got.finalize(),
        sent.finalize(),
        "flow {flow:?}: UDP SHA-256"
    );
    echo_side.join().unwrap();
    assert_healthy(&mut skiff, &log);
}

#[test]
fn udp_without_flow() {
    udp_case("");
}

#[test]
fn udp_with_vision() {
    udp_case("xtls-rprx-vision");
}

/// A server without our key: Xray forwards the hello to its target, whose real certificate
/// fails REALITY's check; nothing reaches D and Skiff stays up.
#[test]
fn wrong_public_key_carries_nothing() {
    let Some(xray) = xray() else { return };
    let dir = TempDir::new("reality-client-wrong-key");
    let sink = TcpListener::bind("127.0.0.1:0").unwrap();
    sink.set_nonblocking(true).unwrap();
    let d = sink.local_addr().unwrap().port();
    let (b, c, t) = (free_port(), free_port(), free_port());
    let _target = start_target(dir.path(), t);
    let _server = start_xray(&xray, dir.path(), "c", &server_config(c, t, ""), c);
    let client_json = client_config(b, d, "tcp", c, "", WRONG_PUBLIC_KEY, "chrome");
    let (mut skiff, log) = start_skiff(dir.path(), "b", &client_json, &[b]);
    let mut s = TcpStream::connect(("127.0.0.1", b)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let _ = s.write_all(b"hello");
    let mut buf = [0u8; 16];
    // The client gives up: the connection ends without a byte.
    assert!(matches!(s.read(&mut buf), Ok(0) | Err(_)));
    assert!(sink.accept().is_err(), "nothing may reach D");
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        text.contains("REALITY"),
        "the log names the failed REALITY check:\n{text}"
    );
    assert_healthy(&mut skiff, &log);
}

/// `tlsSettings.fingerprint` on a plain TLS outbound: the browser hello through our TLS 1.3
/// handshake to Xray's (Go crypto/tls) VLESS-over-TLS server, the certificate pinned.
fn tls_fingerprint_case(fingerprint: &str) {
    let Some(xray) = xray() else { return };
    let dir = TempDir::new(&format!("tls-fingerprint-{fingerprint}"));
    let (cert, key) = certificate(dir.path());
    let out = Command::new("openssl")
        .args(["x509", "-noout", "-fingerprint", "-sha256", "-in"])
        .arg(&cert)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let pin = text.trim().rsplit('=').next().unwrap().to_string();
    let sink = TcpListener::bind("127.0.0.1:0").unwrap();
    let d = sink.local_addr().unwrap().port();
    let (b, c) = (free_port(), free_port());
    let server_json = serde_json::json!({
        "log": { "loglevel": "warning" },
        "inbounds": [{ "listen": "127.0.0.1", "port": c, "protocol": "vless",
            "settings": { "clients": [{ "id": UUID }], "decryption": "none" },
            "streamSettings": { "network": "tcp", "security": "tls",
                "tlsSettings": { "certificates": [{ "certificateFile": cert, "keyFile": key }] } } }],
        "outbounds": [{ "protocol": "freedom",
            "settings": { "finalRules": [{ "action": "allow", "ip": ["127.0.0.0/8"] }] } }]
    })
    .to_string();
    let client_json = serde_json::json!({
        "log": { "loglevel": "debug" },
        "inbounds": [{ "listen": "127.0.0.1", "port": b, "protocol": "dokodemo-door",
            "settings": { "address": "127.0.0.1", "port": d, "network": "tcp" } }],
        "outbounds": [{ "protocol": "vless",
            "settings": { "vnext": [{ "address": "127.0.0.1", "port": c,
                "users": [{ "id": UUID, "encryption": "none" }] }] },
            "streamSettings": { "network": "tcp", "security": "tls",
                "tlsSettings": { "serverName": "localhost", "fingerprint": fingerprint,
                    "pinnedPeerCertSha256": pin } } }]
    })
    .to_string();
    let _server = start_xray(&xray, dir.path(), "c", &server_json, c);
    let (mut skiff, log) = start_skiff(dir.path(), "b", &client_json, &[b]);
    let d_side = std::thread::spawn(move || {
        let (s, _) = sink.accept().unwrap();
        exchange(s, 2)
    });
    let (down_len, down_digest) = exchange(TcpStream::connect(("127.0.0.1", b)).unwrap(), 1);
    let (up_len, up_digest) = d_side.join().unwrap();
    assert_eq!((up_len, down_len), (BULK, BULK), "{fingerprint}: lengths");
    assert_eq!(up_digest, digest(1), "{fingerprint}: uplink SHA-256");
    assert_eq!(down_digest, digest(2), "{fingerprint}: downlink SHA-256");
    assert_healthy(&mut skiff, &log);
}

#[test]
fn tls_fingerprint_to_xray_tls_server() {
    tls_fingerprint_case("chrome");
    tls_fingerprint_case("firefox");
}
