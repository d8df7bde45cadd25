//! Which colour each implementation gets. Skiff always has the same one, and each known peer
//! has its own fixed colour, so charts of different runs can be compared at a glance.

use crate::report::format::RAW;
use crate::report::layout::SKIFF;

pub(super) const SKIFF_COLOUR: &str = "#e8590c";
/// The raw baseline is not a contender: neutral grey.
pub(super) const RAW_COLOUR: &str = "#868e96";

/// The peers the lab knows how to run, each with a hue far from Skiff's orange and from one
/// another.
const KNOWN: [(&str, &str); 7] = [
    ("v2ray", "#1c7ed6"),
    ("xray", "#7048e8"),
    ("sing-box", "#2f9e44"),
    ("trojan", "#c2255c"),
    ("ss-libev", "#0c8599"),
    ("ss-rust", "#795548"),
    ("kcptun", "#9c36b5"),
];

/// For peers the table above does not know, in the order they appear.
const SPARE: [&str; 5] = ["#364fc7", "#a61e4d", "#087f5b", "#e67700", "#495057"];

/// Colours for the implementations of one chart.
pub(super) struct Palette {
    unknown: Vec<String>,
}

impl Palette {
    /// `names`: every implementation in the chart, in legend order.
    pub(super) fn new(names: &[&str]) -> Palette {
        Palette {
            unknown: names
                .iter()
                .filter(|n| **n != RAW && **n != SKIFF && !KNOWN.iter().any(|(k, _)| k == *n))
                .map(|n| n.to_string())
                .collect(),
        }
    }

    pub(super) fn colour(&self, name: &str) -> &'static str {
        if name == SKIFF {
            return SKIFF_COLOUR;
        }
        if name == RAW {
            return RAW_COLOUR;
        }
        if let Some((_, c)) = KNOWN.iter().find(|(k, _)| *k == name) {
            return c;
        }
        // More unknown peers than spare colours repeat them; the legend and labels still tell
        // them apart.
        let i = self.unknown.iter().position(|n| n == name).unwrap_or(0);
        SPARE[i % SPARE.len()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skiff_and_known_peers_have_fixed_colours() {
        let p = Palette::new(&["-", "skiff", "xray", "novel", "other"]);
        assert_eq!(p.colour("skiff"), SKIFF_COLOUR);
        assert_eq!(p.colour("-"), RAW_COLOUR);
        assert_eq!(p.colour("xray"), "#7048e8");
        assert_eq!(p.colour("novel"), SPARE[0]);
        assert_eq!(p.colour("other"), SPARE[1]);
        // No peer shares Skiff's colour.
        assert!(KNOWN.iter().all(|(_, c)| *c != SKIFF_COLOUR));
        assert!(!SPARE.contains(&SKIFF_COLOUR));
    }
}
