//! Sniffing and balancers against Xray 26.7 as the oracle: the same config (SOCKS inbounds
//! with `sniffing` for http and tls, rules on sniffed `domain:`/`full:` names, `protocol`,
//! `attrs`, a round-robin balancer) and the same client traffic through both, every
//! connection to a loopback IP; each must take the same outbound in both, read from their
//! access logs. With `routeOnly` the connections still reach the loopback sinks; one inbound
//! without it shows the override: its client asks for 127.0.0.2 (nothing listens there) and
//! only reaches the sink because the sniffed `localhost` replaced the address.
//!
//! Xray from XRAY_BIN or `../shared/peers/bin/xray`; outside CI a missing one skips, under CI
//! it fails.

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use skiff_sniff::tls::test_support::client_hello_record;

/// What one client sends after its SOCKS5 CONNECT.
#[derive(Clone, Copy)]
enum Payload {
    Tls(Option<&'static str>),
    Http(&'static str, &'static str),
    Bytes(&'static [u8]),
}

impl Payload {
    fn bytes(self) -> Vec<u8> {
        match self {
            Payload::Tls(sni) => client_hello_record(sni),
            Payload::Http(path, host) => {
                format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: t\r\n\r\n").into_bytes()
            }
            Payload::Bytes(b) => b.to_vec(),
        }
    }
}

/// (case name, inbound: route-only or override, payload).
const CASES: &[(&str, bool, Payload)] = &[
    ("tls a.example", true, Payload::Tls(Some("a.example"))),
    (
        "tls sub.a.example",
        true,
        Payload::Tls(Some("sub.a.example")),
    ),
    ("tls other", true, Payload::Tls(Some("other.example"))),
    ("tls no sni", true, Payload::Tls(None)),
    ("http b.test", true, Payload::Http("/", "b.test")),
    ("http x.b.test", true, Payload::Http("/", "x.b.test")),
    ("http attr path", true, Payload::Http("/attr/1", "c.test")),
    ("http other", true, Payload::Http("/", "c.test")),
    ("bal 1", true, Payload::Tls(Some("bal.example"))),
    ("bal 2", true, Payload::Http("/", "bal.example")),
    ("bal 3", true, Payload::Tls(Some("x.bal.example"))),
    ("ssh", true, Payload::Bytes(b"SSH-2.0-OpenSSH_9.6\r\n")),
    ("override localhost", false, Payload::Http("/", "localhost")),
];

fn config(route_only: u16, override_port: u16, access: &Path) -> String {
    let freedom = |tag: &str| {
        serde_json::json!({ "tag": tag, "protocol": "freedom",
            "settings": { "finalRules": [{ "action": "allow", "ip": ["127.0.0.0/8", "::1/128"] }] } })
    };
    let socks = |tag: &str, port: u16, route_only: bool| {
        serde_json::json!({ "tag": tag, "listen": "127.0.0.1", "port": port, "protocol": "socks",
            "sniffing": { "enabled": true, "destOverride": ["http", "tls"], "routeOnly": route_only } })
    };
    serde_json::json!({
        "log": { "loglevel": "warning", "access": access },
        "inbounds": [socks("in", route_only, true), socks("in-override", override_port, false)],
        "outbounds": [freedom("default"), freedom("tls-a"), freedom("http-b"), freedom("attr"),
                      freedom("proto-http"), freedom("bal-2"), freedom("bal-1"), freedom("local")],
        "routing": {
            "domainStrategy": "AsIs",
            "balancers": [{ "tag": "bal", "selector": ["bal-"], "strategy": { "type": "roundRobin" } }],
            "rules": [
                { "domain": ["domain:a.example"], "outboundTag": "tls-a", "ruleTag": "sni" },
                { "domain": ["domain:b.test"], "outboundTag": "http-b" },
                { "domain": ["keyword:bal"], "balancerTag": "bal" },
                { "domain": ["full:localhost"], "outboundTag": "local" },
                { "attrs": { ":path": "^/attr/" }, "outboundTag": "attr" },
                { "protocol": ["http"], "outboundTag": "proto-http" }
            ]
        }
    })
    .to_string()
}

/// Loopback sinks, one per case: each answers every request with a short HTTP response, so
/// a client can tell it got through. Threads end with the test process; each accepts a
/// bounded number of connections.
fn sinks(n: usize) -> Vec<u16> {
    (0..n)
        .map(|_| {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let port = listener.local_addr().unwrap().port();
            std::thread::spawn(move || {
                for _ in 0..4 {
                    let Ok((mut s, _)) = listener.accept() else {
                        return;
                    };
                    std::thread::spawn(move || {
                        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                        let mut buf = [0u8; 4096];
                        let _ = s.read(&mut buf);
                        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nsink");
                    });
                }
            });
            port
        })
        .collect()
}

/// One SOCKS5 CONNECT to `ip:port`, then `payload`; returns what came back.
fn connect_through(socks: u16, ip: [u8; 4], port: u16, payload: &[u8]) -> Vec<u8> {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", socks)) else {
        return Vec::new();
    };
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let _ = s.write_all(&[5, 1, 0]);
    let mut reply = [0u8; 2];
    let _ = s.read_exact(&mut reply);
    let mut request = vec![5, 1, 0, 1];
    request.extend_from_slice(&ip);
    request.extend_from_slice(&port.to_be_bytes());
    let _ = s.write_all(&request);
    let mut answer = [0u8; 10];
    let _ = s.read_exact(&mut answer);
    let _ = s.write_all(payload);
    let mut back = Vec::new();
    let _ = s.read_to_end(&mut back);
    back
}

/// Destination port → outbound tag, from an access log (`… tcp:IP:PORT [in -> TAG]`; Xray
/// writes `>>` for the default route).
fn routes(log: &Path) -> BTreeMap<u16, String> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some(at) = line
            .find("accepted tcp:")
            .or_else(|| line.find("rejected tcp:"))
        else {
            continue;
        };
        let Some(dest) = line[at + 13..].split_whitespace().next() else {
            continue;
        };
        let Some(port) = dest.rsplit(':').next().and_then(|p| p.parse().ok()) else {
            continue;
        };
        let (Some(open), Some(close)) = (line.rfind('['), line.rfind(']')) else {
            continue;
        };
        if close < open {
            continue;
        }
        let tag = line[open + 1..close]
            .split_whitespace()
            .last()
            .unwrap_or_default();
        out.insert(port, tag.to_string());
    }
    out
}

