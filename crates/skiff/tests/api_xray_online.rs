//! Xray's online-user stats (`policy.levels.N.statsUserOnline`) with Xray's own CLI as the
//! client (`xray api statsonline`, `statsonlineiplist`, `statsgetallonlineusers`; XRAY_BIN,
//! else `../shared/peers/bin/xray`).
//!
//! * `online_users_answer_as_xray_does`: Skiff and Xray run the same config (a VLESS inbound
//!   with three users, statsUserOnline on) and see the same live connections: user a@x from
//!   127.0.0.2 (twice), 127.0.0.3 and 127.0.0.1, b@x from 127.0.0.4, c@x from 127.0.0.1 only
//!   (which Xray leaves out: its map exists, with no IP). The same questions are asked before
//!   any connection, with them open, after some close and after all close; the CLI's output
//!   must be the same. Xray 26.7 counts connections, with no expiry: an IP leaves the list as
//!   soon as its last connection ends, so "after" is waited for with a bounded deadline.
//!   The Unix seconds of `lastSeen` differ between the two runs: each is checked to lie
//!   within its run, then replaced by `T`; lists Xray prints in Go's map order are sorted.
//!   `statsonlineiplist -all` (GetUsersStats) is asked too, with `-include-traffic`.
//!   `ONLINE_SHOW=1 … -- --nocapture` prints Xray's answers.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::*;

const UUID_B: &str = "b831381d-6324-4d53-ad4f-8cda48b30812";
const UUID_B_BYTES: [u8; 16] = [
    0xb8, 0x31, 0x38, 0x1d, 0x63, 0x24, 0x4d, 0x53, 0xad, 0x4f, 0x8c, 0xda, 0x48, 0xb3, 0x08, 0x12,
];
const UUID_C: &str = "b831381d-6324-4d53-ad4f-8cda48b30813";
const UUID_C_BYTES: [u8; 16] = [
    0xb8, 0x31, 0x38, 0x1d, 0x63, 0x24, 0x4d, 0x53, 0xad, 0x4f, 0x8c, 0xda, 0x48, 0xb3, 0x08, 0x13,
];

fn xray() -> Option<PathBuf> {
    shared_peer("xray", "XRAY_BIN")
}

/// The server config both run (Xray's `finalRules` lets its freedom reach loopback; Skiff is
/// given the same text without it). Short uplinkOnly/downlinkOnly so a closed connection ends
/// at once on both.
fn server_config(vless: u16, api: u16, xray: bool) -> String {
    let freedom = if xray {
        serde_json::json!({ "finalRules": [{ "action": "allow", "ip": ["127.0.0.0/8"] }] })
    } else {
        serde_json::json!({})
    };
    serde_json::json!({
        "log": { "loglevel": "warning" },
        "api": { "tag": "api", "listen": format!("127.0.0.1:{api}"),
            "services": ["StatsService"] },
        "stats": {},
        "policy": { "levels": { "0": { "statsUserUplink": true, "statsUserDownlink": true,
            "statsUserOnline": true, "uplinkOnly": 1, "downlinkOnly": 1 } } },
        "inbounds": [
            { "tag": "vless-in", "listen": "127.0.0.1", "port": vless, "protocol": "vless",
              "settings": { "decryption": "none", "clients": [
                { "id": UUID, "email": "a@x" },
                { "id": UUID_B, "email": "b@x" },
                { "id": UUID_C, "email": "c@x" }] } }
        ],
        "outbounds": [{ "tag": "direct", "protocol": "freedom", "settings": freedom }]
    })
    .to_string()
}

