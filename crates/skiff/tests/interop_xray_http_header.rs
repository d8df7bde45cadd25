//! Raw TCP with Xray's HTTP header obfuscation (`tcpSettings.header.type: "http"`), interop
//! with Xray-core 26.7 (XRAY_BIN, else `../shared/peers/bin/xray`; outside CI a machine
//! without either skips, under CI that fails), both directions, VLESS: A → B (dokodemo-door →
//! VLESS out) → C (VLESS in → freedom) → D, with B or C being Xray, 8 MiB each way at once,
//! SHA-256 checked (and VMess both ways); with configured templates, and with Xray's defaults under TLS (the header
//! then travels inside TLS, as Xray layers it). A prober gets the same bytes from Skiff as
//! from Xray (its Date aside): 404 for a path not configured, 400 for the rest.

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use sha2::{Digest, Sha256};

const BULK: u64 = 8 << 20;

fn xray() -> Option<PathBuf> {
    shared_peer("xray", "XRAY_BIN")
}

/// Templates of our own (two paths, several values, a status of our own), or Xray's defaults.
fn header(custom: bool) -> serde_json::Value {
    if !custom {
        return serde_json::json!({ "type": "http" });
    }
    serde_json::json!({ "type": "http",
        "request": { "method": "POST", "path": ["/a", "/b"],
            "headers": { "Host": ["a.example", "b.example"], "User-Agent": "t1,t2",
                "Accept": ["*/*"] } },
        "response": { "status": "202", "reason": "Accepted",
            "headers": { "Content-Type": ["text/html", "image/png"], "Server": "nginx" } } })
}

/// `tls`: (certificate, key, SHA-256 pin).
type Tls<'a> = Option<(&'a Path, &'a Path, &'a str)>;

fn stream_settings(custom: bool, tls: Tls<'_>, server: bool) -> serde_json::Value {
    let mut s =
        serde_json::json!({ "network": "tcp", "tcpSettings": { "header": header(custom) } });
    if let Some((cert, key, pin)) = tls {
        s["security"] = "tls".into();
        s["tlsSettings"] = if server {
            serde_json::json!({ "certificates": [{ "certificateFile": cert, "keyFile": key }] })
        } else {
            serde_json::json!({ "serverName": "localhost", "pinnedPeerCertSha256": pin })
        };
    }
    s
}

/// VLESS, or with `vmess` VMess (AEAD, aes-128-gcm).
fn server_config(port: u16, custom: bool, tls: Tls<'_>, vmess: bool) -> String {
    let (protocol, settings) = if vmess {
        ("vmess", serde_json::json!({ "clients": [{ "id": UUID }] }))
    } else {
        (
            "vless",
            serde_json::json!({ "clients": [{ "id": UUID }], "decryption": "none" }),
        )
    };
    serde_json::json!({
        "log": { "loglevel": "debug" },
        "inbounds": [{ "listen": "127.0.0.1", "port": port, "protocol": protocol,
            "settings": settings,
            "streamSettings": stream_settings(custom, tls, true) }],
        // Xray 26 refuses private destinations in freedom unless a final rule allows them.
        "outbounds": [{ "protocol": "freedom",
            "settings": { "finalRules": [{ "action": "allow", "ip": ["127.0.0.0/8"] }] } }]
    })
    .to_string()
}

