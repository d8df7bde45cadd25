//! gRPC ("gun") transport interop: Xray-core 26.7 (XRAY_BIN, else `../shared/peers/bin/xray`)
//! and sing-box 1.13 (SING_BOX_BIN, else `../shared/peers/bin/sing-box`); outside CI a machine
//! without them skips, under CI that fails. A → B (dokodemo-door → proxy out over gRPC) → C
//! (proxy in over gRPC → freedom) → D, the peer playing B or C: VLESS and VMess, with TLS and
//! without (h2c), Tun and TunMulti, Xray's custom paths, 64 MiB each way at once, SHA-256
//! checked; a half-close (the uplink ends first, then the downlink runs); nginx's `grpc_pass`
//! in front of a Skiff server as Xray-examples sets it up; and what a request for another
//! path gets, compared with Xray's answer.

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::*;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const BULK: u64 = 64 << 20;
const SERVICE: &str = "gun.Svc";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Peer {
    Skiff,
    Xray,
    SingBox,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Proto {
    Vless,
    Vmess,
}

#[derive(Clone, Debug)]
struct Case {
    client: Peer,
    server: Peer,
    proto: Proto,
    tls: bool,
    multi: bool,
    service: &'static str,
}

impl Case {
    fn new(client: Peer, server: Peer) -> Case {
        Case {
            client,
            server,
            proto: Proto::Vless,
            tls: false,
            multi: false,
            service: SERVICE,
        }
    }
    fn vmess(mut self) -> Case {
        self.proto = Proto::Vmess;
        self
    }
    fn tls(mut self) -> Case {
        self.tls = true;
        self
    }
    fn multi(mut self) -> Case {
        self.multi = true;
        self
    }
    fn service(mut self, service: &'static str) -> Case {
        self.service = service;
        self
    }
}

fn xray() -> Option<PathBuf> {
    shared_peer("xray", "XRAY_BIN")
}

fn sing_box() -> Option<PathBuf> {
    shared_peer("sing-box", "SING_BOX_BIN")
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

/// Xray's (and Skiff's) `streamSettings`; `tls`: the certificate pair (server) or its pin
/// (client).
fn xray_stream(case: &Case, tls: Option<Value>) -> Value {
    let mut stream = json!({ "network": "grpc",
        "grpcSettings": { "serviceName": case.service, "multiMode": case.multi } });
    if let Some(tls) = tls {
        stream["security"] = json!("tls");
        stream["tlsSettings"] = tls;
    }
    stream
}

fn xray_server(case: &Case, port: u16, cert: &Path, key: &Path) -> String {
    let tls = case
        .tls
        .then(|| json!({ "certificates": [{ "certificateFile": cert, "keyFile": key }] }));
    let (protocol, settings) = match case.proto {
        Proto::Vless => (
            "vless",
            json!({ "clients": [{ "id": UUID }], "decryption": "none" }),
        ),
        Proto::Vmess => ("vmess", json!({ "clients": [{ "id": UUID }] })),
    };
    json!({
        "log": { "loglevel": "debug" },
        "inbounds": [{ "listen": "127.0.0.1", "port": port, "protocol": protocol,
            "settings": settings, "streamSettings": xray_stream(case, tls) }],
        // Xray 26 refuses private destinations in freedom unless a final rule allows them.
        "outbounds": [{ "protocol": "freedom",
            "settings": { "finalRules": [{ "action": "allow", "ip": ["127.0.0.0/8"] }] } }]
    })
    .to_string()
}

fn xray_client(case: &Case, listen: u16, target: u16, server: u16, cert: &Path) -> String {
    let tls = case
        .tls
        .then(|| json!({ "serverName": "localhost", "pinnedPeerCertSha256": pin(cert) }));
    let user = match case.proto {
        Proto::Vless => json!({ "id": UUID, "encryption": "none" }),
        Proto::Vmess => json!({ "id": UUID, "security": "aes-128-gcm" }),
    };
    let protocol = match case.proto {
        Proto::Vless => "vless",
        Proto::Vmess => "vmess",
    };
    json!({
        "log": { "loglevel": "debug" },
        "inbounds": [{ "listen": "127.0.0.1", "port": listen, "protocol": "dokodemo-door",
            "settings": { "address": "127.0.0.1", "port": target, "network": "tcp" } }],
        "outbounds": [{ "protocol": protocol,
            "settings": { "vnext": [{ "address": "127.0.0.1", "port": server, "users": [user] }] },
            "streamSettings": xray_stream(case, tls) }]
    })
    .to_string()
}

fn sing_box_transport(case: &Case) -> Value {
    json!({ "type": "grpc", "service_name": case.service })
}

fn sing_box_server(case: &Case, port: u16, cert: &Path, key: &Path) -> String {
    assert_eq!(case.proto, Proto::Vless, "sing-box cases run VLESS");
    let mut inbound = json!({ "type": "vless", "listen": "127.0.0.1", "listen_port": port,
        "users": [{ "uuid": UUID }], "transport": sing_box_transport(case) });
    if case.tls {
        inbound["tls"] = json!({ "enabled": true, "certificate_path": cert, "key_path": key });
    }
    json!({ "log": { "level": "debug" }, "inbounds": [inbound],
        "outbounds": [{ "type": "direct" }] })
    .to_string()
}

fn sing_box_client(case: &Case, listen: u16, target: u16, server: u16) -> String {
    assert_eq!(case.proto, Proto::Vless, "sing-box cases run VLESS");
    let mut outbound = json!({ "type": "vless", "server": "127.0.0.1", "server_port": server,
        "uuid": UUID, "transport": sing_box_transport(case) });
    if case.tls {
        outbound["tls"] = json!({ "enabled": true, "server_name": "localhost", "insecure": true });
    }
    json!({ "log": { "level": "debug" },
        "inbounds": [{ "type": "direct", "listen": "127.0.0.1", "listen_port": listen,
            "override_address": "127.0.0.1", "override_port": target }],
        "outbounds": [outbound] })
    .to_string()
}

/// `BIN run -c DIR/NAME.json` (Xray and sing-box alike), waiting for `port`.
/// A peer on TCP `port` (see [`common::start_peer`]).
fn start_peer(
    bin: &Path,
    what: &'static str,
    dir: &Path,
    name: &str,
    config: &str,
    port: u16,
) -> Proc {
    common::start_peer(bin, what, dir, name, config, port, false).0
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

/// Reads to EOF (each read bounded by 60 s): the length and SHA-256 of what came.
fn read_all(reader: &mut TcpStream) -> (u64, Vec<u8>) {
    read_all_then(reader, u64::MAX, || {})
}

/// As `read_all`, calling `at_len` once `len` bytes are in.
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

/// Sends `seed`'s payload while hashing what arrives; the write side is shut once the whole
/// opposite payload is in (or after 60 s), so neither direction ends before both are done.
fn exchange_both(s: TcpStream, seed: u64) -> (u64, Vec<u8>) {
    let mut writer = s.try_clone().unwrap();
    let (all_in, wait_all_in) = std::sync::mpsc::channel::<()>();
    let sender = std::thread::spawn(move || {
        payload_chunks(seed, BULK, |c| writer.write_all(c).unwrap());
        let _ = wait_all_in.recv_timeout(Duration::from_secs(60));
        let _ = writer.shutdown(Shutdown::Write);
    });
    let mut reader = s;
    let result = read_all_then(&mut reader, BULK, || {
        let _ = all_in.send(());
    });
    sender.join().unwrap();
    result
}

/// The processes of one chain, kept alive until the case ends; the Skiff ones are checked
/// for health at the end.
struct Chain {
    _dir: TempDir,
    procs: Vec<Proc>,
    skiff_logs: Vec<(usize, PathBuf)>,
    /// Where A connects.
    entry: u16,
    sink: TcpListener,
}

impl Chain {
    fn healthy(&mut self) {
        for (index, log) in &self.skiff_logs {
            assert_healthy(&mut self.procs[*index], log);
        }
    }
}

/// Starts C (the server) then B (the client) of `case`; nginx, when `nginx` is given, sits
/// in front of the server with TLS (the server then speaks h2c to it). None: a peer is missing.
fn chain(case: &Case, nginx: Option<&Path>) -> Option<Chain> {
    let bins = [case.client, case.server].map(|peer| match peer {
        Peer::Skiff => Some(PathBuf::new()),
        Peer::Xray => xray(),
        Peer::SingBox => sing_box(),
    });
    let [Some(client_bin), Some(server_bin)] = bins else {
        return None;
    };
    // Tests run in parallel, and two may run the same case: a number of its own for each.
    static CHAINS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let dir = TempDir::new(&format!(
        "grpc-{}-{:?}-{:?}-{:?}-{}-{}-{}",
        CHAINS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        case.client,
        case.server,
        case.proto,
        case.tls,
        case.multi,
        nginx.is_some()
    ));
    let (cert, key) = certificate(dir.path());
    let sink = TcpListener::bind("127.0.0.1:0").unwrap();
    let d = sink.local_addr().unwrap().port();
    let (b, c) = (free_port(), free_port());
    let mut procs = Vec::new();
    let mut skiff_logs = Vec::new();
    // Behind nginx the server has no TLS of its own; the client dials nginx's TLS port.
    let server_case = Case {
        tls: case.tls && nginx.is_none(),
        ..case.clone()
    };
    let server_json = match case.server {
        Peer::SingBox => sing_box_server(&server_case, c, &cert, &key),
        _ => xray_server(&server_case, c, &cert, &key),
    };
    match case.server {
        Peer::Skiff => {
            let (proc, log) = start_skiff(dir.path(), "c", &server_json, &[c]);
            skiff_logs.push((procs.len(), log));
            procs.push(proc);
        }
        Peer::Xray => procs.push(start_peer(
            &server_bin,
            "xray",
            dir.path(),
            "c",
            &server_json,
            c,
        )),
        Peer::SingBox => procs.push(start_peer(
            &server_bin,
            "sing-box",
            dir.path(),
            "c",
            &server_json,
            c,
        )),
    }
    let dial = match nginx {
        Some(nginx) => {
            let n = free_port();
            let (cert, key) = (cert.display(), key.display());
            // Xray-examples' all-in-one setup: TLS and HTTP/2 at nginx, h2c to the inbound,
            // no body size limit, long reads for idle tunnels.
            let servers = format!(
                r#"server {{
        listen 127.0.0.1:{n} ssl http2;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        client_max_body_size 0;
        client_body_timeout 1h;
        grpc_read_timeout 1h;
        grpc_send_timeout 1h;
        location /{service}/ {{
            grpc_pass grpc://127.0.0.1:{c};
        }}
        location / {{ return 404; }}
    }}"#,
                service = case
                    .service
                    .trim_start_matches('/')
                    .split('/')
                    .next()
                    .unwrap_or("")
            );
            procs.push(start_nginx(nginx, dir.path(), &servers, &[n]));
            n
        }
        None => c,
    };
    let client_json = match case.client {
        Peer::SingBox => sing_box_client(case, b, d, dial),
        _ => xray_client(case, b, d, dial, &cert),
    };
    match case.client {
        Peer::Skiff => {
            let (proc, log) = start_skiff(dir.path(), "b", &client_json, &[b]);
            skiff_logs.push((procs.len(), log));
            procs.push(proc);
        }
        Peer::Xray => procs.push(start_peer(
            &client_bin,
            "xray",
            dir.path(),
            "b",
            &client_json,
            b,
        )),
        Peer::SingBox => procs.push(start_peer(
            &client_bin,
            "sing-box",
            dir.path(),
            "b",
            &client_json,
            b,
        )),
    }
    Some(Chain {
        _dir: dir,
        procs,
        skiff_logs,
        entry: b,
        sink,
    })
}

/// 64 MiB each way at once through the chain, SHA-256 checked.
fn bulk(case: Case) {
    bulk_via(case, None)
}

fn bulk_via(case: Case, nginx: Option<&Path>) {
    let Some(mut chain) = chain(&case, nginx) else {
        return;
    };
    let sink = chain.sink.try_clone().unwrap();
    let d_side = std::thread::spawn(move || {
        let (s, _) = sink.accept().unwrap();
        exchange_both(s, 2)
    });
    let a = TcpStream::connect(("127.0.0.1", chain.entry)).unwrap();
    let (down_len, down_digest) = exchange_both(a, 1);
    let (up_len, up_digest) = d_side.join().unwrap();
    let who = format!("{case:?}, nginx {}", nginx.is_some());
    assert_eq!((up_len, down_len), (BULK, BULK), "{who}: lengths");
    assert_eq!(up_digest, digest(1, BULK), "{who}: uplink SHA-256");
    assert_eq!(down_digest, digest(2, BULK), "{who}: downlink SHA-256");
    chain.healthy();
}

/// The uplink ends first (A shuts its write side after 4 MiB); D answers only once it saw
/// that end, 4 MiB, then closes: the client's END_STREAM must reach D while the call still
/// carries the answer back. Skiff's ends only: Xray ends the whole tunnel once either
/// direction ends (Xray client to Xray server fails this too, and `ends_cross`), so with
/// Xray `end_arrives` checks what it keeps: the end arrives behind all the data.
fn half_close(case: Case) {
    const LEN: u64 = 4 << 20;
    let Some(mut chain) = chain(&case, None) else {
        return;
    };
    let sink = chain.sink.try_clone().unwrap();
    let d_side = std::thread::spawn(move || {
        let (mut s, _) = sink.accept().unwrap();
        let got = read_all(&mut s);
        payload_chunks(4, LEN, |c| s.write_all(c).unwrap());
        s.shutdown(Shutdown::Write).unwrap();
        got
    });
    let mut a = TcpStream::connect(("127.0.0.1", chain.entry)).unwrap();
    payload_chunks(3, LEN, |c| a.write_all(c).unwrap());
    a.shutdown(Shutdown::Write).unwrap();
    let (down_len, down_digest) = read_all(&mut a);
    let (up_len, up_digest) = d_side.join().unwrap();
    assert_eq!((up_len, down_len), (LEN, LEN), "{case:?}: lengths");
    assert_eq!(up_digest, digest(3, LEN), "{case:?}: uplink SHA-256");
    assert_eq!(down_digest, digest(4, LEN), "{case:?}: downlink SHA-256");
    chain.healthy();
}

use Peer::{SingBox, Skiff, Xray};

#[test]
fn xray_client_skiff_server_vless_tls() {
    bulk(Case::new(Xray, Skiff).tls());
}

#[test]
fn xray_client_skiff_server_vless_h2c_multi() {
    bulk(Case::new(Xray, Skiff).multi());
}

#[test]
fn xray_client_skiff_server_vmess_tls_multi() {
    bulk(Case::new(Xray, Skiff).vmess().tls().multi());
}

#[test]
fn xray_client_skiff_server_vmess_h2c() {
    bulk(Case::new(Xray, Skiff).vmess());
}

#[test]
fn skiff_client_xray_server_vless_tls_multi() {
    bulk(Case::new(Skiff, Xray).tls().multi());
}

#[test]
fn skiff_client_xray_server_vless_h2c() {
    bulk(Case::new(Skiff, Xray));
}

#[test]
fn skiff_client_xray_server_vmess_tls() {
    bulk(Case::new(Skiff, Xray).vmess().tls());
}

#[test]
fn skiff_client_xray_server_vmess_h2c_multi() {
    bulk(Case::new(Skiff, Xray).vmess().multi());
}

/// Xray's custom path: `/a/b/tun|multi` serves `/a/b/tun` and `/a/b/multi`; its client
/// given the same string calls the second in multiMode.
#[test]
fn xray_client_skiff_server_custom_path_multi() {
    bulk(Case::new(Xray, Skiff).multi().service("/my/app/tun|multi"));
}

#[test]
fn skiff_client_xray_server_custom_path() {
    bulk(Case::new(Skiff, Xray).tls().service("/my/app/tun|multi"));
}

#[test]
fn sing_box_client_skiff_server_tls() {
    bulk(Case::new(SingBox, Skiff).tls());
}

#[test]
fn skiff_client_sing_box_server_h2c() {
    bulk(Case::new(Skiff, SingBox));
}

#[test]
fn skiff_client_sing_box_server_tls() {
    bulk(Case::new(Skiff, SingBox).tls());
}

#[test]
fn nginx_grpc_pass_xray_client_skiff_server() {
    let Some(nginx) = nginx_binary() else { return };
    bulk_via(Case::new(Xray, Skiff).tls(), Some(&nginx));
}

#[test]
fn nginx_grpc_pass_skiff_client_skiff_server_multi() {
    let Some(nginx) = nginx_binary() else { return };
    bulk_via(Case::new(Skiff, Skiff).tls().multi(), Some(&nginx));
}

/// The response head curl saw for one request over h2c, lower-cased, without `date`.
fn h2c_answer(port: u16, method: &str, path: &str, content_type: &str) -> Vec<String> {
    let url = format!("http://127.0.0.1:{port}{path}");
    let out = curl(&[
        "--http2-prior-knowledge",
        "-X",
        method,
        "-H",
        &format!("content-type: {content_type}"),
        "-o",
        "/dev/null",
        "-D",
        "-",
        &url,
    ]);
    let mut lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim().to_ascii_lowercase())
        .filter(|l| !l.is_empty() && !l.starts_with("date:"))
        .collect();
    lines.sort();
    lines
}

