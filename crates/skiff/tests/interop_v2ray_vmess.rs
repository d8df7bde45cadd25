//! VMess (AEAD) interop with Debian's v2ray 4.34, both directions:
//! A → B (dokodemo-door → vmess out) → C (vmess in → freedom) → D, with B or C being v2ray.
//!
//! * TCP: security aes-128-gcm, chacha20-poly1305 and none, over tcp, ws and ws+tls; both
//!   payloads at once, 64 MiB each way, SHA-256 checked.
//! * skiff ↔ skiff: what v2ray 4.34 cannot speak (zero, AuthenticatedLength) and ws+tls.
//! * UDP (command 0x02), both directions and skiff ↔ skiff: 200 datagrams of 1..=1400 bytes
//!   echoed intact (v2ray 4.34 caps datagrams at 2046 bytes).
//! * Replay: the same request header bytes sent twice; the second is refused, by skiff as by
//!   v2ray, with nothing sent back.
//! * Probes (a wrong user's header, random bytes, a short prefix): skiff answers exactly as
//!   v2ray does: nothing at all, a close only after its drain budget.
//!
//! `.ci/run` installs v2ray; outside CI a machine without it skips the v2ray cases.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::{Proc, TempDir, UUID, certificate, free_port, listening, noise};
use sha2::{Digest, Sha256};

const OTHER_UUID: &str = "0f6c8a1e-8d6e-4a8e-9c3f-5b1f2e3d4c5b";
const DATAGRAMS: usize = 200;
const ATTEMPTS: usize = 3;
const ATTEMPT_WAIT: Duration = Duration::from_secs(3);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Side {
    Skiff,
    V2ray,
}

fn v2ray() -> Option<PathBuf> {
    common::tool("v2ray", &["/usr/bin/v2ray", "/usr/local/bin/v2ray"])
}

/// Debug logs when the case's files are kept for a look (SKIFF_KEEP_TEST_DIRS=1).
fn loglevel() -> &'static str {
    if std::env::var_os("SKIFF_KEEP_TEST_DIRS").is_some() {
        "debug"
    } else {
        "warning"
    }
}

fn stream_settings(transport: &str, dir: &Path, server: bool) -> String {
    let ws = r#""network": "ws", "wsSettings": { "path": "/vm" }"#;
    let tls = || {
        let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
        if server {
            format!(
                r#""security": "tls", "tlsSettings": {{ "certificates": [{{ "certificateFile": "{}", "keyFile": "{}" }}] }}"#,
                cert.display(),
                key.display()
            )
        } else {
            r#""security": "tls", "tlsSettings": { "serverName": "localhost", "allowInsecure": true }"#.to_string()
        }
    };
    match transport {
        "tcp" => r#""network": "tcp""#.to_string(),
        "ws" => ws.to_string(),
        "ws-tls" => format!("{ws}, {}", tls()),
        other => panic!("unknown transport {other}"),
    }
}

/// B: dokodemo-door on `listen` (tcp or udp) to 127.0.0.1:`d`, out through VMess to C.
/// `user` is the outbound user's JSON fields besides the id.
fn client_config(
    listen: u16,
    network: &str,
    d: u16,
    c: u16,
    id: &str,
    user: &str,
    stream: &str,
) -> String {
    format!(
        r#"{{ "log": {{ "loglevel": "{}" }},
  "inbounds": [{{ "listen": "127.0.0.1", "port": {listen}, "protocol": "dokodemo-door",
                 "settings": {{ "address": "127.0.0.1", "port": {d}, "network": "{network}" }} }}],
  "outbounds": [{{ "protocol": "vmess",
                  "settings": {{ "vnext": [{{ "address": "127.0.0.1", "port": {c},
                                              "users": [{{ "id": "{id}", "alterId": 0{user} }}] }}] }},
                  "streamSettings": {{ {stream} }} }}] }}"#,
        loglevel()
    )
}

