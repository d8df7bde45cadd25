//! HTTPUpgrade interop with Xray-core 26.7 (XRAY_BIN, else `../shared/peers/bin/xray`) and
//! sing-box 1.13 (SING_BOX_BIN, else `../shared/peers/bin/sing-box`); outside CI a machine
//! without them skips, under CI that fails. A → B (dokodemo-door → proxy out over
//! `httpupgrade`) → C (proxy in → freedom) → D, the peer playing B or C: VLESS and VMess with
//! Xray both ways, VLESS with sing-box both ways, 64 MiB each way at once, SHA-256 checked.
//! Half-close (one direction ends, the other then runs to its end) where the ends honour it,
//! and elsewhere the end arriving behind all the data: see `half_close`. `?ed=` (send before
//! the 101) is tested between Skiff's own ends, for the reason given at that test. A request
//! that is not an upgrade gets what Xray's listener gives it: the connection closed without
//! a byte.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const BULK: u64 = 64 << 20;
const PATH: &str = "/up";
const HOST: &str = "h.example";

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
    path: &'static str,
}

impl Case {
    fn new(client: Peer, server: Peer) -> Case {
        Case {
            client,
            server,
            proto: Proto::Vless,
            path: PATH,
        }
    }
    fn vmess(mut self) -> Case {
        self.proto = Proto::Vmess;
        self
    }
    fn path(mut self, path: &'static str) -> Case {
        self.path = path;
        self
    }
}

fn xray() -> Option<PathBuf> {
    shared_peer("xray", "XRAY_BIN")
}

fn sing_box() -> Option<PathBuf> {
    shared_peer("sing-box", "SING_BOX_BIN")
}

/// Xray's (and Skiff's) `streamSettings`.
fn stream_settings(path: &str) -> Value {
    json!({ "network": "httpupgrade",
        "httpupgradeSettings": { "path": path, "host": HOST, "headers": { "X-Test": "1" } } })
}

fn xray_server(case: &Case, port: u16) -> String {
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
            "settings": settings, "streamSettings": stream_settings(case.path) }],
        // Xray 26 refuses private destinations in freedom unless a final rule allows them.
        "outbounds": [{ "protocol": "freedom",
            "settings": { "finalRules": [{ "action": "allow", "ip": ["127.0.0.0/8"] }] } }]
    })
    .to_string()
}

fn xray_client(case: &Case, listen: u16, target: u16, server: u16) -> String {
    let (protocol, user) = match case.proto {
        Proto::Vless => ("vless", json!({ "id": UUID, "encryption": "none" })),
        Proto::Vmess => ("vmess", json!({ "id": UUID, "security": "aes-128-gcm" })),
    };
    json!({
        "log": { "loglevel": "debug" },
        "inbounds": [{ "listen": "127.0.0.1", "port": listen, "protocol": "dokodemo-door",
            "settings": { "address": "127.0.0.1", "port": target, "network": "tcp" } }],
        "outbounds": [{ "protocol": protocol,
            "settings": { "vnext": [{ "address": "127.0.0.1", "port": server, "users": [user] }] },
            "streamSettings": stream_settings(case.path) }]
    })
    .to_string()
}

/// sing-box's words for the same transport (it sends `host` as the Host header and checks it
/// on its server, as Xray does).
fn sing_box_transport(case: &Case) -> Value {
    json!({ "type": "httpupgrade", "path": case.path, "host": HOST,
        "headers": { "X-Test": "1" } })
}

fn sing_box_server(case: &Case, port: u16) -> String {
    assert_eq!(case.proto, Proto::Vless, "sing-box cases run VLESS");
    json!({ "log": { "level": "debug" },
        "inbounds": [{ "type": "vless", "listen": "127.0.0.1", "listen_port": port,
            "users": [{ "uuid": UUID }], "transport": sing_box_transport(case) }],
        "outbounds": [{ "type": "direct" }] })
    .to_string()
}