/// A call to another service or method, a GET, a request that is not gRPC: the same answer
/// (status, grpc-status, grpc-message) from Skiff as from Xray.
#[test]
fn other_requests_meet_what_xray_gives_them() {
    let Some(xray) = xray() else { return };
    let dir = TempDir::new("grpc-probe");
    let (cert, key) = certificate(dir.path());
    let case = Case::new(Skiff, Skiff);
    let (x, s) = (free_port(), free_port());
    let _xray = start_peer(
        &xray,
        "xray",
        dir.path(),
        "x",
        &xray_server(&case, x, &cert, &key),
        x,
    );
    let (mut skiff, log) = start_skiff(dir.path(), "s", &xray_server(&case, s, &cert, &key), &[s]);
    let probes = [
        ("POST", "/other.Svc/Tun", "application/grpc"),
        ("POST", &*format!("/{SERVICE}/Nope"), "application/grpc"),
        ("POST", "/nothing", "application/grpc"),
        ("GET", &*format!("/{SERVICE}/Tun"), "application/grpc"),
        ("POST", &*format!("/{SERVICE}/Tun"), "text/plain"),
    ];
    for (method, path, content_type) in probes {
        let from_xray = h2c_answer(x, method, path, content_type);
        assert!(
            from_xray.iter().any(|l| l.starts_with("http/2 ")),
            "no answer from xray to {method} {path}: {from_xray:?}"
        );
        let from_skiff = h2c_answer(s, method, path, content_type);
        assert_eq!(
            from_skiff, from_xray,
            "answer to {method} {path} ({content_type})"
        );
    }
    assert_healthy(&mut skiff, &log);
}

