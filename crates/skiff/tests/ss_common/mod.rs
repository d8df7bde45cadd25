//! Shared by the Shadowsocks interop tests: A (the test) → B (a client: port forward into
//! Shadowsocks) → C (a server: Shadowsocks to freedom) → D (the test again), with B and C
//! any of Skiff, v2ray 4.34, shadowsocks-libev (ss-tunnel / ss-server) and shadowsocks-rust
//! (sslocal tunnel / ssserver). TCP: a bulk payload each way at once, SHA-256 checked; UDP:
//! 200 datagrams echoed by D, each resent up to three times (loopback UDP may drop).
//! Everything listens on 127.0.0.1. `SKIFF_KEEP_INTEROP=1` keeps configs and logs.
#![allow(dead_code)] // Each test file uses its own subset.

use std::collections::HashSet;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

pub const MIB: u64 = 1 << 20;
pub const DATAGRAMS: usize = 200;
const ATTEMPTS: usize = 3;
const ATTEMPT_WAIT: Duration = Duration::from_secs(3);

/// A 2022 key of `len` bytes (base64), different per seed.
pub fn psk(len: usize, seed: u8) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let data: Vec<u8> = (0..len as u8)
        .map(|i| i.wrapping_mul(31).wrapping_add(seed))
        .collect();
    let mut out = String::new();
    for c in data.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

pub struct Proc {
    pub child: Child,
    pub what: String,
    pub log: PathBuf,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Proc {
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn assert_alive(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!("{} exited ({status}); log:\n{}", self.what, self.log_text());
        }
        let log = self.log_text();
        assert!(!log.contains("panicked"), "{} panicked:\n{log}", self.what);
    }
}

pub struct Dir(pub PathBuf);

impl Dir {
    pub fn new(name: &str) -> Dir {
        let dir = std::env::temp_dir().join(format!("skiff-ss-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Dir(dir)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        if std::env::var_os("SKIFF_KEEP_INTEROP").is_none() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// The first of `paths` that exists (a bare name is looked up on PATH); None with a note
/// when none does. In CI (.ci/run installs every peer) a missing one is a failure.
pub fn tool(name: &str, paths: &[&str]) -> Option<PathBuf> {
    let on_path = |bin: &str| {
        std::env::var_os("PATH").and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join(bin))
                .find(|c| c.is_file())
        })
    };
    let home_cargo = std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo/bin"));
    let found = paths.iter().find_map(|p| {
        if p.contains('/') {
            Some(PathBuf::from(p)).filter(|c| c.is_file())
        } else {
            on_path(p).or_else(|| {
                home_cargo
                    .as_ref()
                    .map(|d| d.join(p))
                    .filter(|c| c.is_file())
            })
        }
    });
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must install {name} (.ci/run)"
        );
        eprintln!("skipped: {name} is not installed");
    }
    found
}

/// A port free on 127.0.0.1 for both TCP and UDP (servers listen on both), below the
/// kernel's ephemeral range so no outgoing connection can take it before the server binds
/// it, and never the same one twice in this process.
pub fn free_port() -> u16 {
    use std::sync::Mutex;
    static GIVEN: Mutex<Vec<u16>> = Mutex::new(Vec::new());
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32768);
    let from = low.saturating_sub(12_000).max(1024);
    let span = low.saturating_sub(from).max(1);
    let mut given = GIVEN.lock().unwrap();
    let mut state = u64::from(std::process::id())
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
        | 1;
    for _ in 0..500 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let Ok(port) = u16::try_from(from + (state % u64::from(span)) as u32) else {
            continue;
        };
        if given.contains(&port) {
            continue;
        }
        let free = TcpListener::bind(("127.0.0.1", port)).is_ok()
            && UdpSocket::bind(("127.0.0.1", port)).is_ok();
        if free {
            given.push(port);
            return port;
        }
    }
    panic!("no port free for both TCP and UDP");
}

