//! Raw TCP with Xray's HTTP header obfuscation (`tcpSettings.header.type: "http"`), interop
//! with Xray-core 26.7 (XRAY_BIN, else `../shared/peers/bin/xray`; outside CI a machine
//! without either skips, under CI that fails), both directions, VLESS and VMess: A → B
//! (dokodemo-door → proxy out) → C (proxy in → freedom) → D, with B or C being Xray, 64 MiB
//! each way at once, SHA-256 checked; with configured templates, and with Xray's defaults
//! under TLS (the header then travels inside TLS, as Xray layers it). Half-close (one
//! direction ends, the other then runs to its end) between Skiff's own ends and from Xray's
//! VMess client, the only Xray end that honours it; otherwise with Xray the end arriving
//! behind all the data (see `half_close`). A prober gets the same bytes from Skiff as from
//! Xray (its Date aside): 404 for a path not configured, 400 for the rest.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use sha2::{Digest, Sha256};

const BULK: u64 = 64 << 20;

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
    common::start_peer(xray, "xray", dir, name, config, port, false).0
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

/// Deterministic bytes (xorshift) of `seed`: `len` bytes in 64 KiB chunks.
fn payload_chunks(seed: u64, len: u64, mut f: impl FnMut(&[u8])) {
    let mut state = seed | 1;
    let mut buf = vec![0u8; 64 * 1024];
    for _ in 0..len / buf.len() as u64 {
        for chunk in buf.chunks_mut(8) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            chunk.copy_from_slice(&state.to_le_bytes()[..chunk.len()]);
        }
        f(&buf);
    }
}

fn digest(seed: u64, len: u64) -> Vec<u8> {
    let mut h = Sha256::new();
    payload_chunks(seed, len, |c| h.update(c));
    h.finalize().to_vec()
}

/// Reads to EOF (each read bounded by 60 s): the length and SHA-256 of what came; `at_len`
/// is called once `len` bytes are in.
fn read_all_then(reader: &mut TcpStream, len: u64, at_len: impl FnOnce()) -> (u64, Vec<u8>) {
    let mut at_len = Some(at_len);
    reader
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut h = Sha256::new();
    let mut total = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = reader.read(&mut buf).unwrap();
        if n == 0 {
            return (total, h.finalize().to_vec());
        }
        total += n as u64;
        h.update(&buf[..n]);
        if total >= len
            && let Some(f) = at_len.take()
        {
            f();
        }
    }
}

fn read_all(reader: &mut TcpStream) -> (u64, Vec<u8>) {
    read_all_then(reader, u64::MAX, || {})
}

/// Sends `seed`'s payload while hashing what arrives; the write side is shut once the whole
/// opposite payload is in (or the reading ended short of it, or after 60 s), so neither
/// direction ends before both are done. The first 64 KiB go out before anything else: when
/// A sends nothing for the first 100 ms, Xray 26.7's VMess client ends the uplink at once,
/// without a byte (to Xray's own VMess server as to Skiff's), and on a loaded machine a
/// sending thread of its own sometimes starts that late.
fn exchange_bulk(s: TcpStream, seed: u64) -> (u64, Vec<u8>) {
    const FIRST: u64 = 64 * 1024;
    let mut writer = s.try_clone().unwrap();
    payload_chunks(seed, FIRST, |c| writer.write_all(c).unwrap());
    let (all_in, wait_all_in) = std::sync::mpsc::channel::<()>();
    let sender = std::thread::spawn(move || {
        let mut sent = 0;
        payload_chunks(seed, BULK, |c| {
            if sent >= FIRST {
                writer.write_all(c).unwrap();
            }
            sent += c.len() as u64;
        });
        let _ = wait_all_in.recv_timeout(Duration::from_secs(60));
        let _ = writer.shutdown(Shutdown::Write);
    });
    let mut reader = s;
    let result = read_all_then(&mut reader, BULK, move || {
        let _ = all_in.send(());
    });
    sender.join().unwrap();
    result
}

/// Which end of the chain Xray plays, if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Xray {
    Client,
    Server,
    Neither,
}

