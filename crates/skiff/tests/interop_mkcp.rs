//! mKCP interop with Debian's v2ray 4.34 (`network: "kcp"`), both directions:
//! test client → v2ray (dokodemo-door → VLESS/VMess over mKCP) → Skiff (same inbound →
//! freedom) → target, and the mirror image with Skiff as the client and v2ray as the server.
//!
//! Cases: header none without seed, and with obfuscation headers and a seed (AES-128-GCM),
//! which v2ray 4.34 supports. Each moves `BULK` bytes each way at once, SHA-256 checked.
//! mKCP has no half-close (closing ends both directions, in v2ray as in Skiff), so the client
//! and the target each read exactly the other's byte count instead of waiting for EOF.
//! `.ci/run` installs v2ray; outside CI a machine without it skips with a message.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use common::{Proc, TempDir, UUID, free_port, noise, start_skiff, tool, wait_ports, wait_udp};
use sha2::{Digest, Sha256};

const MIB: usize = 1024 * 1024;
const BULK: usize = 32 * MIB;
/// Every wait in this file gives up after this long.
const LIMIT: Duration = Duration::from_secs(60);

#[derive(Clone, Copy)]
struct Case {
    protocol: &'static str,
    header: &'static str,
    seed: Option<&'static str>,
}

fn v2ray() -> Option<PathBuf> {
    tool("v2ray", &["/usr/bin/v2ray", "/usr/local/bin/v2ray"])
}

/// The same `streamSettings` for v2ray and Skiff.
fn stream(case: Case) -> String {
    let seed = case
        .seed
        .map(|s| format!(r#", "seed": "{s}""#))
        .unwrap_or_default();
    format!(
        r#"{{"network": "kcp", "kcpSettings": {{"header": {{"type": "{}"}}{seed}}}}}"#,
        case.header
    )
}

fn user(case: Case) -> String {
    match case.protocol {
        "vless" => format!(r#"{{"id": "{UUID}", "encryption": "none"}}"#),
        _ => format!(r#"{{"id": "{UUID}", "alterId": 0, "security": "aes-128-gcm"}}"#),
    }
}

fn inbound_settings(case: Case) -> String {
    match case.protocol {
        "vless" => format!(r#"{{"clients": [{{"id": "{UUID}"}}], "decryption": "none"}}"#),
        _ => format!(r#"{{"clients": [{{"id": "{UUID}", "alterId": 0}}]}}"#),
    }
}

fn client_config(case: Case, entry: u16, target: u16, server: u16) -> String {
    format!(
        r#"{{"log": {{"loglevel": "warning"}},
  "inbounds": [{{"listen": "127.0.0.1", "port": {entry}, "protocol": "dokodemo-door",
                 "settings": {{"address": "127.0.0.1", "port": {target}, "network": "tcp"}}}}],
  "outbounds": [{{"protocol": "{}",
                  "settings": {{"vnext": [{{"address": "127.0.0.1", "port": {server},
                                            "users": [{}]}}]}},
                  "streamSettings": {}}}]}}"#,
        case.protocol,
        user(case),
        stream(case)
    )
}

fn server_config(case: Case, port: u16) -> String {
    format!(
        r#"{{"log": {{"loglevel": "warning"}},
  "inbounds": [{{"listen": "127.0.0.1", "port": {port}, "protocol": "{}",
                 "settings": {},
                 "streamSettings": {}}}],
  "outbounds": [{{"protocol": "freedom"}}]}}"#,
        case.protocol,
        inbound_settings(case),
        stream(case)
    )
}

fn start_v2ray(v2ray: &Path, dir: &Path, name: &str, config: &str) -> (Proc, PathBuf) {
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, config).unwrap();
    let log = dir.join(format!("{name}.log"));
    let file = std::fs::File::create(&log).unwrap();
    let child = Command::new(v2ray)
        .arg("-config")
        .arg(&path)
        .env("V2RAY_LOCATION_ASSET", dir)
        .stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .unwrap();
    (
        Proc {
            child,
            what: "v2ray",
        },
        log,
    )
}

/// Reads exactly `len` bytes (or until EOF, error or the limit) and hashes them.
fn hash_exactly(conn: &mut TcpStream, len: usize) -> ([u8; 32], usize) {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0;
    while total < len {
        let want = buf.len().min(len - total);
        match conn.read(&mut buf[..want]) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                hasher.update(&buf[..n]);
                total += n;
            }
        }
    }
    (hasher.finalize().into(), total)
}

