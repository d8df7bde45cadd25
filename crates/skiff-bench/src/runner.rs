//! Runs one row: starts C then B (each a separate process, so each side's CPU and memory are
//! its own), warms the chain up, then measures each repeat with the bench's own source and
//! sink, and optionally idle memory per connection, latency and connection rate.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::cgroup::CpuCap;
use crate::combos::{Combination, KcpCarrier, Kind};
use crate::faketcp::Relays;
use crate::impls::{Flavor, Hops, Implementation, Role};
use crate::model::{ConnRate, IdleMemory, Latency, Row, Sample};
use crate::process::{Proc, free_port, own_cpu_s};
use crate::stats::summarize;
use crate::traffic::{self, Amount, Enter, Mode, Sink};

/// What each loopback row moves before its measured repeats.
pub const WARM_UP_BYTES: u64 = 4 << 20;

/// Which side `--cpu-limit` caps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    B,
    C,
}

#[derive(Clone, Debug)]
pub struct RowOptions {
    pub amount: Amount,
    pub mode: Mode,
    pub parallel: u32,
    pub repeats: u32,
    pub cpu_limit: Option<(f64, Side)>,
    /// Open this many idle connections and report KiB per connection on B and C.
    pub idle: Option<u32>,
    /// Measure connect + first byte this many times.
    pub latency: Option<u32>,
    /// Run this many short connections at saturation (connections per second).
    pub rate: Option<u32>,
    /// Wrap the bulk data in end-to-end TLS 1.3 (`--payload tls`).
    pub tls: Option<crate::tls::TlsPayload>,
}

impl RowOptions {
    fn client_tls(&self) -> Option<std::sync::Arc<rustls::ClientConfig>> {
        self.tls.as_ref().map(|t| t.client.clone())
    }
}

/// Where the hops live: plain loopback, or two namespaces joined by the emulated link.
#[derive(Clone)]
pub struct Place {
    /// Namespace of A and B, and of C and D (None: the current one).
    pub ns_b: Option<String>,
    pub ns_c: Option<String>,
    /// C's address as B reaches it.
    pub c_ip: IpAddr,
    /// B reaches C across the emulated link (runs are then bounded by time, not bytes).
    pub link: bool,
    /// The TCP congestion control every socket of the place uses, which Skiff is told too
    /// (its loopback rule would otherwise pick Reno); None leaves Skiff to its own rules.
    pub tcp_congestion: Option<String>,
    pub enter_b: Option<Enter>,
    pub enter_c: Option<Enter>,
}

impl Place {
    pub fn loopback() -> Place {
        Place {
            ns_b: None,
            ns_c: None,
            c_ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            link: false,
            tcp_congestion: None,
            enter_b: None,
            enter_c: None,
        }
    }

    /// All four hops on the loopback of namespace `ns` (see [`crate::fair_cc`]).
    pub fn lab(ns: &str) -> Place {
        let enter = || -> Enter {
            let ns = ns.to_string();
            std::sync::Arc::new(move || crate::link::netns::enter(&ns))
        };
        Place {
            ns_b: Some(ns.to_string()),
            ns_c: Some(ns.to_string()),
            c_ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            link: false,
            tcp_congestion: None,
            enter_b: Some(enter()),
            enter_c: Some(enter()),
        }
    }

    /// A port free in namespace `ns` (the current one when None). Chains of one row run side
    /// by side, so each needs its own ports, in a namespace as on the host.
    fn port_in(ns: &Option<String>) -> io::Result<u16> {
        match ns {
            Some(ns) => crate::link::netns::run_in(ns, free_port)?,
            None => free_port(),
        }
    }
}

