//! kcptun interop with Debian's kcptun 20210922, both directions:
//! kcptun-client → Skiff kcptun inbound → freedom → a local target, and
//! Skiff (tunnel inbound → kcptun outbound) → kcptun-server → the local target.
//!
//! The matrix covers crypt none/aes/salsa20, FEC 10/3 and 0/0, smux v1 and v2, snappy on and
//! off, each value at least once per direction, plus four smux streams on one session at once
//! (aes-128, 4 MiB each way each). The single-stream cases move `BULK` bytes each way at once
//! (half noise, half compressible text, so snappy writes both chunk kinds), SHA-256 checked:
//! the target sends its bytes while it reads the client's, the client half-closes only after
//! it has read everything (kcptun closes both directions when one ends).
//! Two more tests take every crypt kcptun has (`aes aes-128 aes-192 salsa20 blowfish twofish
//! cast5 3des tea xtea xor sm4 none`) through each direction in turn, 1 MiB each way per crypt
//! (FEC 10/3, smux v1, no compression), SHA-256 checked the same way.
//! One more case runs Skiff's outbound against Skiff's inbound, with a real half-close.
//! `.ci/run` installs kcptun; outside CI a machine without it skips with a message.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use common::{Proc, TempDir, free_port, noise, start_skiff, tool, wait_ports, wait_udp};
use sha2::{Digest, Sha256};

const MIB: usize = 1024 * 1024;
const BULK: usize = 32 * MIB;
const KEY: &str = "interop-kcptun-key";
/// Every wait in this file gives up after this long.
const LIMIT: Duration = Duration::from_secs(60);

#[derive(Clone, Copy)]
struct Case {
    crypt: &'static str,
    fec: (u8, u8),
    smuxver: u8,
    nocomp: bool,
}

fn binaries() -> Option<(std::path::PathBuf, std::path::PathBuf)> {
    let client = tool("kcptun", &["/usr/bin/kcptun-client"])?;
    let server = tool("kcptun", &["/usr/bin/kcptun-server"])?;
    Some((client, server))
}

/// kcptun's flags for `case` (windows, mode, mtu stay kcptun's defaults on both sides).
fn kcptun_flags(case: Case) -> Vec<String> {
    let mut flags: Vec<String> = ["--key", KEY, "--crypt", case.crypt, "--quiet"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    flags.extend([
        "--datashard".into(),
        case.fec.0.to_string(),
        "--parityshard".into(),
        case.fec.1.to_string(),
        "--smuxver".into(),
        case.smuxver.to_string(),
    ]);
    if case.nocomp {
        flags.push("--nocomp".into());
    }
    flags
}

/// The same settings as Skiff JSON keys.
fn skiff_tuning(case: Case) -> String {
    format!(
        r#""key": "{KEY}", "crypt": "{}", "datashard": {}, "parityshard": {}, "smuxver": {}, "nocomp": {}"#,
        case.crypt, case.fec.0, case.fec.1, case.smuxver, case.nocomp
    )
}

fn start_kcptun(binary: &Path, dir: &Path, name: &'static str, args: &[String]) -> Proc {
    let log = std::fs::File::create(dir.join(format!("{name}.log"))).unwrap();
    let child = Command::new(binary)
        .args(args)
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    Proc { child, what: name }
}

/// `len` bytes, alternating 64 KiB of noise and 64 KiB of repetitive text.
fn payload(seed: u64, len: usize) -> Vec<u8> {
    let text = b"kcptun interop: the quick brown fox jumps over the lazy dog. ";
    let mut out = noise(seed, len);
    for (i, block) in out.chunks_mut(64 * 1024).enumerate() {
        if i % 2 == 1 {
            for (j, b) in block.iter_mut().enumerate() {
                *b = text[j % text.len()];
            }
        }
    }
    out
}

/// A target for `conns` connections: each is sent `down` while it is read until EOF; reports
/// the SHA-256 and length of what each one read.
fn target(down: Vec<u8>, conns: usize) -> (u16, mpsc::Receiver<([u8; 32], usize)>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    let down = std::sync::Arc::new(down);
    thread::spawn(move || {
        for _ in 0..conns {
            let Ok((mut conn, _)) = listener.accept() else {
                return;
            };
            let (tx, down) = (tx.clone(), down.clone());
            thread::spawn(move || {
                conn.set_read_timeout(Some(LIMIT)).unwrap();
                conn.set_write_timeout(Some(LIMIT)).unwrap();
                let mut writer = conn.try_clone().unwrap();
                let sender = thread::spawn(move || {
                    let _ = writer.write_all(&down);
                    writer
                });
                let (digest, n) = hash_to_eof(&mut conn);
                let _ = tx.send((digest, n));
                drop(sender.join());
            });
        }
    });
    (port, rx)
}

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

/// Connects to `port` (the client end of the tunnel), sends `up` while reading `down_len`
/// bytes, then half-closes; returns the SHA-256 of what came down.
fn client_exchange(port: u16, up: Vec<u8>, down_len: usize) -> ([u8; 32], usize) {
    let mut conn = TcpStream::connect(("127.0.0.1", port)).unwrap();
    conn.set_read_timeout(Some(LIMIT)).unwrap();
    conn.set_write_timeout(Some(LIMIT)).unwrap();
    let mut writer = conn.try_clone().unwrap();
    let sender = thread::spawn(move || writer.write_all(&up).is_ok());
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0;
    while total < down_len {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                hasher.update(&buf[..n]);
                total += n;
            }
        }
    }
    assert!(sender.join().unwrap(), "upload failed");
    let _ = conn.shutdown(std::net::Shutdown::Write);
    (hasher.finalize().into(), total)
}

