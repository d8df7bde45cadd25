//! The `kcptun` transport network (Skiff's own: kcptun's KCP + smux under any protocol),
//! Skiff client ↔ Skiff server: test client → tunnel inbound → VLESS over kcptun with TLS →
//! VLESS inbound over kcptun with TLS → freedom → target. Three connections at once (three
//! smux streams of one KCP session), `BULK` bytes each way on the first, SHA-256 checked.
//! smux has half-close, so each side half-closes after sending and reads to EOF.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use common::{TempDir, UUID, certificate, free_port, noise, start_skiff, wait_udp};
use sha2::{Digest, Sha256};

const MIB: usize = 1024 * 1024;
const BULK: usize = 32 * MIB;
const SMALL: usize = MIB;
const LIMIT: Duration = Duration::from_secs(60);

fn hash_to_eof(conn: &mut TcpStream) -> ([u8; 32], usize) {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0;
    loop {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                hasher.update(&buf[..n]);
                total += n;
            }
        }
    }
    (hasher.finalize().into(), total)
}

/// Sends `out` then half-closes, while reading to EOF; the digest and length of what came.
fn both_ways(conn: TcpStream, out: Vec<u8>) -> ([u8; 32], usize) {
    conn.set_read_timeout(Some(LIMIT)).unwrap();
    conn.set_write_timeout(Some(LIMIT)).unwrap();
    let mut writer = conn.try_clone().unwrap();
    let sender = thread::spawn(move || {
        let ok = writer.write_all(&out).is_ok();
        let _ = writer.shutdown(std::net::Shutdown::Write);
        ok
    });
    let mut reader = conn;
    let got = hash_to_eof(&mut reader);
    assert!(sender.join().unwrap(), "sending failed");
    got
}

fn sha(data: &[u8]) -> [u8; 32] {
    Sha256::digest(data).into()
}

#[test]
fn vless_over_kcptun_with_tls() {
    let dir = TempDir::new("kcptun-network");
    let (cert, key) = certificate(dir.path());
    // The target answers each connection by the class in its first byte: 0 gets BULK bytes
    // of noise(2), others SMALL bytes of noise(4); it reports the digest of the rest.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let target_port = listener.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for _ in 0..3 {
            let Ok((conn, _)) = listener.accept() else {
                return;
            };
            let tx = tx.clone();
            thread::spawn(move || {
                let mut first = [0u8; 1];
                let mut peek = conn.try_clone().unwrap();
                peek.set_read_timeout(Some(LIMIT)).unwrap();
                // The client's first byte says which payload it wants back.
                if peek.read_exact(&mut first).is_err() {
                    return;
                }
                let (seed, len) = if first[0] == 0 { (2, BULK) } else { (4, SMALL) };
                let (digest, n) = both_ways(conn, noise(seed, len));
                let _ = tx.send((first[0], digest, n));
            });
        }
    });
    let kcp_port = free_port();
    let tuning = r#""key": "kcptun-network-test", "crypt": "aes-128", "nocomp": true"#;
    let server = format!(
        r#"{{"log": {{"loglevel": "warning"}},
  "inbounds": [{{"listen": "127.0.0.1", "port": {kcp_port}, "protocol": "vless",
                 "settings": {{"clients": [{{"id": "{UUID}"}}], "decryption": "none"}},
                 "streamSettings": {{"network": "kcptun", "kcptunSettings": {{{tuning}}},
                   "security": "tls", "tlsSettings": {{"certificates": [{{
                     "certificateFile": "{}", "keyFile": "{}"}}]}}}}}}],
  "outbounds": [{{"protocol": "freedom"}}]}}"#,
        cert.display(),
        key.display()
    );
    let (mut server, server_log) = start_skiff(dir.path(), "server", &server, &[]);
    wait_udp(&mut server, kcp_port, &server_log);
    let entry = free_port();
    let client = format!(
        r#"{{"log": {{"loglevel": "warning"}},
  "inbounds": [{{"listen": "127.0.0.1", "port": {entry}, "protocol": "tunnel",
                 "settings": {{"address": "127.0.0.1", "port": {target_port}}}}}],
  "outbounds": [{{"protocol": "vless",
                  "settings": {{"vnext": [{{"address": "127.0.0.1", "port": {kcp_port},
                                            "users": [{{"id": "{UUID}", "encryption": "none"}}]}}]}},
                  "streamSettings": {{"network": "kcptun", "kcptunSettings": {{{tuning}, "conn": 1}},
                    "security": "tls", "tlsSettings": {{"serverName": "localhost", "allowInsecure": true}}}}}}]}}"#
    );
    let (mut client, client_log) = start_skiff(dir.path(), "client", &client, &[entry]);
    // One bulk connection and two small ones at once: three streams on one session.
    let cases = [(0u8, 1u64, BULK), (1, 3, SMALL), (2, 5, SMALL)];
    let clients: Vec<_> = cases
        .iter()
        .map(|&(class, seed, len)| {
            let mut up = noise(seed, len);
            up[0] = class;
            let want_up = (sha(&up[1..]), len - 1);
            let handle = thread::spawn(move || {
                let conn = TcpStream::connect(("127.0.0.1", entry)).unwrap();
                both_ways(conn, up)
            });
            (class, want_up, handle)
        })
        .collect();
    let mut want_ups = Vec::new();
    for (class, want_up, handle) in clients {
        let (digest, n) = handle.join().unwrap();
        let expected = if class == 0 {
            noise(2, BULK)
        } else {
            noise(4, SMALL)
        };
        assert_eq!(n, expected.len(), "download length of connection {class}");
        assert!(
            digest == sha(&expected),
            "download digest of connection {class}"
        );
        want_ups.push((class, want_up));
    }
    for _ in 0..cases.len() {
        let (class, digest, n) = rx.recv_timeout(LIMIT).expect("target reported");
        let (_, (want_digest, want_len)) = want_ups
            .iter()
            .find(|(c, _)| *c == class)
            .expect("a known connection");
        assert_eq!(n, *want_len, "upload length of connection {class}");
        assert!(
            digest == *want_digest,
            "upload digest of connection {class}"
        );
    }
    for (proc, log) in [(&mut client, &client_log), (&mut server, &server_log)] {
        common::assert_healthy(proc, log);
    }
}