/// A running chain: its processes (kept until dropped, and killed before their directory
/// goes), where A connects, D's listener.
struct Chain {
    _peer: Option<Proc>,
    skiffs: Vec<(Proc, PathBuf)>,
    entry: u16,
    sink: TcpListener,
    _dir: TempDir,
}

impl Chain {
    fn healthy(&mut self) {
        for (proc, log) in &mut self.skiffs {
            assert_healthy(proc, log);
        }
    }

    /// A's connection to B, its reads and writes bounded by 60 s.
    fn connect(&self) -> TcpStream {
        let a = TcpStream::connect(("127.0.0.1", self.entry)).unwrap();
        a.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        a.set_write_timeout(Some(Duration::from_secs(60))).unwrap();
        a
    }

    /// D's listener, for D's thread to `accept_d` on.
    fn sink(&self) -> TcpListener {
        self.sink.try_clone().unwrap()
    }
}

/// D's connection from C, its reads and writes bounded by 60 s. Fails if none comes within
/// 10 s (a chain that broke before reaching D), rather than waiting for ever.
fn accept_d(sink: &TcpListener) -> TcpStream {
    let deadline = Instant::now() + Duration::from_secs(10);
    sink.set_nonblocking(true).unwrap();
    let d = loop {
        match sink.accept() {
            Ok((d, _)) => break d,
            Err(e) if e.kind() == ErrorKind::WouldBlock && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => panic!("no connection reached D: {e}"),
        }
    };
    d.set_nonblocking(false).unwrap();
    d.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    d.set_write_timeout(Some(Duration::from_secs(60))).unwrap();
    d
}

/// Starts C (the server) then B (the client). None: Xray is wanted and missing.
fn chain(name: &str, role: Xray, custom: bool, with_tls: bool, vmess: bool) -> Option<Chain> {
    let xray = match role {
        Xray::Neither => PathBuf::new(),
        _ => xray()?,
    };
    let dir = TempDir::new(name);
    let (cert, key) = certificate(dir.path());
    let pin = pin(&cert);
    let tls = with_tls.then_some((cert.as_path(), key.as_path(), pin.as_str()));
    let sink = TcpListener::bind("127.0.0.1:0").unwrap();
    let d = sink.local_addr().unwrap().port();
    let (b, c) = (free_port(), free_port());
    let server_json = server_config(c, custom, tls, vmess);
    let client_json = client_config(b, d, c, custom, tls, vmess);
    let mut skiffs = Vec::new();
    let mut peer = None;
    if role == Xray::Server {
        peer = Some(start_xray(&xray, dir.path(), "c", &server_json, c));
    } else {
        skiffs.push(start_skiff(dir.path(), "c", &server_json, &[c]));
    }
    if role == Xray::Client {
        peer = Some(start_xray(&xray, dir.path(), "b", &client_json, b));
    } else {
        skiffs.push(start_skiff(dir.path(), "b", &client_json, &[b]));
    }
    Some(Chain {
        _dir: dir,
        _peer: peer,
        skiffs,
        entry: b,
        sink,
    })
}

