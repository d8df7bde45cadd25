//! The UDP FEC rows of the lossy-link report (`--udp-fec X:Y`, with `--link`): what a game,
//! VoIP or VPN flow sees through a UDPspeeder tunnel. A flow of fixed-size datagrams at a
//! fixed rate goes from A through the FEC client (B) across the emulated link to the FEC
//! server (C), on to an echo (D), and back the same way. Skiff's UDPspeeder-compatible pair
//! (a `dokodemo-door` UDP inbound → `udpspeeder` outbound on B, a `udpspeeder` inbound on C)
//! and speederv2's own (`-c` on B, `-s` on C) run with the same `-f`, key, mode and timeout,
//! in turns (Skiff, speederv2, Skiff, …).
//!
//! ```text
//!  namespace b                                       namespace c
//!  A (flow) ──lo── B (FEC client) ⇄ emulated link ⇄ C (FEC server) ──lo── D (echo)
//! ```
//!
//! Reported per implementation: the datagrams the application lost (sent by A and not echoed
//! back: both directions through the tunnel, so about twice a one-way loss), the round trip
//! p50/p99 and what the tunnel added to the link's own, the link bytes per payload byte
//! (FEC's overhead, both directions), and B's and C's CPU seconds per GiB of payload.

use std::fmt::Write as _;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::faketcp::Relays;
use crate::link::{self, Link};
use crate::process::{Proc, usage_of};

/// Payload bytes of each datagram of the flow (a VoIP or game packet is smaller, a VPN's
/// larger; speederv2's default `--mtu` is 1250).
pub const DATAGRAM: usize = 1000;
/// The key both implementations are given (`-k`).
const KEY: &str = "skiff-bench";
/// How long after the last datagram the flow still waits for echoes: the link's round trip
/// plus FEC's group timeout, with room.
const DRAIN: Duration = Duration::from_secs(2);
/// How long B and C get to bind their UDP ports.
const START: Duration = Duration::from_millis(600);

/// Who runs the tunnel.
#[derive(Clone, Debug)]
pub enum FecImpl {
    /// Skiff, with `--threads N` when given (speederv2 runs on one thread).
    Skiff(PathBuf, Option<u16>),
    Speederv2(PathBuf),
}

impl FecImpl {
    pub fn name(&self) -> String {
        match self {
            FecImpl::Skiff(_, None) => "skiff".into(),
            FecImpl::Skiff(_, Some(n)) => format!("skiff --threads {n}"),
            FecImpl::Speederv2(_) => "speederv2".into(),
        }
    }

    /// The name without spaces, for file names.
    fn slug(&self) -> String {
        self.name().replace(" --threads ", "-threads-")
    }
}

/// speederv2: SPEEDERV2_BIN, PATH, or the project's `../shared/peers/bin`.
pub fn find_speederv2() -> Option<PathBuf> {
    crate::process::find_peer_bin("SPEEDERV2_BIN", "speederv2")
}

/// udp2raw: UDP2RAW_BIN, PATH, or the project's `../shared/peers/bin`.
pub fn find_udp2raw() -> Option<PathBuf> {
    crate::process::find_peer_bin("UDP2RAW_BIN", "udp2raw")
}

/// One run of the flow through one implementation.
#[derive(Clone, Debug, Default)]
pub struct FecRun {
    pub sent: u64,
    pub echoed: u64,
    /// Round trips of the echoed datagrams, ascending.
    pub rtts: Vec<Duration>,
    /// Bytes the link was handed in both directions (what B and C sent, headers included).
    pub link_bytes: u64,
    pub cpu_b_s: f64,
    pub cpu_c_s: f64,
}

impl FecRun {
    /// Datagrams sent and not echoed, in 0..=1.
    pub fn loss(&self) -> f64 {
        if self.sent == 0 {
            return 0.0;
        }
        1.0 - self.echoed as f64 / self.sent as f64
    }

    /// The round trip at quantile `q` (0..=1).
    pub fn rtt(&self, q: f64) -> Option<Duration> {
        let last = self.rtts.len().checked_sub(1)?;
        self.rtts.get((last as f64 * q).round() as usize).copied()
    }

