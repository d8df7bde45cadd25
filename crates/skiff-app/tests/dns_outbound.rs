//! The `dns` outbound behind a dokodemo-door on UDP and TCP: A queries are answered by the
//! `dns` section (a hosts entry), a TXT query goes on to the configured upstream (a loopback
//! server that knows TXT), garbage gets no answer.

mod common;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::*;
use hickory_proto::op::{Message, MessageType, OpCode, Query};
use hickory_proto::rr::rdata::{A, TXT};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use skiff_core::Network;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

pub const UPSTREAM_TXT: &str = "from-upstream";

/// The upstream's reply: TXT questions get `UPSTREAM_TXT`, A questions 127.0.0.1 (so a
/// hijacked answer, 127.0.0.9, cannot be mistaken for a forwarded one).
fn upstream_answer(query: &[u8]) -> Option<Vec<u8>> {
    let query = Message::from_vec(query).ok()?;
    let q = query.queries.first()?;
    let mut reply = Message::response(query.metadata.id, OpCode::Query);
    reply.add_query(q.clone());
    let data = match q.query_type() {
        RecordType::TXT => RData::TXT(TXT::new(vec![UPSTREAM_TXT.to_owned()])),
        RecordType::A => RData::A(A("127.0.0.1".parse().unwrap())),
        _ => return reply.to_vec().ok(),
    };
    reply.add_answer(Record::from_rdata(q.name().clone(), 60, data));
    reply.to_vec().ok()
}

/// A loopback DNS server on UDP and TCP (same port); counts the queries it gets.
async fn upstream() -> (SocketAddr, Arc<AtomicUsize>) {
    let (socket, tcp, addr) = udp_and_tcp_on_one_port().await;
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 4096];
        while let Ok((len, from)) = socket.recv_from(&mut buf).await {
            seen.fetch_add(1, Ordering::SeqCst);
            if let Some(reply) = upstream_answer(&buf[..len]) {
                let _ = socket.send_to(&reply, from).await;
            }
        }
    });
    let seen = count.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = tcp.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                while let Ok(Some(query)) = read_framed(&mut s).await {
                    seen.fetch_add(1, Ordering::SeqCst);
                    let Some(reply) = upstream_answer(&query) else {
                        break;
                    };
                    if write_framed(&mut s, &reply).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    (addr, count)
}

async fn read_framed(s: &mut TcpStream) -> std::io::Result<Option<Vec<u8>>> {
    let mut len = [0u8; 2];
    if s.read_exact(&mut len).await.is_err() {
        return Ok(None);
    }
    let mut msg = vec![0u8; usize::from(u16::from_be_bytes(len))];
    s.read_exact(&mut msg).await?;
    Ok(Some(msg))
}

