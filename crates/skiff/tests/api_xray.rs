//! Xray's gRPC API with Xray's own CLI as the client (`xray api …`, XRAY_BIN, else
//! `../shared/peers/bin/xray`): Skiff and Xray run the same config and carry the same traffic
//! (a tunnel inbound and a VLESS user, 256 KiB up and an echo of it down), then
//! `statsquery`, `stats` (with and without `-reset`), `statssys` and `restartlogger` are
//! asked of both. Counter names and values must be equal; statssys is compared by its
//! fields only (Go runtime figures have no Rust counterpart). Both ways of reaching the API
//! are covered: `api.listen`, and Xray's older dokodemo-door inbound routed to the API's tag.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

const PAYLOAD: usize = 256 << 10;
const EMAIL: &str = "alice@example.com";

fn xray() -> Option<PathBuf> {
    shared_peer("xray", "XRAY_BIN")
}

struct Ports {
    tunnel: u16,
    vless: u16,
    api: u16,
}

/// The config both run. `routed`: the API behind a dokodemo-door inbound and a routing rule
/// (Xray's older form) instead of `api.listen`.
fn config(ports: &Ports, echo: u16, routed: bool) -> String {
    let services = ["StatsService", "LoggerService"];
    let mut inbounds = vec![
        serde_json::json!({ "tag": "tunnel-in", "listen": "127.0.0.1", "port": ports.tunnel,
            "protocol": "dokodemo-door",
            "settings": { "address": "127.0.0.1", "port": echo, "network": "tcp" } }),
        serde_json::json!({ "tag": "vless-in", "listen": "127.0.0.1", "port": ports.vless,
            "protocol": "vless", "settings": { "decryption": "none",
                "clients": [{ "id": UUID, "email": EMAIL }] } }),
    ];
    let mut rules = Vec::new();
    let api = if routed {
        inbounds.push(serde_json::json!({ "tag": "api-in", "listen": "127.0.0.1",
            "port": ports.api, "protocol": "dokodemo-door",
            "settings": { "address": "127.0.0.1" } }));
        rules.push(
            serde_json::json!({ "type": "field", "inboundTag": ["api-in"],
            "outboundTag": "api" }),
        );
        serde_json::json!({ "tag": "api", "services": services })
    } else {
        serde_json::json!({ "tag": "api", "listen": format!("127.0.0.1:{}", ports.api),
            "services": services })
    };
    serde_json::json!({
        "log": { "loglevel": "warning" },
        "api": api,
        "stats": {},
        "policy": {
            "levels": { "0": { "statsUserUplink": true, "statsUserDownlink": true } },
            "system": { "statsInboundUplink": true, "statsInboundDownlink": true,
                "statsOutboundUplink": true, "statsOutboundDownlink": true }
        },
        "inbounds": inbounds,
        "outbounds": [{ "tag": "direct", "protocol": "freedom",
            "settings": { "finalRules": [{ "action": "allow", "ip": ["127.0.0.0/8"] }] } }],
        "routing": { "rules": rules }
    })
    .to_string()
}

/// Skiff does not know Xray 26's freedom `finalRules` (Xray's way to allow loopback);
/// everything else is the same text.
fn skiff_config(xray_config: &str) -> String {
    let mut v: serde_json::Value = serde_json::from_str(xray_config).unwrap();
    v["outbounds"][0]["settings"] = serde_json::json!({});
    v.to_string()
}

/// Sends `request` then `payload`, reads until the server closes; returns what came back, or
/// why it could not.
fn carry(port: u16, request: &[u8], payload: &[u8]) -> Result<Vec<u8>, String> {
    let mut conn = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
    conn.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    let mut writer = conn.try_clone().unwrap();
    let mut all = request.to_vec();
    all.extend_from_slice(payload);
    let sender = std::thread::spawn(move || {
        writer.write_all(&all)?;
        writer.shutdown(std::net::Shutdown::Write)
    });
    let mut back = Vec::new();
    let read = conn.read_to_end(&mut back);
    let sent = sender.join().unwrap();
    read.map_err(|e| format!("read after {} bytes: {e}", back.len()))?;
    sent.map_err(|e| format!("send: {e}"))?;
    Ok(back)
}