    /// Payload carried: every datagram sent (B encodes it) and every one echoed (B decodes
    /// it), each once.
    pub fn payload_bytes(&self) -> u64 {
        (self.sent + self.echoed) * DATAGRAM as u64
    }

    /// Link bytes per payload byte.
    pub fn overhead(&self) -> f64 {
        let payload = self.payload_bytes();
        if payload == 0 {
            return 0.0;
        }
        self.link_bytes as f64 / payload as f64
    }

    fn per_gib(&self, cpu_s: f64) -> f64 {
        let gib = self.payload_bytes() as f64 / f64::from(1u32 << 30);
        if gib > 0.0 { cpu_s / gib } else { 0.0 }
    }

    pub fn cpu_b_per_gib(&self) -> f64 {
        self.per_gib(self.cpu_b_s)
    }

    pub fn cpu_c_per_gib(&self) -> f64 {
        self.per_gib(self.cpu_c_s)
    }
}

/// What the flow and the tunnel are run with.
#[derive(Clone, Debug)]
pub struct FecOptions {
    /// `-f`, e.g. "20:10".
    pub fec: String,
    /// Datagrams per second.
    pub rate: u32,
    pub duration: Duration,
    /// Carry the tunnel over udp2raw's fake TCP: the real udp2raw's path, which runs beside
    /// speederv2 (Skiff runs its own udp2raw ends in the same processes).
    pub udp2raw: Option<PathBuf>,
}

/// A UDP port free a moment ago on `ip` inside `ns`.
fn udp_port_in(link: &Link, in_b: bool, ip: IpAddr) -> io::Result<u16> {
    let bind = move || -> io::Result<u16> { Ok(UdpSocket::bind((ip, 0))?.local_addr()?.port()) };
    if in_b {
        link.run_in_b(bind)?
    } else {
        link.run_in_c(bind)?
    }
}

fn skiff_client(
    listen: u16,
    server: SocketAddr,
    echo: u16,
    faketcp: bool,
    opts: &FecOptions,
) -> String {
    let mut outbound = serde_json::json!({ "protocol": "udpspeeder", "settings": {
        "address": server.ip().to_string(), "port": server.port(),
        "fec": opts.fec, "key": KEY, "mode": 0 } });
    if faketcp {
        outbound["streamSettings"] = crate::faketcp::skiff_layer();
    }
    serde_json::json!({
        "log": { "loglevel": "warning" },
        "inbounds": [{ "listen": "127.0.0.1", "port": listen, "protocol": "dokodemo-door",
            "settings": { "address": "127.0.0.1", "port": echo, "network": "udp" } }],
        "outbounds": [outbound]
    })
    .to_string()
}

fn skiff_server(listen: SocketAddr, echo: u16, faketcp: bool, opts: &FecOptions) -> String {
    let mut inbound = serde_json::json!({ "listen": listen.ip().to_string(), "port": listen.port(),
        "protocol": "udpspeeder", "settings": {
            "target": format!("127.0.0.1:{echo}"), "fec": opts.fec, "key": KEY, "mode": 0 } });
    if faketcp {
        inbound["streamSettings"] = crate::faketcp::skiff_layer();
    }
    serde_json::json!({
        "log": { "loglevel": "warning" },
        "inbounds": [inbound],
        "outbounds": [{ "protocol": "freedom" }]
    })
    .to_string()
}

/// B (client: `listen` on loopback, tunnelling to C at `remote`) or C (server: `listen` on
/// the link, sending to D at `remote`) of one run, and on a fake-TCP run the relays.
struct Ends {
    listen: SocketAddr,
    remote: SocketAddr,
    echo: u16,
    relays: Option<Relays>,
}

