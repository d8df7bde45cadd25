//! UDPspeeder v2 interop (SPEEDERV2_BIN, else `../shared/peers/bin/speederv2`; outside CI a
//! machine without it skips, under CI that fails), both directions: a UDP client → the
//! speeder client → the speeder server → a UDP echo server, with Skiff as one speeder end and
//! speederv2 as the other. Modes 0 and 1, with and without key, `-f 1:3`, `20:10` and the list
//! form, plus `--disable-fec` and `--disable-obscure`. 10 000 datagrams with sequence numbers
//! and a SHA-256 tag go each way (the echo sends every one back): none may be corrupted, loss
//! (printed with reorder) must stay under 1 % on loopback.

mod common;

use std::collections::HashSet;
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::*;
use sha2::{Digest, Sha256};

const DATAGRAMS: u32 = 10_000;
/// Loss allowed on loopback (speederv2 itself drops on full socket buffers now and then).
const LOSS_LIMIT: f64 = 0.01;

/// One case at a time: each starts several speederv2 and Skiff processes on UDP ports, and
/// side by side on two busy cores they collided on ports and lost datagrams to load.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn speederv2() -> Option<PathBuf> {
    shared_peer("speederv2", "SPEEDERV2_BIN")
}

/// One speeder setting, as speederv2 flags and as Skiff settings.
struct Setting {
    mode: u8,
    fec: &'static str,
    key: Option<&'static str>,
    disable_fec: bool,
    disable_obscure: bool,
}

impl Setting {
    fn flags(&self) -> Vec<String> {
        let mut f = vec![
            "--mode".into(),
            self.mode.to_string(),
            "-f".into(),
            self.fec.into(),
        ];
        if let Some(k) = self.key {
            f.extend(["-k".into(), k.into()]);
        }
        if self.disable_fec {
            f.push("--disable-fec".into());
        }
        if self.disable_obscure {
            f.push("--disable-obscure".into());
        }
        f
    }

    fn settings(&self, mut base: serde_json::Value) -> serde_json::Value {
        base["mode"] = self.mode.into();
        base["fec"] = self.fec.into();
        if let Some(k) = self.key {
            base["key"] = k.into();
        }
        base["disableFec"] = self.disable_fec.into();
        base["disableObscure"] = self.disable_obscure.into();
        base
    }
}

fn start_speeder(
    bin: &Path,
    dir: &Path,
    role: &str,
    listen: u16,
    remote: u16,
    s: &Setting,
    extra: &[&str],
) -> (Proc, PathBuf) {
    let log = dir.join(format!("speederv2-{role}.log"));
    let file = std::fs::File::create(&log).unwrap();
    let child = Command::new(bin)
        .arg(if role == "server" { "-s" } else { "-c" })
        .args([
            "-l",
            &format!("127.0.0.1:{listen}"),
            "-r",
            &format!("127.0.0.1:{remote}"),
        ])
        .args(s.flags())
        .args(extra)
        .args(["--log-level", "3", "--disable-color"])
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let mut proc = Proc {
        child,
        what: "speederv2",
    };
    wait_udp(&mut proc, listen, &log);
    (proc, log)
}

