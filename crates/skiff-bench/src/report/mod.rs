//! Everything a bench run leaves behind for people: the terminal table, results.md, chart.svg,
//! results.json, and the comparison of two runs.
//!
//! Every report is drawn from a [`BenchRun`] alone, so a run can be re-reported (or compared)
//! later from its results.json without running anything again.

mod compare;
mod format;
mod json;
mod layout;
mod markdown;
mod svg;
mod table;

#[cfg(test)]
mod fixture;

use std::io;
use std::path::{Path, PathBuf};

use crate::model::BenchRun;

pub use compare::{compare, compare_with};
pub use json::{read_json, write_json};
pub use markdown::markdown;
pub use svg::svg_chart;
pub use table::{Charset, terminal_table, terminal_table_with};

/// The one line that says which rows the run skipped and why, if it skipped any.
pub fn skipped_line(run: &BenchRun) -> Option<String> {
    format::skipped(&run.skipped)
}

/// Writes results.json, results.md and chart.svg into `dir` (created if missing) and returns
/// their paths in that order.
///
/// results.json goes first: it is the one the others can be redrawn from, so it is the one that
/// must exist if writing a later file fails.
pub fn write_all(run: &BenchRun, dir: &Path) -> io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(|e| with_path(e, "creating", dir))?;
    let json = dir.join("results.json");
    write_json(run, &json)?;
    let md = dir.join("results.md");
    write_file(&md, &markdown(run))?;
    let svg = dir.join("chart.svg");
    write_file(&svg, &svg_chart(run))?;
    Ok(vec![json, md, svg])
}

/// Writes `text` to `path` through a temporary file beside it, so a reader (or a crash) never
/// sees a half-written report.
fn write_file(path: &Path, text: &str) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, text).map_err(|e| with_path(e, "writing", &tmp))?;
    std::fs::rename(&tmp, path).map_err(|e| with_path(e, "renaming into", path))
}

/// An io::Error that says which file it was about: a bare "permission denied" is no help.
fn with_path(e: io::Error, doing: &str, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("{doing} {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_all_writes_three_files_that_read_back() {
        let dir = fixture::temp_dir("write_all");
        let run = fixture::run();
        let paths = write_all(&run, &dir.join("nested")).unwrap();
        let names: Vec<_> = paths
            .iter()
            .map(|p| p.file_name().unwrap().to_str().unwrap().to_owned())
            .collect();
        assert_eq!(names, ["results.json", "results.md", "chart.svg"]);
        for p in &paths {
            assert!(std::fs::metadata(p).unwrap().len() > 0, "{}", p.display());
        }
        let back = read_json(&paths[0]).unwrap();
        assert_eq!(back.rows.len(), run.rows.len());
        assert!(
            std::fs::read_to_string(&paths[1])
                .unwrap()
                .starts_with("# ")
        );
        assert!(std::fs::read_to_string(&paths[2]).unwrap().contains("<svg"));
        // No temporary files left behind.
        let left: Vec<_> = std::fs::read_dir(dir.join("nested")).unwrap().collect();
        assert_eq!(left.len(), 3);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn write_all_names_the_directory_it_could_not_create() {
        let dir = fixture::temp_dir("write_all_err");
        let file = dir.join("a-file");
        std::fs::write(&file, "x").unwrap();
        let err = write_all(&fixture::run(), &file.join("sub")).unwrap_err();
        assert!(err.to_string().contains("a-file"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
