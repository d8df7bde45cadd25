//! Loopback DNS servers for the tests: a UDP (and TCP) responder and a DoH server (HTTP/2
//! over rustls with a throwaway CA), each with a fault to play and a query counter.

#![allow(dead_code, reason = "each test file uses a part of the support")]

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use hickory_proto::op::{Message, OpCode};
use hickory_proto::rr::rdata::{A, AAAA};
use hickory_proto::rr::{RData, Record, RecordType};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, UdpSocket};

/// What a test server does with a query.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    None,
    Garbage,
    /// The answer cut in half.
    CutShort,
    /// The TC bit over UDP; the full answer over TCP on the same port.
    Truncate,
    WrongId,
    CompressionLoop,
    /// More than 64 KiB (DoH body).
    Oversize,
    Silent,
}

/// Names the server knows, with the TTL of every answer.
#[derive(Clone)]
pub struct Zone {
    pub records: HashMap<String, Vec<IpAddr>>,
    pub ttl: u32,
}

impl Zone {
    pub fn new(ttl: u32, entries: &[(&str, &[&str])]) -> Zone {
        Zone {
            records: entries
                .iter()
                .map(|(n, ips)| {
                    (
                        (*n).to_owned(),
                        ips.iter().map(|i| i.parse().unwrap()).collect(),
                    )
                })
                .collect(),
            ttl,
        }
    }

    /// The reply to `query` (ids as given).
    pub fn answer(&self, query: &[u8], fault: Fault) -> Vec<u8> {
        let q = Message::from_vec(query).expect("the resolver sends valid queries");
        let id = q.metadata.id;
        match fault {
            // Garbage for this transaction (a datagram with another id is only a stray).
            Fault::Garbage => return [&id.to_be_bytes()[..], b"\xffnot a dns message"].concat(),
            Fault::CompressionLoop => return compression_loop(id),
            _ => {}
        }
        let mut m = Message::response(
            if fault == Fault::WrongId {
                id ^ 0x5555
            } else {
                id
            },
            OpCode::Query,
        );
        m.add_queries(q.queries.clone());
        let question = &q.queries[0];
        let name = question.name().to_ascii();
        let name = name.trim_end_matches('.');
        for ip in self.records.get(name).into_iter().flatten() {
            let data = match (ip, question.query_type()) {
                (IpAddr::V4(v4), RecordType::A) => RData::A(A(*v4)),
                (IpAddr::V6(v6), RecordType::AAAA) => RData::AAAA(AAAA(*v6)),
                _ => continue,
            };
            m.add_answer(Record::from_rdata(question.name().clone(), self.ttl, data));
        }
        if fault == Fault::Truncate {
            m.metadata.truncation = true;
            m.answers.clear();
        }
        let mut bytes = m.to_vec().unwrap();
        if fault == Fault::CutShort {
            bytes.truncate(bytes.len() / 2);
        }
        bytes
    }
}

/// A reply whose answer's owner name is a compression pointer to itself.
pub fn compression_loop(id: u16) -> Vec<u8> {
    let mut m = id.to_be_bytes().to_vec();
    m.extend_from_slice(&[0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0]);
    m.extend_from_slice(b"\x07example\x03com\x00\x00\x01\x00\x01");
    m.extend_from_slice(&[0xc0, 29, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 1, 2, 3, 4]);
    m
}

pub struct TestServer {
    pub addr: SocketAddr,
    pub queries: Arc<AtomicUsize>,
    /// For DoH: the CA that signed its certificate.
    pub ca: Option<CertificateDer<'static>>,
}

impl TestServer {
    pub fn count(&self) -> usize {
        self.queries.load(Ordering::SeqCst)
    }
}

/// A UDP responder, and a TCP one on the same port (which never plays `Truncate`).
pub async fn udp_server(zone: Zone, fault: Fault) -> TestServer {
    let (socket, tcp, addr) = udp_and_tcp_on_one_port().await;
    let queries = Arc::new(AtomicUsize::new(0));
    let (count, z) = (queries.clone(), zone.clone());
    tokio::spawn(async move {
        let mut buf = vec![0u8; 4096];
        while let Ok((len, from)) = socket.recv_from(&mut buf).await {
            count.fetch_add(1, Ordering::SeqCst);
            if fault == Fault::Silent {
                continue;
            }
            if fault == Fault::WrongId {
                // A few stray datagrams, none for this transaction.
                for _ in 0..3 {
                    let _ = socket.send_to(&z.answer(&buf[..len], fault), from).await;
                }
                continue;
            }
            let _ = socket.send_to(&z.answer(&buf[..len], fault), from).await;
        }
    });
    let count = queries.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = tcp.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            let z = zone.clone();
            tokio::spawn(async move {
                let mut len = [0u8; 2];
                stream.read_exact(&mut len).await?;
                let mut query = vec![0u8; u16::from_be_bytes(len).into()];
                stream.read_exact(&mut query).await?;
                let fault = if fault == Fault::Truncate {
                    Fault::None
                } else {
                    fault
                };
                let reply = z.answer(&query, fault);
                stream
                    .write_all(&(reply.len() as u16).to_be_bytes())
                    .await?;
                stream.write_all(&reply).await?;
                std::io::Result::Ok(())
            });
        }
    });
    TestServer {
        addr,
        queries,
        ca: None,
    }
}

