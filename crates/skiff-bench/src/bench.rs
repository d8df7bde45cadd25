//! `skiff bench` from flags to printed table: discover peers, run the matrix row by row with a
//! progress bar, print the table, write the files, compare with an earlier run.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::args::BenchArgs;
use crate::combos::{Combination, Kind};
use crate::impls::{self, Implementation};
use crate::model::{BenchRun, BinaryInfo, Machine, Row, RunOptions};
use crate::plan::{self, Plan};
use crate::report;
use crate::runner::{self, Place, RowOptions, WorkDir};
use crate::traffic::Amount;

pub fn main(args: BenchArgs) -> ExitCode {
    match run(args) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: BenchArgs) -> Result<ExitCode, String> {
    let skiff_path = match &args.skiff {
        Some(p) => p.clone(),
        None => {
            std::env::current_exe().map_err(|e| format!("cannot find the skiff binary: {e}"))?
        }
    };
    let skiff = impls::skiff(skiff_path);
    let (peers, missing) = impls::discover(&args.peers);
    for note in &missing {
        eprintln!("warning: {note}");
    }
    let plan = plan::plan(&args, &skiff, &peers)?;
    if args.list {
        print!("{}", list(&skiff, &peers, &plan::listed(&args), &plan));
        return Ok(ExitCode::SUCCESS);
    }
    if plan.combos.is_empty() {
        return Err(format!(
            "no combination matches `{}`; see --list",
            args.filter.unwrap_or_default()
        ));
    }
    let tls = crate::tls::parse_payload(&args.payload)?;
    let started = SystemTime::now();
    let (amount, mode, repeats) = (plan.amount, plan.mode, plan.repeats);
    let cpu_limit = match &args.cpu_limit {
        Some(text) => Some((crate::cgroup::parse_percent(text)?, args.side()?)),
        None => None,
    };
    if repeats == 0 || args.parallel == 0 {
        return Err("--repeats and --parallel must be at least 1".into());
    }
    let opts = RowOptions {
        amount,
        mode,
        parallel: args.parallel,
        repeats,
        cpu_limit,
        idle: args.idle,
        latency: args.latency,
        rate: args.rate,
        tls,
    };

    // One congestion control for every hop of every implementation (see crate::fair_cc).
    let link_spec = args.link.as_deref().map(crate::netlab::parse).transpose()?;
    let host_cc = crate::fair_cc::host_default().map_err(|e| format!("--cc: {e}"))?;
    let cc = crate::fair_cc::choose(
        args.cc.as_deref(),
        link_spec.as_ref().and_then(|s| s.cc.as_deref()),
        &host_cc,
    )?;
    let link = match link_spec {
        Some(spec) => Some(crate::netlab::setup(spec, &cc)?),
        None => None,
    };
    // Loopback runs stay on the host unless the algorithm differs from the host's default.
    let lab = match (&link, cc == host_cc) {
        (None, false) => Some(crate::fair_cc::Lab::up(&cc).map_err(|e| format!("--cc: {e}"))?),
        _ => None,
    };
    let mut place = match (&link, &lab) {
        (Some(link), _) => crate::netlab::place(link),
        (None, Some(lab)) => Place::lab(lab.ns()),
        (None, None) => Place::loopback(),
    };
    place.tcp_congestion = Some(cc.clone());
    let ping = link.as_ref().and_then(crate::netlab::probe);
    let workdir = WorkDir::new().map_err(|e| format!("cannot create a scratch directory: {e}"))?;
    if let Some(fec) = &args.udp_fec {
        let link = link.as_ref().ok_or("--udp-fec needs --link")?;
        return udp_fec_rows(&args, fec, link, &skiff, &workdir, ping.as_ref());
    }

    let jobs = &plan.jobs;
    let bar = progress_bar(jobs.len() as u64);
    let mut rows = Vec::new();
    // A combination's rows run together, their repeats in turns (runner::run_rows).
    for group in jobs.chunk_by(|a, b| a.combo.name == b.combo.name) {
        let combo = &group[0].combo;
        let imps: Vec<Option<&Implementation>> = group.iter().map(|j| j.imp).collect();
        let label = combo.name.to_string();
        bar.set_message(label.clone());
        let group_rows = runner::run_rows(combo, &imps, &opts, &place, &workdir.0, &|step| {
            bar.set_message(format!("{label} · {step}"));
        });
        for row in group_rows {
            if let Some(e) = &row.error {
                bar.println(format!("{label} · {}: failed: {e}", row.implementation));
            }
            rows.push(row);
            bar.inc(1);
        }
        if crate::netlab::interrupted() {
            bar.abandon_with_message("interrupted");
            return Err("interrupted; namespaces and processes were cleaned up".into());
        }
    }
    // iperf3 has no TLS payload, so its figures only compare with raw-payload rows.
    // It runs on the host's loopback, so only where the rows did too.
    if args.iperf3 && link.is_none() && lab.is_none() && opts.tls.is_none() {
        bar.set_message("iperf3 cross-check");
        rows.extend(crate::iperf::cross_check(
            &skiff,
            &plan.combos,
            &opts,
            &workdir.0,
            place.tcp_congestion.clone(),
        ));
    }
    bar.finish_and_clear();
    let link_text = link.as_ref().map(|l| {
        format!(
            "{}; {}",
            l.describe(),
            crate::netlab::measured(&l.counters(), ping.as_ref())
        )
    });

    let mut binaries = vec![BinaryInfo {
        name: "skiff".into(),
        path: skiff.client.display().to_string(),
        version: skiff.version.clone(),
    }];
    binaries.extend(peers.iter().map(|p| BinaryInfo {
        name: p.name.into(),
        path: p.server.display().to_string(),
        version: p.version.clone(),
    }));
    if args.iperf3
        && let Some(path) = crate::process::which("iperf3")
    {
        let version = impls::version_of(&path, &["--version"]);
        binaries.push(BinaryInfo {
            name: "iperf3".into(),
            path: path.display().to_string(),
            version,
        });
    }
    let run = BenchRun {
        started: skiff_core::time::rfc3339_utc(started),
        machine: machine(),
        binaries,
        options: RunOptions {
            size_bytes: match amount {
                Amount::Bytes(b) => Some(b),
                Amount::Duration(_) => None,
            },
            duration_secs: match amount {
                Amount::Duration(d) => Some(d.as_secs_f64()),
                Amount::Bytes(_) => None,
            },
            parallel: args.parallel,
            repeats,
            direction: mode.name().into(),
            payload: args.payload.clone(),
            link: link_text,
            cpu_limit: args
                .cpu_limit
                .as_ref()
                .map(|l| format!("{l} on {}", args.cap.to_ascii_lowercase())),
            tcp_congestion: Some(if lab.is_some() || args.cc.is_some() {
                cc.clone()
            } else {
                format!("{cc} (the host's default)")
            }),
        },
        rows,
        skipped: plan.skipped.clone(),
    };
    drop(link);
    drop(lab);
    println!("{}", report::terminal_table(&run));
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let written =
            report::write_all(&run, dir).map_err(|e| format!("cannot write results: {e}"))?;
        for path in written {
            println!("wrote {}", path.display());
        }
    }
    if let Some(old) = &args.compare {
        let old = report::read_json(old)?;
        println!("{}", report::compare(&old, &run));
    }
    // Last, so it is the line a reader sees when the run is done. Skipped rows are not
    // failures: a run where every row that could run did exits 0.
    if let Some(line) = report::skipped_line(&run) {
        println!("{line}");
    }
    let failed = run.rows.iter().filter(|r| r.error.is_some()).count();
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