struct Run {
    routes: BTreeMap<u16, String>,
    /// Whether the override case's client got the sink's answer.
    override_reached: bool,
}

fn drive(program: &Path, dir: &Path, name: &str, sinks: &[u16]) -> Run {
    let (port, override_port) = (free_port(), free_port());
    let access = dir.join(format!("{name}.access"));
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, config(port, override_port, &access)).unwrap();
    let out = dir.join(format!("{name}.out"));
    let file = std::fs::File::create(&out).unwrap();
    let child = Command::new(program)
        .args(["run", "-c", &path.to_string_lossy()])
        .stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .unwrap();
    let mut proc = Proc {
        child,
        what: "peer",
    };
    wait_ports(&mut proc, &[port, override_port], &out);
    let mut override_reached = false;
    for ((_, route_only, payload), sink) in CASES.iter().zip(sinks) {
        if *route_only {
            connect_through(port, [127, 0, 0, 1], *sink, &payload.bytes());
        } else {
            let back = connect_through(override_port, [127, 0, 0, 2], *sink, &payload.bytes());
            override_reached = find(&back, b"sink").is_some();
        }
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let routes = routes(&access);
        if routes.len() >= CASES.len() || Instant::now() > deadline {
            drop(proc);
            return Run {
                routes,
                override_reached,
            };
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn sniffed_names_and_balancers_route_as_xray_s() {
    let Some(xray) = shared_peer("xray", "XRAY_BIN") else {
        return;
    };
    let dir = TempDir::new("sniffing-xray");
    // Separate sinks per implementation: each accepts only a bounded number of connections.
    let xray_sinks = sinks(CASES.len());
    let skiff_sinks = sinks(CASES.len());
    let x = drive(&xray, dir.path(), "xray", &xray_sinks);
    let s = drive(
        Path::new(env!("CARGO_BIN_EXE_skiff")),
        dir.path(),
        "skiff",
        &skiff_sinks,
    );
    let mut table = Vec::new();
    let mut differ = 0;
    for (i, (case, _, _)) in CASES.iter().enumerate() {
        let xt = x
            .routes
            .get(&xray_sinks[i])
            .map_or("(none)", String::as_str);
        let st = s
            .routes
            .get(&skiff_sinks[i])
            .map_or("(none)", String::as_str);
        let same = xt == st && xt != "(none)";
        differ += usize::from(!same);
        table.push(format!(
            "{case:22} xray {xt:11} skiff {st:11}{}",
            if same { "" } else { "  DIFFERENT" }
        ));
    }
    let report = table.join("\n");
    eprintln!(
        "{report}\noverride reached the sink: xray {} skiff {}",
        x.override_reached, s.override_reached
    );
    assert_eq!(differ, 0, "routes differ:\n{report}");
    assert!(x.override_reached, "Xray's override did not reach the sink");
    assert!(
        s.override_reached,
        "skiff's override did not reach the sink"
    );
    for tag in [
        "tls-a",
        "http-b",
        "attr",
        "proto-http",
        "bal-1",
        "bal-2",
        "local",
        "default",
    ] {
        assert!(
            s.routes.values().any(|t| t == tag),
            "no connection took `{tag}`:\n{report}"
        );
    }
}
