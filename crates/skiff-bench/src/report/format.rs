//! How numbers and run facts are written, shared by every report so the terminal table,
//! results.md and the chart never disagree about a figure.

use crate::model::{Machine, RunOptions, Skipped, Stat};

/// The implementation name of the raw row: source and sink talk directly, with no proxy.
pub(crate) const RAW: &str = "-";

/// How an implementation is named to a person ("-" means nothing to a reader).
pub(crate) fn impl_label(name: &str) -> &str {
    if name == RAW { "no proxy" } else { name }
}

/// About three significant digits: enough to compare implementations, few enough to read.
pub(crate) fn num(v: f64) -> String {
    let a = v.abs();
    if !v.is_finite() {
        "-".into()
    } else if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// Connections per second of a row's `--rate` runs: `median (min–max)` when there were
/// several, with the failures when there were any.
pub(crate) fn conn_rate(
    r: &crate::model::ConnRate,
    spread: Option<&crate::model::RateSpread>,
    dash: &str,
) -> String {
    let figure = spread.map_or_else(|| num(r.per_second), |s| median_range(&s.per_second, dash));
    if r.failed > 0 {
        format!("{figure} ({} failed)", r.failed)
    } else {
        figure
    }
}

/// CPU-seconds per 1 000 connections on one side: `median (min–max)` over the runs when
/// there were several, "-" where the side does not exist (the raw row).
pub(crate) fn rate_cpu(median: Option<f64>, spread: Option<Stat>, dash: &str) -> String {
    match (median, spread) {
        (_, Some(s)) => median_range(&s, dash),
        (Some(v), None) => num(v),
        (None, None) => "-".into(),
    }
}

/// A stat that was never measured is all zeros (e.g. the raw row has no proxy B or C to
/// measure): a report shows "-" there rather than a misleading 0.
pub(crate) fn measured(s: &Stat) -> bool {
    s.max > 0.0
}

/// `min–max` with the given dash (an en dash, or "-" where only ASCII will do).
pub(crate) fn range(s: &Stat, dash: &str) -> String {
    format!("{}{dash}{}", num(s.min), num(s.max))
}

/// `median (min–max)`, or just the median when every repeat agreed (or there was one).
pub(crate) fn median_range(s: &Stat, dash: &str) -> String {
    if num(s.min) == num(s.max) {
        num(s.median)
    } else {
        format!("{} ({})", num(s.median), range(s, dash))
    }
}

/// A KiB stat in MiB, which is how people think about a proxy's footprint.
pub(crate) fn kib_to_mib(s: &Stat) -> Stat {
    Stat {
        min: s.min / 1024.0,
        median: s.median / 1024.0,
        max: s.max / 1024.0,
    }
}

/// A byte count in the largest binary unit it reaches: whole when it divides evenly
/// ("1 GiB"), else to about three digits ("1.50 GiB").
pub(crate) fn bytes(n: u64) -> String {
    const UNITS: [(&str, u64); 4] = [
        ("TiB", 1 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ];
    match UNITS.iter().find(|(_, size)| n >= *size) {
        Some((unit, size)) if n.is_multiple_of(*size) => format!("{} {unit}", n / size),
        Some((unit, size)) => format!("{} {unit}", num(n as f64 / *size as f64)),
        None => format!("{n} B"),
    }
}

/// The run's options in one line, e.g. "1 GiB per run, 3 repeats, parallel 1, upload, raw
/// payload".
pub(crate) fn options(o: &RunOptions) -> String {
    let mut parts = Vec::new();
    if let Some(n) = o.size_bytes {
        parts.push(format!("{} per run", bytes(n)));
    }
    if let Some(s) = o.duration_secs {
        parts.push(format!("{} s per run", num(s)));
    }
    let plural = if o.repeats == 1 { "" } else { "s" };
    parts.push(format!("{} repeat{plural}", o.repeats));
    parts.push(format!("parallel {}", o.parallel));
    parts.push(o.direction.clone());
    parts.push(format!("{} payload", o.payload));
    if let Some(l) = &o.link {
        parts.push(format!("link {l}"));
    }
    if let Some(c) = &o.cpu_limit {
        parts.push(format!("CPU limit {c}"));
    }
    if let Some(cc) = &o.tcp_congestion {
        parts.push(format!("TCP {cc} for every hop"));
    }
    parts.join(", ")
}

/// The rows a run skipped, in one line, those with the same peer, direction and reason
/// together, e.g. "skipped 2 rows: ss-aes-128-gcm, ss-chacha20 with ss-libev (upload): not
/// supported by this peer: …". None when nothing was skipped.
pub(crate) fn skipped(skipped: &[Skipped]) -> Option<String> {
    if skipped.is_empty() {
        return None;
    }
    let mut groups: Vec<(&Skipped, Vec<&str>)> = Vec::new();
    for s in skipped {
        let same = |g: &Skipped| {
            g.implementation == s.implementation
                && g.direction == s.direction
                && g.reason == s.reason
        };
        match groups.iter_mut().find(|(g, _)| same(g)) {
            Some((_, combos)) => combos.push(&s.combination),
            None => groups.push((s, vec![&s.combination])),
        }
    }
    let parts: Vec<String> = groups
        .iter()
        .map(|(s, combos)| {
            format!(
                "{} with {} ({}): {}",
                combos.join(", "),
                s.implementation,
                s.direction,
                s.reason
            )
        })
        .collect();
    let n = skipped.len();
    Some(format!(
        "skipped {n} row{}: {}",
        if n == 1 { "" } else { "s" },
        parts.join("; ")
    ))
}

/// The machine in one line, e.g. "AMD EPYC 7B13, 2 cores, 24 GiB RAM, kernel 6.1.0".
pub(crate) fn machine(m: &Machine) -> String {
    format!(
        "{}, {} cores, {} RAM, kernel {}",
        m.cpu_model,
        m.cores,
        bytes(m.memory_kib.saturating_mul(1024)),
        m.kernel
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn num_keeps_about_three_digits() {
        assert_eq!(num(9412.6), "9413");
        assert_eq!(num(123.4), "123");
        assert_eq!(num(12.34), "12.3");
        assert_eq!(num(1.234), "1.23");
        assert_eq!(num(0.1234), "0.123");
        assert_eq!(num(0.0), "0");
        assert_eq!(num(f64::NAN), "-");
    }

    #[test]
    fn median_range_drops_a_range_of_one_value() {
        let s = Stat {
            min: 1.0,
            median: 2.0,
            max: 3.5,
        };
        assert_eq!(median_range(&s, "–"), "2.00 (1.00–3.50)");
        let one = Stat {
            min: 5.0,
            median: 5.0,
            max: 5.0,
        };
        assert_eq!(median_range(&one, "-"), "5.00");
    }

    #[test]
    fn bytes_picks_a_readable_unit() {
        assert_eq!(bytes(1 << 30), "1 GiB");
        assert_eq!(bytes(3 << 29), "1.50 GiB");
        assert_eq!(bytes(512 << 20), "512 MiB");
        assert_eq!(bytes(100), "100 B");
    }

    #[test]
    fn options_mention_only_what_was_set() {
        let mut o = RunOptions {
            size_bytes: None,
            duration_secs: Some(10.0),
            parallel: 4,
            repeats: 5,
            direction: "download".into(),
            payload: "tls".into(),
            link: Some("delay=100ms,loss=9%".into()),
            cpu_limit: None,
            tcp_congestion: None,
        };
        assert_eq!(
            options(&o),
            "10.0 s per run, 5 repeats, parallel 4, download, tls payload, link delay=100ms,loss=9%"
        );
        o.cpu_limit = Some("15% on b".into());
        assert!(options(&o).ends_with(", CPU limit 15% on b"));
        o.repeats = 1;
        assert!(options(&o).contains(", 1 repeat, "), "{}", options(&o));
        o.tcp_congestion = Some("cubic".into());
        assert!(
            options(&o).ends_with(", TCP cubic for every hop"),
            "{}",
            options(&o)
        );
    }

    #[test]
    fn skipped_rows_fit_one_line_grouped_by_peer_and_reason() {
        assert_eq!(skipped(&[]), None);
        let skip = |combination: &str, implementation: &str, reason: &str| Skipped {
            combination: combination.into(),
            implementation: implementation.into(),
            direction: "upload".into(),
            reason: reason.into(),
        };
        let line = skipped(&[
            skip(
                "ss-aes-128-gcm",
                "ss-libev",
                "not supported by this peer: no half-close",
            ),
            skip(
                "ss-chacha20",
                "ss-libev",
                "not supported by this peer: no half-close",
            ),
            skip("vless-tls", "other", "not supported by this peer: no TLS"),
        ])
        .unwrap();
        assert_eq!(
            line,
            "skipped 3 rows: ss-aes-128-gcm, ss-chacha20 with ss-libev (upload): not supported \
             by this peer: no half-close; vless-tls with other (upload): not supported by this \
             peer: no TLS"
        );
        assert!(!line.contains('\n'));
    }
}