/// `--udp-fec`: the UDP FEC rows on the link, Skiff beside speederv2, printed (and written to
/// `udp-fec.md` with --out).
fn udp_fec_rows(
    args: &BenchArgs,
    fec: &str,
    link: &crate::link::Link,
    skiff: &Implementation,
    workdir: &WorkDir,
    ping: Option<&crate::link::PingStats>,
) -> Result<ExitCode, String> {
    use crate::udp_fec::{self, FecImpl, FecOptions};
    let valid = fec.split(',').all(|g| {
        g.split_once(':')
            .is_some_and(|(x, y)| x.parse::<u8>().is_ok() && y.parse::<u8>().is_ok())
    });
    if !valid {
        return Err(format!("--udp-fec: `{fec}` is not X:Y (e.g. 20:10)"));
    }
    let duration = match &args.time {
        Some(t) => crate::args::parse_duration(t)?,
        None => Duration::from_secs(20),
    };
    let opts = FecOptions {
        fec: fec.to_string(),
        rate: args.fec_rate.max(1),
        duration,
        udp2raw: if args.fec_faketcp {
            Some(udp_fec::find_udp2raw().ok_or(
                "--fec-faketcp: udp2raw not found (UDP2RAW_BIN, PATH or ../shared/peers/bin)",
            )?)
        } else {
            None
        },
    };
    let mut imps = vec![FecImpl::Skiff(skiff.client.clone(), None)];
    if let Some(n) = args.skiff_threads {
        imps.push(FecImpl::Skiff(skiff.client.clone(), Some(n)));
    }
    match udp_fec::find_speederv2() {
        Some(path) if args.peers != "none" => imps.push(FecImpl::Speederv2(path)),
        Some(_) => {}
        None => eprintln!(
            "warning: speederv2 not found (SPEEDERV2_BIN, PATH or ../shared/peers/bin): Skiff runs alone"
        ),
    }
    let repeats = args.repeats.unwrap_or(3).max(1);
    let bar = progress_bar(u64::from(repeats) * imps.len() as u64);
    let rows = udp_fec::run_rows(&imps, link, &opts, repeats, &workdir.0, &|step| {
        bar.set_message(step.to_string());
        bar.inc(1);
    });
    bar.finish_and_clear();
    if crate::netlab::interrupted() {
        return Err("interrupted; namespaces and processes were cleaned up".into());
    }
    let mut text = format!(
        "UDP FEC rows: -f {fec}, mode 0{}, a {} B datagram flow at {}/s for {:?} per run, echoed back; {}; {}\n\n",
        if opts.udp2raw.is_some() {
            ", over udp2raw's fake TCP (aes128cbc, md5)"
        } else {
            ", over UDP"
        },
        udp_fec::DATAGRAM,
        opts.rate,
        opts.duration,
        link.describe(),
        crate::netlab::measured(&link.counters(), ping),
    );
    text.push_str(&udp_fec::table(&rows, link.spec().delay * 2));
    println!("{text}");
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let path = dir.join("udp-fec.md");
        std::fs::write(&path, &text)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        println!("wrote {}", path.display());
    }
    let failed = rows.iter().any(|(_, r)| r.is_err());
    Ok(if failed {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

fn progress_bar(len: u64) -> ProgressBar {
    let bar = ProgressBar::new(len);
    if std::io::stderr().is_terminal() {
        bar.set_draw_target(ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {wide_msg}",
        ) {
            bar.set_style(style);
        }
        bar.enable_steady_tick(Duration::from_millis(200));
    } else {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    bar
}

/// What `--list` prints: each combination with who runs it (a peer that would be skipped in
/// this direction is marked so, and so is a combination the run leaves out until `--link`
/// is given), then the implementations found and the peers not found.
pub fn list(
    skiff: &Implementation,
    peers: &[Implementation],
    combos: &[Combination],
    plan: &Plan<'_>,
) -> String {
    let mut out = String::from("Combinations:\n");
    let mut needs_link = false;
    for c in combos {
        let who = if c.kind == Kind::Raw {
            "(no proxy)".to_string()
        } else {
            std::iter::once(skiff)
                .chain(peers.iter())
                .filter(|i| i.supports(c))
                .map(|i| {
                    let skipped = plan
                        .skipped
                        .iter()
                        .any(|s| s.combination == c.name && s.implementation == i.name);
                    if skipped {
                        format!(
                            "{} (not supported by this peer in {})",
                            i.name,
                            plan.mode.name()
                        )
                    } else {
                        i.name.to_string()
                    }
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        let left_out = !plan.combos.iter().any(|p| p.name == c.name);
        needs_link |= left_out;
        let mark = if left_out { " (needs --link)" } else { "" };
        out.push_str(&format!("  {:<16} {}  [{}]{mark}\n", c.name, c.about, who));
    }
    if needs_link {
        out.push_str(
            "  (needs --link): made for lossy links, so plain runs leave it out; it runs with \
             --link SPEC, or on loopback when named with -f\n",
        );
    }
    out.push_str("\nImplementations:\n");
    out.push_str(&format!(
        "  {:<10} {}  ({})\n",
        "skiff",
        skiff.client.display(),
        skiff.version
    ));
    for p in peers {
        out.push_str(&format!(
            "  {:<10} {}  ({})\n",
            p.name,
            p.server.display(),
            p.version
        ));
    }
    let absent: Vec<&str> = impls::peer_names()
        .into_iter()
        .filter(|n| !peers.iter().any(|p| p.name == *n))
        .collect();
    if !absent.is_empty() {
        out.push_str(&format!("  not found: {}\n", absent.join(", ")));
    }
    out
}

fn machine() -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu_model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    let memory_kib = std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    Machine {
        cpu_model,
        cores: std::thread::available_parallelism()
            .map(|n| n.get() as u32)
            .unwrap_or(1),
        memory_kib,
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim()
            .to_string(),
    }
}

/// Rows whose combination and implementation match, for tests and the README.
pub fn find<'a>(rows: &'a [Row], combination: &str, implementation: &str) -> Option<&'a Row> {
    rows.iter()
        .find(|r| r.combination == combination && r.implementation == implementation)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::fixture::{args, ci_peers, skiff};

    fn list_for(flags: &[&str]) -> String {
        let (skiff, peers) = (skiff(), ci_peers());
        let args = args(flags);
        let plan = plan::plan(&args, &skiff, &peers).unwrap();
        list(&skiff, &peers, &plan::listed(&args), &plan)
    }

    fn line<'a>(list: &'a str, combination: &str) -> &'a str {
        list.lines()
            .find(|l| l.trim_start().starts_with(&format!("{combination} ")))
            .unwrap_or_else(|| panic!("no {combination} line in\n{list}"))
    }

    #[test]
    fn list_shows_udp_rows_marked_as_needing_a_link() {
        let plain = list_for(&[]);
        for udp in ["kcp", "kcp-w2048", "kcp-fast3", "mkcp"] {
            assert!(line(&plain, udp).ends_with("(needs --link)"), "{plain}");
        }
        assert!(line(&plain, "kcp").contains("[skiff, kcptun]"));
        assert!(!line(&plain, "tunnel").contains("needs --link"));
        assert!(plain.contains("(needs --link): made for lossy links"));
        // Named with -f they run on loopback, so they are not marked.
        let named = list_for(&["-f", "kcp,mkcp"]);
        assert!(!named.contains("needs --link"), "{named}");
        assert!(line(&named, "mkcp").contains("[skiff, v2ray]"));
    }

    #[test]
    fn list_marks_peers_the_run_would_skip() {
        let up = list_for(&["-f", "ss-aes"]);
        assert!(
            line(&up, "ss-aes-128-gcm").contains("ss-libev (not supported by this peer in upload)"),
            "{up}"
        );
        let down = list_for(&["-f", "ss-aes", "-d", "download"]);
        assert!(!down.contains("not supported"), "{down}");
        assert!(line(&down, "ss-aes-128-gcm").contains("ss-libev"));
    }
}
