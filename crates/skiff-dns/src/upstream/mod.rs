//! One configured server's transport: how a question gets to it and its answer back. Each
//! exchange runs under the server's timeout, set by the caller.

pub mod doh;
pub mod stream;
pub mod tls;
pub mod udp;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use rustls::ClientConfig;
use tokio::net::TcpStream;

use crate::config::{Endpoint, Host};
use crate::error::DnsError;
use crate::message::{Answer, Question};
use tls::TlsRoots;

/// TTL given to the system resolver's answers, which come without one.
const SYSTEM_TTL: u32 = 60;

pub enum Upstream {
    System,
    Udp(Host, u16),
    Tcp(Host, u16),
    Tls(Host, u16, Arc<ClientConfig>),
    Https(doh::Doh),
}

impl Upstream {
    pub fn new(endpoint: &Endpoint, roots: &TlsRoots) -> Result<Upstream, String> {
        Ok(match endpoint {
            Endpoint::System => Upstream::System,
            Endpoint::Udp(h, p) => Upstream::Udp(h.clone(), *p),
            Endpoint::Tcp(h, p) => Upstream::Tcp(h.clone(), *p),
            Endpoint::Tls(h, p) => Upstream::Tls(h.clone(), *p, roots.client_config(&[])?),
            Endpoint::Https(h, p, path) => Upstream::Https(doh::Doh::new(
                h.clone(),
                *p,
                path,
                roots.client_config(&[b"h2"])?,
            )),
        })
    }

    /// Asks `name` (A or AAAA per `v6`). The caller bounds the whole exchange; `timeout` is
    /// also what a UDP wait reports.
    pub async fn exchange(
        &self,
        name: &str,
        v6: bool,
        client_ip: Option<IpAddr>,
        timeout: Duration,
    ) -> Result<Answer, DnsError> {
        if let Upstream::System = self {
            return system(name, v6).await;
        }
        let question = Question::new(name, v6)?;
        let id = if matches!(self, Upstream::Https(_)) {
            0
        } else {
            random_id()
        };
        let query = question.encode(id, client_ip)?;
        match self {
            Upstream::System => unreachable!("answered above"),
            Upstream::Udp(host, port) => {
                let server = resolve_host(host, *port).await?;
                match udp::exchange(server, &question, &query, id, timeout).await? {
                    udp::UdpOutcome::Answer(a) => Ok(a),
                    udp::UdpOutcome::Truncated => {
                        // RFC 7766: the whole answer over TCP, same server and port.
                        let mut tcp = TcpStream::connect(server).await?;
                        stream::exchange(&mut tcp, &question, &query, id).await
                    }
                }
            }
            Upstream::Tcp(host, port) => {
                let mut tcp = connect_tcp(host, *port).await?;
                stream::exchange(&mut tcp, &question, &query, id).await
            }
            Upstream::Tls(host, port, config) => {
                let tcp = connect_tcp(host, *port).await?;
                let mut tls = tls::connect(config, host, tcp).await?;
                stream::exchange(&mut tls, &question, &query, id).await
            }
            Upstream::Https(doh) => doh.exchange(&question, query).await,
        }
    }
}

/// A fresh transaction id per query: with the random source port, what an off-path
/// attacker has to guess.
fn random_id() -> u16 {
    let mut id = [0u8; 2];
    skiff_crypto::random::fill(&mut id);
    u16::from_be_bytes(id)
}

async fn resolve_host(host: &Host, port: u16) -> Result<SocketAddr, DnsError> {
    match host {
        Host::Ip(ip) => Ok(SocketAddr::new(*ip, port)),
        // A server named by domain is found through the system resolver (asking ourselves
        // could loop).
        Host::Name(name) => tokio::net::lookup_host((name.as_str(), port))
            .await?
            .next()
            .ok_or(DnsError::Empty),
    }
}

pub(crate) async fn connect_tcp(host: &Host, port: u16) -> Result<TcpStream, DnsError> {
    let addr = resolve_host(host, port).await?;
    let tcp = TcpStream::connect(addr).await?;
    let _ = tcp.set_nodelay(true);
    Ok(tcp)
}

async fn system(name: &str, v6: bool) -> Result<Answer, DnsError> {
    let ips = tokio::net::lookup_host((name, 0))
        .await?
        .map(|sa| sa.ip())
        .filter(|ip| ip.is_ipv6() == v6)
        .fold(Vec::new(), |mut ips, ip| {
            if !ips.contains(&ip) {
                ips.push(ip);
            }
            ips
        });
    Ok(Answer {
        ttl: if ips.is_empty() { 0 } else { SYSTEM_TTL },
        ips,
    })
}
