//! Turning a row's repeats into the min/median/max numbers every report shows.
//!
//! Units, chosen to match the community benchmark this lab reproduces:
//! - throughput in Mbit/s, where 1 Mbit = 10^6 bits (iperf3's convention);
//! - CPU cost in CPU-seconds per GiB moved (2^30 bytes), so a cost does not depend on how many
//!   bytes a run happened to move;
//! - memory in KiB, as /proc reports it.

use crate::model::{ConnRate, RateSpread, Sample, Stat, Summary};

/// Bytes in a GiB: the unit CPU cost is normalised to.
const GIB: f64 = (1u64 << 30) as f64;

/// Min, median and max of `values`.
///
/// Values that are not finite (NaN, ±∞: a sample with zero bytes or zero seconds) are left out
/// rather than allowed to poison the result: NaN has no order, and results.json cannot hold
/// either (serde_json writes them as `null`, which then fails to read back). With nothing left,
/// every field is zero. The median of an even count is the mean of the middle two.
pub fn stat(values: &[f64]) -> Stat {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return Stat::default();
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        // Halve each before adding, so two values near f64::MAX cannot overflow to ∞.
        v[n / 2 - 1] / 2.0 + v[n / 2] / 2.0
    };
    Stat {
        min: v[0],
        median,
        max: v[n - 1],
    }
}

/// The summary of a row's repeats. Idle memory and latency are measured by separate runs, so
/// they are left `None` here for the runner to fill in.
pub fn summarize(samples: &[Sample]) -> Summary {
    let per_sample = |f: &dyn Fn(&Sample) -> f64| stat(&samples.iter().map(f).collect::<Vec<_>>());
    Summary {
        mbps: per_sample(&sample_mbps),
        client_cpu_per_gib: per_sample(&|s| cpu_per_gib(s.client_cpu_s, s.bytes)),
        server_cpu_per_gib: per_sample(&|s| cpu_per_gib(s.server_cpu_s, s.bytes)),
        source_sink_cpu_per_gib: per_sample(&|s| cpu_per_gib(s.source_sink_cpu_s, s.bytes)),
        client_peak_rss_kib: per_sample(&|s| s.client_peak_rss_kib as f64),
        server_peak_rss_kib: per_sample(&|s| s.server_peak_rss_kib as f64),
        idle_kib_per_conn: None,
        latency: None,
        rate: None,
        rate_spread: None,
    }
}

/// A row's `--rate` runs in one: the median of each per-connection figure (so one slow run
/// cannot drag the row), the totals of what was counted, and the spread a comparison needs.
/// None when there were no runs.
pub fn summarize_rate(runs: &[ConnRate]) -> Option<(ConnRate, RateSpread)> {
    let first = runs.first()?;
    let of = |f: &dyn Fn(&ConnRate) -> f64| stat(&runs.iter().map(f).collect::<Vec<_>>());
    // B and C are there in every run or in none (the raw row).
    let side = |f: &dyn Fn(&ConnRate) -> Option<f64>| {
        let values: Option<Vec<f64>> = runs.iter().map(f).collect();
        values.map(|v| stat(&v))
    };
    let spread = RateSpread {
        runs: runs.len() as u32,
        per_second: of(&|r| r.per_second),
        client_cpu_s_per_1k: side(&|r| r.client_cpu_s_per_1k),
        server_cpu_s_per_1k: side(&|r| r.server_cpu_s_per_1k),
    };
    let merged = ConnRate {
        connections: runs.iter().map(|r| r.connections).sum(),
        failed: runs.iter().map(|r| r.failed).sum(),
        clients: first.clients,
        seconds: runs.iter().map(|r| r.seconds).sum(),
        per_second: spread.per_second.median,
        ttfb_p50_ms: of(&|r| r.ttfb_p50_ms).median,
        ttfb_p99_ms: of(&|r| r.ttfb_p99_ms).median,
        client_cpu_s_per_1k: spread.client_cpu_s_per_1k.map(|s| s.median),
        server_cpu_s_per_1k: spread.server_cpu_s_per_1k.map(|s| s.median),
        source_sink_cpu_s_per_1k: of(&|r| r.source_sink_cpu_s_per_1k).median,
    };
    Some((merged, spread))
}