fn sing_box_client(case: &Case, listen: u16, target: u16, server: u16) -> String {
    assert_eq!(case.proto, Proto::Vless, "sing-box cases run VLESS");
    json!({ "log": { "level": "debug" },
        "inbounds": [{ "type": "direct", "listen": "127.0.0.1", "listen_port": listen,
            "override_address": "127.0.0.1", "override_port": target }],
        "outbounds": [{ "type": "vless", "server": "127.0.0.1", "server_port": server,
            "uuid": UUID, "transport": sing_box_transport(case) }] })
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
/// opposite payload is in (or the reading ended short of it, or after 60 s), so neither
/// direction ends before both are done. The first 64 KiB go out before anything else: when
/// A sends nothing for the first 100 ms, Xray 26.7's VMess client ends the uplink at once,
/// without a byte (to Xray's own VMess server as to Skiff's), and on a loaded machine a
/// sending thread of its own sometimes starts that late.
fn exchange_both(s: TcpStream, seed: u64) -> (u64, Vec<u8>) {
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

/// The processes of one chain, kept alive until the case ends (and killed before their
/// directory goes); the Skiff ones are checked for health at the end.
struct Chain {
    procs: Vec<Proc>,
    skiff_logs: Vec<(usize, PathBuf)>,
    /// Where A connects.
    entry: u16,
    /// D's listener.
    sink: TcpListener,
    /// The server's (C's) log.
    server_log: PathBuf,
    dir: TempDir,
}

impl Chain {
    fn healthy(&mut self) {
        for (index, log) in &self.skiff_logs {
            assert_healthy(&mut self.procs[*index], log);
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

    /// sing-box's server lost the first byte the client sent behind the 101 (see
    /// `SING_BOX_ATTEMPTS`): its VLESS server read the UUID's first byte as the version.
    fn sing_box_lost_first_byte(&self) -> bool {
        let log = std::fs::read_to_string(&self.server_log).unwrap_or_default();
        log.contains(&format!("unknown version: {}", UUID_BYTES[0]))
    }

    /// Starts `peer` as `name` ("b" the client, "c" the server) on `config`, waiting for
    /// `port`.
    fn start(&mut self, peer: Peer, bin: &Path, name: &str, config: &str, port: u16) {
        let dir = self.dir.path();
        match peer {
            Peer::Skiff => {
                let (proc, log) = start_skiff(dir, name, config, &[port]);
                self.skiff_logs.push((self.procs.len(), log));
                self.procs.push(proc);
            }
            Peer::Xray => self
                .procs
                .push(start_peer(bin, "xray", dir, name, config, port)),
            Peer::SingBox => self
                .procs
                .push(start_peer(bin, "sing-box", dir, name, config, port)),
        }
    }
}

/// Starts C (the server) then B (the client) of `case`. None: a peer is missing.
fn chain(case: &Case) -> Option<Chain> {
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
        "httpupgrade-{}-{:?}-{:?}-{:?}",
        CHAINS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        case.client,
        case.server,
        case.proto,
    ));
    let sink = TcpListener::bind("127.0.0.1:0").unwrap();
    let d = sink.local_addr().unwrap().port();
    let (b, c) = (free_port(), free_port());
    let mut chain = Chain {
        procs: Vec::new(),
        skiff_logs: Vec::new(),
        entry: b,
        sink,
        server_log: dir.path().join(match case.server {
            Peer::Skiff => "c.log",
            _ => "c.out",
        }),
        dir,
    };
    let server_json = match case.server {
        Peer::SingBox => sing_box_server(case, c),
        _ => xray_server(case, c),
    };
    chain.start(case.server, &server_bin, "c", &server_json, c);
    let client_json = match case.client {
        Peer::SingBox => sing_box_client(case, b, d, c),
        _ => xray_client(case, b, d, c),
    };
    chain.start(case.client, &client_bin, "b", &client_json, b);
    Some(chain)
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

/// How many times a case with sing-box as the server is tried while sing-box loses the
/// first byte behind the 101 (and only then). Its HTTPUpgrade server flushes the 101 and
/// only then hijacks the connection from Go's HTTP server, dropping the buffered reader that
/// hijacking hands it (`ServeHTTP` in transport/v2rayhttpupgrade/server.go). Go's server
/// keeps a one-byte background read pending while the handler runs, so a byte that arrives
/// in between lands in that dropped reader. Skiff's VLESS client, like any client that does
/// not wait, sends its request as soon as the 101 is in; sing-box then sometimes reports
/// "unknown version: 184" (the UUID's first byte) and drops the connection: about one
/// connection in ten with two test binaries sharing 2 busy cores, rarely when idle. A race
/// in sing-box that a peer cannot avoid, so such a run is tried again; any other failure
/// fails at once.
const SING_BOX_ATTEMPTS: u32 = 4;

/// Runs `body` on a new chain of `case` (nothing when a peer is missing), again when
/// `SING_BOX_ATTEMPTS` says so.
fn on_chain(case: &Case, body: impl Fn(&mut Chain)) {
    for attempt in 1..=SING_BOX_ATTEMPTS {
        let Some(mut chain) = chain(case) else {
            return;
        };
        let Err(panic) = std::panic::catch_unwind(AssertUnwindSafe(|| body(&mut chain))) else {
            return;
        };
        if case.server == Peer::SingBox
            && attempt < SING_BOX_ATTEMPTS
            && chain.sing_box_lost_first_byte()
        {
            eprintln!("{case:?}: sing-box's server lost the first byte behind the 101; again");
            continue;
        }
        std::panic::resume_unwind(panic);
    }
}

/// 64 MiB each way at once through the chain, SHA-256 checked.
fn bulk(case: Case) {
    on_chain(&case, |chain| {
        let sink = chain.sink();
        let d_side = std::thread::spawn(move || exchange_both(accept_d(&sink), 2));
        let (down_len, down_digest) = exchange_both(chain.connect(), 1);
        let (up_len, up_digest) = d_side.join().unwrap();
        assert_eq!((up_len, down_len), (BULK, BULK), "{case:?}: lengths");
        assert_eq!(up_digest, digest(1, BULK), "{case:?}: uplink SHA-256");
        assert_eq!(down_digest, digest(2, BULK), "{case:?}: downlink SHA-256");
        chain.healthy();
    });
}

use Peer::{SingBox, Skiff, Xray};

#[test]
fn xray_client_skiff_server_vless() {
    bulk(Case::new(Xray, Skiff));
}

#[test]
fn skiff_client_xray_server_vless() {
    bulk(Case::new(Skiff, Xray));
}

#[test]
fn xray_client_skiff_server_vmess() {
    bulk(Case::new(Xray, Skiff).vmess());
}

#[test]
fn skiff_client_xray_server_vmess() {
    bulk(Case::new(Skiff, Xray).vmess());
}

#[test]
fn sing_box_client_skiff_server_vless() {
    bulk(Case::new(SingBox, Skiff));
}

#[test]
fn skiff_client_sing_box_server_vless() {
    bulk(Case::new(Skiff, SingBox));
}

/// `?ed=` is tested between Skiff's own ends: the client sends before the 101, and the server
/// keeps the bytes that came behind the request. Xray cannot take part reliably on either
/// side:
/// * Xray's server reads the request through a buffered reader and then drops whatever that
///   reader buffered behind the head (`upgrade` in httpupgrade/hub.go). Data sent right behind
///   the request is lost, and its VLESS server reports "invalid request version".
/// * Xray's client reads the 101 through a reader sized to its first read. It then returns
///   every byte buffered behind the 101, even past the length it was asked for (`ConnRF.Read`
///   in httpupgrade/dialer.go). Its VLESS client reads the response header byte by byte, so it
///   loses a byte whenever the server's first bytes arrive with the 101.
///
/// Each fails about every other run on loopback: races in Xray, not something a peer can avoid.
#[test]
fn skiff_client_skiff_server_early_data() {
    bulk(Case::new(Skiff, Skiff).path("/up?ed=2048"));
}

/// One direction ends first, the other then runs to its end: with `client_first` A sends 4
/// MiB and shuts its write side, and D answers only once it saw that end (4 MiB, then
/// closes); otherwise the same with the roles swapped (D ends first, A answers). The end must
/// cross the tunnel while the tunnel still carries the answer back.
///
/// Who honours it (Xray 26.7 and sing-box 1.13 as found on loopback):
/// * Skiff's ends, either way, VLESS and VMess.
/// * sing-box's client when the server's direction ends first: it shuts A's write side and
///   keeps carrying A's answer. When A's direction ends first it closes the whole tunnel
///   rather than shutting its write side, so D's answer meets a closed connection.
/// * Not sing-box's server, either way: when either direction ends it closes the tunnel, and
///   passes the client's end on to D as a full close (D reads its EOF, then its answer gets
///   EPIPE). sing-box to sing-box fails both ways.
/// * Xray's VMess client when A's direction ends first: VMess carries the end of the request
///   as a chunk of its own, and Xray's client keeps reading the response after sending it.
/// * Not Xray otherwise: over VLESS in either role, as VMess server, or when the server's
///   direction ends first, what ends second is not carried reliably: Xray stops carrying it
///   or carries only part of it (now and then all), and closes the whole tunnel when its
///   `uplinkOnly`/`downlinkOnly` timer runs out (1 s by default; raised to 30 s it only
///   waits longer). Xray to Xray does the same.
///
/// With Xray and sing-box's server, `end_arrives` checks what they do keep: the end arrives
/// behind all the data.
fn half_close(case: Case, client_first: bool) {
    const LEN: u64 = 4 << 20;
    // The side that ends first sends seed 3, the one that answers seed 4.
    fn first_then_read(s: &mut TcpStream) -> (u64, Vec<u8>) {
        payload_chunks(3, LEN, |c| s.write_all(c).unwrap());
        s.shutdown(Shutdown::Write).unwrap();
        read_all(s)
    }
    fn read_then_answer(s: &mut TcpStream) -> (u64, Vec<u8>) {
        let got = read_all(s);
        payload_chunks(4, LEN, |c| s.write_all(c).unwrap());
        s.shutdown(Shutdown::Write).unwrap();
        got
    }
    on_chain(&case, |chain| {
        let sink = chain.sink();
        let d_side = std::thread::spawn(move || {
            let mut d = accept_d(&sink);
            if client_first {
                read_then_answer(&mut d)
            } else {
                first_then_read(&mut d)
            }
        });
        let mut a = chain.connect();
        let at_a = if client_first {
            first_then_read(&mut a)
        } else {
            read_then_answer(&mut a)
        };
        let at_d = d_side.join().unwrap();
        // What the first-ending side received is the answer, and the other way round.
        let (at_first, at_answerer) = if client_first {
            (at_a, at_d)
        } else {
            (at_d, at_a)
        };
        let who = format!("{case:?}, client ends first {client_first}");
        assert_eq!((at_answerer.0, at_first.0), (LEN, LEN), "{who}: lengths");
        assert_eq!(
            at_answerer.1,
            digest(3, LEN),
            "{who}: first direction SHA-256"
        );
        assert_eq!(at_first.1, digest(4, LEN), "{who}: answer SHA-256");
        chain.healthy();
    });
}

#[test]
fn half_close_skiff_client_skiff_server() {
    for case in [Case::new(Skiff, Skiff), Case::new(Skiff, Skiff).vmess()] {
        half_close(case.clone(), true);
        half_close(case, false);
    }
}

#[test]
fn half_close_xray_client_skiff_server_vmess_client_ends_first() {
    half_close(Case::new(Xray, Skiff).vmess(), true);
}

#[test]
fn half_close_sing_box_client_skiff_server_server_ends_first() {
    half_close(Case::new(SingBox, Skiff), false);
}

/// One side sends 4 MiB and ends its direction, the other sends nothing: the end must
/// arrive as an EOF behind all the data.
fn end_arrives(case: Case, client_sends: bool) {
    const LEN: u64 = 4 << 20;
    fn send_and_end(s: &mut TcpStream) {
        payload_chunks(7, LEN, |c| s.write_all(c).unwrap());
        s.shutdown(Shutdown::Write).unwrap();
    }
    on_chain(&case, |chain| {
        let sink = chain.sink();
        let d_side = std::thread::spawn(move || {
            let mut d = accept_d(&sink);
            if client_sends {
                Some(read_all(&mut d))
            } else {
                send_and_end(&mut d);
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
        assert_eq!(
            got,
            (LEN, digest(7, LEN)),
            "{case:?}, client sends {client_sends}"
        );
        chain.healthy();
    });
}

#[test]
fn end_arrives_xray_client_skiff_server() {
    end_arrives(Case::new(Xray, Skiff), true);
    end_arrives(Case::new(Xray, Skiff).vmess(), false);
}

#[test]
fn end_arrives_skiff_client_xray_server() {
    end_arrives(Case::new(Skiff, Xray).vmess(), true);
    end_arrives(Case::new(Skiff, Xray), false);
}

#[test]
fn end_arrives_sing_box_client_skiff_server() {
    end_arrives(Case::new(SingBox, Skiff), false);
}

/// A's end through sing-box's client: sing-box closes the whole tunnel once A's direction
/// ends (see `half_close`), without reading what came back. Skiff's VLESS server once wrote
/// its response header as soon as it had accepted the request; those two unread bytes
/// turned sing-box's close into a reset, which took the last of the uplink with it (D saw a
/// clean end after 2.2 or 3.3 MB of the 4 MiB, in 6 of 40 runs on a busy machine). Now the
/// header waits for the answer's first bytes, as Xray's does.
#[test]
fn end_arrives_sing_box_client_skiff_server_client_sends() {
    end_arrives(Case::new(SingBox, Skiff), true);
}

#[test]
fn end_arrives_skiff_client_sing_box_server() {
    end_arrives(Case::new(Skiff, SingBox), true);
    end_arrives(Case::new(Skiff, SingBox), false);
}

/// What a listener gives a client: the bytes it answered, and whether it then closed.
fn answer_to(port: u16, request: &[u8]) -> (Vec<u8>, End) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    s.write_all(request).unwrap();
    read_to_close(&mut s)
}

/// Plain HTTP, the wrong path, the wrong host, a `Connection` token list, bytes that are not
/// HTTP: Xray closes each without answering, and so must we; a good upgrade gets the same
/// 101 from both.
#[test]
fn requests_that_are_not_upgrades_meet_what_xray_gives_them() {
    let Some(xray) = xray() else { return };
    let dir = TempDir::new("httpupgrade-probe");
    let (x, s) = (free_port(), free_port());
    let case = Case::new(Skiff, Skiff);
    let _xray = start_peer(&xray, "xray", dir.path(), "x", &xray_server(&case, x), x);
    let (mut skiff, log) = start_skiff(dir.path(), "s", &xray_server(&case, s), &[s]);
    let up = "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n";
    let probes = [
        "GET / HTTP/1.1\r\nHost: h.example\r\nUser-Agent: curl/8\r\nAccept: */*\r\n\r\n".to_owned(),
        format!("GET /other HTTP/1.1\r\nHost: {HOST}\r\n{up}"),
        format!("GET {PATH} HTTP/1.1\r\nHost: other.example\r\n{up}"),
        format!(
            "GET {PATH} HTTP/1.1\r\nHost: {HOST}\r\nConnection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n\r\n"
        ),
        "\x16\x03\x01\x00\x05hello\r\n\r\n".to_owned(),
    ];
    for probe in &probes {
        let (from_xray, xray_end) = answer_to(x, probe.as_bytes());
        let (from_skiff, skiff_end) = answer_to(s, probe.as_bytes());
        assert!(
            from_xray.is_empty(),
            "xray answered {probe:?}: {from_xray:?}"
        );
        assert_eq!(
            (from_skiff, skiff_end),
            (from_xray, xray_end),
            "answer to {probe:?}"
        );
    }
    // A good upgrade: the same 101 from both, then the stream is open (VLESS waits for more).
    let good = format!("GET {PATH}?x=1 HTTP/1.1\r\nHost: H.example:443\r\n{up}");
    let answer = |port| {
        let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        c.write_all(good.as_bytes()).unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && head.len() < 4096 {
            assert_eq!(c.read(&mut byte).unwrap(), 1, "closed inside the 101");
            head.push(byte[0]);
        }
        head
    };
    assert_eq!(answer(s), answer(x));
    assert_healthy(&mut skiff, &log);
}
