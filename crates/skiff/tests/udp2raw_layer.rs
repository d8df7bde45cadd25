//! `streamSettings.udp2rawSettings` (udp2raw in-process under a UDP transport) through the
//! skiff binary, inside network namespaces this test creates and removes (root, `ip` and
//! `iptables` needed; the real udp2raw is UDP2RAW_BIN or `../shared/peers/bin/udp2raw`,
//! kcptun Debian's `/usr/bin/kcptun-{client,server}`; outside CI a missing one skips with a
//! printed reason, under `CI=true` it fails). Every end uses its firewall rules (`-a` /
//! `autoRule`); after SIGTERM no `skiff_u2r_*` chain may be left (iptables or ip6tables).
//!
//! - Skiff tunnel → VLESS over the kcptun network with the layer → real `udp2raw -s` →
//!   real kcptun-server → Skiff VLESS inbound → freedom → TCP echo;
//! - real kcptun-client → real `udp2raw -c` → Skiff kcptun inbound with the layer →
//!   freedom → TCP echo;
//! - Skiff ↔ Skiff: VLESS over mKCP with the layer on both ends (raw mode udp), and
//!   udpspeeder with the layer on both ends (raw mode icmp) → UDP echo, and the same over
//!   IPv6 (the server's raw side on ::1, raw mode faketcp with `ip6tables` rules).
//!
//! TCP cases send `BULK` bytes through the echo and compare SHA-256s; the UDP case sends
//! numbered, CRC-32-checked datagrams: none may be corrupted, most must come back. Two more
//! run Skiff as `nobody` without capabilities (`setpriv`): an inbound with the layer does not
//! start, an outbound's first connection fails, each saying CAP_NET_RAW.

mod common;

#[path = "common/numbered.rs"]
mod numbered;

use numbered::{check, datagram};
use std::collections::HashSet;
use std::fs::File;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{TempDir, UUID, noise};
use sha2::{Digest, Sha256};

const KEY: &str = "skiff-layer";
const BULK: usize = 4 << 20;
const DATAGRAMS: u32 = 3000;
/// Every wait in this file gives up after this long.
const LIMIT: Duration = Duration::from_secs(60);

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

fn skip(reason: &str) -> bool {
    assert!(!in_ci(), "CI=true and {reason}");
    eprintln!("SKIPPED udp2raw layer test: {reason}");
    false
}

fn have(cmd: &str) -> bool {
    Command::new(cmd)
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Root, `ip` and `iptables`: what every case needs.
fn privileged() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return skip("not root (raw sockets, network namespaces)");
    }
    if !have("ip") || !have("iptables") {
        return skip("no `ip` or `iptables`");
    }
    true
}

fn udp2raw() -> Option<PathBuf> {
    let p = std::env::var_os("UDP2RAW_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/peers/bin/udp2raw")
        });
    if p.is_file() {
        Some(p)
    } else {
        skip("no udp2raw binary (UDP2RAW_BIN or ../shared/peers/bin/udp2raw)");
        None
    }
}

fn kcptun(name: &str) -> Option<PathBuf> {
    let p = PathBuf::from(format!("/usr/bin/{name}"));
    if p.is_file() {
        Some(p)
    } else {
        skip(&format!("no {name} (apt-get install kcptun)"));
        None
    }
}

/// A network namespace and the processes started in it (stopped by PID), removed on drop.
struct Netns {
    name: String,
    dir: TempDir,
    children: Vec<(Child, String)>,
}