fn client_config(
    listen: u16,
    target: u16,
    server: u16,
    custom: bool,
    tls: Tls<'_>,
    vmess: bool,
) -> String {
    let (protocol, user) = if vmess {
        (
            "vmess",
            serde_json::json!({ "id": UUID, "security": "aes-128-gcm" }),
        )
    } else {
        (
            "vless",
            serde_json::json!({ "id": UUID, "encryption": "none" }),
        )
    };
    serde_json::json!({
        "log": { "loglevel": "debug" },
        "inbounds": [{ "listen": "127.0.0.1", "port": listen, "protocol": "dokodemo-door",
            "settings": { "address": "127.0.0.1", "port": target, "network": "tcp" } }],
        "outbounds": [{ "protocol": protocol,
            "settings": { "vnext": [{ "address": "127.0.0.1", "port": server,
                "users": [user] }] },
            "streamSettings": stream_settings(custom, tls, false) }]
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
fn exchange_bulk(s: TcpStream, seed: u64) -> (u64, Vec<u8>) {
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

fn run_case(xray_is_client: bool, custom: bool, with_tls: bool, vmess: bool) {
    let Some(xray) = xray() else { return };
    let name = format!("httphdr-{xray_is_client}-{custom}-{with_tls}-{vmess}");
    let dir = TempDir::new(&name);
    let (cert, key) = certificate(dir.path());
    let pin = pin(&cert);
    let tls = with_tls.then_some((cert.as_path(), key.as_path(), pin.as_str()));
    let sink = TcpListener::bind("127.0.0.1:0").unwrap();
    let d = sink.local_addr().unwrap().port();
    let (b, c) = (free_port(), free_port());
    let server_json = server_config(c, custom, tls, vmess);
    let client_json = client_config(b, d, c, custom, tls, vmess);
    let (_xray, mut skiff, log) = if xray_is_client {
        let (skiff, log) = start_skiff(dir.path(), "c", &server_json, &[c]);
        let client = start_xray(&xray, dir.path(), "b", &client_json, b);
        (client, skiff, log)
    } else {
        let server = start_xray(&xray, dir.path(), "c", &server_json, c);
        let (skiff, log) = start_skiff(dir.path(), "b", &client_json, &[b]);
        (server, skiff, log)
    };
    let d_side = std::thread::spawn(move || {
        let (s, _) = sink.accept().unwrap();
        exchange_bulk(s, 2)
    });
    let (down_len, down_digest) = exchange_bulk(TcpStream::connect(("127.0.0.1", b)).unwrap(), 1);
    let (up_len, up_digest) = d_side.join().unwrap();
    assert_eq!((up_len, down_len), (BULK, BULK), "{name}: lengths");
    assert_eq!(up_digest, digest(1), "{name}: uplink SHA-256");
    assert_eq!(down_digest, digest(2), "{name}: downlink SHA-256");
    assert_healthy(&mut skiff, &log);
}

#[test]
fn xray_client_skiff_server() {
    run_case(true, true, false, false);
}

#[test]
fn skiff_client_xray_server() {
    run_case(false, true, false, false);
}

#[test]
fn xray_client_skiff_server_tls_defaults() {
    run_case(true, false, true, false);
}

#[test]
fn skiff_client_xray_server_tls_defaults() {
    run_case(false, false, true, false);
}

/// The header is under the protocol, whichever it is: VMess both ways.
#[test]
fn vmess_both_ways() {
    run_case(true, true, false, true);
    run_case(false, true, false, true);
}

/// What a listener answers `request` (the write side then shut when `half_close`).
fn answer_to(port: u16, request: &[u8], half_close: bool) -> (Vec<u8>, End) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    s.write_all(request).unwrap();
    if half_close {
        s.shutdown(Shutdown::Write).unwrap();
    }
    read_to_close(&mut s)
}

/// Probes get Xray's bytes, Date aside: a wrong path 404; bytes that are not HTTP, a bad
/// version, a head cut short, a head of 8192 bytes without its end, and a right head followed
/// by something that is not VLESS (or by nothing) 400; each then closed.
#[test]
fn probes_get_what_xray_gives_them() {
    let Some(xray) = xray() else { return };
    let dir = TempDir::new("httphdr-probe");
    let (x, s) = (free_port(), free_port());
    let _xray = start_xray(
        &xray,
        dir.path(),
        "x",
        &server_config(x, true, None, false),
        x,
    );
    let (mut skiff, log) = start_skiff(dir.path(), "s", &server_config(s, true, None, false), &[s]);
    let mut long = b"GET /a HTTP/1.1\r\nX: ".to_vec();
    long.resize(8192, b'a');
    let probes: Vec<(Vec<u8>, bool, &str)> = vec![
        (
            b"GET /wrong HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
            false,
            "404",
        ),
        (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(), true, "404"),
        (b"GET /a HTTP/9\r\n\r\n".to_vec(), true, "400"),
        (b"garbage line here\r\nmore\r\n".to_vec(), false, "400"),
        (b"\x16\x03\x01\x00\x05hello\r\n\r\n".to_vec(), false, "400"),
        (b"GET /a HTTP/1.1\r\nHost: x\r\n".to_vec(), true, "400"),
        (long, true, "400"),
        (
            [&b"GET /b?q=1 HTTP/1.1\r\nHost: x\r\n\r\n"[..], &[9u8; 64]].concat(),
            true,
            "400",
        ),
        (b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(), true, "400"),
    ];
    for (probe, half_close, status) in &probes {
        let (from_xray, xray_end) = answer_to(x, probe, *half_close);
        let (from_skiff, skiff_end) = answer_to(s, probe, *half_close);
        let shown = String::from_utf8_lossy(&probe[..probe.len().min(40)]).into_owned();
        assert!(
            from_xray.starts_with(format!("HTTP/1.1 {status} ").as_bytes()),
            "xray answered {shown:?} with {:?}",
            String::from_utf8_lossy(&from_xray)
        );
        assert_eq!(
            (undated(&from_skiff), skiff_end),
            (undated(&from_xray), xray_end),
            "answer to {shown:?}"
        );
    }
    assert_healthy(&mut skiff, &log);
}