fn sha(data: &[u8]) -> [u8; 32] {
    Sha256::digest(data).into()
}

/// Runs `conns` exchanges at once through the tunnel entered at `entry` (kcptun: one smux
/// stream each), checking both directions of every one.
fn check_bulk(
    entry: u16,
    conns: usize,
    target_rx: mpsc::Receiver<([u8; 32], usize)>,
    up: &[u8],
    down: &[u8],
) {
    let clients: Vec<_> = (0..conns)
        .map(|_| {
            let (up, down_len) = (up.to_vec(), down.len());
            thread::spawn(move || client_exchange(entry, up, down_len))
        })
        .collect();
    let want_down = sha(down);
    for client in clients {
        let (down_digest, down_len) = client.join().unwrap();
        assert_eq!(down_len, down.len(), "download length");
        assert!(down_digest == want_down, "download digest differs");
    }
    let want_up = sha(up);
    for _ in 0..conns {
        let (up_digest, up_len) = target_rx
            .recv_timeout(LIMIT)
            .expect("target reported within the limit");
        assert_eq!(up_len, up.len(), "upload length");
        assert!(up_digest == want_up, "upload digest differs");
    }
}

/// kcptun-client → Skiff kcptun inbound → freedom → target.
fn kcptun_client_to_skiff(case: Case, tag: &str, conns: usize, size: usize) {
    let Some((client_bin, _)) = binaries() else {
        return;
    };
    let dir = TempDir::new(&format!("kcptun-in-{tag}"));
    let (up, down) = (payload(1, size), payload(2, size));
    let (target_port, target_rx) = target(down.clone(), conns);
    let kcp_port = free_port();
    let config = format!(
        r#"{{"log": {{"loglevel": "warning"}},
            "inbounds": [{{"tag": "kcp", "listen": "127.0.0.1", "port": {kcp_port}, "protocol": "kcptun",
                          "settings": {{"target": "127.0.0.1:{target_port}", {}}}}}],
            "outbounds": [{{"protocol": "freedom"}}]}}"#,
        skiff_tuning(case)
    );
    let (mut skiff, skiff_log) = start_skiff(dir.path(), "skiff", &config, &[]);
    wait_udp(&mut skiff, kcp_port, &skiff_log);
    let local = free_port();
    let mut args = vec![
        "-l".to_string(),
        format!("127.0.0.1:{local}"),
        "-r".into(),
        format!("127.0.0.1:{kcp_port}"),
    ];
    args.extend(kcptun_flags(case));
    let mut client = start_kcptun(&client_bin, dir.path(), "kcptun-client", &args);
    wait_ports(&mut client, &[local], &dir.path().join("kcptun-client.log"));
    check_bulk(local, conns, target_rx, &up, &down);
    common::assert_healthy(&mut skiff, &skiff_log);
}

