//! Which rows a report shows, in which order, and which one is best: decided once here so the
//! table, results.md and the chart agree.
//!
//! Rows are grouped by combination (and by direction and parallel, when a run has several):
//! the raw baseline first, then each combination in the order the run measured it. Within a
//! group Skiff comes first and each peer after it in the run's order, so a reader always finds
//! Skiff in the same place beside the peers it is measured against.

use crate::model::{BenchRun, Row};
use crate::verdict::{self, Comparison, Outcome};

use super::format::RAW;

/// The name Skiff's own rows carry.
pub(crate) const SKIFF: &str = "skiff";

pub(crate) struct Group<'a> {
    pub combination: &'a str,
    pub direction: &'a str,
    pub parallel: u32,
    pub rows: Vec<&'a Row>,
    /// Index into `rows` of the highest median Mbit/s among the proxies that ran, when there
    /// were at least two to choose from.
    pub best: Option<usize>,
    /// Whether `best` is clearly ahead of every other proxy in the group ([`verdict`]): only
    /// then do the reports mark it as the winner.
    pub best_clear: bool,
    /// Skiff's Mbit/s against the best peer's (highest median) in the group, when both ran.
    pub skiff_vs_peer: Option<PeerComparison<'a>>,
}

/// Skiff compared with one peer on Mbit/s, and on CPU per GiB on B and on C.
pub(crate) struct PeerComparison<'a> {
    pub peer: &'a str,
    pub comparison: Comparison,
    /// B's and C's CPU-s/GiB: `ratio` is Skiff's over the peer's (below 1: Skiff is cheaper),
    /// and `outcome` is from the cheaper side's view, ClearlyAhead when Skiff is clearly
    /// cheaper.
    pub cpu: [Comparison; 2],
}

impl PeerComparison<'_> {
    /// e.g. "1.21× xray, clear win" or "0.97× sing-box, within noise", with `times` for ×.
    pub(crate) fn describe(&self, times: &str) -> String {
        format!(
            "{:.2}{times} {}, {}",
            self.comparison.ratio,
            self.peer,
            self.comparison.outcome.label()
        )
    }

    /// e.g. "B 0.62× clearly less, C 0.95× within noise": Skiff's CPU per GiB against the
    /// same peer's.
    pub(crate) fn describe_cpu(&self, times: &str) -> String {
        let side = |name: &str, c: &Comparison| {
            let word = match c.outcome {
                Outcome::ClearlyAhead => "clearly less",
                Outcome::ClearlyBehind => "clearly more",
                other => other.label(),
            };
            format!("{name} {:.2}{times} {word}", c.ratio)
        };
        format!("{}, {}", side("B", &self.cpu[0]), side("C", &self.cpu[1]))
    }
}

pub(crate) struct Layout<'a> {
    pub groups: Vec<Group<'a>>,
    /// Whether the run mixes directions or parallel counts, so a group's label must say which.
    pub varied_direction: bool,
    pub varied_parallel: bool,
}

impl Group<'_> {
    /// The group's name: the combination, plus direction and parallel when the run has several.
    pub(crate) fn label(&self, layout: &Layout<'_>) -> String {
        let mut s = self.combination.to_owned();
        if layout.varied_direction {
            s.push(' ');
            s.push_str(self.direction);
        }
        if layout.varied_parallel {
            s.push_str(&format!(" ×{}", self.parallel));
        }
        s
    }
}

/// Whether a row produced figures worth drawing.
pub(crate) fn ran(row: &Row) -> bool {
    row.error.is_none() && !row.samples.is_empty()
}