/// Whether 127.0.0.1:`port` is bound in /proc/net/tcp (listening) or udp. Read from /proc:
/// a probe into B would travel the whole chain.
fn bound(udp: bool, port: u16) -> bool {
    let (table, state) = if udp {
        ("/proc/net/udp", "07")
    } else {
        ("/proc/net/tcp", "0A")
    };
    let text = std::fs::read_to_string(table).unwrap_or_default();
    let wanted = format!("0100007F:{port:04X}");
    text.lines().skip(1).any(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        fields.get(1) == Some(&wanted.as_str()) && fields.get(3) == Some(&state)
    })
}

pub fn wait_bound(proc: &mut Proc, port: u16, udp: bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !bound(udp, port) {
        if let Ok(Some(status)) = proc.child.try_wait() {
            panic!(
                "{} exited early ({status}); log:\n{}",
                proc.what,
                proc.log_text()
            );
        }
        assert!(
            Instant::now() < deadline,
            "{} never bound {port} ({}); log:\n{}",
            proc.what,
            if udp { "udp" } else { "tcp" },
            proc.log_text()
        );
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// Who plays B or C.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    Skiff,
    V2ray,
    SsLibev,
    SsRust,
}

/// Where the binaries of a peer are (checked by the caller with [`find`]).
pub fn find(peer: Peer) -> Option<(PathBuf, PathBuf)> {
    match peer {
        Peer::Skiff => {
            let skiff = PathBuf::from(env!("CARGO_BIN_EXE_skiff"));
            Some((skiff.clone(), skiff))
        }
        Peer::V2ray => {
            let v = tool("v2ray", &["/usr/bin/v2ray", "/usr/local/bin/v2ray"])?;
            Some((v.clone(), v))
        }
        Peer::SsLibev => Some((
            tool("shadowsocks-libev (ss-tunnel)", &["/usr/bin/ss-tunnel"])?,
            tool("shadowsocks-libev (ss-server)", &["/usr/bin/ss-server"])?,
        )),
        Peer::SsRust => Some((
            tool("shadowsocks-rust (sslocal)", &["sslocal"])?,
            tool("shadowsocks-rust (ssserver)", &["ssserver"])?,
        )),
    }
}

/// One B → C setup.
pub struct Setup<'a> {
    pub client: Peer,
    pub server: Peer,
    pub method: &'a str,
    pub password: String,
    /// 2022 multi-user (identity headers): C's key is `password`, this is the user's key;
    /// B then uses `password:user_key`.
    pub user_key: Option<String>,
}

impl Setup<'_> {
    pub fn simple<'m>(client: Peer, server: Peer, method: &'m str, password: &str) -> Setup<'m> {
        Setup {
            client,
            server,
            method,
            password: password.to_owned(),
            user_key: None,
        }
    }

    fn name(&self) -> String {
        let eih = if self.user_key.is_some() { "-eih" } else { "" };
        format!("{:?}-{:?}-{}{eih}", self.client, self.server, self.method)
    }

    fn client_password(&self) -> String {
        match &self.user_key {
            Some(user) => format!("{}:{user}", self.password),
            None => self.password.clone(),
        }
    }
}

fn loglevel() -> &'static str {
    if std::env::var_os("SKIFF_KEEP_INTEROP").is_some() {
        "debug"
    } else {
        "warning"
    }
}

fn spawn(what: String, mut cmd: Command, log: PathBuf) -> Proc {
    let file = std::fs::File::create(&log).unwrap();
    let child = cmd
        .stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    Proc { child, what, log }
}

fn xray_format(dir: &Path, name: &str, peer: Peer, bin: &Path, config: String) -> Proc {
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, config).unwrap();
    let mut cmd = Command::new(bin);
    if peer == Peer::V2ray {
        cmd.arg("-config")
            .arg(&path)
            .env("V2RAY_LOCATION_ASSET", dir);
    } else {
        cmd.arg("run").arg("-c").arg(&path);
    }
    spawn(
        format!("{peer:?} {name}"),
        cmd,
        dir.join(format!("{name}.log")),
    )
}

