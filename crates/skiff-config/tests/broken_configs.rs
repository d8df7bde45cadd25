//! Every file in `tests/broken-configs/` (at the repository root) must fail to load with a
//! diagnostic at the path and line its first line announces: `// expect: PATH @ LINE`
//! (PATH is empty for JSON syntax errors and problems of the whole file). An optional second
//! line `// message: TEXT` also requires that diagnostic's message to contain TEXT.
//!
//! The files are loaded as `skiff check -c FILE` loads them (from disk, as bytes), so a file
//! that is not UTF-8 is tested too.

use std::path::PathBuf;

use skiff_config::load_paths;

fn broken_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/broken-configs")
}

/// Parses the `// expect: PATH @ LINE` header.
fn expectation(text: &str) -> Option<(String, usize)> {
    let header = text.lines().next()?.strip_prefix("// expect:")?;
    let (path, line) = header.rsplit_once('@')?;
    Some((path.trim().to_owned(), line.trim().parse().ok()?))
}

/// The optional `// message: TEXT` second line.
fn expected_message(text: &str) -> Option<&str> {
    Some(text.lines().nth(1)?.strip_prefix("// message:")?.trim())
}

#[test]
fn every_broken_config_fails_where_its_header_says() {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(broken_dir())
        .expect("tests/broken-configs exists")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    entries.sort();
    assert!(
        entries.len() >= 12,
        "expected at least 12 broken configs, found {}",
        entries.len()
    );
    for path in entries {
        let bytes = std::fs::read(&path).expect("readable file");
        let text = String::from_utf8_lossy(&bytes);
        let (want_path, want_line) = expectation(&text).unwrap_or_else(|| {
            panic!(
                "{}: first line must be `// expect: PATH @ LINE`",
                path.display()
            )
        });
        let want_message = expected_message(&text).unwrap_or("");
        let name = path.display().to_string();
        let diags = match load_paths(std::slice::from_ref(&path), None) {
            Ok(_) => panic!("{name}: loaded without error"),
            Err(diags) => diags,
        };
        let hit = diags.iter().find(|d| {
            d.is_error()
                && d.path == want_path
                && d.line == want_line
                && d.message.contains(want_message)
        });
        let Some(hit) = hit else {
            let got: Vec<String> = diags.iter().map(ToString::to_string).collect();
            panic!(
                "{name}: no error at `{want_path}` line {want_line} saying `{want_message}`; got:\n{}",
                got.join("\n")
            );
        };
        // What `skiff check` prints must name the file, the line and the path.
        let shown = hit.to_string();
        assert!(shown.starts_with("error: "), "{shown}");
        assert!(shown.contains(&format!("{name}:{want_line}:")), "{shown}");
        assert!(shown.contains(&want_path), "{shown}");
    }
}

#[test]
fn header_parsing() {
    assert_eq!(
        expectation("// expect: inbounds[0].port @ 6\n{}"),
        Some(("inbounds[0].port".into(), 6))
    );
    assert_eq!(expectation("// expect:  @ 7\n{"), Some((String::new(), 7)));
    assert_eq!(expectation("{}"), None);
    assert_eq!(
        expected_message("// expect: a @ 3\n// message: out of range\n{"),
        Some("out of range")
    );
    assert_eq!(expected_message("// expect: a @ 3\n{"), None);
}