/// Skiff tunnel inbound → kcptun outbound → kcptun-server → target.
fn skiff_to_kcptun_server(case: Case, tag: &str, conns: usize, size: usize) {
    let Some((_, server_bin)) = binaries() else {
        return;
    };
    let dir = TempDir::new(&format!("kcptun-out-{tag}"));
    let (up, down) = (payload(3, size), payload(4, size));
    let (target_port, target_rx) = target(down.clone(), conns);
    let kcp_port = free_port();
    let mut args = vec![
        "-l".to_string(),
        format!("127.0.0.1:{kcp_port}"),
        "-t".into(),
        format!("127.0.0.1:{target_port}"),
    ];
    args.extend(kcptun_flags(case));
    let mut server = start_kcptun(&server_bin, dir.path(), "kcptun-server", &args);
    wait_udp(&mut server, kcp_port, &dir.path().join("kcptun-server.log"));
    let entry = free_port();
    let config = format!(
        r#"{{"log": {{"loglevel": "warning"}},
            "inbounds": [{{"listen": "127.0.0.1", "port": {entry}, "protocol": "tunnel",
                          "settings": {{"address": "127.0.0.1", "port": {target_port}}}}}],
            "outbounds": [{{"protocol": "kcptun",
                           "settings": {{"address": "127.0.0.1", "port": {kcp_port}, {}}}}}]}}"#,
        skiff_tuning(case)
    );
    let (mut skiff, skiff_log) = start_skiff(dir.path(), "skiff", &config, &[entry]);
    check_bulk(entry, conns, target_rx, &up, &down);
    common::assert_healthy(&mut skiff, &skiff_log);
    assert!(
        server.child.try_wait().unwrap().is_none(),
        "kcptun-server exited"
    );
}

const NONE_FEC_V1_SNAPPY: Case = Case {
    crypt: "none",
    fec: (10, 3),
    smuxver: 1,
    nocomp: false,
};
const AES_NOFEC_V2_PLAIN: Case = Case {
    crypt: "aes",
    fec: (0, 0),
    smuxver: 2,
    nocomp: true,
};
const SALSA20_FEC_V2_SNAPPY: Case = Case {
    crypt: "salsa20",
    fec: (10, 3),
    smuxver: 2,
    nocomp: false,
};

const AES128_NOFEC_V1_PLAIN: Case = Case {
    crypt: "aes-128",
    fec: (0, 0),
    smuxver: 1,
    nocomp: true,
};

#[test]
fn kcptun_client_skiff_none_fec_v1_snappy() {
    kcptun_client_to_skiff(NONE_FEC_V1_SNAPPY, "a", 1, BULK);
}
#[test]
fn kcptun_client_skiff_aes_nofec_v2_nocomp() {
    kcptun_client_to_skiff(AES_NOFEC_V2_PLAIN, "b", 1, BULK);
}
#[test]
fn kcptun_client_skiff_salsa20_fec_v2_snappy() {
    kcptun_client_to_skiff(SALSA20_FEC_V2_SNAPPY, "c", 1, BULK);
}
/// Several smux streams on one KCP session at once.
#[test]
fn kcptun_client_skiff_aes128_nofec_v1_nocomp_4_streams() {
    kcptun_client_to_skiff(AES128_NOFEC_V1_PLAIN, "d", 4, 4 * MIB);
}
#[test]
fn skiff_kcptun_server_none_fec_v1_snappy() {
    skiff_to_kcptun_server(NONE_FEC_V1_SNAPPY, "a", 1, BULK);
}
#[test]
fn skiff_kcptun_server_aes_nofec_v2_nocomp() {
    skiff_to_kcptun_server(AES_NOFEC_V2_PLAIN, "b", 1, BULK);
}
#[test]
fn skiff_kcptun_server_salsa20_fec_v2_snappy() {
    skiff_to_kcptun_server(SALSA20_FEC_V2_SNAPPY, "c", 1, BULK);
}
#[test]
fn skiff_kcptun_server_aes128_nofec_v1_nocomp_4_streams() {
    skiff_to_kcptun_server(AES128_NOFEC_V1_PLAIN, "d", 4, 4 * MIB);
}

/// kcptun's whole `--crypt` list.
const EVERY_CRYPT: [&str; 13] = [
    "aes", "aes-128", "aes-192", "salsa20", "blowfish", "twofish", "cast5", "3des", "tea", "xtea",
    "xor", "sm4", "none",
];

fn every_crypt_case(crypt: &'static str) -> Case {
    Case {
        crypt,
        fec: (10, 3),
        smuxver: 1,
        nocomp: true,
    }
}