/// C: VMess in on `listen`, freedom out.
fn server_config(listen: u16, stream: &str) -> String {
    format!(
        r#"{{ "log": {{ "loglevel": "{}" }},
  "inbounds": [{{ "listen": "127.0.0.1", "port": {listen}, "protocol": "vmess",
                 "settings": {{ "clients": [{{ "id": "{UUID}", "alterId": 0, "email": "a@b" }}] }},
                 "streamSettings": {{ {stream} }} }}],
  "outbounds": [{{ "protocol": "freedom" }}] }}"#,
        loglevel()
    )
}

fn start(side: Side, dir: &Path, name: &str, config: &str) -> Proc {
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, config).unwrap();
    let log = std::fs::File::create(dir.join(format!("{name}.log"))).unwrap();
    let mut cmd = match side {
        Side::Skiff => {
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_skiff"));
            cmd.arg("run").arg("-c").arg(&path);
            cmd
        }
        Side::V2ray => {
            let mut cmd = Command::new(v2ray().expect("v2ray checked"));
            cmd.arg("-config")
                .arg(&path)
                .env("V2RAY_LOCATION_ASSET", dir);
            cmd
        }
    };
    let child = cmd
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    Proc {
        child,
        what: match side {
            Side::Skiff => "skiff",
            Side::V2ray => "v2ray",
        },
    }
}

