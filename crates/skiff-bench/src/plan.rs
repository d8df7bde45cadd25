//! What a `skiff bench` run will do, decided before anything starts: which combinations, which
//! rows (combination × implementation), how much each row moves, and which rows are left out
//! because the peer cannot run them as asked.

use crate::args::BenchArgs;
use crate::combos::{self, Combination, Kind};
use crate::impls::Implementation;
use crate::model::Skipped;
use crate::runner::WARM_UP_BYTES;
use crate::traffic::{Amount, Mode};

/// The prefix of every skip reason, in the report and in the run's last line.
pub const NOT_SUPPORTED: &str = "not supported by this peer";

/// One row to run: a combination with an implementation (None: the raw row).
#[derive(Clone, Copy, Debug)]
pub struct Job<'a> {
    pub combo: Combination,
    pub imp: Option<&'a Implementation>,
}

#[derive(Clone, Debug)]
pub struct Plan<'a> {
    pub amount: Amount,
    pub mode: Mode,
    pub repeats: u32,
    /// The combinations the run covers, in run order.
    pub combos: Vec<Combination>,
    pub jobs: Vec<Job<'a>>,
    /// Rows a peer speaks but cannot run in this direction: reported, never run.
    pub skipped: Vec<Skipped>,
}

impl Plan<'_> {
    /// Every byte the source sends when runs are bounded by size: each row's warm-up and its
    /// repeats (both directions with `-d both`). None when runs are bounded by time.
    pub fn bytes_bound(&self) -> Option<u64> {
        let Amount::Bytes(per_run) = self.amount else {
            return None;
        };
        let ways = if self.mode == Mode::Both { 2 } else { 1 };
        let per_row = (WARM_UP_BYTES + per_run * u64::from(self.repeats)) * ways;
        Some(per_row * self.jobs.len() as u64)
    }
}

/// The plan for `args` with Skiff and the peers found.
pub fn plan<'a>(
    args: &BenchArgs,
    skiff: &'a Implementation,
    peers: &'a [Implementation],
) -> Result<Plan<'a>, String> {
    let mode = args.mode()?;
    let combos = selection(args);
    let (jobs, skipped) = jobs(&combos, skiff, peers, mode);
    Ok(Plan {
        amount: args.amount()?,
        mode,
        repeats: args.repeats(),
        combos,
        jobs,
        skipped,
    })
}

/// The combinations `--list` shows: what `-f` (or `--quick`) selects, UDP rows included even
/// where the run leaves them out.
pub fn listed(args: &BenchArgs) -> Vec<Combination> {
    match (&args.filter, args.quick) {
        (None, true) => combos::quick(),
        (filter, _) => combos::select(filter.as_deref()),
    }
}

/// The combinations the run covers: `-f`'s if given; else `--quick`'s; else all but the UDP
/// ones, which are about lossy links and join only with `--link` (on loopback they would only
/// slow the default run).
pub fn selection(args: &BenchArgs) -> Vec<Combination> {
    let mut selected = listed(args);
    if args.filter.is_none() && args.link.is_none() {
        selected.retain(|c| !c.kind.udp());
    }
    selected
}

/// The rows: the raw row, then every combination with Skiff and each peer that speaks it.
/// A peer that speaks a combination but cannot run it in `mode` is skipped with its reason.
pub fn jobs<'a>(
    combos: &[Combination],
    skiff: &'a Implementation,
    peers: &'a [Implementation],
    mode: Mode,
) -> (Vec<Job<'a>>, Vec<Skipped>) {
    let mut jobs = Vec::new();
    let mut skipped = Vec::new();
    for combo in combos {
        if combo.kind == Kind::Raw {
            jobs.push(Job {
                combo: *combo,
                imp: None,
            });
            continue;
        }
        for imp in std::iter::once(skiff).chain(peers.iter()) {
            if !imp.supports(combo) {
                continue;
            }
            match imp.cannot_measure(mode) {
                Some(why) => skipped.push(Skipped {
                    combination: combo.name.into(),
                    implementation: imp.name.into(),
                    direction: mode.name().into(),
                    reason: format!("{NOT_SUPPORTED}: {why}"),
                }),
                None => jobs.push(Job {
                    combo: *combo,
                    imp: Some(imp),
                }),
            }
        }
    }
    (jobs, skipped)
}

/// Flags and implementations for tests of the plan and of `--list`.
#[cfg(test)]
pub(crate) mod fixture {
    use crate::args::BenchArgs;
    use crate::impls::{Flavor, Implementation};
    use clap::Parser;

    #[derive(Parser)]
    pub(crate) struct Cli {
        #[command(flatten)]
        pub(crate) args: BenchArgs,
    }

    /// `skiff bench FLAGS…` parsed as the CLI parses it.
    pub(crate) fn args(flags: &[&str]) -> BenchArgs {
        Cli::try_parse_from(std::iter::once("bench").chain(flags.iter().copied()))
            .unwrap()
            .args
    }

    pub(crate) fn peer(name: &'static str, flavor: Flavor) -> Implementation {
        Implementation {
            name,
            flavor,
            client: name.into(),
            server: name.into(),
            version: String::new(),
        }
    }

