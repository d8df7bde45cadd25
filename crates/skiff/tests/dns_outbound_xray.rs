//! The `dns` outbound against Xray 26.7 as the oracle: the same config (a dokodemo-door on
//! UDP and TCP routed to a `dns` outbound, a hosts entry, a loopback upstream this test runs)
//! and the same queries through both; each must get the same reply (header flags, rcode,
//! question and answers; TTLs are left out, see below) or none in both.
//!
//! Xray from XRAY_BIN or `../shared/peers/bin/xray`; outside CI a missing one skips, under
//! CI it fails.

mod common;

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream, UdpSocket};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::*;
use hickory_proto::op::{Message, MessageType, OpCode, Query};
use hickory_proto::rr::rdata::{A, TXT};
use hickory_proto::rr::{Name, RData, Record, RecordType};

const UPSTREAM_TXT: &str = "from-upstream";

/// The upstream's reply: TXT gets `UPSTREAM_TXT`, A gets 127.0.0.1, anything else an empty
/// answer.
fn upstream_answer(query: &[u8]) -> Option<Vec<u8>> {
    let query = Message::from_vec(query).ok()?;
    let q = query.queries.first()?;
    let mut reply = Message::response(query.metadata.id, OpCode::Query);
    reply.metadata.recursion_desired = query.metadata.recursion_desired;
    reply.metadata.recursion_available = true;
    reply.add_query(q.clone());
    let data = match q.query_type() {
        RecordType::TXT => Some(RData::TXT(TXT::new(vec![UPSTREAM_TXT.to_owned()]))),
        RecordType::A => Some(RData::A(A(Ipv4Addr::LOCALHOST))),
        _ => None,
    };
    if let Some(data) = data {
        reply.add_answer(Record::from_rdata(q.name().clone(), 60, data));
    }
    reply.to_vec().ok()
}

/// The upstream on UDP and TCP (same port), on threads until `stop`; every wait is bounded
/// so the loops see it.
fn upstream(stop: Arc<AtomicBool>) -> u16 {
    // One port for both: an ephemeral UDP port's TCP twin may be some connection's source
    // port, so take ports below the ephemeral range and try a few.
    let (socket, tcp, port) = (0..20)
        .find_map(|_| {
            let port = free_port();
            let udp = UdpSocket::bind(("127.0.0.1", port)).ok()?;
            let tcp = TcpListener::bind(("127.0.0.1", port)).ok()?;
            Some((udp, tcp, port))
        })
        .expect("a port free on both UDP and TCP within 20 tries");
    socket
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    tcp.set_nonblocking(true).unwrap();
    let udp_stop = stop.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while !udp_stop.load(Ordering::SeqCst) {
            let Ok((len, from)) = socket.recv_from(&mut buf) else {
                continue;
            };
            if let Some(reply) = upstream_answer(&buf[..len]) {
                let _ = socket.send_to(&reply, from);
            }
        }
    });
    std::thread::spawn(move || {
        while !stop.load(Ordering::SeqCst) {
            let Ok((mut s, _)) = tcp.accept() else {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            };
            std::thread::spawn(move || {
                let _ = s.set_nonblocking(false);
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                while let Some(query) = read_framed(&mut s) {
                    let Some(reply) = upstream_answer(&query) else {
                        break;
                    };
                    if write_framed(&mut s, &reply).is_err() {
                        break;
                    }
                }
            });
        }
    });
    port
}

fn read_framed(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 2];
    s.read_exact(&mut len).ok()?;
    let mut msg = vec![0u8; usize::from(u16::from_be_bytes(len))];
    s.read_exact(&mut msg).ok()?;
    Some(msg)
}