/// Waits until 127.0.0.1:`port` is bound: TCP listening, or (udp) an unconnected UDP socket.
fn wait_bound(proc: &mut Proc, port: u16, udp: bool, dir: &Path) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let wanted = format!("0100007F:{port:04X}");
    loop {
        let ready = if udp {
            std::fs::read_to_string("/proc/net/udp")
                .unwrap_or_default()
                .lines()
                .skip(1)
                .any(|l| {
                    let f: Vec<&str> = l.split_whitespace().collect();
                    f.get(1) == Some(&wanted.as_str()) && f.get(3) == Some(&"07")
                })
        } else {
            listening(port)
        };
        if ready {
            return;
        }
        if let Ok(Some(status)) = proc.child.try_wait() {
            panic!("{} exited early ({status}) in {}", proc.what, dir.display());
        }
        assert!(
            Instant::now() < deadline,
            "{} never bound {port} in {}",
            proc.what,
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// Whether every implementation the case needs is installed (false: skipped, with a note).
fn available(sides: &[Side]) -> bool {
    !sides.contains(&Side::V2ray) || v2ray().is_some()
}

/// Starts C then B; returns both and B's port.
#[allow(clippy::too_many_arguments)]
fn start_pair(
    dir: &Path,
    client: Side,
    server: Side,
    transport: &str,
    network: &str,
    d: u16,
    user: &str,
) -> (Proc, Proc, u16) {
    let (b, c) = (free_port(), free_port());
    let mut server_proc = start(
        server,
        dir,
        "c",
        &server_config(c, &stream_settings(transport, dir, true)),
    );
    wait_bound(&mut server_proc, c, false, dir);
    let config = client_config(
        b,
        network,
        d,
        c,
        UUID,
        user,
        &stream_settings(transport, dir, false),
    );
    let mut client_proc = start(client, dir, "b", &config);
    wait_bound(&mut client_proc, b, network == "udp", dir);
    (client_proc, server_proc, b)
}

// ---------------------------------------------------------------------------------------
// TCP bulk.

/// Deterministic bytes (xorshift), so both ends can compute the digest.
fn payload_chunks(seed: u64, len: u64, mut f: impl FnMut(&[u8])) {
    let mut state = seed | 1;
    let mut buf = vec![0u8; 64 * 1024];
    let mut left = len;
    while left > 0 {
        let n = left.min(buf.len() as u64) as usize;
        for chunk in buf[..n].chunks_mut(8) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            chunk.copy_from_slice(&state.to_le_bytes()[..chunk.len()]);
        }
        f(&buf[..n]);
        left -= n as u64;
    }
}

fn digest(seed: u64, len: u64) -> Vec<u8> {
    let mut h = Sha256::new();
    payload_chunks(seed, len, |c| h.update(c));
    h.finalize().to_vec()
}

/// Sends `seed`'s `len` bytes on a clone of `s` while hashing everything read from `s`. The
/// write side is shut only once the whole opposite payload has arrived (or 60 s passed):
/// v2ray 4.34 drops what is still queued towards its outbound when the other direction has
/// already finished (see interop_v2ray.rs).
fn exchange(s: TcpStream, seed: u64, len: u64) -> (u64, Vec<u8>) {
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut writer = s.try_clone().unwrap();
    let (all_received, wait_all_received) = std::sync::mpsc::channel::<()>();
    let sender = std::thread::spawn(move || {
        payload_chunks(seed, len, |c| writer.write_all(c).unwrap());
        let _ = wait_all_received.recv_timeout(Duration::from_secs(60));
        writer.shutdown(Shutdown::Write).unwrap();
    });
    let mut reader = s;
    let mut h = Sha256::new();
    let mut total = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    if len == 0 {
        let _ = all_received.send(());
    }
    loop {
        let n = reader.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        total += n as u64;
        h.update(&buf[..n]);
        if total >= len {
            let _ = all_received.send(());
        }
    }
    drop(all_received);
    sender.join().unwrap();
    (total, h.finalize().to_vec())
}

/// Bytes each way per TCP case (the whole file takes about 30 s on a 2-core machine).
const BULK: u64 = 64 << 20;

/// One TCP case: `security` (with any extra user fields in `user`) over `transport`.
fn run_tcp(client: Side, server: Side, security: &str, user_extra: &str, transport: &str) {
    if !available(&[client, server]) {
        return;
    }
    let name = format!(
        "vmess-{client:?}-{server:?}-{security}-{transport}{}",
        user_extra.len()
    );
    let dir = TempDir::new(&name);
    certificate(dir.path());
    let sink = TcpListener::bind("127.0.0.1:0").unwrap();
    let d = sink.local_addr().unwrap().port();
    let user = format!(r#", "security": "{security}"{user_extra}"#);
    let (_b, _c, b) = start_pair(dir.path(), client, server, transport, "tcp", d, &user);
    let len = BULK;
    let started = Instant::now();
    let d_side = std::thread::spawn(move || {
        let (s, _) = sink.accept().unwrap();
        exchange(s, 2, len)
    });
    let (down_len, down_digest) = exchange(TcpStream::connect(("127.0.0.1", b)).unwrap(), 1, len);
    let (up_len, up_digest) = d_side.join().unwrap();
    let who =
        format!("{client:?} client → {server:?} server, {security}{user_extra} over {transport}");
    assert_eq!((up_len, down_len), (len, len), "{who}: lengths");
    assert_eq!(up_digest, digest(1, len), "{who}: uplink SHA-256");
    assert_eq!(down_digest, digest(2, len), "{who}: downlink SHA-256");
    eprintln!(
        "{who}: {} MiB each way in {:.2?}",
        len >> 20,
        started.elapsed()
    );
}

macro_rules! tcp_cases {
    ($($name:ident: $client:ident => $server:ident, $security:literal, $transport:literal;)*) => {
        $(
            #[test]
            fn $name() {
                run_tcp(Side::$client, Side::$server, $security, "", $transport);
            }
        )*
    };
}

tcp_cases! {
    v2ray_client_skiff_server_aes_tcp: V2ray => Skiff, "aes-128-gcm", "tcp";
    v2ray_client_skiff_server_aes_ws: V2ray => Skiff, "aes-128-gcm", "ws";
    v2ray_client_skiff_server_aes_ws_tls: V2ray => Skiff, "aes-128-gcm", "ws-tls";
    v2ray_client_skiff_server_chacha_tcp: V2ray => Skiff, "chacha20-poly1305", "tcp";
    v2ray_client_skiff_server_chacha_ws: V2ray => Skiff, "chacha20-poly1305", "ws";
    v2ray_client_skiff_server_chacha_ws_tls: V2ray => Skiff, "chacha20-poly1305", "ws-tls";
    v2ray_client_skiff_server_none_tcp: V2ray => Skiff, "none", "tcp";
    v2ray_client_skiff_server_none_ws: V2ray => Skiff, "none", "ws";
    v2ray_client_skiff_server_none_ws_tls: V2ray => Skiff, "none", "ws-tls";
    skiff_client_v2ray_server_aes_tcp: Skiff => V2ray, "aes-128-gcm", "tcp";
    skiff_client_v2ray_server_aes_ws: Skiff => V2ray, "aes-128-gcm", "ws";
    skiff_client_v2ray_server_aes_ws_tls: Skiff => V2ray, "aes-128-gcm", "ws-tls";
    skiff_client_v2ray_server_chacha_tcp: Skiff => V2ray, "chacha20-poly1305", "tcp";
    skiff_client_v2ray_server_chacha_ws: Skiff => V2ray, "chacha20-poly1305", "ws";
    skiff_client_v2ray_server_chacha_ws_tls: Skiff => V2ray, "chacha20-poly1305", "ws-tls";
    skiff_client_v2ray_server_none_tcp: Skiff => V2ray, "none", "tcp";
    skiff_client_v2ray_server_none_ws: Skiff => V2ray, "none", "ws";
    skiff_client_v2ray_server_none_ws_tls: Skiff => V2ray, "none", "ws-tls";
    skiff_client_skiff_server_aes_ws_tls: Skiff => Skiff, "aes-128-gcm", "ws-tls";
    skiff_client_skiff_server_zero_tcp: Skiff => Skiff, "zero", "tcp";
}

/// v2ray 4.34 knows neither experiment; skiff ↔ skiff exercises option A and the missing end
/// chunk (the transport's end then ends the stream).
#[test]
fn skiff_client_skiff_server_chacha_experiments_ws() {
    run_tcp(
        Side::Skiff,
        Side::Skiff,
        "chacha20-poly1305",
        r#", "experiments": "AuthenticatedLength|NoTerminationSignal""#,
        "ws",
    );
}

// ---------------------------------------------------------------------------------------
// UDP.

/// A UDP echo server on 127.0.0.1 in a thread; stops when dropped.
struct Echo {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Echo {
    fn start() -> Echo {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let addr = socket.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(600);
            let mut buf = vec![0u8; 65_536];
            while !stopped.load(Ordering::Relaxed) && Instant::now() < deadline {
                if let Ok((n, from)) = socket.recv_from(&mut buf) {
                    let _ = socket.send_to(&buf[..n], from);
                }
            }
        });
        Echo {
            addr,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Datagram `i`: 1..=1400 bytes, deterministic, starting with its index.
fn datagram(i: usize) -> Vec<u8> {
    let len = match i {
        0 => 1,
        1 => 1400,
        _ => 1 + (i * 7919 + 13) % 1400,
    };
    let mut out = noise(i as u64 + 7, len);
    for (byte, tag) in out.iter_mut().zip((i as u16).to_le_bytes()) {
        *byte = tag;
    }
    out
}

/// Sends every datagram from one of two sockets (two UDP sessions, two VMess connections)
/// and waits for its echo, resending up to [`ATTEMPTS`] times (loopback UDP may drop under
/// load). A reply that matches nothing sent is corruption and fails at once.
fn echo_all(to: SocketAddr, who: &str) -> usize {
    let sockets = [
        UdpSocket::bind("127.0.0.1:0").unwrap(),
        UdpSocket::bind("127.0.0.1:0").unwrap(),
    ];
    let mut sent = std::collections::HashSet::new();
    let mut buf = vec![0u8; 65_536];
    let mut resends = 0;
    for i in 0..DATAGRAMS {
        let socket = &sockets[i % 2];
        let want = datagram(i);
        sent.insert(want.clone());
        let mut echoed = false;
        'attempts: for attempt in 0..ATTEMPTS {
            resends += usize::from(attempt > 0);
            socket.send_to(&want, to).unwrap();
            let deadline = Instant::now() + ATTEMPT_WAIT;
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                if left < Duration::from_millis(1) {
                    break;
                }
                socket.set_read_timeout(Some(left)).unwrap();
                match socket.recv_from(&mut buf) {
                    Ok((n, _)) if buf[..n] == want[..] => {
                        echoed = true;
                        break 'attempts;
                    }
                    Ok((n, _)) => assert!(
                        sent.contains(&buf[..n]),
                        "{who}: a reply of {n} bytes matches nothing sent"
                    ),
                    Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                        break;
                    }
                    Err(e) => panic!("{who}: receive failed: {e}"),
                }
            }
        }
        assert!(echoed, "{who}: datagram {i} never came back intact");
    }
    resends
}

fn run_udp(client: Side, server: Side, security: &str, transport: &str) {
    if !available(&[client, server]) {
        return;
    }
    let name = format!("vmess-udp-{client:?}-{server:?}-{security}-{transport}");
    let dir = TempDir::new(&name);
    certificate(dir.path());
    let echo = Echo::start();
    let user = format!(r#", "security": "{security}""#);
    let (_b, _c, b) = start_pair(
        dir.path(),
        client,
        server,
        transport,
        "udp",
        echo.addr.port(),
        &user,
    );
    let who = format!("UDP {client:?} client → {server:?} server, {security} over {transport}");
    let resends = echo_all(SocketAddr::from(([127, 0, 0, 1], b)), &who);
    eprintln!("{who}: {DATAGRAMS} datagrams echoed, {resends} resent");
}

#[test]
fn udp_v2ray_client_skiff_server_aes_tcp() {
    run_udp(Side::V2ray, Side::Skiff, "aes-128-gcm", "tcp");
}
#[test]
fn udp_skiff_client_v2ray_server_aes_tcp() {
    run_udp(Side::Skiff, Side::V2ray, "aes-128-gcm", "tcp");
}
#[test]
fn udp_v2ray_client_skiff_server_none_ws() {
    run_udp(Side::V2ray, Side::Skiff, "none", "ws");
}
#[test]
fn udp_skiff_client_v2ray_server_chacha_ws_tls() {
    run_udp(Side::Skiff, Side::V2ray, "chacha20-poly1305", "ws-tls");
}
#[test]
fn udp_skiff_client_skiff_server_aes_ws_tls() {
    run_udp(Side::Skiff, Side::Skiff, "aes-128-gcm", "ws-tls");
}

// ---------------------------------------------------------------------------------------
// Replay and probes, against a skiff and a v2ray server side by side.

/// What a client sends first: the request header and the first chunk, recorded by a fake
/// server. `id` is the client's user id.
fn record_request(client: Side, dir: &Path, id: &str, d: u16) -> Vec<u8> {
    let recorder = TcpListener::bind("127.0.0.1:0").unwrap();
    let c = recorder.local_addr().unwrap().port();
    let b = free_port();
    let config = client_config(
        b,
        "tcp",
        d,
        c,
        id,
        r#", "security": "aes-128-gcm""#,
        r#""network": "tcp""#,
    );
    let mut proc = start(client, dir, &format!("rec-{id}"), &config);
    wait_bound(&mut proc, b, false, dir);
    let mut a = TcpStream::connect(("127.0.0.1", b)).unwrap();
    a.write_all(b"ping over vmess").unwrap();
    let (mut s, _) = recorder.accept().unwrap();
    s.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut recorded = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => recorded.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => break,
            Err(e) => panic!("recording: {e}"),
        }
    }
    assert!(
        recorded.len() > 16 + 18 + 8 + 16,
        "recorded only {recorded:?}"
    );
    recorded
}

