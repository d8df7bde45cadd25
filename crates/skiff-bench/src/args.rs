//! `skiff bench` flags and their parsing into run options.

use std::path::PathBuf;
use std::time::Duration;

use crate::runner::Side;
use crate::traffic::{Amount, Mode};

#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// Bytes per run, e.g. 256M, 1G (default 1G; with --quick, 256M; with --link, 20 s runs
    /// instead).
    #[arg(short = 'n', long, value_name = "SIZE")]
    pub size: Option<String>,
    /// The TCP congestion control every hop (A, B, C, D) of every implementation uses, e.g.
    /// cubic, reno, bbr (default: the host's, /proc/sys/net/ipv4/tcp_congestion_control).
    /// Another than the host's runs the lab in a network namespace set to it (root); Skiff is
    /// told it too, so its own Reno-on-loopback rule does not decide the comparison.
    #[arg(long, value_name = "ALGO")]
    pub cc: Option<String>,
    /// Run for a duration instead of a size, e.g. 30s.
    #[arg(short = 't', long, value_name = "DURATION", conflicts_with = "size")]
    pub time: Option<String>,
    /// Parallel connections per run.
    #[arg(short = 'P', long, default_value_t = 1, value_name = "N")]
    pub parallel: u32,
    /// Repeats per row, taken in turns across the row's implementations (A B A B …); the table
    /// shows median and min–max, and calls a comparison clear only when the ranges do not
    /// overlap (default 5; with --quick, 1).
    #[arg(short = 'r', long, value_name = "N")]
    pub repeats: Option<u32>,
    /// A first look in under a minute: one 256 MiB run of each seed row (raw, tunnel,
    /// vless-tls, trojan-tls, ss-aes-128-gcm, vmess-ws-tls) with every peer found. -n, -t, -r
    /// and -f still apply. Loopback only.
    #[arg(long, conflicts_with = "link")]
    pub quick: bool,
    /// Which way the bulk data flows: upload (A→D), download (D→A) or both (default upload;
    /// with --link, download, as the reports measured lossy links).
    #[arg(short = 'd', long, value_name = "DIR")]
    pub direction: Option<String>,
    /// Payload: raw bytes, tls (bulk data inside end-to-end TLS 1.3), or tls:SIZE with records
    /// of at most SIZE bytes (512 to 16k, e.g. tls:1k, tls:4k: the record-size sweep).
    #[arg(long, default_value = "raw", value_name = "KIND")]
    pub payload: String,
    /// Only combinations whose name contains one of these comma-separated words.
    #[arg(short = 'f', long, value_name = "WORDS")]
    pub filter: Option<String>,
    /// Peers to run beside Skiff: auto (all found on PATH; Xray and sing-box also through
    /// XRAY_BIN / SING_BOX_BIN or ../shared/peers/bin), none, or a list such as
    /// v2ray,xray=/opt/xray.
    #[arg(long, default_value = "auto", value_name = "LIST")]
    pub peers: String,
    /// Cap a side's CPU with a cgroup, e.g. 15%.
    #[arg(long, value_name = "PERCENT")]
    pub cpu_limit: Option<String>,
    /// Which side --cpu-limit caps: b (proxy client) or c (proxy server).
    #[arg(long, default_value = "b", value_name = "SIDE")]
    pub cap: String,
    /// Put B and C in two network namespaces joined by an emulated link, e.g.
    /// delay=100ms,loss=9%[,rate=100mbit][,queue=N][,mtu=N][,cc=NAME] (root). cc= sets the
    /// TCP congestion control in both namespaces (cubic, bbr, or any name in
    /// /proc/sys/net/ipv4/tcp_available_congestion_control); default: the system's.
    #[arg(long, value_name = "SPEC")]
    pub link: Option<String>,
    /// Also open N idle connections per row and report KiB per connection on B and C.
    #[arg(long, value_name = "N")]
    pub idle: Option<u32>,
    /// Also measure connect + first byte over N connections (p50 / p99).
    #[arg(long, value_name = "N")]
    pub latency: Option<u32>,
    /// Also run N short connections per row (connect, 1 KiB request, 1 KiB response, close)
    /// from 16 client threads at once, and report connections per second, CPU-seconds per
    /// 1 000 connections on B and C, and p50 / p99 time from connect to the response's first
    /// byte. Raw payload; stops starting connections after 60 s.
    #[arg(long, value_name = "N")]
    pub rate: Option<u32>,
    /// Cross-check the raw and tunnel rows with iperf3 over the same path.
    #[arg(long)]
    pub iperf3: bool,
    /// Instead of the TCP rows, the UDP FEC rows (needs --link): a flow of 1000-byte
    /// datagrams at --fec-rate through Skiff's UDPspeeder-compatible pair and speederv2's
    /// (SPEEDERV2_BIN, PATH or ../shared/peers/bin) with `-f X:Y` (e.g. 20:10), in turns,
    /// echoed back: the application's loss, round trip p50/p99, link bytes per payload byte
    /// and CPU per GiB. -t sets each run's length (default 20s), -r the runs (default 3).
    #[arg(long, value_name = "X:Y")]
    pub udp_fec: Option<String>,
    /// Datagrams per second of the --udp-fec flow. The default, 5 MB/s of 1000-byte
    /// datagrams, is about the bulk rate the lossy-link report's UDPspeeder row moved
    /// (4.9 MB/s); 1000 is closer to a game or a call.
    #[arg(long, value_name = "N", default_value_t = 5000)]
    pub fec_rate: u32,
    /// Carry the --udp-fec tunnel over udp2raw's fake TCP (the report's "UDPspeeder over
    /// udp2raw"): Skiff's own udp2raw ends in the same processes, or the real udp2raw
    /// (UDP2RAW_BIN, PATH or ../shared/peers/bin) beside speederv2, its CPU counted to its side.
    #[arg(long, requires = "udp_fec")]
    pub fec_faketcp: bool,
    /// Also run Skiff with `skiff run --threads N` in the --udp-fec rows, a row of its own
    /// beside the default (one worker per core) and speederv2 (one thread), in turns.
    #[arg(long, value_name = "N", requires = "udp_fec",
          value_parser = clap::value_parser!(u16).range(1..))]
    pub skiff_threads: Option<u16>,
    /// Write results.json, results.md and chart.svg here.
    #[arg(short = 'o', long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print ratios against an earlier results.json.
    #[arg(long, value_name = "OLD.json")]
    pub compare: Option<PathBuf>,
    /// List the combinations and the peers found, then exit.
    #[arg(long)]
    pub list: bool,
    /// The skiff binary to run as B and C (default: this one).
    #[arg(long, value_name = "PATH")]
    pub skiff: Option<PathBuf>,
}