    pub(crate) fn skiff() -> Implementation {
        peer("skiff", Flavor::Skiff)
    }

    /// The peers `.ci/run` installs.
    pub(crate) fn ci_peers() -> Vec<Implementation> {
        vec![
            peer("v2ray", Flavor::V2ray),
            peer("trojan", Flavor::Trojan),
            peer("ss-libev", Flavor::SsLibev),
            peer("ss-rust", Flavor::SsRust),
            peer("kcptun", Flavor::Kcptun),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::fixture::{Cli, args, ci_peers, skiff};
    use super::*;
    use clap::Parser;

    fn names(jobs: &[Job<'_>]) -> Vec<String> {
        jobs.iter()
            .map(|j| format!("{} {}", j.combo.name, j.imp.map_or("-", |i| i.name)))
            .collect()
    }

    #[test]
    fn ss_libev_upload_rows_are_skipped_as_not_supported_not_run() {
        let (skiff, peers) = (skiff(), ci_peers());
        let plan = plan(&args(&[]), &skiff, &peers).unwrap();
        assert_eq!(plan.mode, Mode::Upload);
        let ran = names(&plan.jobs);
        assert!(!ran.iter().any(|j| j.contains("ss-libev")), "{ran:?}");
        assert!(ran.contains(&"ss-aes-128-gcm ss-rust".to_string()));
        // Both AEAD rows ss-libev speaks (not ss-2022), each with the peer's reason.
        let skipped: Vec<_> = plan
            .skipped
            .iter()
            .map(|s| (s.combination.as_str(), s.implementation.as_str()))
            .collect();
        assert_eq!(
            skipped,
            [("ss-aes-128-gcm", "ss-libev"), ("ss-chacha20", "ss-libev")]
        );
        for s in &plan.skipped {
            assert_eq!(s.direction, "upload");
            assert!(
                s.reason.starts_with("not supported by this peer: ")
                    && s.reason.contains("half-close"),
                "{}",
                s.reason
            );
        }
        // Both ways needs the half-close too.
        let both = plan_for(&["-d", "both", "-f", "ss-aes"], &skiff, &peers);
        assert_eq!(both.skipped.len(), 1);
        // Downloads run it.
        let down = plan_for(&["-d", "download", "-f", "ss-aes"], &skiff, &peers);
        assert!(down.skipped.is_empty());
        assert!(names(&down.jobs).contains(&"ss-aes-128-gcm ss-libev".to_string()));
    }

    fn plan_for<'a>(
        flags: &[&str],
        skiff: &'a Implementation,
        peers: &'a [Implementation],
    ) -> Plan<'a> {
        plan(&args(flags), skiff, peers).unwrap()
    }

    #[test]
    fn default_plan_leaves_udp_rows_to_link_runs_unless_named() {
        let (skiff, peers) = (skiff(), ci_peers());
        let udp = |p: &Plan<'_>| p.combos.iter().filter(|c| c.kind.udp()).count();
        assert_eq!(udp(&plan_for(&[], &skiff, &peers)), 0);
        assert_eq!(udp(&plan_for(&["-f", "kcp,mkcp"], &skiff, &peers)), 2);
        // --list shows them all the same.
        assert_eq!(listed(&args(&[])).len(), combos::ALL.len());
    }

    #[test]
    fn quick_plan_is_one_small_repeat_of_the_seed_rows() {
        let (skiff, peers) = (skiff(), ci_peers());
        let full = plan_for(&[], &skiff, &peers);
        let quick = plan_for(&["--quick"], &skiff, &peers);
        assert_eq!(quick.repeats, 1);
        let Amount::Bytes(per_run) = quick.amount else {
            panic!("quick runs are bounded by size");
        };
        assert!(per_run <= 256 << 20, "{per_run}");
        let quick_names: Vec<_> = quick.combos.iter().map(|c| c.name).collect();
        assert_eq!(quick_names, combos::QUICK);
        // The whole quick run moves under 4 GiB with every CI peer, against over 90 GiB for
        // the default matrix.
        let (q, f) = (quick.bytes_bound().unwrap(), full.bytes_bound().unwrap());
        assert!(q < 4 << 30, "quick moves {q} bytes");
        assert!(f > 90 << 30, "default moves {f} bytes");
        // The ss-libev row is skipped in quick mode too, not failed.
        assert!(quick.skipped.iter().any(|s| s.implementation == "ss-libev"));
        // Explicit flags still win over --quick's defaults.
        let wide = plan_for(&["--quick", "-n", "1G", "-r", "2"], &skiff, &peers);
        assert!(matches!(wide.amount, Amount::Bytes(b) if b == 1 << 30));
        assert_eq!(wide.repeats, 2);
        let filtered = plan_for(&["--quick", "-f", "vless-ws"], &skiff, &peers);
        assert_eq!(filtered.combos.len(), 1);
    }

    #[test]
    fn quick_does_not_combine_with_a_link() {
        assert!(
            Cli::try_parse_from(["bench", "--quick", "--link", "delay=10ms"]).is_err(),
            "--quick is for loopback"
        );
    }
}
