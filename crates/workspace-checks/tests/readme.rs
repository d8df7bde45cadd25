//! The README keeps up with the repository: every example config is listed, and the test
//! command it gives is the one CI runs.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn readme() -> String {
    std::fs::read_to_string(root().join("README.md")).expect("README.md")
}

#[test]
fn every_example_config_is_listed_in_the_readme() {
    let readme = readme();
    let mut missing = Vec::new();
    let mut seen = 0;
    for entry in std::fs::read_dir(root().join("examples")).expect("examples/") {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        seen += 1;
        let name = format!("examples/{}", path.file_name().unwrap().to_string_lossy());
        if !readme.contains(&name) {
            missing.push(name);
        }
    }
    assert!(seen > 0, "no example configs found");
    assert!(missing.is_empty(), "README.md does not list {missing:?}");
}

#[test]
fn the_readme_test_command_is_the_one_ci_runs() {
    let readme = readme();
    let ci = std::fs::read_to_string(root().join(".ci/run")).expect(".ci/run");
    let command = "cargo test --workspace --locked";
    assert!(readme.contains(command), "README.md gives no `{command}`");
    assert!(
        ci.lines().any(|l| l.trim() == command),
        ".ci/run does not run the README's `{command}`"
    );
}
