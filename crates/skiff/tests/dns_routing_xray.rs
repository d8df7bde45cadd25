//! The `dns` section and `IPIfNonMatch` against Xray 26.7 as the oracle: the same config
//! (hosts with a full name, a suffix and an alias; one UDP server on loopback that this test
//! runs) and the same SOCKS5 requests through both; each connection must take the same
//! outbound, read from the access logs. Every outbound the connections can take is a
//! blackhole with its own tag, so nothing leaves the machine; the names exist only in the
//! test's DNS.
//!
//! Xray from XRAY_BIN or `../shared/peers/bin/xray`; outside CI a missing one skips, under
//! CI it fails.

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpStream, UdpSocket};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::*;
use hickory_proto::op::{Message, OpCode, ResponseCode};
use hickory_proto::rr::rdata::A;
use hickory_proto::rr::{RData, Record, RecordType};

/// What the loopback server knows (A records only; AAAA questions get an empty answer).
const ZONE: &[(&str, Ipv4Addr)] = &[
    ("ok.test", Ipv4Addr::new(127, 0, 0, 1)),
    ("intranet.test", Ipv4Addr::new(10, 9, 9, 9)),
    ("far.test", Ipv4Addr::new(198, 51, 100, 9)),
    ("named.test", Ipv4Addr::new(198, 51, 100, 10)),
];

/// Destinations (SOCKS5 CONNECT) whose routes are compared.
const DESTINATIONS: &[&str] = &[
    "ok.test",
    "intranet.test",
    "far.test",
    "hosted.test",
    "alias.test",
    "a.suffix.test",
    "named.test",
    "unknown.test",
    "10.1.1.1",
    "8.8.8.8",
];

/// A UDP DNS server on a thread until `stop`; reads time out so the loop checks it.
fn dns_server(stop: Arc<AtomicBool>) -> u16 {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let port = socket.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while !stop.load(Ordering::SeqCst) {
            let Ok((len, from)) = socket.recv_from(&mut buf) else {
                continue;
            };
            let Ok(query) = Message::from_vec(&buf[..len]) else {
                continue;
            };
            let Some(q) = query.queries.first() else {
                continue;
            };
            let mut reply = Message::response(query.metadata.id, query.metadata.op_code);
            reply.metadata.recursion_desired = query.metadata.recursion_desired;
            reply.metadata.recursion_available = true;
            reply.add_queries(query.queries.clone());
            let name = q
                .name()
                .to_ascii()
                .trim_end_matches('.')
                .to_ascii_lowercase();
            match ZONE.iter().find(|(n, _)| *n == name) {
                Some((_, ip)) if q.query_type() == RecordType::A => {
                    reply.add_answer(Record::from_rdata(q.name().clone(), 60, RData::A(A(*ip))));
                }
                Some(_) => {}
                None => reply.metadata.response_code = ResponseCode::NXDomain,
            }
            debug_assert_eq!(reply.metadata.op_code, OpCode::Query);
            if let Ok(bytes) = reply.to_vec() {
                let _ = socket.send_to(&bytes, from);
            }
        }
    });
    port
}

fn config(port: u16, dns_port: u16, access: &Path) -> String {
    let blackhole = |tag: &str| serde_json::json!({ "tag": tag, "protocol": "blackhole" });
    serde_json::json!({
        "log": { "loglevel": "warning", "access": access },
        "inbounds": [{ "tag": "in", "listen": "127.0.0.1", "port": port, "protocol": "socks" }],
        "outbounds": [blackhole("default"), blackhole("private"), blackhole("far"),
                      blackhole("named"), { "tag": "dns-direct", "protocol": "freedom" }],
        "routing": { "domainStrategy": "IPIfNonMatch", "rules": [
            // Xray routes its DNS module's own queries like connections (skiff sends them
            // directly and warns that the tag is unused): without this rule they would go
            // to the default blackhole.
            { "inboundTag": ["dns-module"], "outboundTag": "dns-direct" },
            { "domain": ["full:named.test"], "outboundTag": "named" },
            { "ip": ["10.0.0.0/8", "192.168.0.0/16"], "outboundTag": "private" },
            { "ip": ["198.51.100.0/24"], "outboundTag": "far" }
        ] },
        "dns": {
            "hosts": {
                "hosted.test": "192.168.7.7",
                "alias.test": "far.test",
                "domain:suffix.test": ["198.51.100.4"]
            },
            "servers": [{ "address": "127.0.0.1", "port": dns_port }],
            "queryStrategy": "UseIPv4",
            "tag": "dns-module"
        }
    })
    .to_string()
}