/// A VLESS connection from `source` (a loopback address) as user `id`, to the echo server,
/// that carried a few bytes both ways and is still open.
fn open(source: &str, server: u16, id: &[u8; 16], echo: u16) -> TcpStream {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    let from: SocketAddr = format!("{source}:0").parse().unwrap();
    socket.bind(&from.into()).unwrap();
    let to: SocketAddr = format!("127.0.0.1:{server}").parse().unwrap();
    socket
        .connect_timeout(&to.into(), Duration::from_secs(5))
        .unwrap_or_else(|e| panic!("connect from {source}: {e}"));
    let mut conn: TcpStream = socket.into();
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let data = b"online?";
    conn.write_all(&vless_request(id, echo, data)).unwrap();
    // VLESS's two-byte response header, then the echo.
    let mut back = vec![0u8; 2 + data.len()];
    conn.read_exact(&mut back)
        .unwrap_or_else(|e| panic!("echo from {source}: {e}"));
    assert_eq!(&back[2..], data);
    conn
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// A JSON integer the CLI may print as a number or (protojson's int64) as a string.
fn integer(v: &serde_json::Value) -> Option<i64> {
    v.as_i64().or_else(|| v.as_str()?.parse().ok())
}

/// Replaces a `lastSeen` value with `T` after checking it lies within the run.
fn seen(v: &mut serde_json::Value, run: (i64, i64)) {
    let t = integer(v).unwrap_or_else(|| panic!("lastSeen is not a number: {v}"));
    assert!(
        (run.0 - 1..=run.1 + 1).contains(&t),
        "lastSeen {t} outside the run {run:?}"
    );
    *v = serde_json::Value::from("T");
}

/// The CLI's answer with its Unix seconds replaced (see `seen`) and Go's map orders sorted:
/// `ips` objects (JSON objects compare unordered anyway), `users` lists of names or of
/// objects (by email), each user's `ips` list (by ip). Text that is not JSON (an error) as
/// it is.
fn normalized(text: &str, run: (i64, i64)) -> String {
    let Ok(mut v) = serde_json::from_str::<serde_json::Value>(text) else {
        return text.to_string();
    };
    if let Some(ips) = v.get_mut("ips").and_then(|i| i.as_object_mut()) {
        for value in ips.values_mut() {
            seen(value, run);
        }
    }
    if let Some(users) = v.get_mut("users").and_then(|u| u.as_array_mut()) {
        for user in users.iter_mut() {
            if let Some(ips) = user.get_mut("ips").and_then(|i| i.as_array_mut()) {
                for ip in ips.iter_mut() {
                    if let Some(last) = ip.get_mut("lastSeen") {
                        seen(last, run);
                    }
                }
                ips.sort_by_key(|ip| ip["ip"].to_string());
            }
        }
        users.sort_by_key(|u| match u.as_str() {
            Some(name) => name.to_string(),
            None => u["email"].to_string(),
        });
    }
    serde_json::to_string_pretty(&v).unwrap()
}

/// Every question of one moment, with its answer.
fn ask(xray: &Path, port: u16, moment: &str, run_start: i64) -> Vec<(String, String)> {
    let mut said = Vec::new();
    let mut q = |sub: &str, args: &[&str]| {
        let (ok, text) = xray_api(xray, port, sub, args);
        let run = (run_start, unix_now());
        said.push((
            format!("[{moment}] {sub} {}", args.join(" ")),
            format!("ok={ok}\n{}", normalized(&text, run)),
        ));
    };
    for email in ["a@x", "b@x", "c@x", "nobody@x"] {
        q("statsonline", &["-email", email]);
        q("statsonlineiplist", &["-email", email]);
    }
    q("statsgetallonlineusers", &[]);
    q("statsonlineiplist", &["-all"]);
    q("statsonlineiplist", &["-all", "-include-traffic"]);
    said
}

/// The value `statsonline -email EMAIL` prints, 0 when the CLI prints none (protojson
/// leaves a zero out) or fails.
fn online_count(xray: &Path, port: u16, email: &str) -> i64 {
    let (ok, text) = xray_api(xray, port, "statsonline", &["-email", email]);
    if !ok {
        return 0;
    }
    let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    integer(&v["stat"]["value"]).unwrap_or(0)
}

/// Waits (bounded) until user `email` is online from `want` IPs.
fn wait_count(xray: &Path, port: u16, email: &str, want: i64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got = online_count(xray, port, email);
        if got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{email} stayed online from {got} IPs, not {want}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One run against whichever server listens on `vless`/`api`: the moments and their answers.
fn scenario(xray: &Path, vless: u16, api_port: u16, echo: u16) -> Vec<(String, String)> {
    wait_xray_api(xray, api_port, &["statssys"]);
    let start = unix_now();
    let mut said = ask(xray, api_port, "before", start);
    let a1 = open("127.0.0.2", vless, &UUID_BYTES, echo);
    let a2 = open("127.0.0.2", vless, &UUID_BYTES, echo);
    let a3 = open("127.0.0.3", vless, &UUID_BYTES, echo);
    let a4 = open("127.0.0.1", vless, &UUID_BYTES, echo);
    let b1 = open("127.0.0.4", vless, &UUID_B_BYTES, echo);
    let c1 = open("127.0.0.1", vless, &UUID_C_BYTES, echo);
    said.extend(ask(xray, api_port, "open", start));
    // One of 127.0.0.2's two connections and 127.0.0.3's only one end.
    drop(a1);
    drop(a3);
    wait_count(xray, api_port, "a@x", 1);
    said.extend(ask(xray, api_port, "some closed", start));
    drop((a2, a4, b1, c1));
    wait_count(xray, api_port, "a@x", 0);
    wait_count(xray, api_port, "b@x", 0);
    said.extend(ask(xray, api_port, "all closed", start));
    said
}

#[test]
fn online_users_answer_as_xray_does() {
    let Some(xray) = xray() else { return };
    let dir = TempDir::new("api-online");
    let echo = echo_server(64, Duration::from_secs(30));
    let mut answers = Vec::new();
    for implementation in ["xray", "skiff"] {
        // Ports of its own for each: nothing in the answers names them.
        let (vless, api_port) = (free_port(), free_port());
        let text = server_config(vless, api_port, implementation == "xray");
        let said = if implementation == "xray" {
            let (_proc, _) = start_peer(&xray, "xray", dir.path(), "xray", &text, vless, false);
            scenario(&xray, vless, api_port, echo)
        } else {
            let (mut proc, log) = start_skiff(dir.path(), "skiff", &text, &[vless, api_port]);
            let said = scenario(&xray, vless, api_port, echo);
            assert_healthy(&mut proc, &log);
            said
        };
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
    assert!(
        differences.is_empty(),
        "{} answers differ:\n{}",
        differences.len(),
        differences.join("\n")
    );
    // Not vacuous: Xray's answers name the users online and their IPs, and leave out
    // 127.0.0.1.
    let all: String = xray_said
        .iter()
        .map(|(q, a)| format!("{q}\n{a}\n"))
        .collect();
    assert!(all.contains("user>>>a@x>>>online"), "{all}");
    assert!(
        all.contains("127.0.0.3") && all.contains("127.0.0.4"),
        "{all}"
    );
    assert!(!all.contains("\"127.0.0.1\""), "{all}");
    if std::env::var_os("ONLINE_SHOW").is_some() {
        eprintln!("{all}");
    }
}
