//! Every `examples/*.json` at the repository root must load without errors or warnings, and
//! the default example must be exactly the built-in default configuration.

use std::path::PathBuf;

use skiff_config::{DEFAULT_CONFIG, Source, load_paths, load_sources};

fn examples_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// Runs in this crate's directory, not the repository root: certificate paths in the examples
/// are relative to the example files, which is where they are found from any directory.
#[test]
fn every_example_loads_cleanly() {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(examples_dir())
        .expect("examples/ exists")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    let names: Vec<String> = paths
        .iter()
        .filter_map(|p| p.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .collect();
    for required in [
        "socks-http-direct.json",
        "port-forward.json",
        "routing.json",
        "http-auth.json",
        "vless-tls-fallback.json",
        "vless-ws-client.json",
        "trojan-tls-fallback.json",
        "shadowsocks-2022-server.json",
        "shadowsocks-client.json",
        "vmess-ws-tls.json",
        "kcptun.json",
        "kcp-transports.json",
    ] {
        assert!(
            names.iter().any(|n| n == required),
            "examples/{required} is missing"
        );
    }
    for path in paths {
        match load_paths(std::slice::from_ref(&path), None) {
            Ok(loaded) => {
                let warnings: Vec<String> =
                    loaded.warnings.iter().map(ToString::to_string).collect();
                assert!(
                    warnings.is_empty(),
                    "{}: warnings:\n{}",
                    path.display(),
                    warnings.join("\n")
                );
                assert!(!loaded.plan.to_string().is_empty());
            }
            Err(diags) => {
                let shown: Vec<String> = diags.iter().map(ToString::to_string).collect();
                panic!("{}: failed:\n{}", path.display(), shown.join("\n"));
            }
        }
    }
}

#[test]
fn default_example_is_the_builtin_default() {
    let text =
        std::fs::read_to_string(examples_dir().join("socks-http-direct.json")).expect("readable");
    assert_eq!(text, DEFAULT_CONFIG);
    let loaded = load_sources(&[Source {
        name: "<default>".into(),
        text: DEFAULT_CONFIG.into(),
    }])
    .expect("default loads");
    assert!(loaded.warnings.is_empty());
}

#[test]
fn routing_example_has_its_rules() {
    let loaded = load_paths(&[examples_dir().join("routing.json")], None).expect("loads");
    assert_eq!(loaded.plan.routing.rules.len(), 6);
    assert_eq!(loaded.plan.outbounds[0].tag, "direct");
}
