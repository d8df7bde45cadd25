//! Xray's RoutingService with Xray's own CLI as the client (`xray api lsrules`, `adrules`,
//! `rmrules`; XRAY_BIN, else `../shared/peers/bin/xray`).
//!
//! `routing_service_answers_and_routes_as_xray_does`: Xray 26.7 and Skiff run the same
//! config (a tunnel to a local echo server, freedom and blackhole outbounds, three rules, one
//! to a balancer) and are asked the same questions in the same order: `lsrules`; `adrules
//! -append` of a rule sending the tunnel to the blackhole, then of the same file again (a
//! duplicate ruleTag), of a rule naming a balancer that does not exist, of a rule with no
//! condition, of a new balancer with its rule, of a rule to an outbound nobody has, of
//! `geoip:`/`geosite:` rules (the lists are sent by name and loaded by the server; with
//! `../shared/data/geo`); `rmrules` of a tag, an unknown tag and ""; `adrules` without
//! `-append` (replacing every rule); `lsrules` after each. Between them connections go
//! through the tunnel: before the blackhole rule the echo comes back intact, after it a new
//! connection gets nothing while one opened before keeps echoing, after `rmrules` new
//! connections echo again, and after the replacement they go where the new rules say. The
//! CLI's output and the connections' fate must be the same for both.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

fn geo_dir() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/geo");
    if dir.join("geosite.dat").is_file() && dir.join("geoip.dat").is_file() {
        return Some(dir);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI must have ../shared/data/geo"
    );
    eprintln!("note: ../shared/data/geo not found: the geoip/geosite questions are skipped");
    None
}

/// The config both run (Xray's `finalRules` lets its freedom reach loopback; Skiff is given
/// the same text without it).
fn server_config(api: u16, tunnel: u16, echo: u16, xray: bool) -> String {
    let freedom = if xray {
        serde_json::json!({ "finalRules": [{ "action": "allow", "ip": ["127.0.0.0/8"] }] })
    } else {
        serde_json::json!({})
    };
    serde_json::json!({
        "log": { "loglevel": "warning" },
        "api": { "tag": "api", "listen": format!("127.0.0.1:{api}"),
            "services": ["RoutingService"] },
        "inbounds": [
            { "tag": "tun-in", "listen": "127.0.0.1", "port": tunnel,
              "protocol": "dokodemo-door",
              "settings": { "address": "127.0.0.1", "port": echo, "network": "tcp" } }
        ],
        "outbounds": [
            { "tag": "direct", "protocol": "freedom", "settings": freedom },
            { "tag": "block", "protocol": "blackhole" },
            { "tag": "direct-2", "protocol": "freedom", "settings": freedom }
        ],
        "routing": {
            "rules": [
                { "ruleTag": "base", "inboundTag": ["other-in"], "outboundTag": "block" },
                { "domain": ["example.com"], "outboundTag": "block" },
                { "ip": ["10.0.0.0/8"], "balancerTag": "b1" }
            ],
            "balancers": [{ "tag": "b1", "selector": ["direct"] }]
        }
    })
    .to_string()
}

/// The files `adrules` reads, by name.
fn rule_files(dir: &Path) -> Vec<(&'static str, PathBuf)> {
    let files = [
        (
            "cut",
            serde_json::json!({ "routing": { "rules": [
                { "ruleTag": "cut", "inboundTag": ["tun-in"], "outboundTag": "block" },
                { "port": "80,443", "network": "tcp", "outboundTag": "direct" }
            ] } }),
        ),
        (
            "no-balancer",
            serde_json::json!({ "routing": { "rules": [
                { "ruleTag": "nb", "port": "53", "balancerTag": "missing" }
            ] } }),
        ),
        (
            "no-condition",
            serde_json::json!({ "routing": { "rules": [
                { "ruleTag": "empty", "outboundTag": "direct" }
            ] } }),
        ),
        (
            "balancer",
            serde_json::json!({ "routing": {
                "rules": [{ "ruleTag": "to-b2", "source": ["192.0.2.0/24"],
                    "sourcePort": "1000-2000", "balancerTag": "b2" }],
                "balancers": [{ "tag": "b2", "selector": ["direct-"],
                    "strategy": { "type": "roundRobin" } }] } }),
        ),
        (
            "ghost",
            serde_json::json!({ "routing": { "rules": [
                { "ruleTag": "ghost", "user": ["nobody@x"], "protocol": ["bittorrent"],
                  "attrs": { ":method": "GET" }, "outboundTag": "ghost-out" }
            ] } }),
        ),
        (
            "geo",
            serde_json::json!({ "routing": { "rules": [
                { "ruleTag": "geo-ip", "ip": ["geoip:private", "!1.1.1.0/24"],
                  "outboundTag": "direct" },
                { "ruleTag": "geo-site", "domain": ["geosite:google", "full:a.test",
                    "regexp:^b\\.", "keyword:ads", "domain:c.test"], "outboundTag": "block" }
            ] } }),
        ),
        (
            "replace",
            serde_json::json!({ "routing": { "rules": [
                { "ruleTag": "new-1", "network": "udp", "outboundTag": "block" },
                { "ruleTag": "new-2", "ip": ["127.0.0.0/8"], "port": "1-65535",
                  "outboundTag": "block" }
            ] } }),
        ),
    ];
    files
        .into_iter()
        .map(|(name, json)| {
            let path = dir.join(format!("rules-{name}.json"));
            std::fs::write(&path, json.to_string()).unwrap();
            (name, path)
        })
        .collect()
}

