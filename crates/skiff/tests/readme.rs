//! The README and `--help` as a newcomer meets them: what they say must stay true of the
//! repository (the examples that exist, what `.ci/run` installs, the Rust version Cargo.toml
//! asks for, the options the binary takes).

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(relative: &str) -> String {
    std::fs::read_to_string(repo_root().join(relative)).unwrap()
}

fn help(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_skiff"))
        .args(args)
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success(), "skiff {args:?} --help");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn readme_lists_every_example() {
    let readme = read("README.md");
    let mut names: Vec<String> = std::fs::read_dir(repo_root().join("examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert!(names.len() >= 12, "{names:?}");
    let missing: Vec<&String> = names
        .iter()
        .filter(|n| !readme.contains(&format!("[`examples/{n}`](examples/{n})")))
        .collect();
    assert!(missing.is_empty(), "README.md does not list {missing:?}");
}

/// The packages `.ci/run` installs with apt-get, in its order.
fn ci_apt_packages(script: &str) -> Vec<String> {
    let line = script
        .lines()
        .find(|l| l.contains("apt-get install"))
        .expect(".ci/run installs with apt-get");
    let after = line.split("apt-get install").nth(1).unwrap();
    after
        .split_whitespace()
        .take_while(|w| !w.starts_with('>'))
        .filter(|w| !w.starts_with('-'))
        .map(str::to_owned)
        .collect()
}

#[test]
fn readme_names_what_ci_installs() {
    let readme = read("README.md");
    let script = read(".ci/run");
    let packages = ci_apt_packages(&script);
    assert!(packages.len() >= 5, "{packages:?}");
    // The README gives the list in one code span, possibly wrapped over two lines.
    let flat = readme.split_whitespace().collect::<Vec<_>>().join(" ");
    let list = packages.join(" ");
    assert!(
        flat.contains(&format!("`{list}`")),
        "README.md should list `{list}` as .ci/run installs it"
    );
    // shadowsocks-rust comes from `cargo install` at a pinned version.
    let version = script
        .split("cargo install shadowsocks-rust --version ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect(".ci/run pins shadowsocks-rust");
    assert!(
        flat.contains(&format!(
            "cargo install shadowsocks-rust --version {version}"
        )),
        "README.md should say shadowsocks-rust {version}"
    );
    assert!(script.contains("rustup component add rustfmt clippy"));
    assert!(flat.contains("rustup component add rustfmt clippy"));
}

#[test]
fn readme_states_the_rust_version_cargo_toml_asks_for() {
    let manifest = read("Cargo.toml");
    let version = manifest
        .lines()
        .find_map(|l| l.trim().strip_prefix("rust-version = "))
        .expect("workspace rust-version")
        .trim_matches('"');
    let edition = manifest
        .lines()
        .find_map(|l| l.trim().strip_prefix("edition = "))
        .expect("workspace edition")
        .trim_matches('"');
    let readme = read("README.md");
    assert!(readme.contains(&format!("**Rust {version} or newer**")));
    assert!(readme.contains(&format!("edition {edition}")));
}

/// Every long option in a `skiff run …` / `skiff check …` code span of the README is spelled
/// as that command's `--help` shows it (`--confdir`, not Xray's `-confdir`).
#[test]
fn readme_spells_options_as_help_shows_them() {
    let readme = read("README.md");
    let mut checked = 0;
    for command in ["run", "check"] {
        let help = help(&[command]);
        let prefix = format!("`skiff {command} ");
        for (at, _) in readme.match_indices(&prefix) {
            let span = &readme[at + 1..];
            let span = &span[..span.find('`').unwrap()];
            for word in span.split_whitespace() {
                let word = word.trim_matches(|c| matches!(c, '[' | ']' | '.'));
                if word.starts_with('-') && word.len() > 2 {
                    assert!(
                        word.starts_with("--") && help.contains(word),
                        "README.md `{span}`: `{word}` is not an option `skiff {command} --help` shows"
                    );
                    checked += 1;
                }
            }
        }
    }
    assert!(checked >= 3, "only {checked} long options found");
}

#[test]
fn help_describes_todays_skiff() {
    let help = help(&[]);
    for word in [
        "VLESS",
        "Vision",
        "fallbacks",
        "VMess AEAD",
        "Trojan",
        "Shadowsocks AEAD and 2022",
        "kcptun",
        "SOCKS5",
        "HTTP",
        "dokodemo-door",
        "TLS",
        "WebSocket",
        "mKCP",
        "REALITY",
        "gRPC",
        "XHTTP",
        "Mux.Cool",
        "UDPspeeder",
        "udp2raw",
        "API",
        "skiff check",
        "skiff bench",
        "bench",
    ] {
        assert!(
            help.contains(word),
            "`skiff --help` does not mention {word}:\n{help}"
        );
    }
    // Short help (`-h`) keeps to one line about Skiff.
    let out = Command::new(env!("CARGO_BIN_EXE_skiff"))
        .arg("-h")
        .output()
        .unwrap();
    let short = String::from_utf8(out.stdout).unwrap();
    assert!(
        short.starts_with("A lean, fast proxy and tunnel"),
        "{short}"
    );
}
