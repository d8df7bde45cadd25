//! Which interop peers this machine has, in one line: without a peer its interop tests pass
//! in no time having tested nothing, which a green run must not hide. Under CI (which
//! installs every Debian peer, builds ss-rust and has `../shared/peers/bin`) an absent one
//! fails here as well as in the tests that need it.
//!
//! This crate's name sorts after every `skiff*` crate, this file after its others, and the
//! libraries run no doctests, so `cargo test --workspace` runs this last and its output ends
//! with this line.

use std::path::{Path, PathBuf};

/// A peer, where the interop tests look for it, and the test files that need it.
struct Peer {
    name: &'static str,
    candidates: Vec<PathBuf>,
    how: &'static str,
    tests: &'static str,
}

fn on_path(bin: &str) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).map(|d| d.join(bin)).collect())
        .unwrap_or_default();
    if let Some(home) = std::env::var_os("HOME") {
        found.push(PathBuf::from(home).join(".cargo/bin").join(bin));
    }
    found
}

fn shared(bin: &str, var: &str) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::env::var_os(var)
        .map(PathBuf::from)
        .into_iter()
        .collect();
    found.push(shared_peers_dir().join(bin));
    found
}

fn debian(paths: &[&str]) -> Vec<PathBuf> {
    paths.iter().map(PathBuf::from).collect()
}

fn peers() -> Vec<Peer> {
    vec![
        Peer {
            name: "v2ray",
            candidates: debian(&["/usr/bin/v2ray", "/usr/local/bin/v2ray"]),
            how: "apt-get install v2ray",
            tests: "interop_v2ray*, interop_mkcp, interop_ss_v2ray, interop_trojan, fallback_nginx",
        },
        Peer {
            name: "trojan",
            candidates: debian(&["/usr/bin/trojan", "/usr/local/bin/trojan"]),
            how: "apt-get install trojan",
            tests: "interop_trojan",
        },
        Peer {
            name: "nginx",
            candidates: debian(&["/usr/sbin/nginx", "/usr/local/sbin/nginx"]),
            how: "apt-get install nginx",
            tests: "fallback_nginx, probing, interop_trojan",
        },
        Peer {
            name: "ss-server",
            candidates: debian(&["/usr/bin/ss-server"]),
            how: "apt-get install shadowsocks-libev",
            tests: "interop_ss_libev",
        },
        Peer {
            name: "ss-tunnel",
            candidates: debian(&["/usr/bin/ss-tunnel"]),
            how: "apt-get install shadowsocks-libev",
            tests: "interop_ss_libev",
        },
        Peer {
            name: "ssserver",
            candidates: on_path("ssserver"),
            how: "cargo install shadowsocks-rust (.ci/run)",
            tests: "interop_ss_rust",
        },
        Peer {
            name: "sslocal",
            candidates: on_path("sslocal"),
            how: "cargo install shadowsocks-rust (.ci/run)",
            tests: "interop_ss_rust",
        },
        Peer {
            name: "kcptun-client",
            candidates: debian(&["/usr/bin/kcptun-client"]),
            how: "apt-get install kcptun",
            tests: "interop_kcptun, udp2raw_layer, skiff-kcp kcptun_client",
        },
        Peer {
            name: "kcptun-server",
            candidates: debian(&["/usr/bin/kcptun-server"]),
            how: "apt-get install kcptun",
            tests: "interop_kcptun, udp2raw_layer, skiff-kcp kcptun_server",
        },
        Peer {
            name: "xray",
            candidates: shared("xray", "XRAY_BIN"),
            how: "XRAY_BIN or ../shared/peers/bin/xray",
            tests: "interop_xray_vision, interop_xray_httpupgrade, interop_xray_http_header",
        },
        Peer {
            name: "speederv2",
            candidates: shared("speederv2", "SPEEDERV2_BIN"),
            how: "SPEEDERV2_BIN or ../shared/peers/bin/speederv2",
            tests: "interop_udpspeeder",
        },
        Peer {
            name: "udp2raw",
            candidates: shared("udp2raw", "UDP2RAW_BIN"),
            how: "UDP2RAW_BIN or ../shared/peers/bin/udp2raw",
            tests: "skiff-udp2raw real_udp2raw, interop_udp2raw, udp2raw_layer",
        },
    ]
}

#[test]
fn interop_peers_summary() {
    let all = peers();
    let absent: Vec<&Peer> = all
        .iter()
        .filter(|p| !p.candidates.iter().any(|c| c.is_file()))
        .collect();
    if absent.is_empty() {
        say(&format!(
            "interop peers: all {} present, no interop test skipped",
            all.len()
        ));
        return;
    }
    let list: Vec<String> = absent
        .iter()
        .map(|p| format!("{} ({}; skips {})", p.name, p.how, p.tests))
        .collect();
    let line = format!(
        "interop peers: {} of {} absent, their tests SKIPPED: {}",
        absent.len(),
        all.len(),
        list.join("; ")
    );
    say(&line);
    assert!(
        std::env::var_os("CI").is_none(),
        "CI must have every interop peer: {line}"
    );
}

/// Straight to stderr: the test harness captures `println!`/`eprintln!` of a passing test,
/// not writes to the handle itself, and this line is meant to be seen.
fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// `../shared/peers/bin` next to the repository root (as the interop tests look for it).
fn shared_peers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/peers/bin")
}
