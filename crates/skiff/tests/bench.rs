//! A tiny end-to-end `skiff bench` run (raw and tunnel rows, 16 MiB, one repeat): the real
//! processes B and C start, the table prints, results.json/md and the SVG are written, and the
//! figures are sane. Bounded well under a minute.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use skiff_bench::combos::ALL;
use skiff_bench::fair_cc::{self, Lab};
use skiff_bench::impls;
use skiff_bench::runner::{Place, RowOptions, start_chain};
use skiff_bench::traffic::{self, Amount, Mode};

fn skiff() -> Command {
    Command::new(env!("CARGO_BIN_EXE_skiff"))
}

#[test]
fn tiny_bench_run_writes_every_report() {
    let out = std::env::temp_dir().join(format!("skiff-bench-test-{}", std::process::id()));
    let result = skiff()
        .args([
            "bench",
            "-n",
            "16M",
            "-r",
            "1",
            "-f",
            "raw,tunnel",
            "--peers",
            "none",
            "--idle",
            "50",
        ])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&result.stdout);
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(result.status.success(), "bench failed:\n{stdout}\n{stderr}");
    assert!(
        stdout.contains("tunnel") && stdout.contains("raw"),
        "table:\n{stdout}"
    );

    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    let rows = json["rows"].as_array().unwrap();
    let row = |combo: &str, imp: &str| {
        rows.iter()
            .find(|r| r["combination"] == combo && r["implementation"] == imp)
            .unwrap_or_else(|| panic!("no {combo}/{imp} row in {json}"))
    };
    for r in [row("raw", "-"), row("tunnel", "skiff")] {
        assert!(r["error"].is_null(), "{r}");
        let sample = &r["samples"][0];
        assert_eq!(sample["bytes"], 16 << 20, "{r}");
        assert!(sample["mbps"].as_f64().unwrap() > 0.0);
    }
    let tunnel = row("tunnel", "skiff");
    // B and C were real processes that did the work.
    assert!(
        tunnel["samples"][0]["client_peak_rss_kib"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert!(tunnel["samples"][0]["client_cpu_s"].as_f64().unwrap() >= 0.0);
    assert!(tunnel["summary"]["idle_kib_per_conn"]["connections"] == 50);
    let svg = std::fs::read_to_string(out.join("chart.svg")).unwrap();
    assert!(svg.starts_with("<svg") || svg.starts_with("<?xml"));
    assert!(svg.contains("skiff"));
    assert!(
        std::fs::read_to_string(out.join("results.md"))
            .unwrap()
            .contains("tunnel")
    );
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn list_shows_combinations_and_peers() {
    let result = skiff().args(["bench", "--list"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&result.stdout);
    assert!(result.status.success());
    assert!(
        stdout.contains("raw") && stdout.contains("tunnel") && stdout.contains("skiff"),
        "{stdout}"
    );
}

#[test]
fn list_shows_the_udp_rows_marked_as_needing_a_link() {
    let result = skiff()
        .args(["bench", "--list", "--peers", "none"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&result.stdout);
    assert!(result.status.success(), "{stdout}");
    for udp in ["kcp", "kcp-w2048", "kcp-fast3", "mkcp"] {
        let line = stdout
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{udp} ")))
            .unwrap_or_else(|| panic!("{udp} is not listed:\n{stdout}"));
        assert!(line.ends_with("(needs --link)"), "{line}");
    }
    let tunnel = stdout.lines().find(|l| l.contains("tunnel ")).unwrap();
    assert!(!tunnel.contains("needs --link"), "{tunnel}");
}

/// A stand-in for shadowsocks-libev: `ss-tunnel` and `ss-server` that print a version and
/// exit. The bench must never start them in an upload run.
fn fake_ss_libev(dir: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).unwrap();
    for bin in ["ss-tunnel", "ss-server"] {
        let path = dir.join(bin);
        std::fs::write(
            &path,
            "#!/bin/sh\necho 'shadowsocks-libev 0.0 (stand-in)'\n",
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

#[test]
fn an_upload_run_skips_ss_libev_as_not_supported_and_exits_0() {
    let base = std::env::temp_dir().join(format!("skiff-bench-skip-{}", std::process::id()));
    let (peer_dir, out) = (base.join("ss-libev"), base.join("out"));
    fake_ss_libev(&peer_dir);
    let result = skiff()
        .args(["bench", "-n", "8M", "-r", "1", "-f", "ss-aes-128-gcm"])
        .arg("--peers")
        .arg(format!("ss-libev={}", peer_dir.display()))
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&result.stdout);
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(result.status.success(), "bench failed:\n{stdout}\n{stderr}");
    // The run's last line says what was skipped and why.
    let last = stdout.lines().last().unwrap_or_default();
    assert!(
        last.starts_with(
            "skipped 1 row: ss-aes-128-gcm with ss-libev (upload): not supported by this peer: "
        ) && last.contains("half-close"),
        "{stdout}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    // Skiff's row ran; ss-libev has no row, only its skip record.
    let rows = json["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{json}");
    assert_eq!(rows[0]["implementation"], "skiff");
    assert!(rows[0]["error"].is_null(), "{json}");
    assert_eq!(json["skipped"][0]["implementation"], "ss-libev");
    assert_eq!(json["skipped"][0]["direction"], "upload");
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn quick_is_documented_and_lists_only_the_seed_rows() {
    let help = skiff().args(["bench", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("--quick") && help.contains("under a minute"),
        "{help}"
    );
    let result = skiff()
        .args(["bench", "--quick", "--list", "--peers", "none"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&result.stdout);
    assert!(result.status.success(), "{stdout}");
    let listed: Vec<&str> = stdout
        .lines()
        .take_while(|l| !l.is_empty())
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(
        listed,
        [
            "raw",
            "tunnel",
            "vless-tls",
            "trojan-tls",
            "ss-aes-128-gcm",
            "vmess-ws-tls"
        ],
        "{stdout}"
    );
}

#[test]
fn tls_payload_runs_end_to_end() {
    let out = std::env::temp_dir().join(format!("skiff-bench-tls-{}", std::process::id()));
    let result = skiff()
        .args([
            "bench",
            "-n",
            "8M",
            "-r",
            "1",
            "-f",
            "tunnel",
            "--peers",
            "none",
            "--payload",
            "tls",
        ])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        result.status.success(),
        "{}",
        String::from_utf8_lossy(&result.stderr)
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(json["options"]["payload"], "tls");
    assert_eq!(json["rows"][0]["samples"][0]["bytes"], 8 << 20, "{json}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn bad_flags_are_clear_errors() {
    let result = skiff().args(["bench", "-n", "12X"]).output().unwrap();
    assert!(!result.status.success());
    assert!(String::from_utf8_lossy(&result.stderr).contains("12X"));
    let result = skiff()
        .args(["bench", "--payload", "quic", "-f", "raw"])
        .output()
        .unwrap();
    assert!(!result.status.success());
    assert!(String::from_utf8_lossy(&result.stderr).contains("quic"));
}

/// The congestion control of every established TCP socket in namespace `ns`, from `ss -tin`
/// (its info line starts with the algorithm's name).
fn socket_algorithms(ns: &str) -> Vec<String> {
    let out = skiff_bench::link::command_in(ns, "ss")
        .args(["-tin", "state", "established"])
        .output()
        .expect("ss (iproute2) runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with(char::is_whitespace))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

/// An algorithm the kernel offers that is neither the host's default nor Reno (Skiff's own
/// loopback rule), so a socket that ignored the bench's choice shows.
fn an_algorithm_to_choose() -> Option<String> {
    let host = fair_cc::host_default().ok()?;
    let offered = skiff_bench::link::cc::available().ok()?;
    offered
        .iter()
        .find(|a| **a != host && *a != "reno")
        .or_else(|| offered.iter().find(|a| **a != host))
        .cloned()
}

#[test]
fn cc_every_socket_of_skiff_and_the_peers_uses_the_runs_algorithm() {
    if let Err(why) = fair_cc::check_support() {
        assert!(std::env::var_os("CI").is_none(), "CI runs as root: {why}");
        println!("skipped: --cc with another algorithm than the host's {why}");
        return;
    }
    let Some(algorithm) = an_algorithm_to_choose() else {
        println!("skipped: the kernel offers no algorithm but the host's default");
        return;
    };
    let mut implementations = vec![impls::skiff(env!("CARGO_BIN_EXE_skiff").into())];
    let mut peers = Vec::new();
    for (name, var) in [("xray", "XRAY_BIN"), ("sing-box", "SING_BOX_BIN")] {
        if let Some(path) = common::shared_peer(name, var) {
            peers.push(format!("{name}={}", path.display()));
        }
    }
    let (found, missing) = impls::discover(&peers.join(","));
    assert!(missing.is_empty(), "{missing:?}");
    implementations.extend(found);
    let lab = Lab::up(&algorithm).expect("lab namespace");
    let mut place = Place::lab(lab.ns());
    place.tcp_congestion = Some(algorithm.clone());
    let opts = RowOptions {
        amount: Amount::Bytes(1 << 20),
        mode: Mode::Upload,
        parallel: 1,
        repeats: 1,
        cpu_limit: None,
        idle: None,
        latency: None,
        rate: None,
        tls: None,
    };
    let workdir = std::env::temp_dir().join(format!("skiff-bench-cc-{}", std::process::id()));
    std::fs::create_dir_all(&workdir).unwrap();
    let mut checked: Vec<String> = Vec::new();
    for name in ["vless-tls", "ss-2022", "tunnel"] {
        let combo = ALL.iter().find(|c| c.name == name).unwrap();
        for imp in implementations.iter().filter(|i| i.supports(combo)) {
            let chain = start_chain(combo, Some(imp), &opts, &place, &workdir, None)
                .unwrap_or_else(|e| panic!("{name} with {}: {e}", imp.name));
            // Two connections held open through A → B → C → D: six sockets each.
            let held = traffic::hold(chain.entry, 2, place.enter_b.clone()).unwrap();
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut algorithms = socket_algorithms(lab.ns());
            while algorithms.len() < 12 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(100));
                algorithms = socket_algorithms(lab.ns());
            }
            assert!(
                algorithms.len() >= 12,
                "{name} with {}: only {} sockets established: {algorithms:?}",
                imp.name,
                algorithms.len()
            );
            assert!(
                algorithms.iter().all(|a| *a == algorithm),
                "{name} with {}: sockets use {algorithms:?}, not only {algorithm}",
                imp.name
            );
            checked.push(format!("{name}/{}", imp.name));
            drop(held);
            drop(chain);
            // The closed sockets leave `established` before the next chain is counted.
            let deadline = Instant::now() + Duration::from_secs(10);
            while !socket_algorithms(lab.ns()).is_empty() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
    println!("every socket used {algorithm}: {checked:?}");
    assert!(checked.len() >= 3, "{checked:?}");
    let _ = std::fs::remove_dir_all(&workdir);
}

#[test]
fn cc_is_named_in_every_report() {
    if let Err(why) = fair_cc::check_support() {
        assert!(std::env::var_os("CI").is_none(), "CI runs as root: {why}");
        println!("skipped: --cc with another algorithm than the host's {why}");
        return;
    }
    let Some(algorithm) = an_algorithm_to_choose() else {
        println!("skipped: the kernel offers no algorithm but the host's default");
        return;
    };
    let out = std::env::temp_dir().join(format!("skiff-bench-cc-out-{}", std::process::id()));
    let result = skiff()
        .args([
            "bench", "-n", "4M", "-r", "1", "-f", "tunnel", "--peers", "none",
        ])
        .args(["--cc", &algorithm])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&result.stdout);
    assert!(
        result.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&result.stderr)
    );
    let named = format!("TCP {algorithm} for every hop");
    assert!(stdout.contains(&named), "{stdout}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(json["options"]["tcp_congestion"], algorithm.as_str());
    let md = std::fs::read_to_string(out.join("results.md")).unwrap();
    assert!(
        md.contains(&format!("every implementation): {algorithm}")),
        "{md}"
    );
    assert!(
        std::fs::read_to_string(out.join("chart.svg"))
            .unwrap()
            .contains(&named)
    );
    let _ = std::fs::remove_dir_all(&out);
    // An algorithm the kernel does not have is refused, naming the ones it has.
    let result = skiff()
        .args([
            "bench",
            "-f",
            "tunnel",
            "--peers",
            "none",
            "--cc",
            "no_such_cc",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(!result.status.success());
    assert!(stderr.contains("`no_such_cc` is not available"), "{stderr}");
}

#[test]
fn sing_box_runs_every_combination_it_speaks_beside_skiff() {
    let Some(sing_box) = common::shared_peer("sing-box", "SING_BOX_BIN") else {
        return;
    };
    let out = std::env::temp_dir().join(format!("skiff-bench-singbox-{}", std::process::id()));
    let result = skiff()
        .args([
            "bench",
            "-n",
            "2M",
            "-r",
            "2",
            "-f",
            // Every TCP combination but HTTPUpgrade: sing-box 1.13's HTTPUpgrade server
            // sometimes drops the bytes a client sends right behind its upgrade request (see
            // interop_xray_httpupgrade.rs), and then resets the row's connection. Its config
            // is checked by `sing-box check` in skiff-bench's unit tests.
            "tunnel,vless-tcp,vless-tls,vless-ws,vless-ws-tls,vless-grpc-tls,vless-xhttp,\
             vless-vision,vless-reality-vision,vmess,trojan,ss-aes-128-gcm,ss-chacha20,ss-2022",
        ])
        .arg("--peers")
        .arg(format!("sing-box={}", sing_box.display()))
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&result.stdout);
    assert!(
        result.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&result.stderr)
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    let rows = json["rows"].as_array().unwrap();
    let sing_box_rows: Vec<&serde_json::Value> = rows
        .iter()
        .filter(|r| r["implementation"] == "sing-box")
        .collect();
    // Every TCP combination asked for but XHTTP (sing-box has none): tunnel, 7 VLESS (with
    // gRPC and REALITY), 3 VMess, 2 Trojan, 3 Shadowsocks.
    assert_eq!(sing_box_rows.len(), 16, "{json}");
    for row in rows {
        assert!(row["error"].is_null(), "{row}");
        let samples = row["samples"].as_array().unwrap();
        assert_eq!(samples.len(), 2, "{row}");
        assert!(samples.iter().all(|s| s["bytes"] == 2 << 20), "{row}");
    }
    // Each combination has Skiff beside sing-box, and the table says how they compare.
    // The two XHTTP rows have Skiff alone.
    assert_eq!(rows.len(), 34, "{json}");
    assert!(stdout.contains("x sing-box, "), "{stdout}");
    let _ = std::fs::remove_dir_all(&out);
}

/// `--udp-fec`: a short flow through Skiff's UDPspeeder-compatible pair (as it starts, and with
/// `--threads 1`) and speederv2's on a lossy emulated link (root), every row in the table with
/// its figures, and FEC bringing
/// the application's loss under what the link drops on a round trip.
#[test]
fn udp_fec_rows_run_skiff_beside_speederv2_on_a_lossy_link() {
    if let Err(why) = skiff_bench::link::check_support() {
        assert!(std::env::var_os("CI").is_none(), "CI runs as root: {why}");
        println!("skipped: --udp-fec needs a link: {why}");
        return;
    }
    let Some(speederv2) = common::shared_peer("speederv2", "SPEEDERV2_BIN") else {
        return;
    };
    let result = skiff()
        .args([
            "bench",
            "--link",
            "delay=20ms,loss=5%",
            "--udp-fec",
            "10:6",
            "--fec-rate",
            "250",
            "--skiff-threads",
            "1",
            "-t",
            "2s",
            "-r",
            "1",
        ])
        .env("SPEEDERV2_BIN", &speederv2)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&result.stdout);
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(result.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("UDP FEC rows: -f 10:6"), "{stdout}");
    for name in ["skiff", "skiff --threads 1", "speederv2"] {
        let row = stdout
            .lines()
            .find(|l| l.starts_with(&format!("| {name} |")))
            .unwrap_or_else(|| panic!("no {name} row in:\n{stdout}"));
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        assert_eq!(cells[2], "1 × 500 datagrams", "{row}");
        // 5 % each way loses about 10 % of round trips without FEC; 10:6 recovers most.
        let loss: f64 = cells[3].split(' ').next().unwrap().parse().unwrap();
        assert!(loss < 9.75, "{name}: {loss} % lost: {row}");
        let overhead: f64 = cells[6].parse().unwrap();
        assert!(overhead > 1.0, "{name}: FEC adds bytes: {row}");
    }
}