/// Starts C on `c` (TCP and UDP).
pub fn start_server(setup: &Setup<'_>, bin: &Path, dir: &Path, c: u16) -> Proc {
    let mut proc = match setup.server {
        Peer::Skiff | Peer::V2ray => {
            let clients = setup
                .user_key
                .as_ref()
                .map(|k| format!(r#", "clients": [{{ "password": "{k}", "email": "user@eih" }}]"#))
                .unwrap_or_default();
            let config = format!(
                r#"{{ "log": {{ "loglevel": "{}" }},
  "inbounds": [{{ "listen": "127.0.0.1", "port": {c}, "protocol": "shadowsocks",
                 "settings": {{ "method": "{}", "password": "{}", "network": "tcp,udp"{clients} }} }}],
  "outbounds": [{{ "protocol": "freedom" }}] }}"#,
                loglevel(),
                setup.method,
                setup.password,
            );
            xray_format(dir, "c", setup.server, bin, config)
        }
        Peer::SsLibev => {
            let mut cmd = Command::new(bin);
            cmd.args(["-s", "127.0.0.1", "-p", &c.to_string()]).args([
                "-k",
                &setup.password,
                "-m",
                setup.method,
                "-u",
            ]);
            if std::env::var_os("SKIFF_KEEP_INTEROP").is_some() {
                cmd.arg("-v");
            }
            spawn("ss-server C".into(), cmd, dir.join("c.log"))
        }
        Peer::SsRust => {
            // A config file: multi-user (identity headers) needs its `users`.
            let users = setup
                .user_key
                .as_ref()
                .map(|k| format!(r#", "users": [{{ "name": "eih", "password": "{k}" }}]"#))
                .unwrap_or_default();
            let config = format!(
                r#"{{ "servers": [{{ "server": "127.0.0.1", "server_port": {c}, "method": "{}",
                                  "password": "{}", "mode": "tcp_and_udp"{users} }}] }}"#,
                setup.method, setup.password
            );
            let path = dir.join("c.json");
            std::fs::write(&path, config).unwrap();
            let mut cmd = Command::new(bin);
            cmd.arg("-c").arg(&path);
            spawn("ssserver C".into(), cmd, dir.join("c.log"))
        }
    };
    wait_bound(&mut proc, c, false);
    wait_bound(&mut proc, c, true);
    proc
}

/// Starts B on `b`: forwards TCP (or UDP) to `d` through C at `c`.
pub fn start_client(
    setup: &Setup<'_>,
    bin: &Path,
    dir: &Path,
    b: u16,
    c: u16,
    d: SocketAddr,
    udp: bool,
) -> Proc {
    let mut proc = match setup.client {
        Peer::Skiff | Peer::V2ray => {
            let config = format!(
                r#"{{ "log": {{ "loglevel": "{}" }},
  "inbounds": [{{ "listen": "127.0.0.1", "port": {b}, "protocol": "dokodemo-door",
                 "settings": {{ "address": "127.0.0.1", "port": {}, "network": "{}" }} }}],
  "outbounds": [{{ "protocol": "shadowsocks",
                  "settings": {{ "servers": [{{ "address": "127.0.0.1", "port": {c},
                                               "method": "{}", "password": "{}" }}] }} }}] }}"#,
                loglevel(),
                d.port(),
                if udp { "udp" } else { "tcp" },
                setup.method,
                setup.client_password()
            );
            xray_format(dir, "b", setup.client, bin, config)
        }
        Peer::SsLibev => {
            let mut cmd = Command::new(bin);
            cmd.args(["-s", "127.0.0.1", "-p", &c.to_string()])
                .args(["-b", "127.0.0.1", "-l", &b.to_string()])
                .args(["-k", &setup.client_password(), "-m", setup.method])
                .args(["-L", &d.to_string(), "-u"]);
            spawn("ss-tunnel B".into(), cmd, dir.join("b.log"))
        }
        Peer::SsRust => {
            let mut cmd = Command::new(bin);
            cmd.args(["-b", &format!("127.0.0.1:{b}"), "--protocol", "tunnel"])
                .args(["-f", &d.to_string()])
                .args(["-s", &format!("127.0.0.1:{c}")])
                .args(["-k", &setup.client_password(), "-m", setup.method, "-U"]);
            spawn("sslocal B".into(), cmd, dir.join("b.log"))
        }
    };
    wait_bound(&mut proc, b, udp);
    proc
}