/// Runs `combo` with each of `imps` (None: the raw row) and returns one row for each, in the
/// same order. All chains start first and stay up; then the repeats are taken in turns
/// ([`crate::turns`]: A B A B …), so whatever the machine does meanwhile (another build, a
/// thermal step) falls on every implementation alike rather than on whichever ran last. A
/// failure ends only its own row, as a row with an error. Rows the peer cannot run in this
/// direction never get here: the plan skips them (`crate::plan`).
pub fn run_rows(
    combo: &Combination,
    imps: &[Option<&Implementation>],
    opts: &RowOptions,
    place: &Place,
    workdir: &Path,
    progress: &dyn Fn(&str),
) -> Vec<Row> {
    let mut rows: Vec<Row> = imps
        .iter()
        .map(|imp| Row {
            combination: combo.name.to_string(),
            implementation: imp.map_or("-", |i| i.name).to_string(),
            direction: opts.mode.name().to_string(),
            parallel: opts.parallel,
            samples: Vec::new(),
            rate_runs: Vec::new(),
            summary: Default::default(),
            error: None,
        })
        .collect();
    let mut chains: Vec<Option<Chain>> = Vec::new();
    for (imp, row) in imps.iter().zip(&mut rows) {
        progress(&format!("starting {}", row.implementation));
        let started = start_chain(combo, *imp, opts, place, workdir, None)
            .and_then(|chain| warm_up(&chain, opts, place).map(|()| chain));
        chains.push(started.map_err(|e| row.error = Some(e.to_string())).ok());
    }
    for (repeat, i) in crate::turns::turns(imps.len(), opts.repeats) {
        // Ctrl-C: stop at the next turn; the caller unwinds and removes the namespaces.
        if crate::netlab::interrupted() {
            break;
        }
        let Some(chain) = &chains[i] else { continue };
        progress(&format!(
            "run {repeat}/{} · {}",
            opts.repeats, rows[i].implementation
        ));
        // The short-connection run belongs to the turn too, so its repeats alternate like
        // the bulk ones rather than all falling in one stretch after them.
        let measured = measure_once(chain, opts, place).and_then(|sample| {
            let rate = match opts.rate {
                Some(n) => Some(measure_rate(chain, n, place, progress)?),
                None => None,
            };
            Ok((sample, rate))
        });
        match measured {
            Ok((sample, rate)) => {
                rows[i].samples.push(sample);
                rows[i].rate_runs.extend(rate);
            }
            Err(e) => {
                rows[i].error = Some(e.to_string());
                chains[i] = None;
            }
        }
    }
    for ((chain, row), imp) in chains.iter().zip(&mut rows).zip(imps) {
        row.summary = summarize(&row.samples);
        if let Some((rate, spread)) = crate::stats::summarize_rate(&row.rate_runs) {
            row.summary.rate = Some(rate);
            row.summary.rate_spread = Some(spread);
        }
        let Some(chain) = chain else { continue };
        match extras(chain, imp.is_some(), opts, place, progress) {
            Ok((idle, latency)) => {
                row.summary.idle_kib_per_conn = idle;
                row.summary.latency = latency;
            }
            Err(e) => row.error = Some(e.to_string()),
        }
    }
    rows
}

/// A running A→B→C→D path. Dropping it ends the processes (by PID) and the sink.
pub struct Chain {
    pub b: Option<Proc>,
    pub c: Option<Proc>,
    /// Processes that work for B or C beside them (the real udp2raw under kcptun on a
    /// fake-TCP row): their CPU and memory count to that side.
    pub b_helper: Option<Proc>,
    pub c_helper: Option<Proc>,
    /// Where A connects.
    pub entry: SocketAddr,
    _sink: Option<Sink>,
    /// The TLS server C's REALITY borrows its handshake from, for as long as the chain runs.
    _reality_target: Option<Sink>,
    _caps: Vec<CpuCap>,
}

/// A small transfer so lazy setup (first connections, page cache) is not measured. Across an
/// emulated link it is bounded by time instead: 4 MiB at TCP cubic's 0.3 Mbit/s through 9 %
/// loss would take two minutes.
fn warm_up(chain: &Chain, opts: &RowOptions, place: &Place) -> io::Result<()> {
    let amount = if place.link {
        Amount::Duration(std::time::Duration::from_secs(2))
    } else {
        Amount::Bytes(WARM_UP_BYTES)
    };
    traffic::transfer(
        chain.entry,
        opts.mode,
        amount,
        1,
        place.enter_b.clone(),
        opts.client_tls(),
    )?;
    Ok(())
}

/// One measured repeat through `chain`.
fn measure_once(chain: &Chain, opts: &RowOptions, place: &Place) -> io::Result<Sample> {
    let before = (chain.usage_b(), chain.usage_c(), own_cpu_s());
    let t = traffic::transfer(
        chain.entry,
        opts.mode,
        opts.amount,
        opts.parallel,
        place.enter_b.clone(),
        opts.client_tls(),
    )?;
    let after = (chain.usage_b(), chain.usage_c(), own_cpu_s());
    Ok(Sample {
        bytes: t.bytes,
        seconds: t.seconds,
        mbps: t.mbps(),
        client_cpu_s: after.0.cpu_s - before.0.cpu_s,
        server_cpu_s: after.1.cpu_s - before.1.cpu_s,
        client_peak_rss_kib: after.0.peak_rss_kib,
        server_peak_rss_kib: after.1.peak_rss_kib,
        source_sink_cpu_s: after.2 - before.2,
    })
}

