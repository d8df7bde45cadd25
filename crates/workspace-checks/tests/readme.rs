//! The test command the README gives is the one CI runs (the README's other checks, which
//! need the skiff binary, are in crates/skiff/tests/readme.rs).

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn readme() -> String {
    std::fs::read_to_string(root().join("README.md")).expect("README.md")
}

#[test]
fn the_readme_test_command_is_the_one_ci_runs() {
    let readme = readme();
    let ci = std::fs::read_to_string(root().join(".ci/run")).expect(".ci/run");
    let command = "cargo test --workspace --locked --no-fail-fast";
    assert!(readme.contains(command), "README.md gives no `{command}`");
    assert!(
        ci.lines().any(|l| l.trim() == command),
        ".ci/run does not run the README's `{command}`"
    );
}