/// A sample's throughput. The runner's own figure is taken when it gave one (a time-bounded
/// run may measure over a window that is not exactly `seconds`); otherwise it is derived from
/// the bytes moved and the time taken.
pub fn sample_mbps(s: &Sample) -> f64 {
    if s.mbps.is_finite() && s.mbps > 0.0 {
        s.mbps
    } else {
        // NaN or ∞ when seconds is 0: `stat` then leaves the sample out.
        s.bytes as f64 * 8.0 / 1e6 / s.seconds
    }
}

/// B's and C's CPU-seconds per GiB in one repeat.
pub fn sample_cpu_per_gib(s: &Sample) -> (f64, f64) {
    (
        cpu_per_gib(s.client_cpu_s, s.bytes),
        cpu_per_gib(s.server_cpu_s, s.bytes),
    )
}

/// CPU-seconds per GiB; NaN (left out by `stat`) when nothing was moved.
fn cpu_per_gib(cpu_s: f64, bytes: u64) -> f64 {
    if bytes == 0 {
        return f64::NAN;
    }
    cpu_s * GIB / bytes as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(min: f64, median: f64, max: f64) -> Stat {
        Stat { min, median, max }
    }

    fn sample(bytes: u64, seconds: f64, mbps: f64, b_cpu: f64, c_cpu: f64) -> Sample {
        Sample {
            bytes,
            seconds,
            mbps,
            client_cpu_s: b_cpu,
            server_cpu_s: c_cpu,
            client_peak_rss_kib: 0,
            server_peak_rss_kib: 0,
            source_sink_cpu_s: 0.0,
        }
    }

    fn rate_run(per_second: f64, b: Option<f64>, failed: u32) -> ConnRate {
        ConnRate {
            connections: 1000,
            failed,
            clients: 16,
            seconds: 1000.0 / per_second,
            per_second,
            ttfb_p50_ms: 1000.0 / per_second,
            ttfb_p99_ms: 4000.0 / per_second,
            client_cpu_s_per_1k: b,
            server_cpu_s_per_1k: b.map(|b| b * 2.0),
            source_sink_cpu_s_per_1k: 0.1,
        }
    }

    #[test]
    fn rate_runs_merge_into_medians_totals_and_a_spread() {
        let runs = [
            rate_run(2000.0, Some(0.3), 0),
            rate_run(1000.0, Some(0.5), 2),
            rate_run(2500.0, Some(0.2), 1),
        ];
        let (merged, spread) = summarize_rate(&runs).unwrap();
        assert_eq!(spread.runs, 3);
        assert_eq!(spread.per_second, st(1000.0, 2000.0, 2500.0));
        assert_eq!(spread.client_cpu_s_per_1k, Some(st(0.2, 0.3, 0.5)));
        assert_eq!(spread.server_cpu_s_per_1k, Some(st(0.4, 0.6, 1.0)));
        assert_eq!(merged.per_second, 2000.0);
        assert_eq!(merged.client_cpu_s_per_1k, Some(0.3));
        // TTFB: the median of the runs' p50s (1.0, 0.5, 0.4) and p99s.
        assert_eq!(merged.ttfb_p50_ms, 0.5);
        assert_eq!(merged.ttfb_p99_ms, 2.0);
        assert_eq!((merged.connections, merged.failed), (3000, 3));
        assert!((merged.seconds - 1.9).abs() < 1e-9);
    }

    #[test]
    fn rate_runs_of_the_raw_row_have_no_sides_and_none_is_none() {
        let (merged, spread) = summarize_rate(&[rate_run(9000.0, None, 0)]).unwrap();
        assert_eq!(spread.client_cpu_s_per_1k, None);
        assert_eq!(merged.server_cpu_s_per_1k, None);
        assert!(summarize_rate(&[]).is_none());
    }

    #[test]
    fn stat_of_odd_count_takes_the_middle_value() {
        assert_eq!(stat(&[3.0, 1.0, 2.0]), st(1.0, 2.0, 3.0));
        assert_eq!(stat(&[5.0]), st(5.0, 5.0, 5.0));
    }

    #[test]
    fn stat_of_even_count_averages_the_middle_two() {
        // Sorted: 1, 2, 4, 10 → median (2 + 4) / 2 = 3.
        assert_eq!(stat(&[10.0, 2.0, 1.0, 4.0]), st(1.0, 3.0, 10.0));
        assert_eq!(stat(&[7.0, 8.0]), st(7.0, 7.5, 8.0));
    }

    #[test]
    fn stat_of_nothing_is_zero() {
        assert_eq!(stat(&[]), Stat::default());
        assert_eq!(stat(&[f64::NAN, f64::INFINITY]), Stat::default());
    }

    #[test]
    fn stat_leaves_out_non_finite_values() {
        assert_eq!(
            stat(&[f64::NAN, 4.0, f64::NEG_INFINITY, 2.0, 9.0]),
            st(2.0, 4.0, 9.0)
        );
    }

    #[test]
    fn stat_median_of_huge_values_does_not_overflow() {
        let m = f64::MAX;
        assert_eq!(stat(&[m, m]).median, m);
    }

    #[test]
    fn summarize_computes_cpu_per_gib_and_rss() {
        let gib = 1u64 << 30;
        let mut a = sample(2 * gib, 10.0, 1717.99, 1.0, 3.0);
        a.client_peak_rss_kib = 1000;
        a.server_peak_rss_kib = 3000;
        a.source_sink_cpu_s = 0.5;
        let mut b = sample(gib / 2, 4.0, 1073.74, 1.0, 0.25);
        b.client_peak_rss_kib = 2000;
        b.server_peak_rss_kib = 1000;
        b.source_sink_cpu_s = 0.5;
        let mut c = sample(gib, 5.0, 1717.99, 0.75, 1.0);
        c.client_peak_rss_kib = 1500;
        c.server_peak_rss_kib = 2000;
        c.source_sink_cpu_s = 0.125;
        let s = summarize(&[a, b, c]);
        assert_eq!(s.mbps, st(1073.74, 1717.99, 1717.99));
        // B: 1 s / 2 GiB = 0.5; 1 s / 0.5 GiB = 2; 0.75 s / 1 GiB = 0.75.
        assert_eq!(s.client_cpu_per_gib, st(0.5, 0.75, 2.0));
        // C: 3 / 2 = 1.5; 0.25 / 0.5 = 0.5; 1 / 1 = 1.
        assert_eq!(s.server_cpu_per_gib, st(0.5, 1.0, 1.5));
        // Source+sink: 0.25, 1, 0.125.
        assert_eq!(s.source_sink_cpu_per_gib, st(0.125, 0.25, 1.0));
        assert_eq!(s.client_peak_rss_kib, st(1000.0, 1500.0, 2000.0));
        assert_eq!(s.server_peak_rss_kib, st(1000.0, 2000.0, 3000.0));
        assert!(s.idle_kib_per_conn.is_none());
        assert!(s.latency.is_none());
    }

    #[test]
    fn summarize_derives_mbps_when_the_sample_has_none() {
        // 125 MB in 2 s = 1000 Mbit / 2 s = 500 Mbit/s.
        let s = summarize(&[sample(125_000_000, 2.0, 0.0, 0.0, 0.0)]);
        assert_eq!(s.mbps, st(500.0, 500.0, 500.0));
    }

    #[test]
    fn summarize_skips_samples_that_moved_nothing() {
        let gib = 1u64 << 30;
        let s = summarize(&[
            sample(0, 0.0, 0.0, 1.0, 1.0),
            sample(gib, 8.0, 1073.74, 2.0, 4.0),
        ]);
        assert_eq!(s.mbps, st(1073.74, 1073.74, 1073.74));
        assert_eq!(s.client_cpu_per_gib, st(2.0, 2.0, 2.0));
        assert_eq!(s.server_cpu_per_gib, st(4.0, 4.0, 4.0));
        // RSS is still a fact about the zero-byte sample's processes.
        assert_eq!(s.client_peak_rss_kib, st(0.0, 0.0, 0.0));
    }

    #[test]
    fn summarize_of_no_samples_is_all_zero() {
        let s = summarize(&[]);
        assert_eq!(s.mbps, Stat::default());
        assert_eq!(s.client_cpu_per_gib, Stat::default());
    }
}
