//! Xray-compatible JSON configuration: comments stripped, parsed into serde types that mirror
//! Xray's schema, merged across files, then built into a validated [`plan::Plan`]. Every error
//! and warning carries the file, the JSON path and the line:column it points at.
//!
//! Pipeline, one module per step:
//! [`comments`] (blank out comments) → `raw` (per-file decoding, unknown keys warned) →
//! `merge` (Xray's multi-file rules, documented there) → `build` (validation into a
//! [`Plan`]) → `summary` (`Display for Plan`, for `skiff check`). `locate`, `path` and
//! `source` give every diagnostic its file, JSON path and line:column.

pub mod comments;
pub mod diag;
pub mod plan;
pub mod plan_udp2raw;
pub mod plan_udpspeeder;
pub mod rule_lists;

mod build;
mod decode;
mod locate;
mod merge;
mod path;
mod raw;
mod source;
mod summary;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

pub use comments::strip_comments;
pub use diag::{Diagnostic, Severity};
pub use plan::*;

/// One config text and the name diagnostics call it by (normally its path).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    pub name: String,
    pub text: String,
}

/// A usable configuration and the warnings found on the way.
#[derive(Clone, Debug)]
pub struct Loaded {
    pub plan: Plan,
    pub warnings: Vec<Diagnostic>,
}

/// Skiff's built-in configuration (Xray JSON with comments): a SOCKS5 proxy on
/// 127.0.0.1:10808 and an HTTP proxy on 127.0.0.1:10809, both connecting directly. The same
/// text is shipped as `examples/socks-http-direct.json`.
pub const DEFAULT_CONFIG: &str = include_str!("default.json");

/// Loads, merges (in the given order, with Xray's multi-file rules: later files replace
/// top-level objects whole, replace same-tag inbounds/outbounds, append other inbounds and
/// prepend other outbounds unless the file name contains "tail") and validates config texts.
///
/// `Err` holds every diagnostic (errors and warnings) when at least one is an error.
/// Diagnostics are sorted by file (in load order), then line and column.
pub fn load_sources(sources: &[Source]) -> Result<Loaded, Vec<Diagnostic>> {
    load(sources, Vec::new())
}

/// Reads the `-c` files in order, then every `*.json` / `*.jsonc` file of `confdir` sorted by
/// name (Xray's order: directory files come after the flags), and loads them with
/// [`load_sources`]. A file that cannot be read is an error diagnostic with an empty path.
pub fn load_paths(files: &[PathBuf], confdir: Option<&Path>) -> Result<Loaded, Vec<Diagnostic>> {
    let mut diags = Vec::new();
    let mut paths: Vec<PathBuf> = files.to_vec();
    if let Some(dir) = confdir {
        match confdir_files(dir) {
            Ok(found) => {
                if found.is_empty() && files.is_empty() {
                    diags.push(Diagnostic::file_error(
                        &dir.display().to_string(),
                        "no *.json files in this directory",
                    ));
                }
                paths.extend(found);
            }
            Err(e) => diags.push(Diagnostic::file_error(
                &dir.display().to_string(),
                format!("cannot read directory: {e}"),
            )),
        }
    }
    if paths.is_empty() && diags.is_empty() {
        diags.push(Diagnostic::file_error("", "no configuration files given"));
    }
    let mut sources = Vec::new();
    for path in paths {
        let name = path.display().to_string();
        match std::fs::read(&path) {
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(text) => sources.push(Source { name, text }),
                Err(e) => diags.push(not_utf8(&name, e.as_bytes(), e.utf8_error())),
            },
            Err(e) => diags.push(Diagnostic::file_error(&name, format!("cannot read: {e}"))),
        }
    }
    load(&sources, diags)
}

/// Where a file stops being UTF-8: the byte offset (what a hex editor shows) and the
/// line:column (what a text editor shows), with the offending byte.
fn not_utf8(name: &str, bytes: &[u8], e: std::str::Utf8Error) -> Diagnostic {
    let offset = e.valid_up_to();
    let valid = bytes.get(..offset).unwrap_or_default();
    // The prefix is valid UTF-8 by definition of `valid_up_to`.
    let prefix = std::str::from_utf8(valid).unwrap_or_default();
    let (line, column) = locate::line_col(prefix, offset);
    let byte = bytes
        .get(offset)
        .map_or(String::new(), |b| format!(" (byte 0x{b:02X})"));
    let mut d = Diagnostic::file_error(
        name,
        format!(
            "the file is not valid UTF-8 at byte offset {offset}{byte}; config files must be \
             UTF-8 (re-save it as UTF-8 in an editor or convert it with iconv)"
        ),
    );
    d.line = line;
    d.column = column;
    d
}

/// The config files of a `-confdir`, sorted by file name.
fn confdir_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let is_config = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| e == "json" || e == "jsonc");
        // Follows symlinks, so a linked config counts and a directory named x.json does not.
        if is_config && path.is_file() {
            found.push(path);
        }
    }
    found.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
    Ok(found)
}

/// `early`: problems found before parsing (unreadable files). When any file cannot be read or
/// is not JSON, the others are still parsed for their own errors, but not merged or built:
/// their cross-references would produce errors that are only echoes of the first one.
fn load(sources: &[Source], early: Vec<Diagnostic>) -> Result<Loaded, Vec<Diagnostic>> {
    let unreadable = diag::has_errors(&early);
    let mut diags = early;
    let mut parsed = Vec::new();
    for source in sources {
        if let Some(file) = raw::parse_file(&source.name, &source.text, &mut diags) {
            parsed.push(file);
        }
    }
    // Type errors inside a file do not stop here (the item is dropped, its tag remembered, and
    // everything else is still checked); a missing or non-JSON file does.
    let complete = parsed.len() == sources.len() && !unreadable;
    let plan = if complete && !sources.is_empty() {
        let merged = merge::merge(parsed, &mut diags);
        Some(build::build(&merged, &mut diags))
    } else {
        None
    };
    sort(&mut diags, sources);
    match plan {
        Some(plan) if !diag::has_errors(&diags) => Ok(Loaded {
            plan,
            warnings: diags,
        }),
        _ => {
            if diags.is_empty() {
                diags.push(Diagnostic::file_error("", "no configuration given"));
            }
            Err(diags)
        }
    }
}

/// Load order of files, then position in the file; diagnostics without a position first.
fn sort(diags: &mut [Diagnostic], sources: &[Source]) {
    let mut order: HashMap<&str, usize> = HashMap::new();
    for (i, s) in sources.iter().enumerate() {
        order.entry(s.name.as_str()).or_insert(i);
    }
    diags.sort_by_key(|d| {
        (
            order.get(d.file.as_str()).copied().unwrap_or(0),
            d.line,
            d.column,
        )
    });
}