impl Netns {
    fn new(tag: &str) -> Netns {
        let name = format!("skiff-u2rl-{}-{tag}", std::process::id());
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
            dir: TempDir::new(&format!("u2rl-{tag}")),
            name,
            children: Vec::new(),
        };
        ns.exec("ip link set lo up");
        // ICMP mode: the kernel must not answer the echo requests itself.
        ns.exec(
            "echo 1 > /proc/sys/net/ipv4/icmp_echo_ignore_all; \
             echo 1 > /proc/sys/net/ipv6/icmp/echo_ignore_all 2>/dev/null; true",
        );
        ns
    }

    fn exec(&self, script: &str) -> String {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.name, "sh", "-c", script])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Moves the calling thread into the namespace.
    fn enter(name: &str) {
        let f = File::open(format!("/run/netns/{name}")).expect("netns");
        // SAFETY: setns on a valid fd; it changes only this thread's network namespace.
        assert_eq!(unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) }, 0);
    }

    fn spawn(&mut self, what: &str, program: &Path, args: &[String]) -> u32 {
        let log = File::create(self.dir.path().join(format!("{what}.log"))).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", &self.name])
            .arg(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let pid = child.id();
        self.children.push((child, what.to_string()));
        pid
    }

    fn skiff(&mut self, what: &str, config: serde_json::Value) -> u32 {
        let path = self.dir.path().join(format!("{what}.json"));
        std::fs::write(&path, config.to_string()).unwrap();
        self.spawn(
            what,
            Path::new(env!("CARGO_BIN_EXE_skiff")),
            &["run".into(), "-c".into(), path.display().to_string()],
        )
    }

    /// Waits until process `pid` has a `proto` ("tcp"/"udp") socket bound to `port` (its own
    /// /proc view is the namespace's).
    fn wait_bound(&self, pid: u32, proto: &str, port: u16) {
        let needle = format!(":{port:04X} ");
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            let table =
                std::fs::read_to_string(format!("/proc/{pid}/net/{proto}")).unwrap_or_default();
            if table.lines().skip(1).any(|l| {
                l.split_whitespace()
                    .nth(1)
                    .is_some_and(|a| a.ends_with(needle.trim()))
            }) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("{proto} port {port} never bound\n{}", self.logs());
    }

    fn chains(&self) -> Vec<String> {
        self.exec("iptables -S; ip6tables -S 2>/dev/null")
            .lines()
            .filter_map(|l| l.strip_prefix("-N "))
            .filter(|c| c.starts_with("skiff_u2r_"))
            .map(str::to_string)
            .collect()
    }

    /// SIGTERM to every child, then waits (bounded) for each to exit: Skiff gives live
    /// connections up to 10 s, and an outbound's tunnel (and its rules) goes after that.
    fn stop(&mut self) {
        for (c, _) in &mut self.children {
            // SAFETY: kill on the PID of a child this test started and has not reaped.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        }
        for (c, _) in &mut self.children {
            let deadline = Instant::now() + Duration::from_secs(15);
            while Instant::now() < deadline && c.try_wait().ok().flatten().is_none() {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn logs(&self) -> String {
        let mut out = String::new();
        for (_, what) in &self.children {
            let log = std::fs::read_to_string(self.dir.path().join(format!("{what}.log")))
                .unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(30).collect();
            out.push_str(&format!("--- {what} (tail)\n"));
            for l in tail.into_iter().rev() {
                out.push_str(l);
                out.push('\n');
            }
        }
        out
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        self.stop();
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// A TCP echo on 127.0.0.1:`port` in `ns`, for as long as `stop` is false.
fn tcp_echo(ns: &str, port: u16, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    let ns = ns.to_string();
    std::thread::spawn(move || {
        Netns::enter(&ns);
        let l = TcpListener::bind(("127.0.0.1", port)).unwrap();
        l.set_nonblocking(true).unwrap();
        let deadline = Instant::now() + Duration::from_secs(300);
        while !stop.load(Ordering::SeqCst) && Instant::now() < deadline {
            match l.accept() {
                Ok((mut c, _)) => {
                    c.set_nonblocking(false).unwrap();
                    c.set_read_timeout(Some(LIMIT)).unwrap();
                    std::thread::spawn(move || {
                        let mut w = c.try_clone().unwrap();
                        let _ = std::io::copy(&mut c, &mut w);
                        let _ = w.shutdown(std::net::Shutdown::Write);
                    });
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    })
}

/// Sends `BULK` bytes to 127.0.0.1:`entry` in `ns` while reading them back; Ok when the
/// SHA-256 of what came back is that of what went.
fn bulk_through(ns: &str, entry: u16) -> Result<(), String> {
    let ns = ns.to_string();
    std::thread::spawn(move || {
        Netns::enter(&ns);
        let up = noise(7, BULK);
        let want: [u8; 32] = Sha256::digest(&up).into();
        let mut conn = TcpStream::connect(("127.0.0.1", entry)).map_err(|e| e.to_string())?;
        conn.set_read_timeout(Some(LIMIT)).unwrap();
        conn.set_write_timeout(Some(LIMIT)).unwrap();
        let mut w = conn.try_clone().unwrap();
        let sender = std::thread::spawn(move || w.write_all(&up).is_ok());
        let mut hasher = Sha256::new();
        let (mut total, mut buf) = (0, vec![0u8; 64 * 1024]);
        while total < BULK {
            match conn.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    hasher.update(&buf[..n]);
                    total += n;
                }
            }
        }
        if !sender.join().unwrap() {
            return Err("upload failed".into());
        }
        if total != BULK {
            return Err(format!("{total} of {BULK} bytes came back"));
        }
        let got: [u8; 32] = hasher.finalize().into();
        (got == want)
            .then_some(())
            .ok_or_else(|| "SHA-256 differs".to_string())
    })
    .join()
    .unwrap()
}

/// Runs a TCP case: `setup` starts the ends in `ns` and returns the entry port; then `BULK`
/// bytes through the echo on 127.0.0.1:7000, SIGTERM, and no chain left.
fn tcp_case(label: &str, setup: impl FnOnce(&mut Netns) -> u16) {
    let mut ns = Netns::new(label);
    let stop = Arc::new(AtomicBool::new(false));
    let echo = tcp_echo(&ns.name, 7000, stop.clone());
    let entry = setup(&mut ns);
    let result = bulk_through(&ns.name, entry);
    stop.store(true, Ordering::SeqCst);
    echo.join().unwrap();
    ns.stop();
    let logs = ns.logs();
    let chains = ns.chains();
    assert!(result.is_ok(), "{label}: {:?}\n{logs}", result);
    assert!(
        chains.is_empty(),
        "{label}: left after SIGTERM: {chains:?}\n{logs}"
    );
    eprintln!("ok   {label}: {BULK} bytes each way, SHA-256 equal, rules removed");
}

fn u2r_args(server: bool, listen: &str, remote: &str, raw: &str) -> Vec<String> {
    let mut a: Vec<String> = vec![
        if server { "-s" } else { "-c" }.into(),
        format!("-l{listen}"),
        format!("-r{remote}"),
    ];
    for s in [
        "-k",
        KEY,
        "--raw-mode",
        raw,
        "-a",
        "--log-level",
        "3",
        "--disable-color",
    ] {
        a.push(s.into());
    }
    a
}

const KCPTUN_KEY: &str = "layer-kcptun";

fn kcptun_flags() -> Vec<String> {
    ["--key", KCPTUN_KEY, "--crypt", "aes", "--nocomp", "--quiet"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

fn layer(raw: &str) -> serde_json::Value {
    serde_json::json!({ "key": KEY, "rawMode": raw, "autoRule": true })
}

/// Skiff tunnel → VLESS over kcptun + udp2rawSettings → udp2raw -s → kcptun-server →
/// Skiff VLESS inbound (second process) → freedom → echo.
#[test]
fn kcptun_network_with_the_layer_to_real_udp2raw_and_kcptun_server() {
    if !privileged() {
        return;
    }
    let (Some(u2r), Some(kserver)) = (udp2raw(), kcptun("kcptun-server")) else {
        return;
    };
    tcp_case("kcptun-net-to-real", |ns| {
        let vless = ns.skiff(
            "skiff-vless-server",
            serde_json::json!({
                "log": { "loglevel": "warning" },
                "inbounds": [{ "listen": "127.0.0.1", "port": 7100, "protocol": "vless",
                    "settings": { "clients": [{ "id": UUID }], "decryption": "none" } }],
                "outbounds": [{ "protocol": "freedom" }]
            }),
        );
        ns.wait_bound(vless, "tcp", 7100);
        let mut args = vec![
            "-l".to_string(),
            "127.0.0.1:4000".into(),
            "-t".into(),
            "127.0.0.1:7100".into(),
        ];
        args.extend(kcptun_flags());
        let ks = ns.spawn("kcptun-server", &kserver, &args);
        ns.wait_bound(ks, "udp", 4000);
        // Nothing to wait for: its port is not in a socket table, and the client's
        // handshake is resent every second anyway.
        ns.spawn(
            "udp2raw-server",
            &u2r,
            &u2r_args(true, "127.0.0.1:4096", "127.0.0.1:4000", "faketcp"),
        );
        let client = ns.skiff(
            "skiff-client",
            serde_json::json!({
                "log": { "loglevel": "info" },
                "inbounds": [{ "listen": "127.0.0.1", "port": 3333, "protocol": "tunnel",
                    "settings": { "address": "127.0.0.1", "port": 7000 } }],
                "outbounds": [{ "protocol": "vless",
                    "settings": { "vnext": [{ "address": "127.0.0.1", "port": 4096,
                        "users": [{ "id": UUID, "encryption": "none" }] }] },
                    "streamSettings": { "network": "kcptun",
                        "kcptunSettings": { "key": KCPTUN_KEY, "crypt": "aes", "nocomp": true, "conn": 1 },
                        "udp2rawSettings": layer("faketcp") } }]
            }),
        );
        ns.wait_bound(client, "tcp", 3333);
        3333
    });
}

/// kcptun-client → udp2raw -c → Skiff kcptun inbound + udp2rawSettings → freedom → echo.
#[test]
fn real_kcptun_client_and_udp2raw_to_kcptun_inbound_with_the_layer() {
    if !privileged() {
        return;
    }
    let (Some(u2r), Some(kclient)) = (udp2raw(), kcptun("kcptun-client")) else {
        return;
    };
    tcp_case("real-to-kcptun-in", |ns| {
        let server = ns.skiff(
            "skiff-server",
            serde_json::json!({
                "log": { "loglevel": "info" },
                "inbounds": [{ "listen": "127.0.0.1", "port": 4096, "protocol": "kcptun",
                    "settings": { "target": "127.0.0.1:7000", "key": KCPTUN_KEY, "crypt": "aes",
                        "nocomp": true },
                    "streamSettings": { "udp2rawSettings": layer("faketcp") } }],
                "outbounds": [{ "protocol": "freedom" }]
            }),
        );
        ns.wait_bound(server, "udp", 4096);
        let uc = ns.spawn(
            "udp2raw-client",
            &u2r,
            &u2r_args(false, "127.0.0.1:5000", "127.0.0.1:4096", "faketcp"),
        );
        ns.wait_bound(uc, "udp", 5000);
        let mut args = vec![
            "-l".to_string(),
            "127.0.0.1:3333".into(),
            "-r".into(),
            "127.0.0.1:5000".into(),
        ];
        args.extend(kcptun_flags());
        let kc = ns.spawn("kcptun-client", &kclient, &args);
        ns.wait_bound(kc, "tcp", 3333);
        3333
    });
}

/// Skiff ↔ Skiff: VLESS over mKCP, udp2rawSettings (raw mode udp) on both ends.
#[test]
fn mkcp_with_the_layer_on_both_ends() {
    if !privileged() {
        return;
    }
    tcp_case("mkcp-both", |ns| {
        let kcp = serde_json::json!({ "mtu": 1350, "tti": 20, "uplinkCapacity": 50,
            "downlinkCapacity": 50, "congestion": false });
        let server = ns.skiff(
            "skiff-server",
            serde_json::json!({
                "log": { "loglevel": "info" },
                "inbounds": [{ "listen": "127.0.0.1", "port": 4096, "protocol": "vless",
                    "settings": { "clients": [{ "id": UUID }], "decryption": "none" },
                    "streamSettings": { "network": "kcp", "kcpSettings": kcp,
                        "udp2rawSettings": layer("udp") } }],
                "outbounds": [{ "protocol": "freedom" }]
            }),
        );
        ns.wait_bound(server, "udp", 4096);
        let client = ns.skiff(
            "skiff-client",
            serde_json::json!({
                "log": { "loglevel": "info" },
                "inbounds": [{ "listen": "127.0.0.1", "port": 3333, "protocol": "tunnel",
                    "settings": { "address": "127.0.0.1", "port": 7000 } }],
                "outbounds": [{ "protocol": "vless",
                    "settings": { "vnext": [{ "address": "127.0.0.1", "port": 4096,
                        "users": [{ "id": UUID, "encryption": "none" }] }] },
                    "streamSettings": { "network": "kcp", "kcpSettings": kcp,
                        "udp2rawSettings": layer("udp") } }]
            }),
        );
        ns.wait_bound(client, "tcp", 3333);
        3333
    });
}

/// Skiff ↔ Skiff: dokodemo-door → udpspeeder + udp2rawSettings (raw mode icmp) → udpspeeder
/// inbound + udp2rawSettings → UDP echo.
#[test]
fn udpspeeder_with_the_layer_on_both_ends() {
    udpspeeder_layer_case("speeder-both", "127.0.0.1", "icmp");
}

/// The same over IPv6: the server's raw side on ::1 (fake TCP, with ip6tables rules), the
/// client's tunnel to it.
#[test]
fn udpspeeder_with_the_layer_on_both_ends_over_ipv6() {
    if privileged() && !have("ip6tables") {
        skip("ip6tables missing");
        return;
    }
    udpspeeder_layer_case("speeder-v6", "::1", "faketcp");
}

/// Skiff's udpspeeder client and server, each with `udp2rawSettings` in `raw` mode, the
/// server's raw side on `server_ip`; numbered datagrams through them to an echo and back.
fn udpspeeder_layer_case(tag: &str, server_ip: &str, raw: &str) {
    if !privileged() {
        return;
    }
    let mut ns = Netns::new(tag);
    let speeder = serde_json::json!({ "key": "layer-fec", "fec": "20:10" });
    let mut server_settings = speeder.clone();
    server_settings["target"] = "127.0.0.1:7000".into();
    let server = ns.skiff(
        "skiff-server",
        serde_json::json!({
            "log": { "loglevel": "info" },
            "inbounds": [{ "listen": server_ip, "port": 4096, "protocol": "udpspeeder",
                "settings": server_settings,
                "streamSettings": { "udp2rawSettings": layer(raw) } }],
            "outbounds": [{ "protocol": "freedom" }]
        }),
    );
    let bound_as = if server_ip.contains(':') {
        "udp6"
    } else {
        "udp"
    };
    ns.wait_bound(server, bound_as, 4096);
    let mut client_settings = speeder.clone();
    client_settings["address"] = server_ip.into();
    client_settings["port"] = 4096.into();
    let client = ns.skiff(
        "skiff-client",
        serde_json::json!({
            "log": { "loglevel": "info" },
            "inbounds": [{ "listen": "127.0.0.1", "port": 3333, "protocol": "dokodemo-door",
                "settings": { "address": "127.0.0.1", "port": 7000, "network": "udp" } }],
            "outbounds": [{ "protocol": "udpspeeder", "settings": client_settings,
                "streamSettings": { "udp2rawSettings": layer(raw) } }]
        }),
    );
    ns.wait_bound(client, "udp", 3333);
    // The client's tunnel comes up at start, before any datagram, as `udp2raw -c` does: a
    // flow's first datagrams would otherwise be lost to the handshakes.
    let client_log = ns.dir.path().join("skiff-client.log");
    let deadline = Instant::now() + Duration::from_secs(15);
    while !std::fs::read_to_string(&client_log)
        .unwrap_or_default()
        .contains("udp2rawSettings: tunnel started")
    {
        assert!(
            Instant::now() < deadline,
            "the client's tunnel did not start before traffic\n{}",
            ns.logs()
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    let stop = Arc::new(AtomicBool::new(false));
    let (s2, name) = (stop.clone(), ns.name.clone());
    let echo = std::thread::spawn(move || {
        Netns::enter(&name);
        let s = UdpSocket::bind("127.0.0.1:7000").unwrap();
        s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        let mut buf = vec![0u8; 4096];
        let deadline = Instant::now() + Duration::from_secs(180);
        while !s2.load(Ordering::SeqCst) && Instant::now() < deadline {
            if let Ok((n, from)) = s.recv_from(&mut buf) {
                let _ = s.send_to(&buf[..n], from);
            }
        }
    });
    let name = ns.name.clone();
    // (sent, intact back, corrupted, duplicated), or None when nothing ever came back.
    let app = std::thread::spawn(move || -> Option<(u32, u32, u32, u32)> {
        Netns::enter(&name);
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.connect("127.0.0.1:3333").unwrap();
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut buf = vec![0u8; 4096];
        let probe = datagram(u32::MAX - 1);
        // The server's conversation opens on the first datagram.
        let up = (0..150).any(|_| {
            let _ = s.send(&probe);
            s.recv(&mut buf).is_ok() || {
                std::thread::sleep(Duration::from_millis(100));
                false
            }
        });
        if !up {
            return None;
        }
        s.set_read_timeout(Some(Duration::from_millis(2))).unwrap();
        let (mut sent, mut corrupt, mut dup) = (0u32, 0u32, 0u32);
        let mut seen = HashSet::new();
        let deadline = Instant::now() + LIMIT;
        let mut quiet = Instant::now();
        while Instant::now() < deadline {
            let outstanding = sent - (seen.len() as u32 + corrupt).min(sent);
            if sent < DATAGRAMS && (outstanding < 64 || quiet.elapsed() > Duration::from_millis(50))
            {
                let _ = s.send(&datagram(sent));
                sent += 1;
                quiet = Instant::now();
                continue;
            }
            match s.recv(&mut buf) {
                Ok(n) => {
                    quiet = Instant::now();
                    match check(&buf[..n]) {
                        Some(i) if i == u32::MAX - 1 => {}
                        Some(i) => {
                            if !seen.insert(i) {
                                dup += 1;
                            }
                        }
                        None => corrupt += 1,
                    }
                }
                Err(_) if sent >= DATAGRAMS && quiet.elapsed() > Duration::from_millis(500) => {
                    break;
                }
                Err(_) => {}
            }
            if seen.len() as u32 >= DATAGRAMS {
                break;
            }
        }
        Some((sent, seen.len() as u32, corrupt, dup))
    });
    let result = app.join().unwrap();
    stop.store(true, Ordering::SeqCst);
    echo.join().unwrap();
    ns.stop();
    let logs = ns.logs();
    let chains = ns.chains();
    let Some((sent, back, corrupt, dup)) = result else {
        panic!("udpspeeder over udp2raw never came up\n{logs}");
    };
    eprintln!("udpspeeder+layer {tag}: back {back}/{sent}, corrupt {corrupt}, dup {dup}");
    assert_eq!(corrupt, 0, "corrupted datagrams");
    assert!(back >= sent * 9 / 10, "most lost\n{logs}");
    assert!(chains.is_empty(), "left after SIGTERM: {chains:?}\n{logs}");
}

/// Without CAP_NET_RAW the inbound fails to start with udp2raw's plain message (run as an
/// unprivileged user in a namespace of its own).
#[test]
fn without_raw_sockets_the_start_fails_plainly() {
    if !privileged() {
        return;
    }
    let ns = Netns::new("noprivs");
    let config = ns.dir.path().join("c.json");
    std::fs::write(
        &config,
        serde_json::json!({
            "inbounds": [{ "listen": "127.0.0.1", "port": 4096, "protocol": "vless",
                "settings": { "clients": [{ "id": UUID }], "decryption": "none" },
                "streamSettings": { "network": "kcp", "udp2rawSettings": {} } }],
            "outbounds": [{ "protocol": "freedom" }]
        })
        .to_string(),
    )
    .unwrap();
    // Readable by the unprivileged user.
    let _ = Command::new("chmod")
        .args(["-R", "a+rX", &ns.dir.path().display().to_string()])
        .status();
    // setpriv drops every capability; nobody cannot open raw sockets.
    if !have("setpriv") {
        skip("no setpriv");
        return;
    }
    let out = Command::new("timeout")
        .args([
            "20",
            "ip",
            "netns",
            "exec",
            &ns.name,
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(env!("CARGO_BIN_EXE_skiff"))
        .args(["run", "-c", &config.display().to_string()])
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "started without raw sockets: {text}");
    assert!(
        text.contains("CAP_NET_RAW") && text.contains("udp2rawSettings"),
        "{text}"
    );
}

/// Without CAP_NET_RAW an outbound with the layer starts (its tunnel starts on first use),
/// and the first connection fails with udp2raw's plain message in the log.
#[test]
fn without_raw_sockets_a_connection_fails_plainly() {
    if !privileged() {
        return;
    }
    if !have("setpriv") {
        skip("no setpriv");
        return;
    }
    let mut ns = Netns::new("noprivs-out");
    let config = ns.dir.path().join("c.json");
    std::fs::write(
        &config,
        serde_json::json!({
            "log": { "loglevel": "warning" },
            "inbounds": [{ "listen": "127.0.0.1", "port": 3333, "protocol": "tunnel",
                "settings": { "address": "127.0.0.1", "port": 7000 } }],
            "outbounds": [{ "protocol": "vless",
                "settings": { "vnext": [{ "address": "127.0.0.1", "port": 4096,
                    "users": [{ "id": UUID, "encryption": "none" }] }] },
                "streamSettings": { "network": "kcp", "udp2rawSettings": { "key": KEY } } }]
        })
        .to_string(),
    )
    .unwrap();
    let _ = Command::new("chmod")
        .args(["-R", "a+rX", &ns.dir.path().display().to_string()])
        .status();
    let mut args: Vec<String> = [
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--inh-caps=-all",
        env!("CARGO_BIN_EXE_skiff"),
        "run",
        "-c",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push(config.display().to_string());
    let pid = ns.spawn("skiff-nobody", Path::new("setpriv"), &args);
    ns.wait_bound(pid, "tcp", 3333);
    let name = ns.name.clone();
    std::thread::spawn(move || {
        Netns::enter(&name);
        let mut c = TcpStream::connect("127.0.0.1:3333").unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let _ = c.write_all(b"hello");
        let mut buf = [0u8; 64];
        // Closed (or reset) once the dial fails; the timeout bounds it otherwise.
        let _ = c.read(&mut buf);
    })
    .join()
    .unwrap();
    let log_path = ns.dir.path().join("skiff-nobody.log");
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut log = String::new();
    while Instant::now() < deadline {
        log = std::fs::read_to_string(&log_path).unwrap_or_default();
        if log.contains("CAP_NET_RAW") {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        log.contains("CAP_NET_RAW") && log.contains("udp2rawSettings"),
        "{log}"
    );
}