/// `xray api SUBCOMMAND --server=127.0.0.1:PORT ARGS…` (with the geodata for the CLI's own
/// check of `geoip:`/`geosite:` names): whether it succeeded and what it printed, stdout
/// then stderr, without the CLI's dated warnings.
fn api(xray: &Path, port: u16, geo: Option<&Path>, sub: &str, args: &[&str]) -> (bool, String) {
    let mut cmd = Command::new(xray);
    cmd.arg("api")
        .arg(sub)
        .arg(format!("--server=127.0.0.1:{port}"))
        .args(args)
        .stdin(Stdio::null());
    if let Some(geo) = geo {
        cmd.env("XRAY_LOCATION_ASSET", geo);
    }
    let out = run_bounded(cmd, b"", Duration::from_secs(20));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let text: Vec<&str> = text.lines().filter(|l| !l.contains("[Warning]")).collect();
    (out.status.success(), text.join("\n"))
}

fn wait_api(xray: &Path, port: u16) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if api(xray, port, None, "lsrules", &[]).0 {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the API on port {port} never answered");
}

/// FNV-1a of the bytes, to name what came back.
fn checksum(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Sends `data` on `conn` and reads until as many bytes came back, the end, or 10 s.
fn echo_on(conn: &mut TcpStream, data: &[u8]) -> Vec<u8> {
    conn.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    if conn.write_all(data).is_err() {
        return Vec::new();
    }
    let deadline = Instant::now() + READ_TIMEOUT;
    let mut got = Vec::new();
    let mut buf = vec![0u8; 16 << 10];
    while got.len() < data.len() && Instant::now() < deadline {
        match conn.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break,
        }
    }
    got
}

/// What one exchange through the tunnel showed: "echo" when `data` came back intact
/// (checked by checksum), "nothing" when no byte came back, else what did.
fn fate(data: &[u8], got: &[u8]) -> String {
    if got.is_empty() {
        "nothing".into()
    } else if checksum(got) == checksum(data) && got == data {
        "echo".into()
    } else {
        format!("{} bytes, checksum {:x}", got.len(), checksum(got))
    }
}

/// A new connection through the tunnel, `len` bytes of noise each way.
fn new_connection(tunnel: u16, seed: u64, len: usize) -> String {
    let data = noise(seed, len);
    match TcpStream::connect(("127.0.0.1", tunnel)) {
        Ok(mut conn) => fate(&data, &echo_on(&mut conn, &data)),
        Err(e) => format!("refused: {e}"),
    }
}

/// Every question, in order, with its answer (the CLI's, or a connection's fate).
fn ask(
    xray: &Path,
    api_port: u16,
    tunnel: u16,
    files: &[(&str, PathBuf)],
    geo: Option<&Path>,
) -> Vec<(String, String)> {
    wait_api(xray, api_port);
    let file = |name: &str| -> String {
        let (_, path) = files.iter().find(|(n, _)| *n == name).unwrap();
        path.to_string_lossy().into_owned()
    };
    let mut said: Vec<(String, String)> = Vec::new();
    let q = |said: &mut Vec<(String, String)>, sub: &str, args: &[&str]| {
        let (ok, text) = api(xray, api_port, geo, sub, args);
        said.push((
            format!("{sub} {}", args.join(" ")),
            format!("ok={ok}\n{text}"),
        ));
    };
    q(&mut said, "lsrules", &[]);
    said.push(("before any rule".into(), new_connection(tunnel, 1, 100_000)));
    // Opened before the blackhole rule; it must keep echoing after it.
    let mut open = TcpStream::connect(("127.0.0.1", tunnel)).unwrap();
    let first = noise(2, 30_000);
    said.push((
        "open connection".into(),
        fate(&first, &echo_on(&mut open, &first)),
    ));

    q(&mut said, "adrules", &["-append", &file("cut")]);
    q(&mut said, "lsrules", &[]);
    said.push(("after cut".into(), new_connection(tunnel, 3, 100_000)));
    let second = noise(4, 30_000);
    said.push((
        "open connection after cut".into(),
        fate(&second, &echo_on(&mut open, &second)),
    ));
    drop(open);
    // The same ruleTag again; a balancer nobody has; a rule without a condition.
    q(&mut said, "adrules", &["-append", &file("cut")]);
    q(&mut said, "adrules", &["-append", &file("no-balancer")]);
    q(&mut said, "adrules", &["-append", &file("no-condition")]);
    q(&mut said, "lsrules", &[]);
    q(&mut said, "adrules", &["-append", &file("balancer")]);
    q(&mut said, "adrules", &["-append", &file("ghost")]);
    if geo.is_some() {
        q(&mut said, "adrules", &["-append", &file("geo")]);
    }
    q(&mut said, "lsrules", &[]);
    q(&mut said, "rmrules", &["cut", "nope"]);
    q(&mut said, "rmrules", &[""]);
    q(&mut said, "lsrules", &[]);
    said.push((
        "after rmrules cut".into(),
        new_connection(tunnel, 5, 100_000),
    ));
    q(&mut said, "adrules", &[&file("replace")]);
    q(&mut said, "lsrules", &[]);
    said.push(("after replace".into(), new_connection(tunnel, 6, 10_000)));
    q(&mut said, "rmrules", &["new-2"]);
    q(&mut said, "lsrules", &[]);
    said.push((
        "after rmrules new-2".into(),
        new_connection(tunnel, 7, 10_000),
    ));
    said
}

