//! A small but awkward run for the report tests: a raw baseline, three proxy combinations with
//! two or three implementations each, a failed row, a skipped one, and idle/latency figures on
//! some rows only, connection-rate figures on Skiff's vless-tcp row and the raw one. Skiff and
//! Xray have five runs in vless-tcp and v2ray three, with ranges apart (a clear win); the
//! other groups have too few runs to call.

use std::path::PathBuf;

use crate::model::{
    BenchRun, BinaryInfo, ConnRate, IdleMemory, Latency, Machine, Row, RunOptions, Sample, Skipped,
    Summary,
};
use crate::stats::summarize;

const GIB: u64 = 1 << 30;

/// A row whose repeats moved 1 GiB each at the given Mbit/s, with B and C spending the given
/// CPU-seconds.
fn row(combination: &str, implementation: &str, reps: &[(f64, f64, f64)]) -> Row {
    let samples: Vec<Sample> = reps
        .iter()
        .map(|&(mbps, b_cpu, c_cpu)| Sample {
            bytes: GIB,
            seconds: GIB as f64 * 8.0 / 1e6 / mbps,
            mbps,
            client_cpu_s: b_cpu,
            server_cpu_s: c_cpu,
            client_peak_rss_kib: if implementation == "-" { 0 } else { 10_240 },
            server_peak_rss_kib: if implementation == "-" { 0 } else { 20_480 },
            source_sink_cpu_s: 0.4,
        })
        .collect();
    Row {
        combination: combination.into(),
        implementation: implementation.into(),
        direction: "upload".into(),
        parallel: 1,
        summary: summarize(&samples),
        samples,
        rate_runs: Vec::new(),
        error: None,
    }
}

fn failed(combination: &str, implementation: &str, why: &str) -> Row {
    Row {
        combination: combination.into(),
        implementation: implementation.into(),
        direction: "upload".into(),
        parallel: 1,
        samples: Vec::new(),
        rate_runs: Vec::new(),
        summary: Summary::default(),
        error: Some(why.into()),
    }
}

pub(crate) fn run() -> BenchRun {
    let mut skiff_vless = row(
        "vless-tcp",
        "skiff",
        &[
            (9400.0, 0.8, 0.9),
            (9100.0, 0.85, 0.95),
            (9650.0, 0.78, 0.88),
            (9300.0, 0.79, 0.89),
            (9500.0, 0.8, 0.9),
        ],
    );
    skiff_vless.summary.idle_kib_per_conn = Some(IdleMemory {
        connections: 1000,
        client_kib: 9.5,
        server_kib: 11.5,
    });
    skiff_vless.summary.latency = Some(Latency {
        connections: 200,
        p50_ms: 0.21,
        p99_ms: 0.9,
        client_cpu_ms: 0.12,
        server_cpu_ms: 0.15,
    });
    // Three runs in turns (the raw row below keeps the older single-run form).
    skiff_vless.rate_runs = [(2500.0, 0.25, 0.6), (2000.0, 0.3, 0.7), (2600.0, 0.2, 0.55)]
        .map(|(per_second, b, c)| ConnRate {
            connections: 2000,
            failed: 0,
            clients: 16,
            seconds: 2000.0 / per_second,
            per_second,
            ttfb_p50_ms: 1.5,
            ttfb_p99_ms: 4.2,
            client_cpu_s_per_1k: Some(b),
            server_cpu_s_per_1k: Some(c),
            source_sink_cpu_s_per_1k: 0.2,
        })
        .to_vec();
    let (rate, spread) = crate::stats::summarize_rate(&skiff_vless.rate_runs).unwrap();
    skiff_vless.summary.rate = Some(rate);
    skiff_vless.summary.rate_spread = Some(spread);
    let mut raw = row("raw", "-", &[(40000.0, 0.0, 0.0), (41000.0, 0.0, 0.0)]);
    raw.summary.rate = Some(ConnRate {
        connections: 1998,
        failed: 2,
        clients: 16,
        seconds: 0.222,
        per_second: 9000.0,
        ttfb_p50_ms: 0.3,
        ttfb_p99_ms: 0.8,
        client_cpu_s_per_1k: None,
        server_cpu_s_per_1k: None,
        source_sink_cpu_s_per_1k: 0.1,
    });
    let mut xray_vless = row(
        "vless-tcp",
        "xray",
        &[
            (7200.0, 1.6, 1.7),
            (7000.0, 1.65, 1.8),
            (7350.0, 1.55, 1.75),
            (7100.0, 1.58, 1.72),
            (7250.0, 1.62, 1.78),
        ],
    );
    xray_vless.summary.idle_kib_per_conn = Some(IdleMemory {
        connections: 1000,
        client_kib: 31.0,
        server_kib: 29.5,
    });
    BenchRun {
        started: "2025-06-01T12:00:00Z".into(),
        machine: Machine {
            cpu_model: "AMD EPYC 7B13 <test> & co".into(),
            cores: 2,
            memory_kib: 24 * 1024 * 1024,
            kernel: "6.1.0-test".into(),
        },
        binaries: vec![
            bin("skiff", "0.1.0"),
            bin("v2ray", "5.16.1"),
            bin("xray", "1.8.24"),
            bin("ss-libev", "3.3.5"),
            bin("ss-rust", "1.21.2"),
            bin("iperf3", "3.16"),
        ],
        options: RunOptions {
            size_bytes: Some(GIB),
            duration_secs: None,
            parallel: 1,
            repeats: 3,
            direction: "upload".into(),
            payload: "raw".into(),
            link: None,
            cpu_limit: None,
            tcp_congestion: Some("cubic".into()),
        },
        rows: vec![
            // The peers first in vless-tcp: the reports must still put Skiff beside them in a
            // fixed order.
            row(
                "vless-tcp",
                "v2ray",
                &[(5100.0, 2.1, 2.2), (4900.0, 2.2, 2.3), (5000.0, 2.15, 2.25)],
            ),
            skiff_vless,
            xray_vless,
            raw,
            row(
                "ss-aes-128-gcm",
                "skiff",
                &[(6100.0, 1.1, 1.2), (6000.0, 1.15, 1.25)],
            ),
            row(
                "ss-aes-128-gcm",
                "ss-libev",
                &[(6600.0, 1.0, 1.05), (6500.0, 1.02, 1.1)],
            ),
            failed(
                "ss-aes-128-gcm",
                "ss-rust",
                "server exited: status 1 | bind: address in use",
            ),
            row("tunnel", "skiff", &[(12000.0, 0.5, 0.55)]),
            row("tunnel", "v2ray", &[(8000.0, 1.2, 1.25)]),
        ],
        skipped: vec![Skipped {
            combination: "ss-chacha20".into(),
            implementation: "ss-libev".into(),
            direction: "upload".into(),
            reason: "not supported by this peer: no half-close | use -d download".into(),
        }],
    }
}

fn bin(name: &str, version: &str) -> BinaryInfo {
    BinaryInfo {
        name: name.into(),
        path: format!("/usr/local/bin/{name}"),
        version: version.into(),
    }
}

/// A fresh directory for one test, unique per process and test name.
pub(crate) fn temp_dir(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("skiff-bench-report-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