/// One SOCKS5 CONNECT to `host:80`; the answer does not matter (blackholes), only that the
/// request was made.
fn connect_through(socks: u16, host: &str) {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", socks)) else {
        return;
    };
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let _ = s.write_all(&[5, 1, 0]);
    let mut reply = [0u8; 2];
    let _ = s.read_exact(&mut reply);
    let mut request = vec![5, 1, 0];
    match host.parse::<Ipv4Addr>() {
        Ok(ip) => {
            request.push(1);
            request.extend_from_slice(&ip.octets());
        }
        Err(_) => {
            request.push(3);
            request.push(host.len() as u8);
            request.extend_from_slice(host.as_bytes());
        }
    }
    request.extend_from_slice(&80u16.to_be_bytes());
    let _ = s.write_all(&request);
    let mut answer = [0u8; 64];
    let _ = s.read(&mut answer);
}

/// Destination host → outbound tag, from an access log (`… tcp:HOST:PORT [in -> TAG]`).
fn routes(log: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some(at) = line.find("accepted tcp:") else {
            continue;
        };
        let Some(dest) = line[at + 13..].split_whitespace().next() else {
            continue;
        };
        let host = dest.rsplit_once(':').map(|(h, _)| h).unwrap_or(dest);
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
        out.insert(host.to_string(), tag.to_string());
    }
    out
}

fn spawn(program: &Path, config: &str, out: &Path) -> Proc {
    let file = std::fs::File::create(out).unwrap();
    let child = Command::new(program)
        .args(["run", "-c", config])
        .stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .unwrap();
    Proc {
        child,
        what: "peer",
    }
}

fn drive(mut proc: Proc, port: u16, out: &Path, access: &Path) -> BTreeMap<String, String> {
    wait_ports(&mut proc, &[port], out);
    for host in DESTINATIONS {
        connect_through(port, host);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = routes(access);
        if got.len() >= DESTINATIONS.len() || Instant::now() > deadline {
            return got;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn dns_hosts_and_ip_if_non_match_route_as_xray_s() {
    let Some(xray) = shared_peer("xray", "XRAY_BIN") else {
        return;
    };
    let stop = Arc::new(AtomicBool::new(false));
    let dns_port = dns_server(stop.clone());
    let dir = TempDir::new("dns-routing");
    let mut results = Vec::new();
    for name in ["xray", "skiff"] {
        let port = free_port();
        let access = dir.path().join(format!("{name}.access"));
        let path = dir.path().join(format!("{name}.json"));
        std::fs::write(&path, config(port, dns_port, &access)).unwrap();
        let out = dir.path().join(format!("{name}.out"));
        let path = path.to_string_lossy().into_owned();
        let program = if name == "xray" {
            xray.clone()
        } else {
            Path::new(env!("CARGO_BIN_EXE_skiff")).to_path_buf()
        };
        results.push(drive(spawn(&program, &path, &out), port, &out, &access));
    }
    stop.store(true, Ordering::SeqCst);
    let (xray, skiff) = (&results[0], &results[1]);
    let mut differ = 0;
    let mut table = Vec::new();
    for dest in DESTINATIONS {
        let x = xray.get(*dest).map(String::as_str).unwrap_or("(none)");
        let s = skiff.get(*dest).map(String::as_str).unwrap_or("(none)");
        differ += usize::from(x != s);
        table.push(format!(
            "{dest:16} xray {x:8} skiff {s:8}{}",
            if x == s { "" } else { "  DIFFERENT" }
        ));
    }
    let report = table.join("\n");
    eprintln!("{report}");
    assert_eq!(
        xray.len(),
        DESTINATIONS.len(),
        "Xray logged every destination:\n{report}"
    );
    assert_eq!(differ, 0, "routes differ:\n{report}");
    for tag in ["default", "private", "far", "named"] {
        assert!(
            skiff.values().any(|t| t == tag),
            "no connection took `{tag}`:\n{report}"
        );
    }
}