#[test]
fn kcptun_client_skiff_every_crypt() {
    for crypt in EVERY_CRYPT {
        eprintln!("kcptun-client → skiff, crypt {crypt}");
        kcptun_client_to_skiff(every_crypt_case(crypt), &format!("c-{crypt}"), 1, MIB);
    }
}

#[test]
fn skiff_kcptun_server_every_crypt() {
    for crypt in EVERY_CRYPT {
        eprintln!("skiff → kcptun-server, crypt {crypt}");
        skiff_to_kcptun_server(every_crypt_case(crypt), &format!("c-{crypt}"), 1, MIB);
    }
}

/// Skiff's kcptun outbound to Skiff's kcptun inbound in one process (no kcptun binaries):
/// the bulk exchange, and smux's end of a stream: a FIN closes both directions, as in kcptun
/// (smux has no other signal, and without it a server would go on pushing a download its
/// client hung up on). A target that answers only after the client's EOF is not heard, and
/// the client's connection ends instead of hanging.
#[test]
fn skiff_to_skiff_bulk_and_fin_closes_both_ways() {
    let dir = TempDir::new("kcptun-self");
    let (up, down) = (payload(5, BULK), payload(6, BULK));
    let (target_port, target_rx) = target(down.clone(), 1);
    // The half-close target: reads to EOF, then says how much it read.
    let answer = TcpListener::bind("127.0.0.1:0").unwrap();
    let answer_port = answer.local_addr().unwrap().port();
    thread::spawn(move || {
        let Ok((mut conn, _)) = answer.accept() else {
            return;
        };
        conn.set_read_timeout(Some(LIMIT)).unwrap();
        let (_, n) = hash_to_eof(&mut conn);
        let _ = conn.write_all(format!("read {n}").as_bytes());
    });
    let (kcp1, kcp2, entry1, entry2) = (free_port(), free_port(), free_port(), free_port());
    let tuning = skiff_tuning(SALSA20_FEC_V2_SNAPPY);
    let config = format!(
        r#"{{"log": {{"loglevel": "warning"}},
            "inbounds": [
              {{"tag": "kcp1", "listen": "127.0.0.1", "port": {kcp1}, "protocol": "kcptun",
                "settings": {{"target": "127.0.0.1:{target_port}", {tuning}}}}},
              {{"tag": "kcp2", "listen": "127.0.0.1", "port": {kcp2}, "protocol": "kcptun",
                "settings": {{"target": "127.0.0.1:{answer_port}", {tuning}}}}},
              {{"tag": "in1", "listen": "127.0.0.1", "port": {entry1}, "protocol": "tunnel",
                "settings": {{"address": "127.0.0.1", "port": 9}}}},
              {{"tag": "in2", "listen": "127.0.0.1", "port": {entry2}, "protocol": "tunnel",
                "settings": {{"address": "127.0.0.1", "port": 9}}}}
            ],
            "outbounds": [
              {{"tag": "direct", "protocol": "freedom"}},
              {{"tag": "out1", "protocol": "kcptun",
                "settings": {{"address": "127.0.0.1", "port": {kcp1}, {tuning}}}}},
              {{"tag": "out2", "protocol": "kcptun",
                "settings": {{"address": "127.0.0.1", "port": {kcp2}, {tuning}}}}}
            ],
            "routing": {{"rules": [{{"inboundTag": ["in1"], "outboundTag": "out1"}},
                                   {{"inboundTag": ["in2"], "outboundTag": "out2"}}]}}}}"#
    );
    let (mut skiff, skiff_log) = start_skiff(dir.path(), "skiff", &config, &[entry1, entry2]);
    wait_udp(&mut skiff, kcp1, &skiff_log);
    wait_udp(&mut skiff, kcp2, &skiff_log);
    check_bulk(entry1, 1, target_rx, &up, &down);

    let mut conn = TcpStream::connect(("127.0.0.1", entry2)).unwrap();
    conn.set_read_timeout(Some(LIMIT)).unwrap();
    conn.write_all(&[7u8; 100_000]).unwrap();
    conn.shutdown(std::net::Shutdown::Write).unwrap();
    let mut reply = String::new();
    conn.read_to_string(&mut reply).unwrap();
    assert_eq!(
        reply, "",
        "the answer after EOF must not cross a closed smux stream"
    );
    common::assert_healthy(&mut skiff, &skiff_log);
}