pub(crate) fn layout(run: &BenchRun) -> Layout<'_> {
    let mut groups: Vec<Group<'_>> = Vec::new();
    for row in &run.rows {
        let same = |g: &&mut Group<'_>| {
            g.combination == row.combination
                && g.direction == row.direction
                && g.parallel == row.parallel
        };
        match groups.iter_mut().find(same) {
            Some(g) => g.rows.push(row),
            None => groups.push(Group {
                combination: &row.combination,
                direction: &row.direction,
                parallel: row.parallel,
                rows: vec![row],
                best: None,
                best_clear: false,
                skiff_vs_peer: None,
            }),
        }
    }
    // Stable sorts: everything not singled out keeps the run's order.
    groups.sort_by_key(|g| !g.rows.iter().any(|r| r.implementation == RAW));
    for g in &mut groups {
        g.rows.sort_by_key(|r| match r.implementation.as_str() {
            RAW => 0,
            SKIFF => 1,
            _ => 2,
        });
        g.best = best(&g.rows);
        g.best_clear = g.best.is_some_and(|b| clearly_best(&g.rows, b));
        g.skiff_vs_peer = skiff_vs_best_peer(&g.rows);
    }
    let first = run.rows.first();
    Layout {
        varied_direction: run
            .rows
            .iter()
            .any(|r| Some(&r.direction) != first.map(|f| &f.direction)),
        varied_parallel: run
            .rows
            .iter()
            .any(|r| Some(r.parallel) != first.map(|f| f.parallel)),
        groups,
    }
}

/// The proxy with the highest median throughput; the raw row is the ceiling, and iperf3
/// cross-check rows (implementation "… (iperf3)") measure the tool, not a proxy.
fn best(rows: &[&Row]) -> Option<usize> {
    let contenders: Vec<usize> = (0..rows.len()).filter(|&i| contender(rows[i])).collect();
    if contenders.len() < 2 {
        return None;
    }
    contenders.into_iter().max_by(|&a, &b| {
        rows[a]
            .summary
            .mbps
            .median
            .total_cmp(&rows[b].summary.mbps.median)
    })
}

/// Whether a proxy, of the rows, is a contender for best (ran, not the raw row or iperf3).
fn contender(row: &Row) -> bool {
    let imp = row.implementation.as_str();
    ran(row) && imp != RAW && !imp.ends_with("(iperf3)")
}

fn mbps(row: &Row) -> Vec<f64> {
    row.samples.iter().map(crate::stats::sample_mbps).collect()
}

/// Row `best` is clearly ahead of every other contender.
fn clearly_best(rows: &[&Row], best: usize) -> bool {
    (0..rows.len())
        .filter(|&i| i != best && contender(rows[i]))
        .all(|i| {
            verdict::compare(&mbps(rows[best]), &mbps(rows[i])).outcome == Outcome::ClearlyAhead
        })
}

/// Skiff against the peer with the highest median Mbit/s, when both ran.
fn skiff_vs_best_peer<'a>(rows: &[&'a Row]) -> Option<PeerComparison<'a>> {
    let skiff = rows
        .iter()
        .find(|r| r.implementation == SKIFF && contender(r))?;
    let peer = rows
        .iter()
        .filter(|r| r.implementation != SKIFF && contender(r))
        .max_by(|a, b| a.summary.mbps.median.total_cmp(&b.summary.mbps.median))?;
    let cpu = |row: &Row, side: usize| -> Vec<f64> {
        row.samples
            .iter()
            .map(|s| {
                let (b, c) = crate::stats::sample_cpu_per_gib(s);
                if side == 0 { b } else { c }
            })
            .collect()
    };
    let cpu_side = |side: usize| {
        let (ours, theirs) = (cpu(skiff, side), cpu(peer, side));
        // Lower is better: compare the peer against Skiff, then state the ratio Skiff/peer.
        let mut c = verdict::compare(&theirs, &ours);
        c.ratio = if c.ratio > 0.0 {
            1.0 / c.ratio
        } else {
            f64::NAN
        };
        c
    };
    Some(PeerComparison {
        peer: &peer.implementation,
        comparison: verdict::compare(&mbps(skiff), &mbps(peer)),
        cpu: [cpu_side(0), cpu_side(1)],
    })
}

