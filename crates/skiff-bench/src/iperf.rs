//! `--iperf3`: the same raw and tunnel paths measured by iperf3 (A and D replaced by iperf3's
//! client and server), so the bench's own source and sink can be checked against an
//! independent tool. Rows come out as implementation "<name> (iperf3)".

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::combos::{Combination, Kind};
use crate::impls::Implementation;
use crate::model::{Row, Sample};
use crate::process::{Proc, free_port, which};
use crate::runner::{Place, RowOptions, start_chain};
use crate::stats::summarize;
use crate::traffic::{Amount, Mode};

/// `tcp_congestion` is the run's algorithm, which Skiff is told as in the rows it checks (the
/// cross-check runs on the host's loopback, so only when that is the host's default).
pub fn cross_check(
    skiff: &Implementation,
    combos: &[Combination],
    opts: &RowOptions,
    workdir: &Path,
    tcp_congestion: Option<String>,
) -> Vec<Row> {
    let mut rows = Vec::new();
    if which("iperf3").is_none() {
        return rows;
    }
    for combo in combos
        .iter()
        .filter(|c| matches!(c.kind, Kind::Raw | Kind::Tunnel))
    {
        let imp = (combo.kind == Kind::Tunnel).then_some(skiff);
        let name = format!("{} (iperf3)", imp.map_or("-", |i| i.name));
        let mut row = Row {
            combination: combo.name.into(),
            implementation: name,
            direction: opts.mode.name().into(),
            parallel: opts.parallel,
            samples: Vec::new(),
            rate_runs: Vec::new(),
            summary: Default::default(),
            error: None,
        };
        let place = Place {
            tcp_congestion: tcp_congestion.clone(),
            ..Place::loopback()
        };
        if let Err(e) = measure(combo, imp, opts, &place, workdir, &mut row.samples) {
            row.error = Some(e);
        }
        row.summary = summarize(&row.samples);
        rows.push(row);
    }
    rows
}

fn measure(
    combo: &Combination,
    imp: Option<&Implementation>,
    opts: &RowOptions,
    place: &Place,
    workdir: &Path,
    samples: &mut Vec<Sample>,
) -> Result<(), String> {
    let port = free_port().map_err(|e| e.to_string())?;
    let mut server = Command::new("iperf3");
    server.args(["-s", "-B", "127.0.0.1", "-p", &port.to_string()]);
    let mut server = Proc::spawn("iperf3 -s", server, workdir.join("iperf3-server.log"))
        .map_err(|e| e.to_string())?;
    let d: SocketAddr = ([127, 0, 0, 1], port).into();
    server
        .wait_for_port(d, Duration::from_secs(10))
        .map_err(|e| e.to_string())?;
    let chain =
        start_chain(combo, imp, opts, place, workdir, Some(d)).map_err(|e| e.to_string())?;
    for _ in 0..opts.repeats {
        let before = (chain.usage_b(), chain.usage_c());
        // iperf3 now and then drops a test at start-up ("control socket has closed
        // unexpectedly") while its server is still finishing the previous one: try again.
        let mut attempt = client(chain.entry, opts);
        for _ in 0..2 {
            if attempt.is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_secs(1));
            attempt = client(chain.entry, opts);
        }
        let (bytes, seconds) = attempt?;
        let after = (chain.usage_b(), chain.usage_c());
        samples.push(Sample {
            bytes,
            seconds,
            mbps: bytes as f64 * 8.0 / seconds.max(1e-9) / 1e6,
            client_cpu_s: after.0.cpu_s - before.0.cpu_s,
            server_cpu_s: after.1.cpu_s - before.1.cpu_s,
            client_peak_rss_kib: chain.usage_b().peak_rss_kib,
            server_peak_rss_kib: chain.usage_c().peak_rss_kib,
            source_sink_cpu_s: 0.0,
        });
        // iperf3's server takes a moment between tests.
        std::thread::sleep(Duration::from_millis(300));
    }
    Ok(())
}

fn client(entry: SocketAddr, opts: &RowOptions) -> Result<(u64, f64), String> {
    let mut cmd = Command::new("iperf3");
    cmd.args([
        "-c",
        &entry.ip().to_string(),
        "-p",
        &entry.port().to_string(),
        "-J",
    ]);
    cmd.args(["-P", &opts.parallel.to_string()]);
    // The same 256 KiB writes as the bench's own source, so both tools ask the same of the path.
    cmd.args(["-l", "256K"]);
    match opts.amount {
        Amount::Bytes(b) => cmd.args(["-n", &b.to_string()]),
        Amount::Duration(d) => cmd.args(["-t", &format!("{}", d.as_secs_f64().ceil())]),
    };
    match opts.mode {
        Mode::Download => {
            cmd.arg("-R");
        }
        Mode::Both => {
            cmd.arg("--bidir");
        }
        _ => {}
    }
    let out = cmd.output().map_err(|e| format!("iperf3: {e}"))?;
    let json: Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("iperf3 output: {e}"))?;
    if let Some(err) = json.get("error").and_then(Value::as_str) {
        return Err(format!("iperf3: {err}"));
    }
    let received = &json["end"]["sum_received"];
    let bytes = received["bytes"].as_u64().ok_or("iperf3: no byte count")?;
    let seconds = received["seconds"].as_f64().ok_or("iperf3: no duration")?;
    Ok((bytes, seconds))
}