/// Echoes every datagram back to its sender; counts the corrupted ones it saw.
struct Echo {
    port: u16,
    corrupted: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Echo {
    fn start() -> Echo {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let port = socket.local_addr().unwrap().port();
        let corrupted = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (c, s) = (corrupted.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while !s.load(Ordering::Relaxed) {
                if let Ok((n, from)) = socket.recv_from(&mut buf) {
                    if parse(&buf[..n]).is_none() {
                        c.fetch_add(1, Ordering::Relaxed);
                    }
                    let _ = socket.send_to(&buf[..n], from);
                }
            }
        });
        Echo {
            port,
            corrupted,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// seq (u32) | payload | first 8 bytes of SHA-256(seq | payload).
fn datagram(seq: u32) -> Vec<u8> {
    let len = 16 + (seq as usize * 7919) % 1000;
    let mut d = seq.to_be_bytes().to_vec();
    d.extend((0..len).map(|i| (seq as usize * 31 + i * 17) as u8));
    let tag = Sha256::digest(&d);
    d.extend_from_slice(&tag[..8]);
    d
}

/// The sequence number of an intact datagram.
fn parse(d: &[u8]) -> Option<u32> {
    if d.len() < 12 {
        return None;
    }
    let (body, tag) = d.split_at(d.len() - 8);
    (Sha256::digest(body)[..8] == *tag).then(|| u32::from_be_bytes(body[..4].try_into().unwrap()))
}

struct Tally {
    /// The first few sequence numbers that never came back, for the report.
    lost_sample: Vec<u32>,
    received: u64,
    corrupted: u64,
    duplicated: u64,
    reordered: u64,
}

/// Datagrams in flight before the sender waits (briefly) for echoes: the test measures the
/// tunnel, not how fast a loaded machine's socket buffers overflow. 64 loopback datagrams
/// (about 2 KiB each with overhead) fit even a default 208 KiB receive buffer.
const WINDOW: u64 = 64;

/// Sends DATAGRAMS through `port` and collects the echoes; bounded to 60 s.
fn run_traffic(port: u16) -> Tally {
    let echoed = Arc::new(AtomicU64::new(0));
    let echoed_by_collector = echoed.clone();
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    // 4 MiB each way, as the bench gives its own ends: a loaded machine's scheduling hiccups
    // must not show up as loss in the test's own socket.
    skiff_bench::udp_fec::roomy(&socket);
    socket.connect(("127.0.0.1", port)).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let reader = socket.try_clone().unwrap();
    let collector = std::thread::spawn(move || {
        let mut tally = Tally {
            lost_sample: Vec::new(),
            received: 0,
            corrupted: 0,
            duplicated: 0,
            reordered: 0,
        };
        let mut seen = HashSet::new();
        let mut highest = None::<u32>;
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut last = Instant::now();
        let mut buf = [0u8; 4096];
        while Instant::now() < deadline
            && last.elapsed() < Duration::from_secs(3)
            && seen.len() < DATAGRAMS as usize
        {
            let Ok(n) = reader.recv(&mut buf) else {
                continue;
            };
            last = Instant::now();
            echoed_by_collector.fetch_add(1, Ordering::Relaxed);
            match parse(&buf[..n]) {
                None => tally.corrupted += 1,
                Some(seq) if !seen.insert(seq) => tally.duplicated += 1,
                Some(seq) => {
                    tally.received += 1;
                    if highest.is_some_and(|h| seq < h) {
                        tally.reordered += 1;
                    }
                    highest = highest.max(Some(seq));
                }
            }
        }
        tally.lost_sample = (0..DATAGRAMS)
            .filter(|s| !seen.contains(s))
            .take(12)
            .collect();
        tally
    });
    // Datagrams written off as lost: whatever is still in flight after a 200 ms wait without
    // an echo. Each loss episode costs one wait, so a lossy run stays short.
    let mut written_off = 0u64;
    for seq in 0..DATAGRAMS {
        let sent = u64::from(seq);
        let waited = Instant::now();
        loop {
            let settled = echoed.load(Ordering::Relaxed) + written_off;
            if sent.saturating_sub(settled) < WINDOW {
                break;
            }
            // The first echo waits for both ends to set up their conversation.
            let patience = if echoed.load(Ordering::Relaxed) == 0 {
                Duration::from_secs(2)
            } else {
                Duration::from_millis(200)
            };
            if waited.elapsed() >= patience {
                written_off = sent.saturating_sub(echoed.load(Ordering::Relaxed));
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        socket.send(&datagram(seq)).unwrap();
    }
    collector.join().unwrap()
}

/// Prints the tally; asserts nothing corrupted and loss below `limit`; returns the loss.
fn check_within(label: &str, echo: &Echo, tally: &Tally, limit: f64) -> f64 {
    let loss = 1.0 - tally.received as f64 / DATAGRAMS as f64;
    let echo_corrupted = echo.corrupted.load(Ordering::Relaxed);
    println!(
        "{label}: {} of {DATAGRAMS} back, loss {:.3} %, reordered {}, duplicated {}, corrupted {} (at echo {})",
        tally.received,
        loss * 100.0,
        tally.reordered,
        tally.duplicated,
        tally.corrupted,
        echo_corrupted
    );
    if !tally.lost_sample.is_empty() {
        println!("  first lost: {:?}", tally.lost_sample);
    }
    assert_eq!(
        tally.corrupted + echo_corrupted,
        0,
        "{label}: corrupted datagrams"
    );
    assert!(
        loss < limit,
        "{label}: loss {:.3} % over {} %",
        loss * 100.0,
        limit * 100.0
    );
    loss
}

fn skiff_client_config(listen: u16, echo: u16, server: u16, s: &Setting) -> String {
    serde_json::json!({
        "log": { "loglevel": "warning" },
        "inbounds": [{ "listen": "127.0.0.1", "port": listen, "protocol": "dokodemo-door",
            "settings": { "address": "127.0.0.1", "port": echo, "network": "udp" } }],
        "outbounds": [{ "protocol": "udpspeeder",
            "settings": s.settings(serde_json::json!({ "address": "127.0.0.1", "port": server })) }]
    })
    .to_string()
}

fn skiff_server_config(listen: u16, echo: u16, s: &Setting) -> String {
    serde_json::json!({
        "log": { "loglevel": "warning" },
        "inbounds": [{ "listen": "127.0.0.1", "port": listen, "protocol": "udpspeeder",
            "settings": s.settings(serde_json::json!({ "target": format!("127.0.0.1:{echo}") })) }],
        "outbounds": [{ "protocol": "freedom" }]
    })
    .to_string()
}

/// Skiff client → speederv2 server (started with `extra` flags); returns the loss.
fn skiff_to_speederv2(s: &Setting, label: &str, extra: &[&str], limit: f64) -> f64 {
    let Some(bin) = speederv2() else { return 0.0 };
    let dir = TempDir::new("udpspeeder-c");
    let echo = Echo::start();
    let (server_port, client_port) = (free_port(), free_port());
    let (_server, _server_log) =
        start_speeder(&bin, dir.path(), "server", server_port, echo.port, s, extra);
    let (mut skiff, log) = start_skiff(
        dir.path(),
        "client",
        &skiff_client_config(client_port, echo.port, server_port, s),
        &[],
    );
    wait_udp(&mut skiff, client_port, &log);
    let tally = run_traffic(client_port);
    let loss = check_within(
        &format!("skiff → speederv2 [{label}]"),
        &echo,
        &tally,
        limit,
    );
    assert_healthy(&mut skiff, &log);
    loss
}

/// speederv2 client (started with `extra` flags) → Skiff server; returns the loss.
fn speederv2_to_skiff(s: &Setting, label: &str, extra: &[&str], limit: f64) -> f64 {
    let Some(bin) = speederv2() else { return 0.0 };
    let dir = TempDir::new("udpspeeder-s");
    let echo = Echo::start();
    let (server_port, client_port) = (free_port(), free_port());
    let (mut skiff, log) = start_skiff(
        dir.path(),
        "server",
        &skiff_server_config(server_port, echo.port, s),
        &[],
    );
    wait_udp(&mut skiff, server_port, &log);
    let (_client, _client_log) = start_speeder(
        &bin,
        dir.path(),
        "client",
        client_port,
        server_port,
        s,
        extra,
    );
    let tally = run_traffic(client_port);
    let loss = check_within(
        &format!("speederv2 → skiff [{label}]"),
        &echo,
        &tally,
        limit,
    );
    assert_healthy(&mut skiff, &log);
    loss
}

/// Modes × keys × FEC settings, each direction: every mode meets every FEC form, and each with
/// and without a key somewhere in the matrix.
const MATRIX: [Setting; 6] = [
    Setting {
        mode: 0,
        fec: "20:10",
        key: None,
        disable_fec: false,
        disable_obscure: false,
    },
    Setting {
        mode: 1,
        fec: "20:10",
        key: Some("k3y-Secret"),
        disable_fec: false,
        disable_obscure: false,
    },
    Setting {
        mode: 0,
        fec: "1:3",
        key: Some("passwd"),
        disable_fec: false,
        disable_obscure: false,
    },
    Setting {
        mode: 1,
        fec: "1:3",
        key: None,
        disable_fec: false,
        disable_obscure: false,
    },
    Setting {
        mode: 0,
        fec: "1:3,2:4,10:6,20:10",
        key: Some("x"),
        disable_fec: false,
        disable_obscure: false,
    },
    Setting {
        mode: 1,
        fec: "1:3,2:4,10:6,20:10",
        key: None,
        disable_fec: false,
        disable_obscure: false,
    },
];

fn label(s: &Setting) -> String {
    format!(
        "mode {} -f {} {}{}{}",
        s.mode,
        s.fec,
        if s.key.is_some() { "key" } else { "no key" },
        if s.disable_fec { " disable-fec" } else { "" },
        if s.disable_obscure {
            " disable-obscure"
        } else {
            ""
        }
    )
}

#[test]
fn skiff_client_with_speederv2_server_matrix() {
    let _serial = one_at_a_time();
    for s in &MATRIX {
        skiff_to_speederv2(s, &label(s), &[], LOSS_LIMIT);
    }
}

#[test]
fn speederv2_client_with_skiff_server_matrix() {
    let _serial = one_at_a_time();
    for s in &MATRIX {
        speederv2_to_skiff(s, &label(s), &[], LOSS_LIMIT);
    }
}

const PLAIN: [Setting; 2] = [
    Setting {
        mode: 0,
        fec: "20:10",
        key: Some("k"),
        disable_fec: true,
        disable_obscure: false,
    },
    Setting {
        mode: 1,
        fec: "10:5",
        key: None,
        disable_fec: false,
        disable_obscure: true,
    },
];

#[test]
fn disable_fec_and_disable_obscure_both_ways() {
    let _serial = one_at_a_time();
    for s in &PLAIN {
        skiff_to_speederv2(s, &label(s), &[], LOSS_LIMIT);
        speederv2_to_skiff(s, &label(s), &[], LOSS_LIMIT);
    }
}

/// speederv2's `--random-drop 500` drops 5 % of the FEC datagrams it sends: towards Skiff's
/// client from its server, towards Skiff's server from its client. With `-f 20:10` Skiff's
/// decoder must recover almost all of it; the same drop with `--disable-fec` is the control
/// that shows the drop is real (it must lose at least 2 %).
#[test]
fn skiff_recovers_what_speederv2_random_drop_loses() {
    let _serial = one_at_a_time();
    const DROP: [&str; 2] = ["--random-drop", "500"];
    for mode in [0, 1] {
        let s = Setting {
            mode,
            fec: "20:10",
            key: Some("drop"),
            disable_fec: false,
            disable_obscure: false,
        };
        let name = format!("{} --random-drop 500", label(&s));
        skiff_to_speederv2(&s, &name, &DROP, LOSS_LIMIT);
        speederv2_to_skiff(&s, &name, &DROP, LOSS_LIMIT);
    }
    let control = Setting {
        mode: 0,
        fec: "20:10",
        key: None,
        disable_fec: true,
        disable_obscure: false,
    };
    let name = format!("{} --random-drop 500 (control)", label(&control));
    let lost = skiff_to_speederv2(&control, &name, &DROP, 1.0);
    if speederv2().is_some() {
        assert!(
            lost >= 0.02,
            "control lost only {:.3} %: the drop did not happen",
            lost * 100.0
        );
    }
}

/// A wrong key is refused by the checksum: nothing gets through, nothing panics.
#[test]
fn wrong_key_delivers_nothing() {
    let _serial = one_at_a_time();
    let Some(bin) = speederv2() else { return };
    let dir = TempDir::new("udpspeeder-k");
    let echo = Echo::start();
    let (server_port, client_port) = (free_port(), free_port());
    let theirs = Setting {
        mode: 0,
        fec: "20:10",
        key: Some("right"),
        disable_fec: false,
        disable_obscure: false,
    };
    let ours = Setting {
        key: Some("wrong"),
        ..theirs
    };
    let (mut skiff, log) = start_skiff(
        dir.path(),
        "server",
        &skiff_server_config(server_port, echo.port, &ours),
        &[],
    );
    wait_udp(&mut skiff, server_port, &log);
    let (_client, _client_log) = start_speeder(
        &bin,
        dir.path(),
        "client",
        client_port,
        server_port,
        &theirs,
        &[],
    );
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    for seq in 0..50 {
        socket
            .send_to(&datagram(seq), ("127.0.0.1", client_port))
            .unwrap();
    }
    let mut buf = [0u8; 4096];
    assert!(
        socket.recv(&mut buf).is_err(),
        "a datagram got through with the wrong key"
    );
    assert_healthy(&mut skiff, &log);

    // The control: the same setup with the right key carries the same datagrams, so the
    // silence above was the key's doing, not a broken tunnel.
    let (server_port, client_port) = (free_port(), free_port());
    let (mut right, right_log) = start_skiff(
        dir.path(),
        "server-right",
        &skiff_server_config(server_port, echo.port, &theirs),
        &[],
    );
    wait_udp(&mut right, server_port, &right_log);
    let (_client, _) = start_speeder(
        &bin,
        dir.path(),
        "client-right",
        client_port,
        server_port,
        &theirs,
        &[],
    );
    let mut echoed = 0;
    for seq in 0..50 {
        socket
            .send_to(&datagram(seq), ("127.0.0.1", client_port))
            .unwrap();
        if socket.recv(&mut buf).is_ok() {
            echoed += 1;
        }
    }
    assert!(echoed > 0, "the right key carried nothing either");
    assert_healthy(&mut right, &right_log);
}