async fn write_framed(s: &mut TcpStream, msg: &[u8]) -> std::io::Result<()> {
    let mut framed = (msg.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(msg);
    s.write_all(&framed).await
}

pub fn query(id: u16, name: &str, qtype: RecordType) -> Vec<u8> {
    let mut m = Message::new(id, MessageType::Query, OpCode::Query);
    m.metadata.recursion_desired = true;
    m.add_query(Query::query(Name::from_ascii(name).unwrap(), qtype));
    m.to_vec().unwrap()
}

/// The A addresses and TXT strings of a reply, after checking it answers `id`'s question.
fn contents(reply: &[u8], id: u16, name: &str, qtype: RecordType) -> (Vec<IpAddr>, Vec<String>) {
    let m = Message::from_vec(reply).expect("a DNS reply");
    assert_eq!(m.metadata.id, id);
    assert_eq!(m.metadata.message_type, MessageType::Response);
    assert_eq!(m.queries.len(), 1);
    assert_eq!(m.queries[0].name().to_ascii(), name);
    assert_eq!(m.queries[0].query_type(), qtype);
    let ips = m.answers.iter().filter_map(|r| r.data.ip_addr()).collect();
    let texts = m
        .answers
        .iter()
        .filter_map(|r| match &r.data {
            RData::TXT(t) => Some(t.to_string()),
            _ => None,
        })
        .collect();
    (ips, texts)
}

fn config(port: u16, upstream: SocketAddr) -> String {
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
            { "tag": "dns-out", "protocol": "dns", "settings": {
                "address": "127.0.0.1", "port": upstream.port(), "nonIPQuery": "skip" } }
        ],
        "routing": { "rules": [{ "inboundTag": ["dns-in"], "outboundTag": "dns-out" }] },
        "dns": {
            "hosts": { "hijack.test": "127.0.0.9" },
            "servers": [format!("udp://{upstream}")]
        }
    })
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dns_outbound_answers_a_and_forwards_txt_over_udp_and_tcp() {
    tokio::time::timeout(TEST_DEADLINE, async {
        let (upstream, count) = upstream().await;
        let running = start(&config(free_port(), upstream)).await;

        let entry = running.address_of("dns-in", Network::Udp).unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        client.connect(entry).await.unwrap();
        let mut buf = vec![0u8; 4096];
        // Garbage first: no reply, and the conversation goes on.
        client.send(b"\x00\x01 not dns").await.unwrap();
        client
            .send(&query(0x1111, "hijack.test.", RecordType::A))
            .await
            .unwrap();
        let n = tokio::time::timeout(Duration::from_secs(5), client.recv(&mut buf))
            .await
            .expect("an A answer over UDP")
            .unwrap();
        let (ips, _) = contents(&buf[..n], 0x1111, "hijack.test.", RecordType::A);
        assert_eq!(ips, vec!["127.0.0.9".parse::<IpAddr>().unwrap()]);
        assert_eq!(count.load(Ordering::SeqCst), 0, "hosts answered A");

        client
            .send(&query(0x2222, "txt.test.", RecordType::TXT))
            .await
            .unwrap();
        let n = tokio::time::timeout(Duration::from_secs(5), client.recv(&mut buf))
            .await
            .expect("a TXT answer over UDP")
            .unwrap();
        let (_, texts) = contents(&buf[..n], 0x2222, "txt.test.", RecordType::TXT);
        assert_eq!(texts, vec![UPSTREAM_TXT.to_owned()]);
        assert_eq!(count.load(Ordering::SeqCst), 1);

        let entry = running.address_of("dns-in", Network::Tcp).unwrap();
        let mut tcp = TcpStream::connect(entry).await.unwrap();
        write_framed(&mut tcp, &query(0x3333, "hijack.test.", RecordType::A))
            .await
            .unwrap();
        write_framed(&mut tcp, &query(0x4444, "txt.test.", RecordType::TXT))
            .await
            .unwrap();
        // The hijacked answer and the forwarded one may come back in either order.
        let mut seen = Vec::new();
        for _ in 0..2 {
            let reply = tokio::time::timeout(Duration::from_secs(5), read_framed(&mut tcp))
                .await
                .expect("an answer over TCP")
                .unwrap()
                .expect("a whole message");
            let id = u16::from_be_bytes([reply[0], reply[1]]);
            seen.push(id);
            if id == 0x3333 {
                let (ips, _) = contents(&reply, id, "hijack.test.", RecordType::A);
                assert_eq!(ips, vec!["127.0.0.9".parse::<IpAddr>().unwrap()]);
            } else {
                let (_, texts) = contents(&reply, 0x4444, "txt.test.", RecordType::TXT);
                assert_eq!(texts, vec![UPSTREAM_TXT.to_owned()]);
            }
        }
        seen.sort();
        assert_eq!(seen, vec![0x3333, 0x4444]);
        assert_eq!(count.load(Ordering::SeqCst), 2);
    })
    .await
    .expect("test deadline");
}

/// A UDP socket and a TCP listener on the same loopback port. The UDP port is ephemeral and
/// its TCP twin may be some connection's source port just then: try another, a few times.
async fn udp_and_tcp_on_one_port() -> (UdpSocket, TcpListener, SocketAddr) {
    for _ in 0..20 {
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = socket.local_addr().unwrap();
        if let Ok(tcp) = TcpListener::bind(addr).await {
            return (socket, tcp, addr);
        }
    }
    panic!("no loopback port free on both UDP and TCP in 20 tries");
}