fn write_framed(s: &mut TcpStream, msg: &[u8]) -> std::io::Result<()> {
    let mut framed = (msg.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(msg);
    s.write_all(&framed)
}

fn query(id: u16, name: &str, qtype: RecordType) -> Vec<u8> {
    let mut m = Message::new(id, MessageType::Query, OpCode::Query);
    m.metadata.recursion_desired = true;
    m.add_query(Query::query(Name::from_ascii(name).unwrap(), qtype));
    m.to_vec().unwrap()
}

/// A reply as compared: flags, rcode, question, answers without TTL. (TTLs differ by
/// design: skiff's resolver seam gives no TTL, so hijacked answers carry Xray's hosts TTL of
/// 10 s whatever their source.)
fn describe(reply: Option<Vec<u8>>) -> String {
    let Some(bytes) = reply else {
        return "no reply".into();
    };
    let Ok(m) = Message::from_vec(&bytes) else {
        return format!("unreadable {} bytes", bytes.len());
    };
    let h = &m.metadata;
    let mut out = format!(
        "id {} qr {} aa {} rd {} ra {} rcode {}",
        h.id,
        h.message_type == MessageType::Response,
        h.authoritative,
        h.recursion_desired,
        h.recursion_available,
        h.response_code
    );
    for q in &m.queries {
        out += &format!(" | q {} {}", q.name(), q.query_type());
    }
    for r in &m.answers {
        out += &format!(" | an {} {} {}", r.name, r.record_type(), r.data);
    }
    out
}

/// The outbound's settings compared: the legacy `nonIPQuery: skip` with a blocked type, the
/// defaults (no rules: non-IP queries get an empty NOERROR), legacy reject (REFUSED), and
/// Xray 26's `rules` with a domain, a qType list and an rcode.
fn variants(upstream: u16) -> Vec<serde_json::Value> {
    let base = |extra: serde_json::Value| {
        let mut v = serde_json::json!({ "address": "127.0.0.1", "port": upstream });
        v.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        v
    };
    vec![
        base(serde_json::json!({ "nonIPQuery": "skip", "blockTypes": [65] })),
        base(serde_json::json!({})),
        base(serde_json::json!({ "blockTypes": [65] })),
        base(serde_json::json!({ "rules": [
            { "action": "return", "domain": ["domain:blocked.test"], "rCode": 3 },
            { "action": "drop", "qType": "65" },
            { "action": "hijack", "qType": "1,28" },
            { "action": "direct", "qType": "16" },
            { "action": "return", "rCode": 2 }
        ] })),
    ]
}

fn config(port: u16, upstream: u16, settings: &serde_json::Value) -> String {
    serde_json::json!({
        "log": { "loglevel": "warning" },
        "inbounds": [{
            "tag": "dns-in", "listen": "127.0.0.1", "port": port, "protocol": "dokodemo-door",
            // Nothing listens on the discard port: forwarded queries reach the upstream only
            // through the outbound's address/port override.
            "settings": { "address": "127.0.0.1", "port": 9, "network": "tcp,udp" }
        }],
        "outbounds": [
            { "tag": "direct", "protocol": "freedom" },
            { "tag": "dns-out", "protocol": "dns", "settings": settings }
        ],
        "routing": { "rules": [{ "inboundTag": ["dns-in"], "outboundTag": "dns-out" }] },
        "dns": {
            "hosts": { "hijack.test": "127.0.0.9" },
            "servers": [{ "address": "127.0.0.1", "port": upstream }]
        }
    })
    .to_string()
}

/// What is asked, over UDP and over TCP: hijacked A from hosts and from the module's server,
/// AAAA with no v6 address, TXT, a blocked type (65, HTTPS), MX (no rule names it), and a
/// name a domain rule names.
const QUESTIONS: &[(u16, &str, RecordType)] = &[
    (0x0101, "hijack.test.", RecordType::A),
    (0x0102, "other.test.", RecordType::A),
    (0x0103, "hijack.test.", RecordType::AAAA),
    (0x0104, "txt.test.", RecordType::TXT),
    (0x0105, "hijack.test.", RecordType::HTTPS),
    (0x0106, "mx.test.", RecordType::MX),
    (0x0107, "x.Blocked.test.", RecordType::A),
];

fn ask_udp(port: u16) -> Vec<String> {
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    client.connect(("127.0.0.1", port)).unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let mut out = Vec::new();
    // Garbage first: neither answers it.
    client.send(b"\x00\x01 not a dns message").unwrap();
    for &(id, name, qtype) in QUESTIONS {
        client.send(&query(id, name, qtype)).unwrap();
        let mut buf = [0u8; 4096];
        let reply = client.recv(&mut buf).ok().map(|n| buf[..n].to_vec());
        out.push(format!("udp {name} {qtype}: {}", describe(reply)));
    }
    out
}

fn ask_tcp(port: u16) -> Vec<String> {
    let mut out = Vec::new();
    // One connection per question: a dropped query leaves nothing to read.
    for &(id, name, qtype) in QUESTIONS {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        write_framed(&mut s, &query(id, name, qtype)).unwrap();
        out.push(format!(
            "tcp {name} {qtype}: {}",
            describe(read_framed(&mut s))
        ));
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

#[test]
fn dns_outbound_answers_as_xray_s() {
    let Some(xray) = shared_peer("xray", "XRAY_BIN") else {
        return;
    };
    let stop = Arc::new(AtomicBool::new(false));
    let upstream_port = upstream(stop.clone());
    let dir = TempDir::new("dns-outbound");
    let mut results: [Vec<String>; 2] = Default::default();
    for (v, settings) in variants(upstream_port).iter().enumerate() {
        for (which, name) in ["xray", "skiff"].into_iter().enumerate() {
            let port = free_port();
            let path = dir.path().join(format!("{name}-{v}.json"));
            std::fs::write(&path, config(port, upstream_port, settings)).unwrap();
            let out = dir.path().join(format!("{name}-{v}.out"));
            let path = path.to_string_lossy().into_owned();
            let program = if name == "xray" {
                xray.clone()
            } else {
                Path::new(env!("CARGO_BIN_EXE_skiff")).to_path_buf()
            };
            let mut proc = spawn(&program, &path, &out);
            wait_ports(&mut proc, &[port], &out);
            wait_udp(&mut proc, port, &out);
            let started = Instant::now();
            let tagged = |line: String| format!("#{v} {line}");
            results[which].extend(ask_udp(port).into_iter().map(tagged));
            results[which].extend(ask_tcp(port).into_iter().map(tagged));
            eprintln!("{name} variant {v} answered in {:?}", started.elapsed());
            drop(proc);
        }
    }
    stop.store(true, Ordering::SeqCst);
    let (xray, skiff) = (&results[0], &results[1]);
    let mut report = Vec::new();
    let mut differ = 0;
    for (x, s) in xray.iter().zip(skiff) {
        if x == s {
            report.push(format!("same  {x}"));
        } else {
            differ += 1;
            report.push(format!("xray  {x}\nskiff {s}"));
        }
    }
    let report = report.join("\n");
    eprintln!("{report}");
    assert!(
        xray.iter().any(|l| l.contains("127.0.0.9"))
            && xray.iter().any(|l| l.contains(UPSTREAM_TXT)),
        "Xray did not hijack and forward as expected:\n{report}"
    );
    assert_eq!(differ, 0, "replies differ:\n{report}");
}