fn run_case(xray_is_client: bool, custom: bool, with_tls: bool, vmess: bool) {
    let name = format!("httphdr-{xray_is_client}-{custom}-{with_tls}-{vmess}");
    let role = if xray_is_client {
        Xray::Client
    } else {
        Xray::Server
    };
    let Some(mut chain) = chain(&name, role, custom, with_tls, vmess) else {
        return;
    };
    let sink = chain.sink();
    let d_side = std::thread::spawn(move || exchange_bulk(accept_d(&sink), 2));
    let (down_len, down_digest) = exchange_bulk(chain.connect(), 1);
    let (up_len, up_digest) = d_side.join().unwrap();
    assert_eq!((up_len, down_len), (BULK, BULK), "{name}: lengths");
    assert_eq!(up_digest, digest(1, BULK), "{name}: uplink SHA-256");
    assert_eq!(down_digest, digest(2, BULK), "{name}: downlink SHA-256");
    chain.healthy();
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

/// One direction ends first, the other then runs to its end: with `client_first` A sends 4
/// MiB and shuts its write side, and D answers only once it saw that end (4 MiB, then
/// closes); otherwise the same with the roles swapped. The end must cross the tunnel (as the
/// VLESS or VMess stream's end, under the HTTP header) while it still carries the answer.
/// Skiff's own ends honour it either way, VLESS and VMess. Of Xray 26.7 only its VMess client
/// does, when A's direction ends first: VMess carries the end of the request as a chunk of
/// its own, and Xray's client keeps reading the response after sending it. Otherwise (VLESS
/// in either role, Xray as VMess server, or the server's direction ending first) what ends
/// second is not carried reliably: Xray stops carrying it or carries only part of it (now
/// and then all), and closes the whole connection when its `uplinkOnly`/`downlinkOnly`
/// timer runs out (1 s by default), as over HTTPUpgrade and gRPC. There `end_arrives`
/// checks what Xray does keep.
fn half_close(role: Xray, vmess: bool, client_first: bool) {
    const LEN: u64 = 4 << 20;
    let name = format!("httphdr-half-{role:?}-{vmess}-{client_first}");
    let Some(mut chain) = chain(&name, role, true, false, vmess) else {
        return;
    };
    // The side that ends first sends seed 3, the one that answers seed 4.
    let first_then_read = |s: &mut TcpStream| {
        payload_chunks(3, LEN, |c| s.write_all(c).unwrap());
        s.shutdown(Shutdown::Write).unwrap();
        read_all(s)
    };
    let read_then_answer = |s: &mut TcpStream| {
        let got = read_all(s);
        payload_chunks(4, LEN, |c| s.write_all(c).unwrap());
        s.shutdown(Shutdown::Write).unwrap();
        got
    };
    let sink = chain.sink();
    let d_side = std::thread::spawn(move || {
        let mut s = accept_d(&sink);
        if client_first {
            read_then_answer(&mut s)
        } else {
            first_then_read(&mut s)
        }
    });
    let mut a = chain.connect();
    let at_a = if client_first {
        first_then_read(&mut a)
    } else {
        read_then_answer(&mut a)
    };
    let at_d = d_side.join().unwrap();
    let (at_first, at_answerer) = if client_first {
        (at_a, at_d)
    } else {
        (at_d, at_a)
    };
    assert_eq!((at_answerer.0, at_first.0), (LEN, LEN), "{name}: lengths");
    assert_eq!(
        at_answerer.1,
        digest(3, LEN),
        "{name}: first direction SHA-256"
    );
    assert_eq!(at_first.1, digest(4, LEN), "{name}: answer SHA-256");
    chain.healthy();
}

#[test]
fn half_close_skiff_client_skiff_server() {
    for vmess in [false, true] {
        half_close(Xray::Neither, vmess, true);
        half_close(Xray::Neither, vmess, false);
    }
}

#[test]
fn half_close_xray_client_skiff_server_vmess_client_ends_first() {
    half_close(Xray::Client, true, true);
}

/// One side sends 4 MiB and ends its direction, the other sends nothing: the end must
/// arrive as an EOF behind all the data.
fn end_arrives(role: Xray, vmess: bool, client_sends: bool) {
    const LEN: u64 = 4 << 20;
    let name = format!("httphdr-end-{role:?}-{vmess}-{client_sends}");
    let Some(mut chain) = chain(&name, role, true, false, vmess) else {
        return;
    };
    let send_and_end = |s: &mut TcpStream| {
        payload_chunks(7, LEN, |c| s.write_all(c).unwrap());
        s.shutdown(Shutdown::Write).unwrap();
    };
    let sink = chain.sink();
    let d_side = std::thread::spawn(move || {
        let mut s = accept_d(&sink);
        if client_sends {
            Some(read_all(&mut s))
        } else {
            send_and_end(&mut s);
            None
        }
    });
    let mut a = chain.connect();
    let got = if client_sends {
        send_and_end(&mut a);
        d_side.join().unwrap().unwrap()
    } else {
        let got = read_all(&mut a);
        d_side.join().unwrap();
        got
    };
    assert_eq!(got, (LEN, digest(7, LEN)), "{name}");
    chain.healthy();
}

#[test]
fn end_arrives_xray_client_skiff_server() {
    end_arrives(Xray::Client, false, true);
    end_arrives(Xray::Client, true, false);
}

#[test]
fn end_arrives_skiff_client_xray_server() {
    end_arrives(Xray::Server, true, true);
    end_arrives(Xray::Server, false, false);
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
