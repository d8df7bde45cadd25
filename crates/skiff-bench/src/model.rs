//! The results of a bench run: what results.json holds and every report is drawn from.

use serde::{Deserialize, Serialize};

/// One whole `skiff bench` run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BenchRun {
    /// UTC, `YYYY-MM-DDThh:mm:ssZ`.
    pub started: String,
    pub machine: Machine,
    /// Every binary that took part, with the version it reported.
    pub binaries: Vec<BinaryInfo>,
    pub options: RunOptions,
    pub rows: Vec<Row>,
    /// Rows left out before the run because the peer cannot run them as asked (absent from
    /// results.json written before they were recorded).
    #[serde(default)]
    pub skipped: Vec<Skipped>,
}

/// A combination a peer speaks but cannot run in this run's direction, so it was not run.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Skipped {
    pub combination: String,
    pub implementation: String,
    pub direction: String,
    /// Why, in the peer's words, e.g. "ss-libev has no TCP half-close …".
    pub reason: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Machine {
    pub cpu_model: String,
    pub cores: u32,
    pub memory_kib: u64,
    pub kernel: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BinaryInfo {
    /// Implementation name as used in rows: "skiff", "v2ray", "xray", "sing-box", "trojan",
    /// "ss-libev", "ss-rust", "kcptun", plus tools such as "iperf3".
    pub name: String,
    pub path: String,
    pub version: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunOptions {
    /// Bytes per run when the run is size-bounded.
    pub size_bytes: Option<u64>,
    /// Seconds per run when the run is time-bounded.
    pub duration_secs: Option<f64>,
    pub parallel: u32,
    pub repeats: u32,
    /// "upload", "download" or "both".
    pub direction: String,
    /// "raw" or "tls".
    pub payload: String,
    /// The emulated link with the TCP congestion control its namespaces use, e.g.
    /// "delay=100ms,loss=9%,cc=cubic", or ",cc=bbr (default)" when not chosen; if any.
    pub link: Option<String>,
    /// e.g. "15% on b", if any.
    pub cpu_limit: Option<String>,
    /// The TCP congestion control every hop of every implementation used (`--cc`), e.g.
    /// "cubic"; absent from results.json written before runs chose one.
    #[serde(default)]
    pub tcp_congestion: Option<String>,
}

/// One combination run by one implementation.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Row {
    /// e.g. "raw", "tunnel", "vless-tcp", "ss-aes-128-gcm".
    pub combination: String,
    /// e.g. "skiff", "v2ray"; "-" for the raw row.
    pub implementation: String,
    pub direction: String,
    pub parallel: u32,
    pub samples: Vec<Sample>,
    /// `--rate`: one short-connection run per repeat, taken in the same turns as the bulk
    /// samples (absent from results.json written before they were).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rate_runs: Vec<ConnRate>,
    pub summary: Summary,
    /// Why the row has no samples (a failed run), if it failed.
    pub error: Option<String>,
}

/// One repeat.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Sample {
    pub bytes: u64,
    pub seconds: f64,
    pub mbps: f64,
    /// utime+stime of the client process B (the proxy client) during the transfer.
    pub client_cpu_s: f64,
    /// utime+stime of the server process C.
    pub server_cpu_s: f64,
    /// Peak RSS (VmHWM) of B and C.
    pub client_peak_rss_kib: u64,
    pub server_peak_rss_kib: u64,
    /// CPU the traffic source and sink spent (to show they were not the bottleneck).
    pub source_sink_cpu_s: f64,
}

#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Stat {
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Summary {
    pub mbps: Stat,
    pub client_cpu_per_gib: Stat,
    pub server_cpu_per_gib: Stat,
    pub client_peak_rss_kib: Stat,
    pub server_peak_rss_kib: Stat,
    pub source_sink_cpu_per_gib: Stat,
    /// KiB per idle connection on B and on C, when measured (`--idle N`).
    pub idle_kib_per_conn: Option<IdleMemory>,
    /// Connect + first byte through the chain, when measured (`--latency`).
    pub latency: Option<Latency>,
    /// Short connections at saturation, when measured (`--rate N`; absent from results.json
    /// written before it was). Over several runs: the median of each figure, and the totals
    /// of connections, failures and seconds.
    #[serde(default)]
    pub rate: Option<ConnRate>,
    /// How far the `--rate` runs spread (absent when there was one run, as before they were
    /// taken in turns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_spread: Option<RateSpread>,
}

/// Min, median and max over a row's `--rate` runs of the figures a comparison reads.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq)]
pub struct RateSpread {
    pub runs: u32,
    pub per_second: Stat,
    /// None on the raw row, which has no B or C.
    pub client_cpu_s_per_1k: Option<Stat>,
    pub server_cpu_s_per_1k: Option<Stat>,
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq)]
pub struct IdleMemory {
    pub connections: u32,
    pub client_kib: f64,
    pub server_kib: f64,
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq)]
pub struct Latency {
    pub connections: u32,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// CPU milliseconds B and C spent per connection while the latency probes ran: each is a
    /// connection set up and torn down, so for TLS-like rows mostly a handshake. 1000 over
    /// C's figure is the connections one core of the server could take per second.
    #[serde(default)]
    pub client_cpu_ms: f64,
    #[serde(default)]
    pub server_cpu_ms: f64,
}

/// `--rate N`: N short connections through the chain, each connect, a 1 KiB request, a 1 KiB
/// response, close, from several client threads at once so that the chain, not the source,
/// is the limit.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq)]
pub struct ConnRate {
    /// Connections that completed (the run stops early at its time limit).
    pub connections: u32,
    /// Connections that failed (refused, reset, timed out, short answer).
    pub failed: u32,
    /// Client threads that ran at once.
    pub clients: u32,
    /// Wall time of the whole run.
    pub seconds: f64,
    /// Completed connections per second.
    pub per_second: f64,
    /// From the start of connect to the first byte of the response.
    pub ttfb_p50_ms: f64,
    pub ttfb_p99_ms: f64,
    /// CPU-seconds B and C spent per 1 000 completed connections (None: the raw row has no
    /// B or C).
    pub client_cpu_s_per_1k: Option<f64>,
    pub server_cpu_s_per_1k: Option<f64>,
    /// CPU-seconds the bench's own source and sink spent per 1 000 connections.
    pub source_sink_cpu_s_per_1k: f64,
}