/// Every implementation in the run that is a proxy, Skiff first, then the peers in the order the
/// run first mentions them: the order of the chart's legend and colours.
pub(crate) fn implementations(run: &BenchRun) -> Vec<&str> {
    let mut names: Vec<&str> = Vec::new();
    for r in &run.rows {
        if !names.contains(&r.implementation.as_str()) {
            names.push(&r.implementation);
        }
    }
    names.sort_by_key(|&n| match n {
        RAW => 0,
        SKIFF => 1,
        _ => 2,
    });
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture;

    #[test]
    fn raw_first_then_combinations_in_run_order_skiff_first_within() {
        let run = fixture::run();
        let l = layout(&run);
        let order: Vec<(&str, Vec<&str>)> = l
            .groups
            .iter()
            .map(|g| {
                (
                    g.combination,
                    g.rows.iter().map(|r| r.implementation.as_str()).collect(),
                )
            })
            .collect();
        assert_eq!(
            order,
            [
                ("raw", vec!["-"]),
                ("vless-tcp", vec!["skiff", "v2ray", "xray"]),
                ("ss-aes-128-gcm", vec!["skiff", "ss-libev", "ss-rust"]),
                ("tunnel", vec!["skiff", "v2ray"]),
            ]
        );
        assert!(!l.varied_direction && !l.varied_parallel);
    }

    #[test]
    fn best_is_the_fastest_proxy_that_ran() {
        let run = fixture::run();
        let l = layout(&run);
        let best: Vec<Option<&str>> = l
            .groups
            .iter()
            .map(|g| g.best.map(|i| g.rows[i].implementation.as_str()))
            .collect();
        // raw: no contest; ss: ss-libev beats skiff and the failed ss-rust is not counted.
        assert_eq!(best, [None, Some("skiff"), Some("ss-libev"), Some("skiff")]);
    }

    #[test]
    fn a_win_is_clear_only_with_ranges_apart_and_runs_enough() {
        let run = fixture::run();
        let l = layout(&run);
        let clear: Vec<bool> = l.groups.iter().map(|g| g.best_clear).collect();
        // vless-tcp: 5 runs each against xray, 5 against 3 for v2ray, ranges apart. ss: two
        // runs each; tunnel: one each.
        assert_eq!(clear, [false, true, false, false]);
        let verdicts: Vec<Option<(&str, Outcome)>> = l
            .groups
            .iter()
            .map(|g| {
                g.skiff_vs_peer
                    .as_ref()
                    .map(|v| (v.peer, v.comparison.outcome))
            })
            .collect();
        assert_eq!(
            verdicts,
            [
                None,
                Some(("xray", Outcome::ClearlyAhead)),
                // The failed ss-rust row is not the best peer.
                Some(("ss-libev", Outcome::TooFewRuns)),
                Some(("v2ray", Outcome::TooFewRuns)),
            ]
        );
        // Skiff's CPU per GiB against Xray's: 0.80 / 1.60 on B, 0.90 / 1.75 on C, all five runs
        // lower.
        let v = l.groups[1].skiff_vs_peer.as_ref().unwrap();
        assert_eq!(
            v.describe_cpu("×"),
            "B 0.50× clearly less, C 0.51× clearly less"
        );
        // One slow Skiff run inside Xray's range: within noise, and no star.
        let mut noisy = fixture::run();
        let skiff = noisy
            .rows
            .iter_mut()
            .find(|r| r.combination == "vless-tcp" && r.implementation == SKIFF)
            .unwrap();
        skiff.samples[0].mbps = 7300.0;
        let l = layout(&noisy);
        assert!(!l.groups[1].best_clear);
        let v = l.groups[1].skiff_vs_peer.as_ref().unwrap();
        assert_eq!(v.comparison.outcome, Outcome::WithinNoise);
    }

    #[test]
    fn directions_split_groups_and_show_in_labels() {
        let mut run = fixture::run();
        let mut down = run.rows[1].clone();
        down.direction = "download".into();
        run.rows.push(down);
        let l = layout(&run);
        assert!(l.varied_direction);
        let labels: Vec<String> = l.groups.iter().map(|g| g.label(&l)).collect();
        assert!(
            labels.contains(&"vless-tcp upload".to_owned()),
            "{labels:?}"
        );
        assert!(
            labels.contains(&"vless-tcp download".to_owned()),
            "{labels:?}"
        );
    }

    #[test]
    fn implementations_put_skiff_before_peers() {
        let run = fixture::run();
        assert_eq!(
            implementations(&run),
            ["-", "skiff", "v2ray", "xray", "ss-libev", "ss-rust"]
        );
    }
}