/// One `--rate` run of `n` short connections through `chain`, with the CPU B and C spent.
fn measure_rate(
    chain: &Chain,
    n: u32,
    place: &Place,
    progress: &dyn Fn(&str),
) -> io::Result<ConnRate> {
    progress(&format!(
        "rate × {n}, {} clients",
        traffic::RATE_CLIENTS.min(n.max(1))
    ));
    let before = (chain.usage_b(), chain.usage_c(), own_cpu_s());
    let run = traffic::rate(
        chain.entry,
        n,
        traffic::RATE_CLIENTS,
        traffic::RATE_TIME_LIMIT,
        place.enter_b.clone(),
    )?;
    let after = (chain.usage_b(), chain.usage_c(), own_cpu_s());
    if run.ttfb.is_empty() && n > 0 {
        return Err(io::Error::other(format!(
            "--rate: no connection completed ({} failed): {}",
            run.failed,
            run.first_error.as_deref().unwrap_or("time limit")
        )));
    }
    let delta = |b: f64, a: f64| (a - b).max(0.0);
    Ok(rate_figures(
        &run,
        chain
            .b
            .as_ref()
            .map(|_| delta(before.0.cpu_s, after.0.cpu_s)),
        chain
            .c
            .as_ref()
            .map(|_| delta(before.1.cpu_s, after.1.cpu_s)),
        delta(before.2, after.2),
    ))
}

/// What [`extras`] measured: idle memory, latency.
type Extras = (Option<IdleMemory>, Option<Latency>);

/// After the repeats: idle memory and latency when asked for, and a check that B and C lived
/// through it all.
fn extras(
    chain: &Chain,
    proxied: bool,
    opts: &RowOptions,
    place: &Place,
    progress: &dyn Fn(&str),
) -> io::Result<Extras> {
    let mut summary_extra = (None, None);
    if let Some(n) = opts.idle.filter(|_| proxied) {
        progress(&format!("{n} idle connections"));
        let before = (chain.usage_b(), chain.usage_c());
        let held = traffic::hold(chain.entry, n, place.enter_b.clone())?;
        std::thread::sleep(Duration::from_millis(1500));
        let after = (chain.usage_b(), chain.usage_c());
        drop(held);
        let per = |a: u64, b: u64| (a as f64 - b as f64) / f64::from(n.max(1));
        summary_extra.0 = Some(IdleMemory {
            connections: n,
            client_kib: per(after.0.rss_kib, before.0.rss_kib),
            server_kib: per(after.1.rss_kib, before.1.rss_kib),
        });
    }
    if let Some(n) = opts.latency {
        progress(&format!("latency × {n}"));
        let before = (chain.usage_b(), chain.usage_c());
        let mut ms: Vec<f64> = traffic::latency(chain.entry, n, place.enter_b.clone())?
            .iter()
            .map(|d| d.as_secs_f64() * 1e3)
            .collect();
        let after = (chain.usage_b(), chain.usage_c());
        let cpu_ms = |a: f64, b: f64| (a - b).max(0.0) * 1e3 / f64::from(n.max(1));
        ms.sort_by(f64::total_cmp);
        summary_extra.1 = Some(Latency {
            connections: n,
            p50_ms: percentile(&ms, 0.5),
            p99_ms: percentile(&ms, 0.99),
            client_cpu_ms: cpu_ms(after.0.cpu_s, before.0.cpu_s),
            server_cpu_ms: cpu_ms(after.1.cpu_s, before.1.cpu_s),
        });
    }
    for side in [&chain.b, &chain.c, &chain.b_helper, &chain.c_helper]
        .into_iter()
        .flatten()
    {
        if !side_alive(side) {
            return Err(io::Error::other(format!(
                "{} died during the run: {}",
                side.name,
                side.output_tail(3)
            )));
        }
    }
    Ok(summary_extra)
}

/// The value at quantile `q` of `sorted` (nearest rank), 0 when empty.
fn percentile(sorted: &[f64], q: f64) -> f64 {
    sorted
        .get(((sorted.len() as f64 - 1.0) * q).round() as usize)
        .copied()
        .unwrap_or(0.0)
}

