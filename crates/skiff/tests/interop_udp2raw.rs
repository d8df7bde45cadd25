//! udp2raw interop through the skiff binary (UDP2RAW_BIN, else `../shared/peers/bin/udp2raw`;
//! root, `ip` and `iptables` needed: outside CI their absence skips with a printed reason,
//! under `CI=true` it fails), both directions, inside a network namespace this test creates
//! and removes: a UDP client → dokodemo-door → Skiff's `udp2raw` outbound → a real
//! `udp2raw -s` → a UDP echo, and a real `udp2raw -c` → Skiff's `udp2raw` inbound → the echo.
//! Both ends use their own firewall rules (`-a` / `autoRule`). One cipher × auth pair per raw
//! mode (faketcp aes128cbc/md5, udp xor/hmac_sha1, icmp aes128cfb/crc32; the full matrix of
//! the tunnel ends runs in `crates/skiff-udp2raw/tests/tunnel_real.rs`). 10 000 datagrams with
//! sequence numbers and CRC-32s each way (the echo returns each); none may be corrupted; loss,
//! duplicates and reordering are printed. The same runs over IPv6 on `::1` (three cases,
//! 2 000 datagrams; `ip6tables` needed), Skiff's `address`/`listen` then "::1".

#[path = "common/numbered.rs"]
mod numbered;

use numbered::{check, datagram};
use std::collections::HashSet;
use std::fs::File;
use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

const DATAGRAMS: u32 = 10_000;
const KEY: &str = "skiff-interop";

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

fn skip(reason: &str) {
    assert!(!in_ci(), "CI=true and {reason}");
    eprintln!("SKIPPED udp2raw interop: {reason}");
}

fn binary() -> Option<PathBuf> {
    let p = std::env::var_os("UDP2RAW_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/peers/bin/udp2raw")
        });
    p.is_file().then_some(p)
}

