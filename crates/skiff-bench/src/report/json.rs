//! results.json: the run as data, the one file every other report can be redrawn from (and
//! the input of `compare`).

use std::io;
use std::path::Path;

use crate::model::BenchRun;

use super::{with_path, write_file};

/// Writes the run as pretty-printed JSON (people diff and read these files too).
pub fn write_json(run: &BenchRun, path: &Path) -> io::Result<()> {
    let mut text = serde_json::to_string_pretty(run)
        .map_err(|e| with_path(io::Error::other(e), "serialising results for", path))?;
    text.push('\n');
    write_file(path, &text)
}

/// Reads a run back. The error names the file, and for malformed JSON where in it the problem is
/// (serde_json's message carries the line and column).
pub fn read_json(path: &Path) -> Result<BenchRun, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    serde_json::from_str(&text)
        .map_err(|e| format!("{} is not a bench run's results: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture;

    #[test]
    fn round_trips() {
        let dir = fixture::temp_dir("json_round_trip");
        let path = dir.join("results.json");
        let run = fixture::run();
        write_json(&run, &path).unwrap();
        let back = read_json(&path).unwrap();
        // The model has no PartialEq; compare its JSON form. serde_json (without its
        // `float_roundtrip` feature) may parse a float back one ulp off, so floats are compared
        // to a relative 1e-12.
        same(
            &serde_json::to_value(&back).unwrap(),
            &serde_json::to_value(&run).unwrap(),
        );
        assert!(std::fs::read_to_string(&path).unwrap().ends_with("}\n"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn same(a: &serde_json::Value, b: &serde_json::Value) {
        use serde_json::Value::*;
        match (a, b) {
            (Number(x), Number(y)) => {
                let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
                assert!((x - y).abs() <= 1e-12 * x.abs().max(y.abs()), "{x} != {y}");
            }
            (Array(x), Array(y)) => {
                assert_eq!(x.len(), y.len());
                x.iter().zip(y).for_each(|(x, y)| same(x, y));
            }
            (Object(x), Object(y)) => {
                assert_eq!(x.keys().collect::<Vec<_>>(), y.keys().collect::<Vec<_>>());
                x.iter().zip(y.values()).for_each(|((_, x), y)| same(x, y));
            }
            _ => assert_eq!(a, b),
        }
    }

    #[test]
    fn reads_results_written_before_skipped_rows_were_recorded() {
        // The run behind the README's table of 2026-11-21, written before `skipped` existed.
        let old = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("testdata/results-2026-11-21.json");
        assert!(
            !std::fs::read_to_string(&old)
                .unwrap()
                .contains("\"skipped\"")
        );
        let run = read_json(&old).unwrap();
        assert!(!run.rows.is_empty() && run.skipped.is_empty());
    }

    #[test]
    fn errors_name_the_file() {
        let dir = fixture::temp_dir("json_errors");
        let missing = dir.join("missing.json");
        let e = read_json(&missing).unwrap_err();
        assert!(e.contains("missing.json"), "{e}");

        let bad = dir.join("bad.json");
        std::fs::write(&bad, "{\"started\": 1}").unwrap();
        let e = read_json(&bad).unwrap_err();
        assert!(e.contains("bad.json") && e.contains("line 1"), "{e}");

        let e = write_json(&fixture::run(), &dir.join("no-such-dir").join("r.json")).unwrap_err();
        assert!(e.to_string().contains("no-such-dir"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