/// A `--rate` run's figures, from what it did and the CPU-seconds B, C (None: not there) and
/// the bench itself spent meanwhile.
fn rate_figures(
    run: &traffic::RateRun,
    client_cpu_s: Option<f64>,
    server_cpu_s: Option<f64>,
    source_sink_cpu_s: f64,
) -> ConnRate {
    let done = run.ttfb.len() as u32;
    let per_1k = |cpu_s: f64| cpu_s * 1000.0 / f64::from(done.max(1));
    let mut ms: Vec<f64> = run.ttfb.iter().map(|d| d.as_secs_f64() * 1e3).collect();
    ms.sort_by(f64::total_cmp);
    ConnRate {
        connections: done,
        failed: run.failed,
        clients: run.clients,
        seconds: run.seconds,
        per_second: if run.seconds > 0.0 {
            f64::from(done) / run.seconds
        } else {
            0.0
        },
        ttfb_p50_ms: percentile(&ms, 0.5),
        ttfb_p99_ms: percentile(&ms, 0.99),
        client_cpu_s_per_1k: client_cpu_s.map(per_1k),
        server_cpu_s_per_1k: server_cpu_s.map(per_1k),
        source_sink_cpu_s_per_1k: per_1k(source_sink_cpu_s),
    }
}

fn side_alive(p: &Proc) -> bool {
    crate::process::usage_of(p.pid()).peak_rss_kib > 0
}

fn usage(p: &Option<Proc>) -> crate::process::Usage {
    p.as_ref().map(|p| p.usage()).unwrap_or_default()
}

impl Chain {
    /// B's usage, its helper's added.
    pub fn usage_b(&self) -> crate::process::Usage {
        usage(&self.b).plus(&usage(&self.b_helper))
    }

    /// C's usage, its helper's added.
    pub fn usage_c(&self) -> crate::process::Usage {
        usage(&self.c).plus(&usage(&self.c_helper))
    }
}