#[test]
fn routing_service_answers_and_routes_as_xray_does() {
    let Some(xray) = shared_peer("xray", "XRAY_BIN") else {
        return;
    };
    let geo = geo_dir();
    let dir = TempDir::new("api-routing");
    let files = rule_files(dir.path());
    let echo = echo_server(64, Duration::from_secs(30));
    let (api_port, tunnel) = (free_port(), free_port());
    let mut answers = Vec::new();
    for implementation in ["xray", "skiff"] {
        let is_xray = implementation == "xray";
        let path = dir.path().join(format!("{implementation}.json"));
        std::fs::write(&path, server_config(api_port, tunnel, echo, is_xray)).unwrap();
        let log = dir.path().join(format!("{implementation}.out"));
        let out = std::fs::File::create(&log).unwrap();
        let (binary, asset_var) = if is_xray {
            (xray.clone(), "XRAY_LOCATION_ASSET")
        } else {
            (
                PathBuf::from(env!("CARGO_BIN_EXE_skiff")),
                "SKIFF_LOCATION_ASSET",
            )
        };
        let mut cmd = Command::new(&binary);
        cmd.arg("run")
            .arg("-c")
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out);
        if let Some(geo) = &geo {
            cmd.env(asset_var, geo);
        }
        let mut proc = Proc {
            child: cmd.spawn().unwrap(),
            what: implementation,
        };
        wait_ports(&mut proc, &[api_port, tunnel], &log);
        let said = ask(&xray, api_port, tunnel, &files, geo.as_deref());
        if !is_xray {
            assert_healthy(&mut proc, &log);
        }
        drop(proc);
        answers.push(said);
    }
    let (xray_said, skiff_said) = (&answers[0], &answers[1]);
    assert_eq!(xray_said.len(), skiff_said.len());
    let mut differences = Vec::new();
    for ((question, x), (_, s)) in xray_said.iter().zip(skiff_said) {
        if x != s {
            differences.push(format!("== {question}\n-- Xray:\n{x}\n-- Skiff:\n{s}"));
        }
    }
    let transcript: Vec<String> = skiff_said
        .iter()
        .map(|(q, a)| format!("== {q}\n{a}"))
        .collect();
    eprintln!("Skiff's transcript:\n{}", transcript.join("\n"));
    assert!(
        differences.is_empty(),
        "{} answers differ:\n{}\n\nSkiff's transcript:\n{}",
        differences.len(),
        differences.join("\n"),
        transcript.join("\n")
    );
    // Not vacuous: the rules moved connections, and the refusals were refusals.
    let answer = |q: &str| {
        skiff_said
            .iter()
            .find(|(question, _)| question == q)
            .map(|(_, a)| a.as_str())
            .unwrap_or_else(|| panic!("no question {q}"))
    };
    assert_eq!(answer("before any rule"), "echo");
    assert_eq!(answer("after cut"), "nothing");
    assert_eq!(answer("open connection after cut"), "echo");
    assert_eq!(answer("after rmrules cut"), "echo");
    assert_eq!(answer("after replace"), "nothing");
    assert_eq!(answer("after rmrules new-2"), "echo");
    let all = transcript.join("\n");
    for expected in [
        "duplicate ruleTag cut",
        "balancer missing not found",
        "this rule has no effective fields",
        "empty tag name!",
        "\"ruleTag\": \"ghost\"",
        "\"ruleTag\": \"new-1\"",
    ] {
        assert!(all.contains(expected), "no `{expected}` in:\n{all}");
    }
}