fn have(cmd: &str) -> bool {
    Command::new(cmd)
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A network namespace and the processes started in it (killed by PID), removed on drop.
struct Netns {
    name: String,
    children: Vec<Child>,
}

impl Netns {
    fn new(tag: &str) -> Netns {
        let name = format!("skiff-u2r-i-{}-{tag}", std::process::id());
        let _ = Command::new("ip")
            .args(["netns", "del", &name])
            .stderr(Stdio::null())
            .status();
        assert!(
            Command::new("ip")
                .args(["netns", "add", &name])
                .status()
                .unwrap()
                .success()
        );
        let ns = Netns {
            name,
            children: Vec::new(),
        };
        assert!(
            Command::new("ip")
                .args(["-n", &ns.name, "link", "set", "lo", "up"])
                .status()
                .unwrap()
                .success()
        );
        ns
    }

    fn enter(name: &str) {
        let f = File::open(format!("/run/netns/{name}")).expect("netns");
        // SAFETY: setns on a valid fd; it changes only this thread's network namespace.
        assert_eq!(unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) }, 0);
    }

    fn spawn(&mut self, program: &Path, args: &[String], log: &Path) {
        let out = File::create(log).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", &self.name])
            .arg(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap();
        self.children.push(child);
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for c in &mut self.children {
            // SIGTERM first, so Skiff removes its firewall rules; then kill by PID.
            // SAFETY: kill on the PID of a child this test started and has not reaped.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        }
        for c in &mut self.children {
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline && c.try_wait().ok().flatten().is_none() {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

const PROBE: u32 = u32::MAX - 1;

#[derive(Default, Debug)]
struct Tally {
    sent: u32,
    received: u32,
    corrupted: u32,
    duplicated: u32,
    reordered: u32,
}

fn count(t: &mut Tally, seen: &mut HashSet<u32>, last: &mut Option<u32>, d: &[u8]) {
    match check(d) {
        Some(PROBE) => {}
        Some(i) => {
            if seen.insert(i) {
                t.received += 1;
            } else {
                t.duplicated += 1;
            }
            if last.is_some_and(|l| i < l) {
                t.reordered += 1;
            }
            *last = Some(i);
        }
        None => t.corrupted += 1,
    }
}

/// Runs one case of `n` datagrams: echo on `lo`:7000, the client side's UDP entry on
/// 127.0.0.1:3333 (`lo` is the loopback address of the tunnel's family).
fn traffic(ns: &Netns, lo: &'static str, n: u32) -> Option<(Tally, Tally)> {
    let stop = Arc::new(AtomicBool::new(false));
    let (s2, name) = (stop.clone(), ns.name.clone());
    let echo = std::thread::spawn(move || {
        Netns::enter(&name);
        let s = UdpSocket::bind((lo, 7000)).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        let (mut t, mut seen, mut last) = (Tally::default(), HashSet::new(), None);
        let mut buf = vec![0u8; 4096];
        let deadline = Instant::now() + Duration::from_secs(180);
        while !s2.load(Ordering::SeqCst) && Instant::now() < deadline {
            if let Ok((n, from)) = s.recv_from(&mut buf) {
                count(&mut t, &mut seen, &mut last, &buf[..n]);
                let _ = s.send_to(&buf[..n], from);
            }
        }
        t
    });
    let name = ns.name.clone();
    let app = std::thread::spawn(move || {
        Netns::enter(&name);
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.connect("127.0.0.1:3333").unwrap();
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut buf = vec![0u8; 4096];
        let mut up = false;
        for _ in 0..150 {
            let _ = s.send(&datagram(PROBE));
            match s.recv(&mut buf) {
                Ok(_) => {
                    up = true;
                    break;
                }
                // Refused (nothing listening yet) returns at once: wait as a timeout would.
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
        if !up {
            return None;
        }
        s.set_read_timeout(Some(Duration::from_millis(2))).unwrap();
        let (mut t, mut seen, mut last) = (Tally::default(), HashSet::new(), None);
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut quiet = Instant::now();
        while Instant::now() < deadline {
            let outstanding = t.sent - (t.received + t.corrupted).min(t.sent);
            if t.sent < n && (outstanding < 64 || quiet.elapsed() > Duration::from_millis(50)) {
                let _ = s.send(&datagram(t.sent));
                t.sent += 1;
                quiet = Instant::now();
                continue;
            }
            match s.recv(&mut buf) {
                Ok(n) => {
                    quiet = Instant::now();
                    count(&mut t, &mut seen, &mut last, &buf[..n]);
                }
                Err(_) if t.sent >= n && quiet.elapsed() > Duration::from_millis(500) => {
                    break;
                }
                Err(_) => {}
            }
            if t.received >= n {
                break;
            }
        }
        Some(t)
    });
    let back = app.join().unwrap();
    stop.store(true, Ordering::SeqCst);
    let there = echo.join().unwrap();
    back.map(|b| (there, b))
}

static N: AtomicU32 = AtomicU32::new(0);

/// The tunnel's family: its loopback address, and the IPv6 one's datagram count.
#[derive(Clone, Copy, PartialEq)]
enum Family {
    V4,
    V6,
}

impl Family {
    fn lo(self) -> &'static str {
        match self {
            Family::V4 => "127.0.0.1",
            Family::V6 => "::1",
        }
    }

    /// `lo:port` as udp2raw's `-l`/`-r` and Skiff's `target` take it.
    fn at(self, port: u16) -> String {
        match self {
            Family::V4 => format!("127.0.0.1:{port}"),
            Family::V6 => format!("[::1]:{port}"),
        }
    }
}

fn run(
    bin: &Path,
    skiff_is_client: bool,
    family: Family,
    (raw, cipher, auth): (&str, &str, &str),
    n: u32,
) -> Result<String, String> {
    let label = format!(
        "{}{}-{raw}-{cipher}-{auth}",
        if skiff_is_client {
            "skiff2real"
        } else {
            "real2skiff"
        },
        if family == Family::V6 { "-v6" } else { "" }
    );
    let mut ns = Netns::new(&format!("{}", N.fetch_add(1, Ordering::Relaxed)));
    let _ = Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns.name,
            "sh",
            "-c",
            "echo 1 > /proc/sys/net/ipv4/icmp_echo_ignore_all; \
             echo 1 > /proc/sys/net/ipv6/icmp/echo_ignore_all 2>/dev/null",
        ])
        .status();
    let dir =
        std::env::temp_dir().join(format!("skiff-u2r-interop-{}-{label}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // The UDP entry of a real client stays on 127.0.0.1 (the tunnel's family is its -r's).
    let mut args: Vec<String> = if skiff_is_client {
        vec![
            "-s".into(),
            format!("-l{}", family.at(4096)),
            format!("-r{}", family.at(7000)),
        ]
    } else {
        vec![
            "-c".into(),
            "-l127.0.0.1:3333".into(),
            format!("-r{}", family.at(4096)),
        ]
    };
    for s in [
        "-k",
        KEY,
        "--raw-mode",
        raw,
        "--cipher-mode",
        cipher,
        "--auth-mode",
        auth,
        "-a",
        "--log-level",
        "3",
        "--disable-color",
    ] {
        args.push(s.into());
    }
    ns.spawn(bin, &args, &dir.join("udp2raw.log"));
    let settings = serde_json::json!({ "key": KEY, "rawMode": raw, "cipherMode": cipher, "authMode": auth, "autoRule": true });
    let config = if skiff_is_client {
        let mut s = settings.clone();
        s["address"] = family.lo().into();
        s["port"] = 4096.into();
        serde_json::json!({
            "log": { "loglevel": "warning" },
            "inbounds": [{ "listen": "127.0.0.1", "port": 3333, "protocol": "dokodemo-door",
                "settings": { "address": family.lo(), "port": 7000, "network": "udp" } }],
            "outbounds": [{ "protocol": "udp2raw", "settings": s }]
        })
    } else {
        let mut s = settings.clone();
        s["target"] = family.at(7000).into();
        serde_json::json!({
            "log": { "loglevel": "warning" },
            "inbounds": [{ "listen": family.lo(), "port": 4096, "protocol": "udp2raw", "settings": s }],
            "outbounds": [{ "protocol": "freedom" }]
        })
    };
    let cfg_path = dir.join("skiff.json");
    std::fs::write(&cfg_path, config.to_string()).unwrap();
    ns.spawn(
        Path::new(env!("CARGO_BIN_EXE_skiff")),
        &[
            "run".into(),
            "-c".into(),
            cfg_path.to_string_lossy().into_owned(),
        ],
        &dir.join("skiff.log"),
    );
    let result = traffic(&ns, family.lo(), n);
    drop(ns);
    let logs = format!(
        "--- skiff\n{}\n--- udp2raw (tail)\n{}",
        std::fs::read_to_string(dir.join("skiff.log")).unwrap_or_default(),
        std::fs::read_to_string(dir.join("udp2raw.log"))
            .unwrap_or_default()
            .lines()
            .rev()
            .take(20)
            .collect::<Vec<_>>()
            .join("\n")
    );
    let _ = std::fs::remove_dir_all(&dir);
    let Some((there, back)) = result else {
        return Err(format!("{label}: the tunnel never came up\n{logs}"));
    };
    let line = format!(
        "{label}: there {}/{} (dup {}, reordered {}, corrupt {}), back {}/{} (dup {}, reordered {}, corrupt {}), lost {}",
        there.received,
        back.sent,
        there.duplicated,
        there.reordered,
        there.corrupted,
        back.received,
        back.sent,
        back.duplicated,
        back.reordered,
        back.corrupted,
        back.sent - back.received
    );
    if there.corrupted + back.corrupted > 0 {
        return Err(format!("{line}: corrupted"));
    }
    if back.received < back.sent / 2 {
        return Err(format!("{line}: most lost\n{logs}"));
    }
    Ok(line)
}

#[test]
fn skiff_and_real_udp2raw_both_ways() {
    let Some(bin) = binary() else {
        return skip("no udp2raw binary (UDP2RAW_BIN or ../shared/peers/bin/udp2raw)");
    };
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return skip("not root (raw sockets, network namespaces)");
    }
    if !have("ip") || !have("iptables") {
        return skip("no `ip` or `iptables`");
    }
    let mut failures = Vec::new();
    for skiff_is_client in [true, false] {
        for (raw, cipher, auth) in [
            ("faketcp", "aes128cbc", "md5"),
            ("udp", "xor", "hmac_sha1"),
            ("icmp", "aes128cfb", "crc32"),
        ] {
            match run(
                &bin,
                skiff_is_client,
                Family::V4,
                (raw, cipher, auth),
                DATAGRAMS,
            ) {
                Ok(l) => eprintln!("ok   {l}"),
                Err(e) => {
                    eprintln!("FAIL {e}");
                    failures.push(e);
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} cases failed", failures.len());
}

/// The same over IPv6 (`::1` in the namespace): Skiff's outbound `address` "::1" and
/// inbound `listen` "::1" (target "[::1]:7000") against `udp2raw -s -l [::1]:4096` and
/// `udp2raw -c -r [::1]:4096`, 2 000 datagrams each way; `ip6tables` needed for both ends'
/// rules.
#[test]
fn skiff_and_real_udp2raw_both_ways_over_ipv6() {
    let Some(bin) = binary() else {
        return skip("no udp2raw binary (UDP2RAW_BIN or ../shared/peers/bin/udp2raw)");
    };
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return skip("not root (raw sockets, network namespaces)");
    }
    if !have("ip") || !have("ip6tables") {
        return skip("no `ip` or `ip6tables`");
    }
    let mut failures = Vec::new();
    for skiff_is_client in [true, false] {
        for mode in [
            ("faketcp", "aes128cbc", "md5"),
            ("udp", "xor", "simple"),
            ("icmp", "aes128cbc", "md5"),
        ] {
            match run(&bin, skiff_is_client, Family::V6, mode, 2000) {
                Ok(l) => eprintln!("ok   {l}"),
                Err(e) => {
                    eprintln!("FAIL {e}");
                    failures.push(e);
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} cases failed", failures.len());
}

/// The `skiff_u2r_*` chains iptables lists in `ns`.
fn skiff_chains(ns: &Netns) -> Vec<String> {
    let out = Command::new("ip")
        .args(["netns", "exec", &ns.name, "iptables", "-S"])
        .output()
        .unwrap();
    let mut chains: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("-N "))
        .filter(|c| c.starts_with("skiff_u2r_"))
        .map(str::to_string)
        .collect();
    chains.sort();
    chains
}

/// The state files of runs of PID `pid` in Skiff's state directory.
fn state_files_of(pid: u32) -> Vec<String> {
    std::fs::read_dir("/run/skiff")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&format!("udp2raw-{pid}-")))
                .collect()
        })
        .unwrap_or_default()
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("timed out waiting for {what}");
}

/// `autoRule` through the skiff binary, as systemd and panels run it: the chain `skiff run`
/// adds is gone after SIGTERM; after a `kill -9` it stays, with its state file, until the
/// next `skiff run` with an `autoRule` end starts and removes it.
#[test]
fn skiff_removes_its_firewall_rules_on_sigterm_and_after_a_crash() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return skip("not root (raw sockets, network namespaces, iptables)");
    }
    if !have("ip") || !have("iptables") {
        return skip("no `ip` or `iptables`");
    }
    let mut ns = Netns::new("rules");
    let dir = std::env::temp_dir().join(format!("skiff-u2r-rules-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("server.json");
    std::fs::write(
        &config,
        r#"{ "log": { "loglevel": "info" },
  "inbounds": [{ "protocol": "udp2raw", "listen": "127.0.0.1", "port": 4096,
    "settings": { "target": "127.0.0.1:7000", "key": "rules", "autoRule": true } }],
  "outbounds": [{ "protocol": "freedom" }] }"#,
    )
    .unwrap();
    let skiff = Path::new(env!("CARGO_BIN_EXE_skiff"));
    let args = ["run".to_string(), "-c".into(), config.display().to_string()];
    let start = |ns: &mut Netns, n: usize| -> u32 {
        ns.spawn(skiff, &args, &dir.join(format!("run{n}.log")));
        ns.children.last().unwrap().id()
    };
    let only_chain_of = |ns: &Netns, pid: u32| {
        let c = skiff_chains(ns);
        c.len() == 1 && c[0].starts_with(&format!("skiff_u2r_{pid}_"))
    };

    // SIGTERM: the chain and the state file go with the process.
    let first = start(&mut ns, 1);
    wait_for("the first run's chain", || only_chain_of(&ns, first));
    assert_eq!(state_files_of(first).len(), 1);
    // SAFETY: kill on the PID of a child this test started and has not reaped.
    unsafe { libc::kill(first as i32, libc::SIGTERM) };
    let child = ns.children.last_mut().unwrap();
    wait_for("skiff to exit on SIGTERM", || {
        child.try_wait().unwrap().is_some()
    });
    assert!(child.try_wait().unwrap().unwrap().success());
    assert_eq!(skiff_chains(&ns), Vec::<String>::new(), "after SIGTERM");
    assert!(state_files_of(first).is_empty());

    // kill -9: nothing runs to remove the chain; the next start does.
    let crashed = start(&mut ns, 2);
    wait_for("the crashing run's chain", || only_chain_of(&ns, crashed));
    let child = ns.children.last_mut().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(only_chain_of(&ns, crashed), "kill -9 leaves the chain");
    assert_eq!(state_files_of(crashed).len(), 1);
    let next = start(&mut ns, 3);
    wait_for("the leftover chain replaced by the new run's", || {
        only_chain_of(&ns, next)
    });
    assert!(state_files_of(crashed).is_empty());
    // The chain is visible to iptables a moment before `Rules::install` returns and logs.
    let log_of_next = || std::fs::read_to_string(dir.join("run3.log")).unwrap_or_default();
    wait_for("the new run to log its rules", || {
        log_of_next().contains("udp2raw firewall rules added")
    });
    drop(ns);
    let _ = std::fs::remove_dir_all(&dir);
}