/// Starts D (our sink, unless `external_d` names another one such as iperf3), then C, then B.
pub fn start_chain(
    combo: &Combination,
    imp: Option<&Implementation>,
    opts: &RowOptions,
    place: &Place,
    workdir: &Path,
    external_d: Option<SocketAddr>,
) -> io::Result<Chain> {
    let (sink, d) = match external_d {
        Some(d) => (None, d),
        None => {
            let ip = if place.ns_c.is_some() && combo.kind == Kind::Raw {
                place.c_ip
            } else {
                IpAddr::V4(Ipv4Addr::LOCALHOST)
            };
            let server_tls = opts.tls.as_ref().map(|t| t.server.clone());
            let sink = Sink::start(SocketAddr::new(ip, 0), place.enter_c.clone(), server_tls)?;
            let d = sink.addr;
            (Some(sink), d)
        }
    };
    let (Some(imp), false) = (imp, combo.kind == Kind::Raw) else {
        // The raw row: A talks to D directly.
        return Ok(Chain {
            b: None,
            c: None,
            b_helper: None,
            c_helper: None,
            entry: d,
            _sink: sink,
            _reality_target: None,
            _caps: Vec::new(),
        });
    };
    let b_port = Place::port_in(&place.ns_b)?;
    // In one namespace (the host, or the lab) a second ask may return B's port again: B has
    // not bound it yet.
    let mut c_port = Place::port_in(&place.ns_c)?;
    for _ in 0..8 {
        if c_port != b_port || place.ns_b != place.ns_c {
            break;
        }
        c_port = Place::port_in(&place.ns_c)?;
    }
    let dir = workdir.join(format!("{}-{}", combo.name, imp.name));
    std::fs::create_dir_all(&dir)?;
    let (certificate, certificate_sha256) = if combo.kind.tls() {
        let (files, digest) = write_certificate(&dir)?;
        (Some(files), Some(digest))
    } else {
        (None, None)
    };
    // REALITY's target lives where C does: C dials it for each of B's connections.
    let reality_target = if combo.kind.reality() {
        let tls = crate::tls::TlsPayload::new().map_err(io::Error::other)?;
        let ip = if place.ns_c.is_some() {
            place.c_ip
        } else {
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        };
        Some(Sink::start(
            SocketAddr::new(ip, 0),
            place.enter_c.clone(),
            Some(tls.server),
        )?)
    } else {
        None
    };
    let relays = match combo.kind {
        Kind::Kcp {
            carrier: KcpCarrier::FakeTcp,
            ..
        } => {
            if !place.link {
                return Err(io::Error::other(format!(
                    "{} runs udp2raw's fake TCP with firewall rules: only between the --link namespaces",
                    combo.name
                )));
            }
            let loopback = |ns: &Option<String>| -> io::Result<SocketAddr> {
                Ok(SocketAddr::new(
                    IpAddr::V4(Ipv4Addr::LOCALHOST),
                    Place::port_in(ns)?,
                ))
            };
            Some(Relays {
                b: loopback(&place.ns_b)?,
                c: loopback(&place.ns_c)?,
            })
        }
        _ => None,
    };
    let hops = Hops {
        b_listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), b_port),
        c_listen: SocketAddr::new(place.c_ip, c_port),
        d,
        certificate,
        certificate_sha256,
        tcp_congestion: place.tcp_congestion.clone(),
        reality_target: reality_target.as_ref().map(|t| t.addr),
        relays,
    };
    // kcptun's fake-TCP rows run the real udp2raw beside it; Skiff runs its own in-process.
    let udp2raw = match (relays, imp.flavor) {
        (Some(_), Flavor::Kcptun) => Some(crate::udp_fec::find_udp2raw().ok_or_else(|| {
            io::Error::other(
                "udp2raw not found (UDP2RAW_BIN, PATH or ../shared/peers/bin): kcptun's fake-TCP rows need it",
            )
        })?),
        _ => None,
    };
    let start_helper = |role: Role, ns: &Option<String>| -> io::Result<Option<Proc>> {
        let Some(bin) = &udp2raw else { return Ok(None) };
        let label = match role {
            Role::Client => "b-udp2raw",
            Role::Server => "c-udp2raw",
        };
        let mut cmd = crate::impls::udp2raw_command(bin, role, &hops)
            .ok_or_else(|| io::Error::other("a fake-TCP row without relays"))?;
        if let Some(ns) = ns {
            cmd = in_namespace(cmd, ns);
        }
        let mut proc = Proc::spawn(
            &format!("udp2raw {label}"),
            cmd,
            dir.join(format!("{label}.log")),
        )?;
        std::thread::sleep(Duration::from_millis(300));
        if !proc.alive() {
            return Err(io::Error::other(format!(
                "udp2raw exited at start: {}",
                proc.output_tail(5)
            )));
        }
        Ok(Some(proc))
    };
    let mut caps = Vec::new();
    let mut start = |role: Role,
                     ns: &Option<String>,
                     listen: SocketAddr,
                     enter: &Option<Enter>|
     -> io::Result<Proc> {
        let label = match role {
            Role::Client => "b",
            Role::Server => "c",
        };
        let config = dir.join(format!("{label}.json"));
        let text = imp.config(combo, role, &hops).ok_or_else(|| {
            io::Error::other(format!("{} has no config for {}", imp.name, combo.name))
        })?;
        std::fs::write(&config, text)?;
        let mut cmd = imp.command(role, &config);
        if let Some(ns) = ns {
            cmd = in_namespace(cmd, ns);
        }
        let mut proc = Proc::spawn(
            &format!("{} {label}", imp.name),
            cmd,
            dir.join(format!("{label}.log")),
        )?;
        if let Some((percent, side)) = opts.cpu_limit {
            let wanted = match role {
                Role::Client => Side::B,
                Role::Server => Side::C,
            };
            if side == wanted {
                // One cgroup per chain: a row's chains run side by side.
                let cap = CpuCap::new(percent, &format!("{}-{label}", imp.name))?;
                cap.add(proc.pid())?;
                caps.push(cap);
            }
        }
        if role == Role::Server && combo.kind.udp() {
            // A UDP server: nothing to connect to. KCP and mKCP resend B's first packets if C
            // is a moment late, so a short pause and a liveness check are enough.
            std::thread::sleep(Duration::from_millis(300));
            if !proc.alive() {
                return Err(io::Error::other(format!("{} exited at start", imp.name)));
            }
        } else {
            wait_for_port(&mut proc, listen, enter)?;
        }
        Ok(proc)
    };
    let c_helper = start_helper(Role::Server, &place.ns_c)?;
    let c = start(Role::Server, &place.ns_c, hops.c_listen, &place.enter_c)?;
    let b_helper = start_helper(Role::Client, &place.ns_b)?;
    let b = start(Role::Client, &place.ns_b, hops.b_listen, &place.enter_b)?;
    Ok(Chain {
        b: Some(b),
        c: Some(c),
        b_helper,
        c_helper,
        entry: hops.b_listen,
        _sink: sink,
        _reality_target: reality_target,
        _caps: caps,
    })
}

