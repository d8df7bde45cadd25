//! How sure a comparison of two rows is: a win counts only when the two rows' ranges do not
//! overlap and that could hardly have happened by chance.
//!
//! The test needs no model of the noise. If two implementations were equally fast, their runs
//! (taken in turns, so drift on the machine hits both alike) would be exchangeable: every way
//! of splitting the m + n sorted figures into a group of m and a group of n would be equally
//! likely. Exactly two of those C(m+n, m) splits put all of one group above all of the other,
//! so ranges that do not overlap arise by chance with probability 2 / C(m+n, m): 0.1 for
//! 3 runs each, 2/252 ≈ 0.008 for 5 each. A comparison is called clear when the ranges are
//! apart and that chance is at most [`CLEAR_AT`]; apart with more chance than that, it had
//! too few runs to say; otherwise it is within noise.

use serde::{Deserialize, Serialize};

/// The largest chance of separate ranges under "equally fast" that still counts as clear.
pub const CLEAR_AT: f64 = 0.05;

/// What a comparison of row A with row B found about A.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Every run of A beat every run of B, with enough runs for that to mean something.
    ClearlyAhead,
    /// Every run of A lost to every run of B, with enough runs.
    ClearlyBehind,
    /// The ranges are apart, but with so few runs that chance could have done it.
    TooFewRuns,
    /// The ranges overlap: no winner.
    WithinNoise,
}

impl Outcome {
    /// How the tables write it.
    pub fn label(self) -> &'static str {
        match self {
            Outcome::ClearlyAhead => "clear win",
            Outcome::ClearlyBehind => "clear loss",
            Outcome::TooFewRuns => "too few runs",
            Outcome::WithinNoise => "within noise",
        }
    }
}

/// A compared with B on one figure (higher is better).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// A's median over B's.
    pub ratio: f64,
    pub outcome: Outcome,
    /// The chance that ranges this far apart arise between equals (1 when they overlap).
    pub chance: f64,
}

/// The chance that m runs of one implementation and n of another, all from one distribution,
/// fall into ranges that do not overlap: 2 / C(m+n, m). 1 when either side has no runs.
pub fn chance_of_separate_ranges(m: usize, n: usize) -> f64 {
    if m == 0 || n == 0 {
        return 1.0;
    }
    // C(m+n, m) as a product of ratios, in floating point: no overflow for any real run count.
    let k = m.min(n);
    let ways = (1..=k).fold(1.0_f64, |acc, i| acc * (m + n + 1 - i) as f64 / i as f64);
    (2.0 / ways).min(1.0)
}

/// Compares A's figures with B's (finite values only; higher is better).
pub fn compare(a: &[f64], b: &[f64]) -> Comparison {
    let finite = |v: &[f64]| -> Vec<f64> { v.iter().copied().filter(|x| x.is_finite()).collect() };
    let (a, b) = (finite(a), finite(b));
    let ratio = {
        let (ma, mb) = (crate::stats::stat(&a).median, crate::stats::stat(&b).median);
        if mb > 0.0 { ma / mb } else { f64::NAN }
    };
    let (Some(range_a), Some(range_b)) = (range(&a), range(&b)) else {
        return Comparison {
            ratio,
            outcome: Outcome::TooFewRuns,
            chance: 1.0,
        };
    };
    let ahead = range_a.0 > range_b.1;
    let behind = range_a.1 < range_b.0;
    if !ahead && !behind {
        return Comparison {
            ratio,
            outcome: Outcome::WithinNoise,
            chance: 1.0,
        };
    }
    let chance = chance_of_separate_ranges(a.len(), b.len());
    let outcome = match (chance <= CLEAR_AT, ahead) {
        (false, _) => Outcome::TooFewRuns,
        (true, true) => Outcome::ClearlyAhead,
        (true, false) => Outcome::ClearlyBehind,
    };
    Comparison {
        ratio,
        outcome,
        chance,
    }
}

fn range(v: &[f64]) -> Option<(f64, f64)> {
    let min = v.iter().copied().reduce(f64::min)?;
    let max = v.iter().copied().reduce(f64::max)?;
    Some((min, max))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chance_is_two_over_the_ways_to_split() {
        // C(6,3) = 20, C(8,4) = 70, C(10,5) = 252, C(2,1) = 2.
        assert!((chance_of_separate_ranges(3, 3) - 0.1).abs() < 1e-12);
        assert!((chance_of_separate_ranges(4, 4) - 2.0 / 70.0).abs() < 1e-12);
        assert!((chance_of_separate_ranges(5, 5) - 2.0 / 252.0).abs() < 1e-12);
        assert!((chance_of_separate_ranges(5, 3) - 2.0 / 56.0).abs() < 1e-12);
        assert_eq!(chance_of_separate_ranges(1, 1), 1.0);
        assert_eq!(chance_of_separate_ranges(0, 5), 1.0);
        // Symmetric, and large counts stay finite.
        assert_eq!(
            chance_of_separate_ranges(2, 7),
            chance_of_separate_ranges(7, 2)
        );
        assert!(chance_of_separate_ranges(500, 500) > 0.0);
    }

    #[test]
    fn separate_ranges_with_five_runs_each_are_clear() {
        let a = [110.0, 112.0, 115.0, 111.0, 113.0];
        let b = [100.0, 104.0, 101.0, 109.0, 102.0];
        let c = compare(&a, &b);
        assert_eq!(c.outcome, Outcome::ClearlyAhead);
        assert!((c.ratio - 112.0 / 102.0).abs() < 1e-12);
        assert!(c.chance < 0.01);
        assert_eq!(compare(&b, &a).outcome, Outcome::ClearlyBehind);
    }

    #[test]
    fn overlapping_ranges_are_within_noise_however_far_the_medians() {
        // Medians 150 vs 100, but one slow run of A reaches into B's range.
        let a = [150.0, 151.0, 149.0, 152.0, 105.0];
        let b = [100.0, 101.0, 99.0, 102.0, 106.0];
        let c = compare(&a, &b);
        assert_eq!(c.outcome, Outcome::WithinNoise);
        assert_eq!(c.chance, 1.0);
        assert!(c.ratio > 1.4);
        // Touching ends overlap too.
        assert_eq!(
            compare(&[2.0, 3.0], &[1.0, 2.0]).outcome,
            Outcome::WithinNoise
        );
    }

    #[test]
    fn separate_ranges_from_three_runs_each_are_too_few_to_call() {
        let c = compare(&[10.0, 11.0, 12.0], &[1.0, 2.0, 3.0]);
        assert_eq!(c.outcome, Outcome::TooFewRuns);
        assert!((c.chance - 0.1).abs() < 1e-12);
        // Four each is enough: 2/70 < 0.05.
        let c = compare(&[10.0, 11.0, 12.0, 13.0], &[1.0, 2.0, 3.0, 4.0]);
        assert_eq!(c.outcome, Outcome::ClearlyAhead);
    }

    #[test]
    fn missing_or_broken_figures_never_make_a_winner() {
        assert_eq!(compare(&[], &[1.0]).outcome, Outcome::TooFewRuns);
        let c = compare(&[f64::NAN, 5.0], &[]);
        assert_eq!(c.outcome, Outcome::TooFewRuns);
        assert!(c.ratio.is_nan());
        // Non-finite values are left out, not counted as runs.
        let c = compare(
            &[9.0, 9.5, 10.0, 10.5, f64::INFINITY],
            &[1.0, 2.0, 3.0, 4.0, f64::NAN],
        );
        assert_eq!(c.outcome, Outcome::ClearlyAhead);
        assert!((c.chance - 2.0 / 70.0).abs() < 1e-12);
    }
}