/// Deterministic bytes (xorshift), so both ends can compute the digest.
pub fn payload_chunks(seed: u64, len: u64, mut f: impl FnMut(&[u8])) {
    let mut state = seed | 1;
    let mut buf = vec![0u8; 64 * 1024];
    let mut left = len;
    while left > 0 {
        let n = left.min(buf.len() as u64) as usize;
        for chunk in buf[..n].chunks_mut(8) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let bytes = state.to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
        f(&buf[..n]);
        left -= n as u64;
    }
}

pub fn digest(seed: u64, len: u64) -> Vec<u8> {
    let mut h = Sha256::new();
    payload_chunks(seed, len, |c| h.update(c));
    h.finalize().to_vec()
}

/// Sends `seed`'s payload while hashing everything read. The write side is shut only once
/// the whole opposite payload arrived (or 60 s passed): v2ray 4.34 drops what it still has
/// queued when one direction ends early (see interop_v2ray.rs).
pub fn exchange(s: TcpStream, seed: u64, bulk: u64) -> (u64, Vec<u8>) {
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut writer = s.try_clone().unwrap();
    let (all_received, wait_all_received) = std::sync::mpsc::channel::<()>();
    let sender = std::thread::spawn(move || {
        payload_chunks(seed, bulk, |c| writer.write_all(c).unwrap());
        let _ = wait_all_received.recv_timeout(Duration::from_secs(60));
        let _ = writer.shutdown(std::net::Shutdown::Write);
    });
    let mut reader = s;
    let mut h = Sha256::new();
    let mut total = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(n) => n,
            Err(e) => panic!("read failed after {total} bytes: {e}"),
        };
        if n == 0 {
            break;
        }
        total += n as u64;
        h.update(&buf[..n]);
        if total >= bulk {
            let _ = all_received.send(());
        }
    }
    drop(all_received);
    sender.join().unwrap();
    (total, h.finalize().to_vec())
}

/// TCP through B → C: `bulk` bytes each way at once, SHA-256 checked.
pub fn run_tcp(setup: &Setup<'_>, bulk: u64) {
    let (Some((client_bin, _)), Some((_, server_bin))) = (find(setup.client), find(setup.server))
    else {
        return;
    };
    let dir = Dir::new(&format!("tcp-{}", setup.name()));
    let sink = TcpListener::bind("127.0.0.1:0").unwrap();
    let d = sink.local_addr().unwrap();
    let (b, c) = (free_port(), free_port());
    let mut server = start_server(setup, &server_bin, &dir.0, c);
    let mut client = start_client(setup, &client_bin, &dir.0, b, c, d, false);
    let started = Instant::now();
    let d_side = std::thread::spawn(move || {
        let (s, _) = sink.accept().unwrap();
        exchange(s, 2, bulk)
    });
    let (down_len, down_digest) = exchange(TcpStream::connect(("127.0.0.1", b)).unwrap(), 1, bulk);
    let (up_len, up_digest) = d_side.join().unwrap();
    let who = format!(
        "{:?} client → {:?} server, {}",
        setup.client, setup.server, setup.method
    );
    assert_eq!((up_len, down_len), (bulk, bulk), "{who}: lengths");
    assert_eq!(up_digest, digest(1, bulk), "{who}: uplink SHA-256");
    assert_eq!(down_digest, digest(2, bulk), "{who}: downlink SHA-256");
    eprintln!(
        "{who}: {} MiB each way in {:.2?}",
        bulk / MIB,
        started.elapsed()
    );
    client.assert_alive();
    server.assert_alive();
}