/// A TLS acceptor for 127.0.0.1 offering `alpn`, with the CA that signed its certificate.
pub fn tls_acceptor(alpn: &[&[u8]]) -> (tokio_rustls::TlsAcceptor, CertificateDer<'static>) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .signed_by(&leaf_key, &issuer)
        .unwrap();
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der())),
        )
        .unwrap();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    (
        tokio_rustls::TlsAcceptor::from(Arc::new(config)),
        ca_cert.der().clone(),
    )
}

/// A DNS-over-TLS server on 127.0.0.1 (one query per connection).
pub async fn dot_server(zone: Zone) -> TestServer {
    let (acceptor, ca) = tls_acceptor(&[]);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let queries = Arc::new(AtomicUsize::new(0));
    let count = queries.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, zone, count) = (acceptor.clone(), zone.clone(), count.clone());
            tokio::spawn(async move {
                let mut stream = acceptor.accept(tcp).await?;
                count.fetch_add(1, Ordering::SeqCst);
                let mut len = [0u8; 2];
                stream.read_exact(&mut len).await?;
                let mut query = vec![0u8; u16::from_be_bytes(len).into()];
                stream.read_exact(&mut query).await?;
                let reply = zone.answer(&query, Fault::None);
                stream
                    .write_all(&(reply.len() as u16).to_be_bytes())
                    .await?;
                stream.write_all(&reply).await?;
                stream.flush().await?;
                std::io::Result::Ok(())
            });
        }
    });
    TestServer {
        addr,
        queries,
        ca: Some(ca),
    }
}

/// A DoH server on 127.0.0.1 with a certificate for that IP, signed by a fresh CA.
pub async fn doh_server(zone: Zone, fault: Fault) -> TestServer {
    let (acceptor, ca) = tls_acceptor(&[b"h2"]);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let queries = Arc::new(AtomicUsize::new(0));
    let count = queries.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, zone, count) = (acceptor.clone(), zone.clone(), count.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let Ok(mut conn) = h2::server::handshake(tls).await else {
                    return;
                };
                while let Some(Ok((request, mut respond))) = conn.accept().await {
                    count.fetch_add(1, Ordering::SeqCst);
                    let zone = zone.clone();
                    tokio::spawn(async move {
                        assert_eq!(request.method(), http::Method::POST);
                        let mut body = request.into_body();
                        let mut query = Vec::new();
                        while let Some(Ok(chunk)) = body.data().await {
                            let _ = body.flow_control().release_capacity(chunk.len());
                            query.extend_from_slice(&chunk);
                        }
                        let reply = match fault {
                            Fault::Oversize => vec![0u8; 70_000],
                            Fault::Silent => {
                                // Keep the stream open, never answering.
                                tokio::time::sleep(std::time::Duration::from_secs(5)).await;
                                drop(respond);
                                return;
                            }
                            f => zone.answer(&query, f),
                        };
                        let response = http::Response::builder()
                            .status(200)
                            .header("content-type", "application/dns-message")
                            .body(())
                            .unwrap();
                        let Ok(mut send) = respond.send_response(response, false) else {
                            return;
                        };
                        // In pieces: flow control allows 64 KiB before the client reads.
                        let chunks: Vec<Bytes> = reply
                            .chunks(16 * 1024)
                            .map(Bytes::copy_from_slice)
                            .collect();
                        let last = chunks.len().saturating_sub(1);
                        for (i, chunk) in chunks.into_iter().enumerate() {
                            send.reserve_capacity(chunk.len());
                            if send.send_data(chunk, i == last).is_err() {
                                return;
                            }
                        }
                    });
                }
            });
        }
    });
    TestServer {
        addr,
        queries,
        ca: Some(ca),
    }
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