#[test]
fn half_close_skiff_client_skiff_server() {
    half_close(Case::new(Skiff, Skiff).multi());
}

/// Each side ends its direction as soon as it has sent its 4 MiB, whatever it has received:
/// the ends cross in flight, and each must still arrive after all the data before it.
fn ends_cross(case: Case) {
    const LEN: u64 = 4 << 20;
    let Some(mut chain) = chain(&case, None) else {
        return;
    };
    let send_then_end = |s: &TcpStream, seed: u64| {
        let mut writer = s.try_clone().unwrap();
        std::thread::spawn(move || {
            payload_chunks(seed, LEN, |c| writer.write_all(c).unwrap());
            writer.shutdown(Shutdown::Write).unwrap();
        })
    };
    let sink = chain.sink.try_clone().unwrap();
    let d_side = std::thread::spawn(move || {
        let (mut s, _) = sink.accept().unwrap();
        let sender = send_then_end(&s, 6);
        let got = read_all(&mut s);
        sender.join().unwrap();
        got
    });
    let mut a = TcpStream::connect(("127.0.0.1", chain.entry)).unwrap();
    let sender = send_then_end(&a, 5);
    let (down_len, down_digest) = read_all(&mut a);
    sender.join().unwrap();
    let (up_len, up_digest) = d_side.join().unwrap();
    assert_eq!((up_len, down_len), (LEN, LEN), "{case:?}: lengths");
    assert_eq!(up_digest, digest(5, LEN), "{case:?}: uplink SHA-256");
    assert_eq!(down_digest, digest(6, LEN), "{case:?}: downlink SHA-256");
    chain.healthy();
}