/// A UDP echo server on 127.0.0.1 in a thread; stops when dropped.
pub struct Echo {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Echo {
    pub fn start() -> Echo {
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

/// Datagram `i`: 1..=1400 bytes (1 and 1400 among them), deterministic, starting with its
/// index. (v2ray 4.34 carries at most ~2 KiB per datagram.)
pub fn datagram(i: usize) -> Vec<u8> {
    let len = match i {
        0 => 1,
        1 => 1400,
        _ => 1 + (i * 7919 + 13) % 1400,
    };
    let mut state = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out: Vec<u8> = (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    for (byte, tag) in out.iter_mut().zip((i as u16).to_le_bytes()) {
        *byte = tag;
    }
    out
}

/// Sends each datagram from one of `sockets` (alternating) to `to` and waits for its echo,
/// resending up to three times; a reply matching nothing sent fails at once. Returns resends.
pub fn echo_all(sockets: &[UdpSocket], to: SocketAddr, count: usize, who: &str) -> usize {
    let mut sent: HashSet<Vec<u8>> = HashSet::new();
    let mut buf = vec![0u8; 65_536];
    let mut resends = 0;
    for i in 0..count {
        let socket = &sockets[i % sockets.len()];
        let want = datagram(i);
        sent.insert(want.clone());
        let mut echoed = false;
        'attempts: for attempt in 0..ATTEMPTS {
            if attempt > 0 {
                resends += 1;
            }
            socket.send_to(&want, to).unwrap();
            let deadline = Instant::now() + ATTEMPT_WAIT;
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                if left < Duration::from_millis(1) {
                    break;
                }
                socket.set_read_timeout(Some(left)).unwrap();
                match socket.recv_from(&mut buf) {
                    Ok((n, _)) => {
                        let got = &buf[..n];
                        if got == want.as_slice() {
                            echoed = true;
                            break 'attempts;
                        }
                        assert!(
                            sent.contains(got),
                            "{who}: while waiting for datagram {i}, {n} bytes arrived that match nothing sent"
                        );
                    }
                    Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                        break;
                    }
                    Err(e) => panic!("{who}: receive failed: {e}"),
                }
            }
        }
        assert!(
            echoed,
            "{who}: datagram {i} ({} bytes) never came back intact in {ATTEMPTS} tries",
            want.len()
        );
    }
    resends
}

/// UDP through B → C to an echo server: 200 datagrams from two client sockets.
pub fn run_udp(setup: &Setup<'_>) {
    let (Some((client_bin, _)), Some((_, server_bin))) = (find(setup.client), find(setup.server))
    else {
        return;
    };
    let dir = Dir::new(&format!("udp-{}", setup.name()));
    let echo = Echo::start();
    let (b, c) = (free_port(), free_port());
    let mut server = start_server(setup, &server_bin, &dir.0, c);
    let mut client = start_client(setup, &client_bin, &dir.0, b, c, echo.addr, true);
    let sockets = [
        UdpSocket::bind("127.0.0.1:0").unwrap(),
        UdpSocket::bind("127.0.0.1:0").unwrap(),
    ];
    let who = format!(
        "{:?} client → {:?} server, {} UDP",
        setup.client, setup.server, setup.method
    );
    let started = Instant::now();
    let to = SocketAddr::from(([127, 0, 0, 1], b));
    let resends = echo_all(&sockets, to, DATAGRAMS, &who);
    eprintln!(
        "{who}: {DATAGRAMS} datagrams echoed in {:.2?}, {resends} resent",
        started.elapsed()
    );
    client.assert_alive();
    server.assert_alive();
}