/// A TCP echo server on 127.0.0.1 (D) in a thread.
fn tcp_echo() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(64) {
            let Ok(mut s) = stream else { continue };
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 || s.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
        }
    });
    port
}

/// How a server treated bytes we sent.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// It answered (with this many bytes) before we gave up.
    Answered(usize),
    /// It closed (FIN or reset) without a byte.
    ClosedSilently,
    /// It kept the connection open and silent for the whole wait.
    Waiting,
}

fn probe(port: u16, bytes: &[u8], wait: Duration) -> Outcome {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let _ = s.write_all(bytes);
    s.set_read_timeout(Some(wait)).unwrap();
    let mut buf = [0u8; 4096];
    match s.read(&mut buf) {
        Ok(0) => Outcome::ClosedSilently,
        Ok(n) => Outcome::Answered(n),
        Err(e) if e.kind() == ErrorKind::ConnectionReset => Outcome::ClosedSilently,
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
            Outcome::Waiting
        }
        Err(e) => panic!("probe: {e}"),
    }
}

/// Starts a skiff and (if installed) a v2ray VMess server over raw TCP; their ports.
fn servers(dir: &Path) -> Vec<(Side, Proc, u16)> {
    let mut out = Vec::new();
    for side in [Side::Skiff, Side::V2ray] {
        if side == Side::V2ray && v2ray().is_none() {
            continue;
        }
        let port = free_port();
        let name = format!("server-{side:?}");
        let mut proc = start(
            side,
            dir,
            &name,
            &server_config(port, &stream_settings("tcp", dir, true)),
        );
        wait_bound(&mut proc, port, false, dir);
        out.push((side, proc, port));
    }
    out
}