/// Writes `out` on a clone of `conn` while reading `in_len` bytes; returns what was read's
/// digest and length once both are done.
fn both_ways(conn: TcpStream, out: Vec<u8>, in_len: usize) -> ([u8; 32], usize) {
    conn.set_read_timeout(Some(LIMIT)).unwrap();
    conn.set_write_timeout(Some(LIMIT)).unwrap();
    let mut writer = conn.try_clone().unwrap();
    let sender = thread::spawn(move || writer.write_all(&out).is_ok());
    let mut reader = conn;
    let got = hash_exactly(&mut reader, in_len);
    assert!(sender.join().unwrap(), "sending failed");
    got
}

/// A target for one connection: sends `down` while reading `up_len` bytes; reports.
fn target(down: Vec<u8>, up_len: usize) -> (u16, mpsc::Receiver<([u8; 32], usize)>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let Ok((conn, _)) = listener.accept() else {
            return;
        };
        let _ = tx.send(both_ways(conn, down, up_len));
    });
    (port, rx)
}

fn run(case: Case, v2ray_is_client: bool, tag: &str) {
    let Some(v2ray) = v2ray() else {
        return;
    };
    let started = Instant::now();
    let dir = TempDir::new(&format!("mkcp-{tag}"));
    let (up, down) = (noise(11, BULK), noise(12, BULK));
    let (target_port, target_rx) = target(down.clone(), BULK);
    let (entry, server_port) = (free_port(), free_port());
    let server_json = server_config(case, server_port);
    let client_json = client_config(case, entry, target_port, server_port);
    let (mut server, server_log, mut client, client_log);
    if v2ray_is_client {
        (server, server_log) = start_skiff(dir.path(), "skiff", &server_json, &[]);
        wait_udp(&mut server, server_port, &server_log);
        (client, client_log) = start_v2ray(&v2ray, dir.path(), "v2ray", &client_json);
    } else {
        (server, server_log) = start_v2ray(&v2ray, dir.path(), "v2ray", &server_json);
        wait_udp(&mut server, server_port, &server_log);
        (client, client_log) = start_skiff(dir.path(), "skiff", &client_json, &[]);
    }
    wait_ports(&mut client, &[entry], &client_log);
    let conn = TcpStream::connect(("127.0.0.1", entry)).unwrap();
    let (down_digest, down_len) = both_ways(conn, up.clone(), BULK);
    let logs = || {
        format!(
            "client log:\n{}\nserver log:\n{}",
            std::fs::read_to_string(&client_log).unwrap_or_default(),
            std::fs::read_to_string(&server_log).unwrap_or_default()
        )
    };
    assert_eq!(down_len, BULK, "download length; {}", logs());
    assert!(down_digest == sha(&down), "download digest differs");
    let (up_digest, up_len) = target_rx.recv_timeout(LIMIT).expect("target reported");
    assert_eq!(up_len, BULK, "upload length; {}", logs());
    assert!(up_digest == sha(&up), "upload digest differs");
    for proc in [&mut client, &mut server] {
        assert!(
            proc.child.try_wait().unwrap().is_none(),
            "{} exited",
            proc.what
        );
    }
    let skiff_log = if v2ray_is_client {
        &server_log
    } else {
        &client_log
    };
    let text = std::fs::read_to_string(skiff_log).unwrap_or_default();
    assert!(!text.contains("panicked"), "skiff panicked:\n{text}");
    eprintln!(
        "{tag}: {} MiB each way in {:.1} s",
        BULK / MIB,
        started.elapsed().as_secs_f64()
    );
}

fn sha(data: &[u8]) -> [u8; 32] {
    Sha256::digest(data).into()
}

const PLAIN: Case = Case {
    protocol: "vless",
    header: "none",
    seed: None,
};

#[test]
fn v2ray_client_skiff_server_vless_plain() {
    run(PLAIN, true, "in-plain");
}

#[test]
fn skiff_client_v2ray_server_vless_plain() {
    run(PLAIN, false, "out-plain");
}

#[test]
fn v2ray_client_skiff_server_vmess_wechat_seed() {
    let case = Case {
        protocol: "vmess",
        header: "wechat-video",
        seed: Some("mkcp-interop-seed"),
    };
    run(case, true, "in-wechat-seed");
}

#[test]
fn skiff_client_v2ray_server_vless_dtls_seed() {
    let case = Case {
        protocol: "vless",
        header: "dtls",
        seed: Some("mkcp-interop-seed"),
    };
    run(case, false, "out-dtls-seed");
}

#[test]
fn skiff_client_v2ray_server_vless_srtp() {
    let case = Case {
        protocol: "vless",
        header: "srtp",
        seed: None,
    };
    run(case, false, "out-srtp");
}