/// Bytes per run with `--quick`. B's and C's CPU time comes in 10 ms ticks, so 256 MiB
/// resolves CPU-s/GiB to 0.04 (64 MiB only to 0.16, and a fast row often read 0).
pub const QUICK_BYTES: u64 = 256 << 20;

/// Repeats per row by default: with five runs each, two implementations whose figures come
/// from one distribution have non-overlapping ranges by chance only 2 times in 252 (see
/// [`crate::verdict`]), so a clear win means something; noise here is ±15 %.
pub const DEFAULT_REPEATS: u32 = 5;

/// Parses sizes such as 512K, 256M, 1G, 1.5G, 1000000 (binary multiples).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a size (e.g. 256M, 1G)"))?;
    let mult = match unit
        .trim()
        .to_ascii_lowercase()
        .trim_end_matches("ib")
        .trim_end_matches('b')
    {
        "" => 1u64,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        "t" => 1 << 40,
        _ => return Err(format!("`{text}`: unknown size unit (K, M, G)")),
    };
    let bytes = value * mult as f64;
    if !(1.0..=1e15).contains(&bytes) {
        return Err(format!("`{text}` is out of range"));
    }
    Ok(bytes as u64)
}

/// Parses durations such as 30s, 500ms, 2m.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a duration (e.g. 30s)"))?;
    let secs = match unit.trim() {
        "" | "s" => value,
        "ms" => value / 1e3,
        "us" => value / 1e6,
        "m" | "min" => value * 60.0,
        _ => return Err(format!("`{text}`: unknown duration unit (ms, s, m)")),
    };
    if !(0.0..=86_400.0).contains(&secs) || secs == 0.0 {
        return Err(format!("`{text}` is out of range"));
    }
    Ok(Duration::from_secs_f64(secs))
}

impl BenchArgs {
    pub fn amount(&self) -> Result<Amount, String> {
        match (&self.size, &self.time) {
            (_, Some(t)) => Ok(Amount::Duration(parse_duration(t)?)),
            (Some(s), None) => Ok(Amount::Bytes(parse_size(s)?)),
            // A lossy link may carry well under 1 Mbit/s: bound the run by time, not size.
            (None, None) if self.link.is_some() => Ok(Amount::Duration(Duration::from_secs(20))),
            (None, None) if self.quick => Ok(Amount::Bytes(QUICK_BYTES)),
            (None, None) => Ok(Amount::Bytes(1 << 30)),
        }
    }

    /// Repeats per row: `-r`, else 1 with `--quick`, else [`DEFAULT_REPEATS`].
    pub fn repeats(&self) -> u32 {
        match self.repeats {
            Some(n) => n,
            None if self.quick => 1,
            None => DEFAULT_REPEATS,
        }
    }

    pub fn mode(&self) -> Result<Mode, String> {
        match &self.direction {
            Some(d) => Mode::parse(d)
                .ok_or_else(|| format!("--direction `{d}`: expected upload, download or both")),
            // Timed downloads are measured where the bytes arrive (A), exact even when the
            // link is too slow to drain its buffers by the end of the run.
            None if self.link.is_some() => Ok(Mode::Download),
            None => Ok(Mode::Upload),
        }
    }

    pub fn side(&self) -> Result<Side, String> {
        match self.cap.to_ascii_lowercase().as_str() {
            "b" | "client" => Ok(Side::B),
            "c" | "server" => Ok(Side::C),
            other => Err(format!("--cap `{other}`: expected b or c")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_durations() {
        assert_eq!(parse_size("1G").unwrap(), 1 << 30);
        assert_eq!(parse_size("256M").unwrap(), 256 << 20);
        assert_eq!(parse_size("1.5GiB").unwrap(), 3 << 29);
        assert_eq!(parse_size("1000").unwrap(), 1000);
        assert!(parse_size("12X").is_err());
        assert!(parse_size("-1G").is_err());
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert!(parse_duration("0s").is_err());
    }
}