/// Starts B or C of `imp` in its namespace, with the real udp2raw beside speederv2 on a
/// fake-TCP run. Skiff's client names D's port (`echo`) as its dokodemo-door destination;
/// the server's target decides.
fn start(
    imp: &FecImpl,
    link: &Link,
    dir: &Path,
    client: bool,
    ends: &Ends,
    opts: &FecOptions,
) -> io::Result<(Proc, Option<Proc>)> {
    let (ns, label) = if client {
        (link.ns_b(), "b")
    } else {
        (link.ns_c(), "c")
    };
    let Ends {
        listen,
        remote,
        echo,
        relays,
    } = *ends;
    let mut helper = None;
    let mut cmd = match imp {
        FecImpl::Skiff(path, threads) => {
            let config = dir.join(format!("{label}.json"));
            // udp2raw in the same process (`udp2rawSettings`), as speederv2 and udp2raw are
            // two processes with one loopback hop between them.
            let text = if client {
                skiff_client(listen.port(), remote, echo, relays.is_some(), opts)
            } else {
                skiff_server(listen, remote.port(), relays.is_some(), opts)
            };
            std::fs::write(&config, text)?;
            let mut cmd = link::command_in(ns, path);
            cmd.arg("run").arg("-c").arg(&config);
            if let Some(n) = threads {
                cmd.arg("--threads").arg(n.to_string());
            }
            cmd
        }
        FecImpl::Speederv2(path) => {
            let (fec_listen, fec_remote) = match (relays, client) {
                (None, _) => (listen, remote),
                (Some(r), true) => (listen, r.b),
                (Some(r), false) => (r.c, remote),
            };
            if let (Some(r), Some(udp2raw)) = (relays, &opts.udp2raw) {
                let mut cmd = link::command_in(ns, udp2raw);
                let c_listen = if client { remote } else { listen };
                cmd.args(crate::faketcp::udp2raw_args(client, c_listen, r));
                helper = Some(Proc::spawn(
                    &format!("udp2raw {label}"),
                    cmd,
                    dir.join(format!("{label}-udp2raw.log")),
                )?);
            }
            let mut cmd = link::command_in(ns, path);
            cmd.arg(if client { "-c" } else { "-s" })
                .arg("-l")
                .arg(fec_listen.to_string())
                .arg("-r")
                .arg(fec_remote.to_string())
                .args(["-f", &opts.fec, "-k", KEY, "--mode", "0"])
                .args(["--log-level", "3", "--disable-color"]);
            cmd
        }
    };
    if let FecImpl::Skiff(..) = imp {
        cmd.env("RUST_LOG", "warn");
    }
    let main = Proc::spawn(
        &format!("{} {label}", imp.name()),
        cmd,
        dir.join(format!("{label}.log")),
    )?;
    Ok((main, helper))
}

fn cpu_of(side: &(Proc, Option<Proc>)) -> f64 {
    usage_of(side.0.pid()).cpu_s + side.1.as_ref().map_or(0.0, |h| usage_of(h.pid()).cpu_s)
}

/// One run: D's echo and C in namespace c, B and the flow in namespace b.
pub fn run_once(
    imp: &FecImpl,
    link: &Link,
    opts: &FecOptions,
    workdir: &Path,
    round: usize,
) -> io::Result<FecRun> {
    let dir = workdir.join(format!("udp-fec-{}-{round}", imp.slug()));
    std::fs::create_dir_all(&dir)?;
    let localhost = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let echo = link.run_in_c(|| UdpSocket::bind((localhost, 0)))??;
    roomy(&echo);
    let echo_port = echo.local_addr()?.port();
    let c_listen = SocketAddr::new(link.addr_c(), udp_port_in(link, false, link.addr_c())?);
    let b_port = udp_port_in(link, true, localhost)?;
    let d = SocketAddr::new(localhost, echo_port);
    let relays = match opts.udp2raw {
        Some(_) => Some(Relays {
            b: SocketAddr::new(localhost, udp_port_in(link, true, localhost)?),
            c: SocketAddr::new(localhost, udp_port_in(link, false, localhost)?),
        }),
        None => None,
    };
    let server = Ends {
        listen: c_listen,
        remote: d,
        echo: echo_port,
        relays,
    };
    let mut c = start(imp, link, &dir, false, &server, opts)?;
    let b_listen = SocketAddr::new(localhost, b_port);
    let client = Ends {
        listen: b_listen,
        remote: c_listen,
        echo: echo_port,
        relays,
    };
    let mut b = start(imp, link, &dir, true, &client, opts)?;
    // udp2raw's handshake (fake TCP, then its own) takes a round trip or two of the link.
    std::thread::sleep(if relays.is_some() { START * 3 } else { START });
    for p in [&mut b.0, &mut c.0]
        .into_iter()
        .chain(b.1.as_mut())
        .chain(c.1.as_mut())
    {
        if !p.alive() {
            return Err(io::Error::other(format!(
                "{} exited: {}",
                p.name,
                p.output_tail(5)
            )));
        }
    }
    let flow = link.run_in_b(|| UdpSocket::bind((localhost, 0)))??;
    roomy(&flow);
    flow.connect((localhost, b_port))?;
    let (cpu_b0, cpu_c0) = (cpu_of(&b), cpu_of(&c));
    let link0 = link.counters();
    let stop = AtomicBool::new(false);
    let mut run = std::thread::scope(|scope| {
        scope.spawn(|| echo_until(&echo, &stop));
        let result = send_flow(&flow, opts);
        stop.store(true, Ordering::Relaxed);
        result
    })?;
    let link1 = link.counters();
    run.cpu_b_s = cpu_of(&b) - cpu_b0;
    run.cpu_c_s = cpu_of(&c) - cpu_c0;
    run.link_bytes = (link1.b_to_c.bytes_in - link0.b_to_c.bytes_in)
        + (link1.c_to_b.bytes_in - link0.c_to_b.bytes_in);
    Ok(run)
}

