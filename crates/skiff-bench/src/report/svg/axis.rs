//! Axis scales with round ticks: 0, 2000, 4000 … rather than 0, 1937, 3874 ….

/// A linear scale from 0 to `max`, ticked every `step`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Axis {
    pub max: f64,
    pub step: f64,
}

/// About this many intervals per axis: enough to read a value off, few enough to label at
/// ~300 px.
const INTERVALS: f64 = 5.0;

impl Axis {
    /// The smallest round axis that reaches `at_least`, ticked in steps of 1, 2 or 5 × 10^k.
    pub(super) fn covering(at_least: f64) -> Axis {
        if !(at_least.is_finite() && at_least > 0.0) {
            // Nothing to show: a unit axis still draws sensibly.
            return Axis {
                max: 1.0,
                step: 0.2,
            };
        }
        let step = nice_step(at_least / INTERVALS);
        // The small epsilon keeps 4000.0000001 from adding a whole extra interval.
        let n = (at_least / step - 1e-9).ceil().max(1.0);
        Axis {
            max: n * step,
            step,
        }
    }

    /// The tick values, 0 to `max` inclusive.
    pub(super) fn ticks(&self) -> Vec<f64> {
        let n = (self.max / self.step).round() as usize;
        (0..=n).map(|i| i as f64 * self.step).collect()
    }

    /// A tick's label: thousands as "k" once every tick is a whole thousand, and exactly as many
    /// decimals as the step needs.
    pub(super) fn label(&self, v: f64) -> String {
        if v == 0.0 {
            return "0".into();
        }
        if self.step >= 1000.0 {
            return format!("{}k", (v / 1000.0).round());
        }
        let decimals = (-self.step.log10().floor()).max(0.0) as usize;
        format!("{v:.decimals$}")
    }
}

/// The 1, 2 or 5 × 10^k at or above `raw`.
fn nice_step(raw: f64) -> f64 {
    let magnitude = 10f64.powf(raw.log10().floor());
    let f = raw / magnitude;
    let nice = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * magnitude
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_axes() {
        assert_eq!(
            Axis::covering(9650.0),
            Axis {
                max: 10000.0,
                step: 2000.0
            }
        );
        assert_eq!(
            Axis::covering(41000.0),
            Axis {
                max: 50000.0,
                step: 10000.0
            }
        );
        assert_eq!(
            Axis::covering(4000.0),
            Axis {
                max: 4000.0,
                step: 1000.0
            }
        );
        let a = Axis::covering(2.3);
        assert_eq!(a.step, 0.5);
        assert!((a.max - 2.5).abs() < 1e-12);
        assert_eq!(
            Axis::covering(0.0),
            Axis {
                max: 1.0,
                step: 0.2
            }
        );
        assert_eq!(
            Axis::covering(f64::NAN),
            Axis {
                max: 1.0,
                step: 0.2
            }
        );
    }

    #[test]
    fn ticks_and_labels() {
        let a = Axis::covering(9650.0);
        let labels: Vec<String> = a.ticks().iter().map(|&t| a.label(t)).collect();
        assert_eq!(labels, ["0", "2k", "4k", "6k", "8k", "10k"]);
        let a = Axis::covering(2.3);
        let labels: Vec<String> = a.ticks().iter().map(|&t| a.label(t)).collect();
        assert_eq!(labels, ["0", "0.5", "1.0", "1.5", "2.0", "2.5"]);
        let a = Axis::covering(0.07);
        assert_eq!(a.label(0.04), "0.04");
        let a = Axis::covering(450.0);
        assert_eq!(a.label(300.0), "300");
    }
}