/// The same request header bytes twice: the first is served, the second refused without a
/// byte back, by skiff as by v2ray. (Each server gets its own fresh recording.)
#[test]
fn replayed_request_is_refused_silently() {
    let dir = TempDir::new("vmess-replay");
    let d = tcp_echo();
    for (side, _proc, port) in servers(dir.path()) {
        let recorded = record_request(Side::Skiff, dir.path(), UUID, d);
        let first = probe(port, &recorded, Duration::from_secs(10));
        assert!(
            matches!(first, Outcome::Answered(n) if n > 38),
            "{side:?} server: first use of the header: {first:?}"
        );
        // The replay, padded past any drain budget so the server closes without waiting.
        let mut again = recorded.clone();
        again.extend_from_slice(&noise(9, 4000));
        let second = probe(port, &again, Duration::from_secs(10));
        assert_eq!(second, Outcome::ClosedSilently, "{side:?} server: replay");
    }
}

/// Probes get nothing back, from skiff exactly as from v2ray: a wrong user's well-formed
/// header and random bytes beyond the drain budget are read and the connection closed
/// silently; a short prefix is waited on (no early close that would tell a VMess server
/// from anything else).
#[test]
fn wrong_user_and_random_probes_get_nothing_back() {
    let dir = TempDir::new("vmess-probe");
    let d = tcp_echo();
    let stranger = record_request(Side::Skiff, dir.path(), OTHER_UUID, d);
    for (side, mut proc, port) in servers(dir.path()) {
        let mut long = stranger.clone();
        long.extend_from_slice(&noise(3, 4000));
        assert_eq!(
            probe(port, &long, Duration::from_secs(10)),
            Outcome::ClosedSilently,
            "{side:?} server: wrong user"
        );
        assert_eq!(
            probe(port, &noise(4, 4096), Duration::from_secs(10)),
            Outcome::ClosedSilently,
            "{side:?} server: random bytes"
        );
        assert_eq!(
            probe(port, &stranger, Duration::from_millis(1500)),
            Outcome::Waiting,
            "{side:?} server: a wrong user's header alone"
        );
        assert_eq!(
            probe(port, &noise(5, 40), Duration::from_millis(1500)),
            Outcome::Waiting,
            "{side:?} server: 40 random bytes"
        );
        assert!(
            proc.child.try_wait().unwrap().is_none(),
            "{side:?} server exited"
        );
        let log = std::fs::read_to_string(dir.path().join(format!("server-{side:?}.log")))
            .unwrap_or_default();
        assert!(
            !log.contains("panicked"),
            "{side:?} server panicked:\n{log}"
        );
    }
}
