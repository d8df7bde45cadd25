//! Helpers shared by the tests that need root and a network namespace.
#![allow(dead_code)]

use std::fs::File;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Skips (prints why) outside CI; fails under CI.
pub fn skip(reason: &str) {
    assert!(!in_ci(), "CI=true and {reason}");
    eprintln!("SKIPPED: {reason}");
}

pub fn binary() -> Option<PathBuf> {
    let path = std::env::var_os("UDP2RAW_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("../shared/peers/bin/udp2raw"));
    path.is_file().then_some(path)
}

pub fn have(cmd: &str, arg: &str) -> bool {
    Command::new(cmd)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A network namespace of this test; removed, with the processes started in it, on drop.
pub struct Netns {
    pub name: String,
    children: Vec<Child>,
}

impl Netns {
    pub fn new(tag: &str) -> Netns {
        let name = format!("skiff-u2r-{}-{tag}", std::process::id());
        let _ = Command::new("ip")
            .args(["netns", "del", &name])
            .stderr(Stdio::null())
            .status();
        let ok = Command::new("ip")
            .args(["netns", "add", &name])
            .status()
            .unwrap();
        assert!(ok.success(), "ip netns add {name}");
        let ns = Netns {
            name,
            children: Vec::new(),
        };
        let ok = Command::new("ip")
            .args(["-n", &ns.name, "link", "set", "lo", "up"])
            .status()
            .unwrap();
        assert!(ok.success(), "lo up in {}", ns.name);
        ns
    }

    /// Enters the namespace on the current thread (sockets it creates from now on live there).
    pub fn enter(name: &str) {
        let ns = File::open(format!("/run/netns/{name}")).expect("open netns");
        // SAFETY: setns on a valid fd; it only changes this thread's network namespace.
        let rc = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
    }

    /// Runs `f` on a thread that has entered the namespace.
    pub fn run_in<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let name = self.name.clone();
        std::thread::spawn(move || {
            Netns::enter(&name);
            f()
        })
        .join()
        .expect("netns thread")
    }

    /// Runs a command in the namespace and waits for it.
    pub fn exec(&self, args: &[&str]) -> bool {
        Command::new("ip")
            .args(["netns", "exec", &self.name])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    pub fn spawn(&mut self, bin: &Path, args: &[String], log: &Path) {
        let out = File::create(log).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", &self.name])
            .arg(bin)
            .args(args)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("spawn");
        self.children.push(child);
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for child in &mut self.children {
            // The PID is `ip netns exec`, which became the program by exec.
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

pub fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// Datagram `i`: its sequence number, a body whose length varies with `i`, CRC-32 of it all.
pub fn datagram(i: u32) -> Vec<u8> {
    let len = (i as usize).wrapping_mul(37) % 1000;
    let mut d = i.to_be_bytes().to_vec();
    d.extend((0..len).map(|k| (k as u32).wrapping_mul(31).wrapping_add(i.wrapping_mul(7)) as u8));
    let crc = crc32(&d);
    d.extend_from_slice(&crc.to_be_bytes());
    d
}

/// The sequence number of a datagram whose checksum verifies.
pub fn check(d: &[u8]) -> Option<u32> {
    if d.len() < 8 {
        return None;
    }
    let (body, crc) = d.split_at(d.len() - 4);
    (crc32(body).to_be_bytes() == crc).then(|| u32::from_be_bytes(body[..4].try_into().unwrap()))
}

/// The sequence number of the datagram that checks a tunnel is up (not counted).
pub const PROBE: u32 = u32::MAX - 1;

/// What came back of `n` datagrams.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    pub sent: u32,
    pub received: u32,
    pub corrupted: u32,
    pub duplicated: u32,
    pub reordered: u32,
}

impl Tally {
    pub fn lost(&self) -> u32 {
        self.sent - self.received
    }
}

/// Echoes every datagram `sock` receives back to its sender, counting them, until `stop`
/// (bounded by `limit`).
pub fn echo(
    sock: UdpSocket,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    limit: Duration,
) -> Tally {
    sock.set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let mut t = Tally::default();
    let mut seen = std::collections::HashSet::new();
    let mut last = None;
    let mut buf = vec![0u8; 4096];
    let deadline = Instant::now() + limit;
    while !stop.load(std::sync::atomic::Ordering::SeqCst) && Instant::now() < deadline {
        let Ok((n, from)) = sock.recv_from(&mut buf) else {
            continue;
        };
        match check(&buf[..n]) {
            Some(PROBE) => {}
            Some(i) => {
                if !seen.insert(i) {
                    t.duplicated += 1;
                } else {
                    t.received += 1;
                }
                if last.is_some_and(|l| i < l) {
                    t.reordered += 1;
                }
                last = Some(i);
            }
            None => t.corrupted += 1,
        }
        let _ = sock.send_to(&buf[..n], from);
    }
    t
}

/// Sends `n` datagrams to `to` from `sock` and counts the echoes (bounded by `limit`).
/// Paced: at most `window` unanswered at a time, waiting a little for echoes between.
pub fn send_and_count(sock: &UdpSocket, to: SocketAddr, n: u32, limit: Duration) -> Tally {
    sock.set_read_timeout(Some(Duration::from_millis(2)))
        .unwrap();
    let mut t = Tally {
        sent: n,
        ..Tally::default()
    };
    let mut seen = std::collections::HashSet::new();
    let mut last = None;
    let mut buf = vec![0u8; 4096];
    let deadline = Instant::now() + limit;
    let mut next = 0u32;
    let window = 64;
    let mut quiet_since = Instant::now();
    while Instant::now() < deadline {
        if next < n && next - (t.received + t.corrupted).min(next) < window {
            let _ = sock.send_to(&datagram(next), to);
            next += 1;
            continue;
        }
        match sock.recv_from(&mut buf) {
            Ok((k, _)) => {
                quiet_since = Instant::now();
                match check(&buf[..k]) {
                    Some(i) => {
                        if !seen.insert(i) {
                            t.duplicated += 1;
                        } else {
                            t.received += 1;
                        }
                        if last.is_some_and(|l| i < l) {
                            t.reordered += 1;
                        }
                        last = Some(i);
                    }
                    None => t.corrupted += 1,
                }
            }
            Err(_) => {
                if next >= n && quiet_since.elapsed() > Duration::from_millis(500) {
                    break;
                }
                // A lost datagram must not stall the window forever.
                if quiet_since.elapsed() > Duration::from_millis(50) && next < n {
                    let _ = sock.send_to(&datagram(next), to);
                    next += 1;
                    quiet_since = Instant::now();
                }
            }
        }
        if t.received >= n {
            break;
        }
    }
    t.sent = next;
    t
}

/// The applications on either side of a tunnel under test: an echo on `target` inside the
/// namespace `echo_ns`, and, inside `app_ns`, a sender bound to `app_bind` that waits (bounded)
/// for the tunnel entry `entry` to answer a probe, then sends `n` numbered datagrams through it
/// and counts what comes back. `stop_tunnel` runs once the sender is done, before the echo is
/// told to stop. Returns what reached the echo, and what came back (None: the tunnel never
/// came up).
pub fn exchange_through(
    app_ns: &str,
    app_bind: &'static str,
    entry: SocketAddr,
    echo_ns: &str,
    target: SocketAddr,
    n: u32,
) -> (Tally, Option<Tally>) {
    let stop = Arc::new(AtomicBool::new(false));
    let (stop2, name) = (stop.clone(), echo_ns.to_string());
    let echo_thread = std::thread::spawn(move || {
        Netns::enter(&name);
        let s = UdpSocket::bind(target).unwrap();
        echo(s, stop2, Duration::from_secs(120))
    });
    let name = app_ns.to_string();
    let app = std::thread::spawn(move || {
        Netns::enter(&name);
        let s = UdpSocket::bind(app_bind).unwrap();
        // Wait (bounded) for the tunnel: probe until one datagram comes back.
        let mut up = false;
        for _ in 0..100 {
            let _ = s.send_to(&datagram(PROBE), entry);
            s.set_read_timeout(Some(Duration::from_millis(200)))
                .unwrap();
            let mut b = [0u8; 2048];
            if s.recv_from(&mut b).is_ok() {
                up = true;
                break;
            }
        }
        if !up {
            return None;
        }
        std::thread::sleep(Duration::from_millis(300));
        let mut b = [0u8; 2048];
        s.set_read_timeout(Some(Duration::from_millis(10))).unwrap();
        while s.recv_from(&mut b).is_ok() {}
        Some(send_and_count(&s, entry, n, Duration::from_secs(90)))
    });
    let back = app.join().expect("app thread");
    stop.store(true, Ordering::SeqCst);
    let there = echo_thread.join().expect("echo thread");
    (there, back)
}

/// One case's line from what reached the echo and what came back, or why it failed: any
/// corrupted datagram, or most of them lost (`log` is the real binary's, for the message).
pub fn verdict(label: &str, there: &Tally, back: &Tally, log: &str) -> Result<String, String> {
    let line = format!(
        "{label}: there {}/{} (corrupt {}, dup {}, reordered {}), back {}/{} (corrupt {}, dup {}, reordered {}), lost {}",
        there.received,
        back.sent,
        there.corrupted,
        there.duplicated,
        there.reordered,
        back.received,
        back.sent,
        back.corrupted,
        back.duplicated,
        back.reordered,
        back.lost()
    );
    if there.corrupted > 0 || back.corrupted > 0 {
        return Err(format!("{line}: corrupted datagrams"));
    }
    if back.received < back.sent / 2 {
        return Err(format!("{line}: most datagrams lost\n{}", tail(log)));
    }
    Ok(line)
}

/// The last 30 lines of a log.
pub fn tail(s: &str) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

/// Runs every case with `run` (each gives its line or why it failed), printing each, and
/// fails with the count if any did; `filter` is `UDP2RAW_CASES`, which must select one at least.
pub fn run_all<C>(cases: &[C], filter: &str, run: impl Fn(&C) -> Result<String, String>) {
    assert!(
        !cases.is_empty(),
        "UDP2RAW_CASES={filter:?} selects no case"
    );
    let mut failures = Vec::new();
    for case in cases {
        match run(case) {
            Ok(line) => eprintln!("ok   {line}"),
            Err(e) => {
                eprintln!("FAIL {e}");
                failures.push(e);
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed",
        failures.len(),
        cases.len()
    );
}