/// A self-signed certificate for C, and its hex SHA-256 (B does not verify the chain:
/// allowInsecure, or for Xray 26 the pinned digest).
fn write_certificate(dir: &Path) -> io::Result<((PathBuf, PathBuf), String)> {
    use sha2::Digest;
    let certified = rcgen::generate_simple_self_signed(vec!["bench.skiff".to_string()])
        .map_err(|e| io::Error::other(format!("certificate: {e}")))?;
    let (cert, key) = (dir.join("c-cert.pem"), dir.join("c-key.pem"));
    std::fs::write(&cert, certified.cert.pem())?;
    std::fs::write(&key, certified.signing_key.serialize_pem())?;
    let digest = sha2::Sha256::digest(certified.cert.der());
    let hex = digest.iter().map(|b| format!("{b:02x}")).collect();
    Ok(((cert, key), hex))
}

/// `ip netns exec NS program args…`: exec keeps the PID, so the process is measured as itself.
fn in_namespace(cmd: Command, ns: &str) -> Command {
    let mut wrapped = Command::new("ip");
    wrapped
        .arg("netns")
        .arg("exec")
        .arg(ns)
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        if let Some(v) = v {
            wrapped.env(k, v);
        }
    }
    wrapped
}

/// Waits for `addr` to accept, connecting from the namespace `enter` puts a thread in.
fn wait_for_port(proc: &mut Proc, addr: SocketAddr, enter: &Option<Enter>) -> io::Result<()> {
    match enter {
        None => proc.wait_for_port(addr, Duration::from_secs(15)),
        Some(enter) => {
            let enter = enter.clone();
            let deadline = std::time::Instant::now() + Duration::from_secs(15);
            loop {
                let enter = enter.clone();
                let reachable = std::thread::spawn(move || {
                    enter().is_ok()
                        && std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200))
                            .is_ok()
                })
                .join()
                .unwrap_or(false);
                if reachable {
                    return Ok(());
                }
                if !proc.alive() {
                    return Err(io::Error::other(format!(
                        "{} exited: {}",
                        proc.name,
                        proc.output_tail(5)
                    )));
                }
                if std::time::Instant::now() > deadline {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("{} never listened on {addr}", proc.name),
                    ));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// A scratch directory for generated configs and logs, removed on drop.
pub struct WorkDir(pub PathBuf);

impl WorkDir {
    pub fn new() -> io::Result<WorkDir> {
        let dir = std::env::temp_dir().join(format!("skiff-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(WorkDir(dir))
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_figures_from_known_cpu() {
        // 2000 connections in 0.8 s; TTFB 1 ms … 2 ms, then one slow one at 50 ms.
        let mut ttfb: Vec<Duration> = (0..1999)
            .map(|i| Duration::from_micros(1000 + i % 1000))
            .collect();
        ttfb.push(Duration::from_millis(50));
        let run = traffic::RateRun {
            ttfb,
            failed: 3,
            first_error: Some("reset".into()),
            seconds: 0.8,
            clients: 16,
        };
        let r = rate_figures(&run, Some(0.5), Some(1.2), 0.3);
        assert_eq!((r.connections, r.failed, r.clients), (2000, 3, 16));
        assert!((r.per_second - 2500.0).abs() < 1e-9, "{}", r.per_second);
        // 0.5 CPU-s over 2000 connections: 0.25 CPU-s per 1 000; C 0.6; source and sink 0.15.
        assert!((r.client_cpu_s_per_1k.unwrap() - 0.25).abs() < 1e-12);
        assert!((r.server_cpu_s_per_1k.unwrap() - 0.6).abs() < 1e-12);
        assert!((r.source_sink_cpu_s_per_1k - 0.15).abs() < 1e-12);
        // The median is about 1.5 ms; the slow one is beyond the 99th percentile.
        assert!((r.ttfb_p50_ms - 1.5).abs() < 0.01, "{}", r.ttfb_p50_ms);
        assert!(
            r.ttfb_p99_ms > 1.9 && r.ttfb_p99_ms < 2.0,
            "{}",
            r.ttfb_p99_ms
        );

        // The raw row: no B or C to measure; an empty run divides by nothing.
        let r = rate_figures(&traffic::RateRun::default(), None, None, 0.0);
        assert_eq!((r.client_cpu_s_per_1k, r.server_cpu_s_per_1k), (None, None));
        assert_eq!((r.per_second, r.ttfb_p50_ms), (0.0, 0.0));
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), 51.0);
        assert_eq!(percentile(&v, 0.99), 99.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
    }
}