/// One side sends 4 MiB and ends its direction, the other sends nothing: the end must
/// arrive as an EOF behind all the data.
fn end_arrives(case: Case, client_sends: bool) {
    const LEN: u64 = 4 << 20;
    let Some(mut chain) = chain(&case, None) else {
        return;
    };
    let send_and_end = |s: &mut TcpStream| {
        payload_chunks(7, LEN, |c| s.write_all(c).unwrap());
        s.shutdown(Shutdown::Write).unwrap();
    };
    let sink = chain.sink.try_clone().unwrap();
    let d_side = std::thread::spawn(move || {
        let (mut s, _) = sink.accept().unwrap();
        if client_sends {
            Some(read_all(&mut s))
        } else {
            send_and_end(&mut s);
            None
        }
    });
    let mut a = TcpStream::connect(("127.0.0.1", chain.entry)).unwrap();
    let got = if client_sends {
        send_and_end(&mut a);
        d_side.join().unwrap().unwrap()
    } else {
        let got = read_all(&mut a);
        d_side.join().unwrap();
        got
    };
    assert_eq!(
        got,
        (LEN, digest(7, LEN)),
        "{case:?}, client sends {client_sends}"
    );
    chain.healthy();
}

#[test]
fn ends_cross_skiff_client_skiff_server() {
    ends_cross(Case::new(Skiff, Skiff).tls());
}

#[test]
fn end_arrives_xray_client_skiff_server() {
    end_arrives(Case::new(Xray, Skiff).tls(), true);
    end_arrives(Case::new(Xray, Skiff).multi(), false);
}

#[test]
fn end_arrives_skiff_client_xray_server() {
    end_arrives(Case::new(Skiff, Xray).multi(), true);
    end_arrives(Case::new(Skiff, Xray).tls(), false);
}
