//! The `dns` section in use: routing's IPIfNonMatch and IPOnDemand resolve through it (hosts
//! and a loopback UDP server), and freedom's UseIPv4 dials the address it gives. The names
//! exist only in the test's DNS, so the system resolver could not have answered.

mod common;

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::*;
use hickory_proto::op::{Message, OpCode};
use hickory_proto::rr::rdata::A;
use hickory_proto::rr::{RData, Record, RecordType};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

/// Answers A queries from `zone`; counts queries.
async fn dns_server(zone: HashMap<&'static str, IpAddr>) -> (SocketAddr, Arc<AtomicUsize>) {
    let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = socket.local_addr().unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 2048];
        while let Ok((len, from)) = socket.recv_from(&mut buf).await {
            seen.fetch_add(1, Ordering::SeqCst);
            let Ok(query) = Message::from_vec(&buf[..len]) else {
                continue;
            };
            let mut reply = Message::response(query.metadata.id, OpCode::Query);
            reply.add_queries(query.queries.clone());
            let q = &query.queries[0];
            let name = q.name().to_ascii();
            if let (Some(IpAddr::V4(ip)), RecordType::A) =
                (zone.get(name.trim_end_matches('.')), q.query_type())
            {
                reply.add_answer(Record::from_rdata(q.name().clone(), 60, RData::A(A(*ip))));
            }
            let _ = socket.send_to(&reply.to_vec().unwrap(), from).await;
        }
    });
    (addr, count)
}

/// A server that greets every connection.
async fn greeter() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let _ = s.write_all(b"hello").await;
        }
    });
    port
}

/// SOCKS5 CONNECT to a domain; returns what the far end sent (empty when blocked).
async fn fetch(socks: u16, host: &str, port: u16) -> Vec<u8> {
    let mut s = TcpStream::connect(("127.0.0.1", socks)).await.unwrap();
    s.write_all(&[5, 1, 0]).await.unwrap();
    let mut reply = [0u8; 2];
    s.read_exact(&mut reply).await.unwrap();
    let mut req = vec![5, 1, 0, 3, host.len() as u8];
    req.extend_from_slice(host.as_bytes());
    req.extend_from_slice(&port.to_be_bytes());
    s.write_all(&req).await.unwrap();
    let mut got = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut got)).await;
    // The SOCKS reply (10 bytes for an IPv4 bound address) comes first.
    got.split_off(got.len().min(10))
}

fn routes(log: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let at = line.find("accepted tcp:")?;
            let dest = line[at + 13..].split_whitespace().next()?;
            let tag = line[line.rfind('[')? + 1..line.rfind(']')?]
                .split_whitespace()
                .last()?;
            Some((dest.split(':').next()?.to_owned(), tag.to_owned()))
        })
        .collect()
}

fn temp_log(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("skiff-dns-{}-{name}.log", std::process::id()))
}

fn config(socks: u16, dns: SocketAddr, strategy: &str, log: &Path) -> String {
    serde_json::json!({
        "log": { "loglevel": "warning", "access": log },
        "inbounds": [{ "tag": "in", "listen": "127.0.0.1", "port": socks, "protocol": "socks" }],
        "outbounds": [
            { "tag": "direct", "protocol": "freedom", "settings": { "domainStrategy": "UseIPv4" } },
            { "tag": "block", "protocol": "blackhole" }
        ],
        "routing": { "domainStrategy": strategy, "rules": [
            { "domain": ["full:named.test"], "outboundTag": "direct" },
            { "ip": ["10.0.0.0/8", "192.168.0.0/16"], "outboundTag": "block" }
        ] },
        "dns": {
            "hosts": { "hosted.test": "192.168.7.7", "alias.test": "ok.test" },
            "servers": [format!("udp://{dns}")]
        }
    })
    .to_string()
}

#[tokio::test]
async fn ip_strategies_route_by_what_the_dns_section_answers() {
    tokio::time::timeout(TEST_DEADLINE, async {
        let zone = HashMap::from([
            ("ok.test", "127.0.0.1".parse().unwrap()),
            ("intranet.test", "10.9.9.9".parse().unwrap()),
            ("named.test", "127.0.0.1".parse().unwrap()),
        ]);
        let (dns, queries) = dns_server(zone).await;
        let target = greeter().await;
        for strategy in ["IPIfNonMatch", "IPOnDemand"] {
            let socks = free_port();
            let log = temp_log(strategy);
            let _ = std::fs::remove_file(&log);
            let _running = start(&config(socks, dns, strategy, &log)).await;
            // Resolved by the UDP server to 127.0.0.1: no IP rule, the default (freedom),
            // which dials it through the DNS module (UseIPv4).
            assert_eq!(
                fetch(socks, "ok.test", target).await,
                b"hello",
                "{strategy}"
            );
            // Resolved into 10.0.0.0/8: blocked.
            assert_eq!(
                fetch(socks, "intranet.test", target).await,
                b"",
                "{strategy}"
            );
            // From hosts into 192.168.0.0/16: blocked; an alias to ok.test: direct.
            assert_eq!(fetch(socks, "hosted.test", target).await, b"", "{strategy}");
            assert_eq!(
                fetch(socks, "alias.test", target).await,
                b"hello",
                "{strategy}"
            );
            // A domain rule comes first and needs no answer under IPIfNonMatch.
            assert_eq!(
                fetch(socks, "named.test", target).await,
                b"hello",
                "{strategy}"
            );
            let mut want = vec![
                ("ok.test", "direct"),
                ("intranet.test", "block"),
                ("hosted.test", "block"),
                ("alias.test", "direct"),
                ("named.test", "direct"),
            ];
            let mut got = Vec::new();
            for _ in 0..50 {
                got = routes(&log);
                if got.len() >= want.len() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let mut got: Vec<(&str, &str)> =
                got.iter().map(|(d, t)| (d.as_str(), t.as_str())).collect();
            got.sort();
            want.sort();
            assert_eq!(got, want, "{strategy}");
            let _ = std::fs::remove_file(&log);
        }
        // Per instance, routing asks A and AAAA of ok.test and intranet.test, and AAAA of
        // ok.test again for alias.test (the test server sends no SOA, so "no AAAA" is not
        // cached); freedom asks A of named.test and finds ok.test's A in the cache.
        assert_eq!(queries.load(Ordering::SeqCst), 2 * 6);
    })
    .await
    .expect("test deadline");
}
