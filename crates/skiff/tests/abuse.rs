//! Bad input against the real binary: malformed SOCKS5 and HTTP requests, truncated
//! handshakes, a one-byte-per-second client, and 10 000 connections opened and dropped at
//! once. The process must stay up, close each bad connection (with a debug log line), apply
//! the handshake timeout, serve normally afterwards, and give its memory back.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Skiff {
    child: Child,
    log: std::path::PathBuf,
    dir: std::path::PathBuf,
}

impl Drop for Skiff {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// An unreadable figure fails the test: a 0 would make the memory bounds pass vacuously.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("/proc/{pid}/status: {e}"));
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .filter(|&kib: &u64| kib > 0)
        .unwrap_or_else(|| panic!("no VmRSS in /proc/{pid}/status"))
}

fn raise_nofile() {
    // SAFETY: plain getrlimit/setrlimit on a zeroed struct.
    unsafe {
        let mut lim: libc::rlimit = std::mem::zeroed();
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        lim.rlim_cur = lim.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
    }
}

fn start(socks: u16, http: u16) -> Skiff {
    let dir = std::env::temp_dir().join(format!("skiff-abuse-{}-{socks}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("config.json");
    std::fs::write(
        &config,
        format!(
            r#"{{ "log": {{ "loglevel": "debug" }},
                 "policy": {{ "levels": {{ "0": {{ "handshake": 2 }} }} }},
                 "inbounds": [
                   {{ "tag": "socks-in", "listen": "127.0.0.1", "port": {socks}, "protocol": "socks" }},
                   {{ "tag": "http-in", "listen": "127.0.0.1", "port": {http}, "protocol": "http" }} ],
                 "outbounds": [{{ "protocol": "freedom" }}] }}"#
        ),
    )
    .unwrap();
    let log = dir.join("stderr.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_skiff"))
        .arg("run")
        .arg("-c")
        .arg(&config)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut listening = 0;
    while listening < 2 {
        match lines.next() {
            Some(Ok(l)) if l.contains("listening on") => listening += 1,
            Some(Ok(_)) => {}
            _ => panic!("skiff did not start; see {}", log.display()),
        }
    }
    Skiff { child, log, dir }
}

/// Sends `bytes`, then waits (bounded) for the server to close: returns what it answered.
fn probe(addr: SocketAddr, bytes: &[u8], close_write: bool) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(6))).unwrap();
    s.write_all(bytes).unwrap();
    if close_write {
        let _ = s.shutdown(std::net::Shutdown::Write);
    }
    let mut answer = Vec::new();
    let start = Instant::now();
    let mut buf = [0u8; 512];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("server did not close within {:?}: {e}", start.elapsed()),
        }
    }
    answer
}

fn alive(skiff: &mut Skiff) -> bool {
    skiff.child.try_wait().unwrap().is_none()
}

fn socks_works(addr: SocketAddr) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(&[5, 1, 0]).unwrap();
    let mut reply = [0u8; 2];
    s.read_exact(&mut reply).unwrap();
    assert_eq!(reply, [5, 0]);
}

#[test]
fn bad_input_costs_one_connection_at_most() {
    raise_nofile();
    let (socks_port, http_port) = (free_port(), free_port());
    let mut skiff = start(socks_port, http_port);
    let socks: SocketAddr = ([127, 0, 0, 1], socks_port).into();
    let http: SocketAddr = ([127, 0, 0, 1], http_port).into();
    std::thread::sleep(Duration::from_millis(200));
    let baseline = rss_kib(skiff.child.id());

    // Malformed SOCKS5: bad version, zero methods, bad address type, absurd command.
    for bad in [
        &b"\x06\x01\x00"[..],
        b"\x05\x00",
        b"\x05\x01\x00\x05\x01\x00\x09\x00",
        b"\x05\x01\x00\x05\x09\x00\x01\x7f\x00\x00\x01\x00\x50",
    ] {
        let answer = probe(socks, bad, false);
        assert!(answer.len() <= 12, "short refusal at most: {answer:?}");
    }
    // Malformed HTTP requests get a 400 or a close, never a hang.
    for bad in [
        &b"GARBAGE\r\n\r\n"[..],
        b"GET\r\n\r\n",
        b"CONNECT nohost HTTP/1.1\r\n\r\n",
        &[0xFFu8; 600][..],
    ] {
        let answer = probe(http, bad, false);
        let text = String::from_utf8_lossy(&answer);
        assert!(
            answer.is_empty() || text.starts_with("HTTP/1.1 4"),
            "{text}"
        );
    }
    // Truncated handshakes: the client stops half-way and closes its side.
    probe(socks, b"\x05\x01", true);
    probe(socks, b"\x05\x01\x00\x05\x01\x00\x03\x20abc", true);
    probe(http, b"CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: x", true);

    // One byte per second: the 2 s handshake timeout closes it after at most a few bytes.
    let mut slow = TcpStream::connect(http).unwrap();
    let started = Instant::now();
    let mut closed_after = None;
    for b in b"GET http://127.0.0.1/ HTTP/1.1\r\n" {
        if slow.write_all(&[*b]).is_err() {
            closed_after = Some(started.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_secs(1));
        slow.set_read_timeout(Some(Duration::from_millis(10)))
            .unwrap();
        let mut probe_buf = [0u8; 64];
        if let Ok(0) = slow.read(&mut probe_buf) {
            closed_after = Some(started.elapsed());
            break;
        }
    }
    let closed_after = closed_after.expect("slow client was never cut off");
    assert!(
        closed_after < Duration::from_secs(6),
        "cut off after {closed_after:?}"
    );

    // 10 000 connections opened and dropped at once.
    let mut open = Vec::with_capacity(10_000);
    for _ in 0..10_000 {
        match TcpStream::connect(socks) {
            Ok(s) => open.push(s),
            Err(e) => panic!("connect #{} failed: {e}", open.len()),
        }
    }
    let peak = rss_kib(skiff.child.id());
    drop(open);
    // Give the server a bounded moment to notice the closes and give memory back.
    let mut after = rss_kib(skiff.child.id());
    for _ in 0..40 {
        if after < baseline + 8 * 1024 {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
        after = rss_kib(skiff.child.id());
    }
    assert!(alive(&mut skiff), "process died");
    socks_works(socks);
    eprintln!("RSS KiB: baseline {baseline}, with 10k connections {peak}, after {after}");
    assert!(
        after < baseline + 8 * 1024,
        "memory did not come back: {baseline} → {after} KiB"
    );

    let log = std::fs::read_to_string(&skiff.log).unwrap();
    let closes = log.lines().filter(|l| l.contains("handshake")).count();
    assert!(
        closes >= 10_000,
        "one debug line per bad connection, got {closes}"
    );
    assert!(log.contains("handshake timed out"), "timeout logged");
    assert!(!log.contains("panicked"), "no panic");
}