/// Gives a flow's own socket (A's or D's here, the udpspeeder interop test's) 4 MiB each way,
/// as net.core.rmem_max/wmem_max allow. A FEC group reaches D, and comes back to A, as a burst
/// of up to 20 datagrams; with the kernel's default of about 90 such datagrams, a few
/// milliseconds without the CPU overflowed D's socket, and those losses were the bench's own,
/// not the tunnel's.
pub fn roomy(socket: &UdpSocket) {
    use std::os::fd::AsRawFd;
    let size: libc::c_int = 4 << 20;
    for option in [libc::SO_RCVBUF, libc::SO_SNDBUF] {
        // SAFETY: setsockopt reads one c_int from a live local on a socket we own.
        unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::SOL_SOCKET,
                option,
                (&size as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
    }
}

/// D: returns each datagram to its sender until `stop`.
fn echo_until(socket: &UdpSocket, stop: &AtomicBool) {
    let _ = socket.set_read_timeout(Some(Duration::from_millis(100)));
    let mut buf = [0u8; 2048];
    while !stop.load(Ordering::Relaxed) {
        if let Ok((n, from)) = socket.recv_from(&mut buf) {
            let _ = socket.send_to(&buf[..n], from);
        }
    }
}

/// A: `rate` datagrams a second for `duration`, each with a run token and its sequence
/// number, and the echoes that come back until DRAIN after the last.
fn send_flow(socket: &UdpSocket, opts: &FecOptions) -> io::Result<FecRun> {
    // A per-run token in every datagram, so nothing else can pass for an echo.
    let clock = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let token = clock.as_nanos() as u64 ^ (u64::from(std::process::id()) << 32);
    let count = (f64::from(opts.rate) * opts.duration.as_secs_f64()) as usize;
    let interval = Duration::from_secs(1) / opts.rate.max(1);
    let mut sent_at: Vec<Instant> = Vec::with_capacity(count);
    let mut rtts: Vec<Option<Duration>> = vec![None; count];
    let mut datagram = vec![0u8; DATAGRAM];
    // The rest of the datagram: bytes that do not compress or repeat.
    for (i, b) in datagram.iter_mut().enumerate().skip(12) {
        *b = (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[1];
    }
    let mut buf = [0u8; 2048];
    let start = Instant::now();
    let mut drain_until = None;
    loop {
        if link::interrupted() {
            return Err(io::Error::new(io::ErrorKind::Interrupted, "interrupted"));
        }
        let now = Instant::now();
        let next = sent_at.len();
        let wake = if next < count {
            let due = start + interval * next as u32;
            if now >= due {
                datagram[..8].copy_from_slice(&token.to_be_bytes());
                datagram[8..12].copy_from_slice(&(next as u32).to_be_bytes());
                sent_at.push(Instant::now());
                // A refused send (ENOBUFS) is a lost datagram, not a failed run.
                let _ = socket.send(&datagram);
                continue;
            }
            due
        } else {
            let until = *drain_until.get_or_insert(now + DRAIN);
            if now >= until || rtts.iter().all(Option::is_some) {
                break;
            }
            until
        };
        socket.set_read_timeout(Some(
            (wake - now).clamp(Duration::from_micros(100), Duration::from_millis(100)),
        ))?;
        match socket.recv(&mut buf) {
            Ok(n) if n == DATAGRAM && buf[..8] == token.to_be_bytes() => {
                let arrived = Instant::now();
                let seq = u32::from_be_bytes([buf[8], buf[9], buf[10], buf[11]]) as usize;
                if let (Some(slot), Some(&t0)) = (rtts.get_mut(seq), sent_at.get(seq)) {
                    slot.get_or_insert(arrived - t0);
                }
            }
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            // ECONNREFUSED before B is listening: nothing came back for it.
            Err(_) => {}
        }
    }
    let mut echoed: Vec<Duration> = rtts.into_iter().flatten().collect();
    echoed.sort_unstable();
    Ok(FecRun {
        sent: sent_at.len() as u64,
        echoed: echoed.len() as u64,
        rtts: echoed,
        ..FecRun::default()
    })
}

/// Every implementation's runs, `repeats` each, in turns.
pub fn run_rows(
    imps: &[FecImpl],
    link: &Link,
    opts: &FecOptions,
    repeats: u32,
    workdir: &Path,
    progress: &dyn Fn(&str),
) -> Vec<(String, Result<Vec<FecRun>, String>)> {
    let mut results: Vec<(String, Result<Vec<FecRun>, String>)> =
        imps.iter().map(|i| (i.name(), Ok(Vec::new()))).collect();
    for round in 0..repeats as usize {
        for (imp, (_, result)) in imps.iter().zip(results.iter_mut()) {
            let Ok(runs) = result else { continue };
            progress(&format!("{} {}/{repeats}", imp.name(), round + 1));
            match run_once(imp, link, opts, workdir, round) {
                Ok(run) => runs.push(run),
                Err(e) => *result = Err(e.to_string()),
            }
            if link::interrupted() {
                return results;
            }
        }
    }
    results
}

fn median_min_max(mut values: Vec<f64>) -> (f64, f64, f64) {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n == 0 {
        return (0.0, 0.0, 0.0);
    }
    let median = if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    };
    (median, values[0], values[n - 1])
}

/// The rows as a Markdown table: medians with min–max over the runs. `link_rtt`: the link's
/// own round trip (twice its delay), from which "added" is measured.
pub fn table(rows: &[(String, Result<Vec<FecRun>, String>)], link_rtt: Duration) -> String {
    let mut out = String::from(
        "| implementation | runs | app loss % (round trip) | RTT p50 / p99 ms | added p50 ms | link bytes / payload byte | CPU-s/GiB B / C |\n|---|---|---|---|---|---|---|\n",
    );
    let ms = |d: Option<Duration>| d.map_or(f64::NAN, |d| d.as_secs_f64() * 1e3);
    for (name, result) in rows {
        let runs = match result {
            Ok(runs) if !runs.is_empty() => runs,
            Ok(_) => continue,
            Err(e) => {
                let _ = writeln!(out, "| {name} | failed: {e} | | | | | |");
                continue;
            }
        };
        let of = |f: &dyn Fn(&FecRun) -> f64| median_min_max(runs.iter().map(f).collect());
        let (loss, loss_min, loss_max) = of(&|r| r.loss() * 100.0);
        let (p50, ..) = of(&|r| ms(r.rtt(0.5)));
        let (p99, ..) = of(&|r| ms(r.rtt(0.99)));
        let (overhead, ..) = of(&|r| r.overhead());
        let (cpu_b, ..) = of(&|r| r.cpu_b_per_gib());
        let (cpu_c, ..) = of(&|r| r.cpu_c_per_gib());
        let sent: u64 = runs.iter().map(|r| r.sent).sum();
        let _ = writeln!(
            out,
            "| {name} | {} × {} datagrams | {loss:.3} ({loss_min:.3}–{loss_max:.3}) | {p50:.1} / {p99:.1} | {:.1} | {overhead:.2} | {cpu_b:.1} / {cpu_c:.1} |",
            runs.len(),
            sent / runs.len() as u64,
            p50 - link_rtt.as_secs_f64() * 1e3,
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runs_figures() {
        let run = FecRun {
            sent: 1000,
            echoed: 990,
            rtts: (0..990)
                .map(|i| Duration::from_millis(200 + i / 100))
                .collect(),
            link_bytes: 3_980_000,
            cpu_b_s: 0.5,
            cpu_c_s: 0.25,
        };
        assert!((run.loss() - 0.01).abs() < 1e-9);
        assert_eq!(run.rtt(0.0), Some(Duration::from_millis(200)));
        assert_eq!(run.rtt(1.0), Some(Duration::from_millis(209)));
        assert_eq!(run.payload_bytes(), 1_990_000);
        assert!((run.overhead() - 2.0).abs() < 1e-9);
        let gib = 1_990_000.0 / f64::from(1u32 << 30);
        assert!((run.cpu_b_per_gib() - 0.5 / gib).abs() < 1e-9);
        assert_eq!(FecRun::default().loss(), 0.0);
        assert_eq!(FecRun::default().rtt(0.5), None);
    }

    #[test]
    fn skiff_accepts_its_configs_over_udp_and_over_fake_tcp() {
        let opts = FecOptions {
            fec: "20:10".into(),
            rate: 1000,
            duration: Duration::from_secs(1),
            udp2raw: None,
        };
        let c_listen: SocketAddr = "10.0.0.2:1002".parse().unwrap();
        for faketcp in [false, true] {
            for text in [
                skiff_client(1001, c_listen, 1003, faketcp, &opts),
                skiff_server(c_listen, 1003, faketcp, &opts),
            ] {
                let loaded = skiff_config::load_sources(&[skiff_config::Source {
                    name: "gen.json".into(),
                    text: text.clone(),
                }]);
                assert!(loaded.is_ok(), "{text}: {loaded:?}");
            }
        }
        // Over fake TCP the FEC ends themselves carry udp2raw (`udp2rawSettings`): the client
        // names C's link address, the server listens on it.
        let b: serde_json::Value =
            serde_json::from_str(&skiff_client(1001, c_listen, 1003, true, &opts)).unwrap();
        assert_eq!(b["outbounds"][0]["settings"]["address"], "10.0.0.2");
        assert_eq!(b["outbounds"][0]["settings"]["port"], 1002);
        let layer = &b["outbounds"][0]["streamSettings"]["udp2rawSettings"];
        assert_eq!(layer["rawMode"], "faketcp");
        let c: serde_json::Value =
            serde_json::from_str(&skiff_server(c_listen, 1003, true, &opts)).unwrap();
        assert_eq!(c["inbounds"][0]["port"], 1002);
        assert_eq!(c["inbounds"][0]["settings"]["target"], "127.0.0.1:1003");
        assert_eq!(
            c["inbounds"][0]["streamSettings"],
            b["outbounds"][0]["streamSettings"]
        );
    }

    #[test]
    fn the_table_gives_medians_and_ranges() {
        let run = |echoed| FecRun {
            sent: 100,
            echoed,
            rtts: vec![Duration::from_millis(210); echoed as usize],
            link_bytes: 300_000,
            ..FecRun::default()
        };
        let rows = vec![
            ("skiff".to_string(), Ok(vec![run(100), run(99), run(98)])),
            ("speederv2".to_string(), Err("exited".to_string())),
        ];
        let text = table(&rows, Duration::from_millis(200));
        assert!(
            text.contains(
                "| skiff | 3 × 100 datagrams | 1.000 (0.000–2.000) | 210.0 / 210.0 | 10.0 |"
            ),
            "{text}"
        );
        assert!(text.contains("| speederv2 | failed: exited |"), "{text}");
    }
}