/// The same traffic through either implementation: the tunnel, then the VLESS user.
fn traffic(ports: &Ports, echo: u16) -> Result<(), String> {
    let data = noise(7, PAYLOAD);
    let back = carry(ports.tunnel, &[], &data).map_err(|e| format!("tunnel echo: {e}"))?;
    if back != data {
        return Err(format!(
            "tunnel echo: {} bytes differ from what was sent",
            back.len()
        ));
    }
    let request = vless_request(&UUID_BYTES, echo, &[]);
    let back = carry(ports.vless, &request, &data).map_err(|e| format!("VLESS echo: {e}"))?;
    if back.get(2..) != Some(&data[..]) {
        return Err(format!(
            "VLESS echo (after the 2-byte response header): {} bytes differ",
            back.len()
        ));
    }
    Ok(())
}

/// `xray api SUBCOMMAND --server=127.0.0.1:PORT ARGS…`: (exit status, stdout, stderr).
fn api(xray: &Path, port: u16, sub: &str, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(xray)
        .arg("api")
        .arg(sub)
        .arg(format!("--server=127.0.0.1:{port}"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The counters of a `statsquery` answer, sorted by name.
fn counters(json: &str) -> Vec<(String, i64)> {
    let v: serde_json::Value = serde_json::from_str(json)
        .unwrap_or_else(|e| panic!("statsquery answer is not JSON ({e}): {json}"));
    let mut list: Vec<(String, i64)> = v["stat"]
        .as_array()
        .map(|stats| {
            stats
                .iter()
                .map(|s| {
                    (
                        s["name"].as_str().unwrap_or_default().to_string(),
                        s["value"].as_i64().unwrap_or(0),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    list.sort();
    list
}

/// Everything one implementation answers, for comparison.
#[derive(Debug)]
struct Answers {
    query: Vec<(String, i64)>,
    user_uplink: String,
    reset_then: Vec<(String, i64)>,
    missing: (bool, String),
    sys_fields: Vec<String>,
    restart: bool,
}

/// Waits (bounded) until the API answers.
fn wait_api(xray: &Path, port: u16) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if api(xray, port, "statsquery", &[]).0 {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the API on port {port} never answered");
}

fn ask(xray: &Path, port: u16) -> Answers {
    wait_api(xray, port);
    let (ok, query, err) = api(xray, port, "statsquery", &[]);
    assert!(ok, "statsquery: {err}");
    let name = format!("user>>>{EMAIL}>>>traffic>>>uplink");
    let (ok, user_uplink, err) = api(xray, port, "stats", &["-name", &name, "-reset"]);
    assert!(ok, "stats: {err}");
    let (ok, after, err) = api(xray, port, "statsquery", &["-pattern", "user>>>"]);
    assert!(ok, "statsquery -pattern: {err}");
    let (ok, _, missing_err) = api(
        xray,
        port,
        "stats",
        &["-name", "user>>>nobody>>>traffic>>>uplink"],
    );
    // The CLI's own wording around the server's message differs by nothing but the name.
    let missing = (ok, missing_err.contains("not found").to_string());
    let (ok, sys, err) = api(xray, port, "statssys", &[]);
    assert!(ok, "statssys: {err}");
    let sys: serde_json::Value = serde_json::from_str(&sys).unwrap();
    let mut sys_fields: Vec<String> = sys.as_object().unwrap().keys().cloned().collect();
    sys_fields.sort();
    let (restart, _, _) = api(xray, port, "restartlogger", &[]);
    Answers {
        query: counters(&query),
        user_uplink,
        reset_then: counters(&after),
        missing,
        sys_fields,
        restart,
    }
}

fn start_xray(xray: &Path, dir: &Path, config: &str, ports: &[u16]) -> Proc {
    let path = dir.join("xray.json");
    std::fs::write(&path, config).unwrap();
    let log = dir.join("xray.out");
    let file = std::fs::File::create(&log).unwrap();
    let child = Command::new(xray)
        .arg("run")
        .arg("-c")
        .arg(&path)
        .stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .unwrap();
    let mut proc = Proc {
        child,
        what: "xray",
    };
    wait_ports(&mut proc, ports, &log);
    proc
}

fn compare(routed: bool) {
    let Some(xray) = xray() else { return };
    let dir = TempDir::new(if routed { "api-routed" } else { "api-listen" });
    let echo = echo_server(16, READ_TIMEOUT);
    let mut answers = Vec::new();
    // Xray, the oracle, once stalled in CI: its tunnel neither answered nor closed for 10 s
    // (it ends such a connection 1 s after the upload, every time here). Its whole run starts
    // over once, on new ports, so that its counters still describe one round of traffic.
    for (implementation, attempts) in [("xray", 2), ("skiff", 1)] {
        let mut attempt = 0;
        let answer = loop {
            attempt += 1;
            let ports = Ports {
                tunnel: free_port(),
                vless: free_port(),
                api: free_port(),
            };
            let text = config(&ports, echo, routed);
            let all = [ports.tunnel, ports.vless, ports.api];
            if implementation == "xray" {
                let _proc = start_xray(&xray, dir.path(), &text, &all);
                match traffic(&ports, echo) {
                    Ok(()) => break ask(&xray, ports.api),
                    Err(e) if attempt < attempts => {
                        eprintln!("Xray's traffic failed ({e}); starting Xray again");
                        continue;
                    }
                    Err(e) => panic!("Xray: {e}"),
                }
            }
            let (mut proc, log) = start_skiff(dir.path(), "skiff", &skiff_config(&text), &all);
            if let Err(e) = traffic(&ports, echo) {
                panic!("Skiff: {e}");
            }
            let answer = ask(&xray, ports.api);
            assert_healthy(&mut proc, &log);
            break answer;
        };
        answers.push(answer);
    }
    let (xray_said, skiff_said) = (&answers[0], &answers[1]);
    // Not vacuous: the traffic shows in the counters.
    assert!(
        xray_said
            .query
            .iter()
            .any(|(n, v)| n.starts_with("user>>>") && *v > 0),
        "Xray counted no user traffic: {xray_said:#?}"
    );
    // The same counter names.
    let names = |a: &Answers| a.query.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(skiff_said), names(xray_said), "counter names");
    // The same values, except where the two count different things: Xray counts a protocol
    // inbound's bytes on its connection (VLESS's request and response headers included, and
    // its downlink read 8 KiB short here), Skiff the payload it carried. There Skiff must be
    // exactly the payload, and Xray within headers and a buffer of it.
    for ((name, skiff), (_, xray)) in skiff_said.query.iter().zip(&xray_said.query) {
        if name.starts_with("inbound>>>vless-in>>>") {
            assert_eq!(*skiff, PAYLOAD as i64, "{name}: Skiff counts the payload");
            assert!(
                (xray - skiff).abs() <= 16 << 10,
                "{name}: Xray {xray}, Skiff {skiff}"
            );
            eprintln!("{name}: Xray {xray}, Skiff {skiff} (the payload)");
        } else if name.starts_with("inbound>>>api-in>>>") {
            // The API's own calls, over HTTP/2 stacks that frame them differently (grpc-go,
            // tonic): counted on both, equal only by chance.
            assert!(
                *skiff > 0 && *xray > 0,
                "{name}: Xray {xray}, Skiff {skiff}"
            );
        } else {
            assert_eq!(skiff, xray, "{name}");
        }
    }
    assert_eq!(
        skiff_said.user_uplink, xray_said.user_uplink,
        "stats -reset answer"
    );
    assert_eq!(skiff_said.reset_then, xray_said.reset_then, "after -reset");
    assert_eq!(skiff_said.missing, xray_said.missing, "an unknown counter");
    // Both must succeed: equal failures would say nothing.
    assert!(skiff_said.restart, "restartlogger failed against Skiff");
    assert_eq!(skiff_said.restart, xray_said.restart, "restartlogger");
    // statssys: Go runtime figures. The CLI prints only non-zero fields; Skiff's are a subset
    // of Xray's names, with tasks, memory and uptime always there.
    for field in &skiff_said.sys_fields {
        assert!(
            xray_said.sys_fields.contains(field),
            "statssys field {field}"
        );
    }
    for field in ["NumGoroutine", "Alloc", "Sys"] {
        assert!(
            skiff_said.sys_fields.iter().any(|f| f == field),
            "statssys lacks {field}"
        );
    }
}

#[test]
fn xray_api_cli_gets_the_same_answers_on_api_listen() {
    compare(false);
}

#[test]
fn xray_api_cli_gets_the_same_answers_through_a_routed_inbound() {
    compare(true);
}
