//! Xray's `dns` outbound: traffic routed here is DNS (typically port 53 hijacked by a routing
//! rule). Each query meets the rules in order (`nonIPQuery`/`blockTypes` are turned into rules
//! by the config, as in Xray): answered by the DNS module (A/AAAA only), sent on to the
//! original server (or the configured `address`/`port`/`network`), dropped, or answered with
//! an empty reply carrying an rcode. Without a matching rule, A/AAAA go to the DNS module and
//! the rest get an empty NOERROR reply, Xray's fall-through.
//!
//! Over UDP each datagram is one message; over TCP messages carry a 2-byte length prefix
//! (RFC 1035 §4.2.2). Messages are read with hickory-proto; a query it cannot read is dropped,
//! as Xray drops one it cannot parse.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA};
use hickory_proto::rr::{RData, Record, RecordType};
use skiff_core::{
    Address, BoxFuture, BoxPacketConn, BoxStream, Dialer, Family, Metadata, Network, Outbound,
    PacketConn, ProxyStream, Resolve,
};
use skiff_geodata::DomainSet;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream, ReadBuf};
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tokio::task::{AbortHandle, JoinSet};

use crate::message::MAX_MESSAGE;

/// A query datagram larger than this is dropped: a query holds one question (a name of at
/// most 255 bytes) and perhaps an OPT record, far below the classic UDP limit.
pub const MAX_UDP_QUERY: usize = 512;

/// Dialing (or resolving) the upstream server.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(5);
/// An upstream that sends nothing back for this long is closed; the next forwarded query
/// opens a new one.
const UPSTREAM_IDLE: Duration = Duration::from_secs(60);
/// A lookup through the module: its servers bound their own waits (4 s each by default);
/// this caps a chain of them.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(10);
/// A TCP conversation with no query and no reply for this long is closed (Xray's default
/// `connIdle`).
const IDLE_TIMEOUT: Duration = Duration::from_secs(300);
/// The TTL of hijacked answers. The resolver seam returns addresses without their TTL; Xray
/// gives its hosts answers 10 s, so that is the value used for all of them.
const ANSWER_TTL: u32 = 10;
/// Replies queued for a client before further ones are dropped (a client that does not read).
const QUEUE: usize = 64;

/// What a rule does with a query it matches (Xray's `rules[].action`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Send it on to the upstream server.
    Direct,
    /// Answer nothing.
    Drop,
    /// Answer with no records and the rule's rcode.
    Return,
    /// Answer from the DNS module (A/AAAA only; other types get the `Return` reply).
    Hijack,
}

#[derive(Clone, Debug)]
pub struct Rule {
    pub action: Action,
    /// Query types the rule applies to, as inclusive ranges (Xray's `qType` takes port-like
    /// lists such as `"1,28"` or `"0-65535"`); empty = all.
    pub qtypes: Vec<(u16, u16)>,
    pub rcode: u16,
    /// Names the rule applies to (matched without the trailing dot, lowercased); None = all.
    pub domains: Option<Arc<DomainSet>>,
}

/// Rules compare by what they do and match; a domain set compares by identity (it may hold
/// whole geosite lists).
impl PartialEq for Rule {
    fn eq(&self, other: &Rule) -> bool {
        self.action == other.action
            && self.qtypes == other.qtypes
            && self.rcode == other.rcode
            && match (&self.domains, &other.domains) {
                (None, None) => true,
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                _ => false,
            }
    }
}

impl Eq for Rule {}

impl Rule {
    fn applies(&self, qtype: u16, name: &str) -> bool {
        self.applies_to_type(qtype) && self.domains.as_ref().is_none_or(|d| d.matches(name))
    }

    fn applies_to_type(&self, qtype: u16) -> bool {
        self.qtypes.is_empty()
            || self
                .qtypes
                .iter()
                .any(|&(first, last)| (first..=last).contains(&qtype))
    }
}

/// The outbound's settings once validated.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DnsOutboundConfig {
    /// Where forwarded queries go: `None` keeps the network the query came on.
    pub network: Option<Network>,
    /// Replaces the destination's host (`address`).
    pub address: Option<String>,
    /// Replaces the destination's port (`port`, 0 = keep).
    pub port: u16,
    /// In order, first match wins; after them A/AAAA are hijacked and the rest get an empty
    /// NOERROR reply (Xray's fall-through).
    pub rules: Vec<Rule>,
}

enum Decision {
    Now(Outcome),
    /// An A/AAAA question for the DNS module: transaction id and question.
    Hijack(u16, Query),
}

/// What to do with one client message.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// This reply goes back to the client.
    Reply(Vec<u8>),
    /// The message goes on to the upstream server unchanged.
    Forward,
    /// Nothing is sent back.
    Drop,
}

/// Cheap to clone (shared parts only): each conversation and lookup task holds one.
#[derive(Clone)]
pub struct DnsOutbound {
    config: Arc<DnsOutboundConfig>,
    resolver: Arc<dyn Resolve>,
    dialer: Arc<dyn Dialer>,
}

impl DnsOutbound {
    /// `resolver` is the DNS module (or the system resolver when there is no `dns` section);
    /// `dialer` reaches the upstream server for forwarded TCP queries.
    pub fn new(
        config: DnsOutboundConfig,
        resolver: Arc<dyn Resolve>,
        dialer: Arc<dyn Dialer>,
    ) -> DnsOutbound {
        DnsOutbound {
            config: Arc::new(config),
            resolver,
            dialer,
        }
    }

    /// Where a query sent to `original` is forwarded.
    fn upstream(&self, original: &Address) -> Address {
        let port = match self.config.port {
            0 => original.port(),
            p => p,
        };
        match &self.config.address {
            Some(host) => Address::from_host(host, port),
            None => match original {
                Address::Ip(sa) => Address::Ip(SocketAddr::new(sa.ip(), port)),
                Address::Domain(name, _) => Address::Domain(name.clone(), port),
            },
        }
    }

    /// Decides what to do with `query` and, for a hijacked one, asks the DNS module.
    pub async fn handle(&self, query: &[u8]) -> Outcome {
        match self.decide(query) {
            Decision::Now(outcome) => outcome,
            Decision::Hijack(id, question) => self.hijack(id, question).await,
        }
    }

    /// The part of [`handle`](Self::handle) that needs no lookup.
    fn decide(&self, query: &[u8]) -> Decision {
        let Ok(message) = Message::from_vec(query) else {
            tracing::debug!(len = query.len(), "dns outbound: unreadable query dropped");
            return Decision::Now(Outcome::Drop);
        };
        if message.metadata.message_type != MessageType::Query {
            return Decision::Now(Outcome::Drop);
        }
        // As Xray: only queries with a question are handled; the first question decides.
        let Some(question) = message.queries.first().cloned() else {
            tracing::debug!("dns outbound: query without a question dropped");
            return Decision::Now(Outcome::Drop);
        };
        let id = message.metadata.id;
        let qtype = question.query_type();
        let code = u16::from(qtype);
        let name = question
            .name()
            .to_ascii()
            .trim_end_matches('.')
            .to_ascii_lowercase();
        let (action, rcode) = self
            .config
            .rules
            .iter()
            .find(|r| r.applies(code, &name))
            .map(|r| (r.action, r.rcode))
            .unwrap_or(match qtype {
                RecordType::A | RecordType::AAAA => (Action::Hijack, 0),
                _ => (Action::Return, 0),
            });
        Decision::Now(match action {
            Action::Direct => Outcome::Forward,
            Action::Drop => Outcome::Drop,
            Action::Hijack if matches!(qtype, RecordType::A | RecordType::AAAA) => {
                return Decision::Hijack(id, question);
            }
            Action::Return | Action::Hijack => reply(id, question, rcode, Vec::new()),
        })
    }

    async fn hijack(&self, id: u16, question: Query) -> Outcome {
        let v6 = question.query_type() == RecordType::AAAA;
        let family = if v6 { Family::V6 } else { Family::V4 };
        let name = question.name().to_ascii();
        let lookup = tokio::time::timeout(LOOKUP_TIMEOUT, self.resolver.lookup(&name, family));
        let ips = match lookup.await {
            Ok(Ok(ips)) => ips,
            // No address of this family: an empty NOERROR answer, as Xray's for an empty one.
            Ok(Err(e)) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            // Nothing known (timeout, unreachable servers): no reply, as Xray; the client
            // retries or gives up on its own timer.
            Ok(Err(e)) => {
                tracing::debug!(%name, error = %e, "dns outbound: lookup failed");
                return Outcome::Drop;
            }
            Err(_) => {
                tracing::debug!(%name, "dns outbound: lookup timed out");
                return Outcome::Drop;
            }
        };
        let records = ips
            .into_iter()
            .filter_map(|ip| match ip {
                IpAddr::V4(v4) if !v6 => Some(RData::A(A(v4))),
                IpAddr::V6(v6addr) if v6 => Some(RData::AAAA(AAAA(v6addr))),
                _ => None,
            })
            .map(|data| Record::from_rdata(question.name().clone(), ANSWER_TTL, data))
            .collect();
        reply(id, question, 0, records)
    }
}

/// A response to transaction `id` repeating `question`, flagged as Xray's are (authoritative,
/// recursion desired and available).
fn reply(id: u16, question: Query, rcode: u16, answers: Vec<Record>) -> Outcome {
    let mut message = Message::new(id, MessageType::Response, OpCode::Query);
    message.metadata.authoritative = true;
    message.metadata.recursion_desired = true;
    message.metadata.recursion_available = true;
    message.metadata.response_code = <ResponseCode as From<u16>>::from(rcode);
    message.add_query(question);
    message.add_answers(answers);
    match message.to_vec() {
        Ok(bytes) => Outcome::Reply(bytes),
        Err(e) => {
            tracing::debug!(error = %e, "dns outbound: cannot encode the reply");
            Outcome::Drop
        }
    }
}

impl Outbound for DnsOutbound {
    fn connect<'a>(
        &'a self,
        meta: &'a Metadata,
        destination: &'a Address,
    ) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(async move {
            let (client, ours) = tokio::io::duplex(MAX_MESSAGE + 2);
            let session = Session::new(self, meta, Network::Tcp);
            tokio::spawn(session.serve_stream(ours, destination.clone()));
            let stream: BoxStream = Box::new(Pipe(client));
            Ok(stream)
        })
    }

    fn bind<'a>(&'a self, meta: &'a Metadata) -> BoxFuture<'a, io::Result<BoxPacketConn>> {
        Box::pin(async move {
            let (tx, rx) = mpsc::channel(QUEUE);
            let session = Arc::new(Session::new(self, meta, Network::Udp));
            let conn: BoxPacketConn = Box::new(DnsPackets {
                session,
                replies: tx,
                queue: Mutex::new(rx),
                tasks: Mutex::new(JoinSet::new()),
                upstream: tokio::sync::Mutex::new(None),
            });
            Ok(conn)
        })
    }
}

/// What one conversation needs of the outbound, owned so its tasks outlive the call.
struct Session {
    outbound: DnsOutbound,
    meta: Metadata,
    /// The network the client's queries arrive on.
    network: Network,
}

impl Session {
    fn new(outbound: &DnsOutbound, meta: &Metadata, network: Network) -> Session {
        Session {
            outbound: outbound.clone(),
            meta: meta.clone(),
            network,
        }
    }

    fn handler(&self) -> DnsOutbound {
        self.outbound.clone()
    }

    fn forward_network(&self) -> Network {
        self.outbound.config.network.unwrap_or(self.network)
    }

    /// Opens the upstream for queries first sent to `original`, and the task that passes its
    /// replies to `replies` (it ends when the upstream closes or stays silent).
    async fn open_upstream(
        &self,
        original: &Address,
        replies: mpsc::Sender<(Vec<u8>, Address)>,
    ) -> io::Result<(Upstream, BoxFuture<'static, ()>)> {
        let target = self.handler().upstream(original);
        let from = original.clone();
        match self.forward_network() {
            Network::Tcp => {
                let dial = self.outbound.dialer.dial(&target, &self.meta);
                let stream = tokio::time::timeout(FORWARD_TIMEOUT, dial)
                    .await
                    .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "dialing timed out"))??;
                let (mut rd, wr) = tokio::io::split(stream);
                let reader = async move {
                    while let Ok(Ok(Some(msg))) =
                        tokio::time::timeout(UPSTREAM_IDLE, read_framed(&mut rd)).await
                    {
                        if replies.send((msg, from.clone())).await.is_err() {
                            break;
                        }
                    }
                };
                Ok((Upstream::Tcp(wr), Box::pin(reader)))
            }
            Network::Udp => {
                let addr = resolve_target(&target).await?;
                let bind: SocketAddr = if addr.is_ipv4() {
                    (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
                } else {
                    (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
                };
                let socket = Arc::new(UdpSocket::bind(bind).await?);
                socket.connect(addr).await?;
                let rx = socket.clone();
                let reader = async move {
                    let mut buf = vec![0u8; MAX_MESSAGE];
                    while let Ok(Ok(n)) =
                        tokio::time::timeout(UPSTREAM_IDLE, rx.recv(&mut buf)).await
                    {
                        // A client that reads nothing loses replies rather than memory.
                        if replies.try_send((buf[..n].to_vec(), from.clone())).is_err()
                            && replies.is_closed()
                        {
                            break;
                        }
                    }
                };
                Ok((Upstream::Udp(socket), Box::pin(reader)))
            }
        }
    }

    /// One TCP conversation: length-prefixed queries in, replies out, until the client
    /// closes or stays idle.
    async fn serve_stream(self, stream: DuplexStream, original: Address) {
        let (mut rd, mut wr) = tokio::io::split(stream);
        let (tx, mut rx) = mpsc::channel::<(Vec<u8>, Address)>(QUEUE);
        let handler = Arc::new(self.handler());
        // Lookups and the upstream's reader; all aborted when the conversation ends.
        let mut tasks = JoinSet::new();
        let mut upstream: Option<(Upstream, AbortHandle)> = None;
        // Queries handed to a lookup or the upstream and not answered yet: a client that
        // closes its sending side after its queries still gets their replies, for a while.
        let mut awaiting = 0usize;
        let mut draining: Option<tokio::time::Instant> = None;
        loop {
            if draining.is_some() && awaiting == 0 {
                break;
            }
            let drain_deadline = draining.unwrap_or_else(tokio::time::Instant::now);
            tokio::select! {
                query = tokio::time::timeout(IDLE_TIMEOUT, read_framed(&mut rd)), if draining.is_none() => {
                    let query = match query {
                        Ok(Ok(Some(query))) => query,
                        Ok(Ok(None)) => {
                            draining = Some(tokio::time::Instant::now() + FORWARD_TIMEOUT);
                            continue;
                        }
                        _ => break,
                    };
                    match handler.decide(&query) {
                        Decision::Now(Outcome::Reply(r)) => {
                            if write_framed(&mut wr, &r).await.is_err() {
                                break;
                            }
                        }
                        Decision::Now(Outcome::Drop) => {}
                        Decision::Hijack(id, question) => {
                            let handler = handler.clone();
                            let tx = tx.clone();
                            awaiting += 1;
                            tasks.spawn(async move {
                                // An empty message says "no reply" to the count above.
                                let reply = match handler.hijack(id, question).await {
                                    Outcome::Reply(r) => r,
                                    _ => Vec::new(),
                                };
                                let _ = tx.send((reply, Address::Ip(([0, 0, 0, 0], 0).into()))).await;
                            });
                        }
                        Decision::Now(Outcome::Forward) => {
                            if upstream.as_ref().is_none_or(|(_, h)| h.is_finished()) {
                                upstream = match self.open_upstream(&original, tx.clone()).await {
                                    Ok((u, reader)) => Some((u, tasks.spawn(reader))),
                                    Err(e) => {
                                        tracing::debug!(error = %e, "dns outbound: upstream unreachable");
                                        None
                                    }
                                };
                            }
                            if let Some((u, _)) = upstream.as_mut() {
                                if u.send(&query).await.is_ok() {
                                    awaiting += 1;
                                } else {
                                    upstream = None;
                                }
                            }
                        }
                    }
                }
                Some((reply, _)) = rx.recv() => {
                    awaiting = awaiting.saturating_sub(1);
                    if !reply.is_empty() && write_framed(&mut wr, &reply).await.is_err() {
                        break;
                    }
                }
                _ = tokio::time::sleep_until(drain_deadline), if draining.is_some() => break,
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            }
        }
    }
}

/// The connection forwarded queries go out on.
enum Upstream {
    Tcp(tokio::io::WriteHalf<BoxStream>),
    Udp(Arc<UdpSocket>),
}

impl Upstream {
    async fn send(&mut self, message: &[u8]) -> io::Result<()> {
        match self {
            Upstream::Tcp(wr) => write_framed(wr, message).await,
            Upstream::Udp(socket) => socket.send(message).await.map(|_| ()),
        }
    }
}

async fn resolve_target(target: &Address) -> io::Result<SocketAddr> {
    match target {
        Address::Ip(sa) => Ok(*sa),
        Address::Domain(name, port) => {
            let lookup = tokio::net::lookup_host((name.as_str(), *port));
            tokio::time::timeout(FORWARD_TIMEOUT, lookup)
                .await
                .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "resolving timed out"))??
                .next()
                .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no address"))
        }
    }
}

/// One length-prefixed message, or None at a clean end of stream.
async fn read_framed<R: AsyncRead + Unpin>(rd: &mut R) -> io::Result<Option<Vec<u8>>> {
    let mut len = [0u8; 2];
    match rd.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    // The prefix is 16 bits, so a message is at most 65535 bytes by construction.
    let mut msg = vec![0u8; usize::from(u16::from_be_bytes(len))];
    rd.read_exact(&mut msg).await?;
    Ok(Some(msg))
}

async fn write_framed<W: AsyncWrite + Unpin>(wr: &mut W, message: &[u8]) -> io::Result<()> {
    let len = u16::try_from(message.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "message over 65535 bytes"))?;
    let mut framed = Vec::with_capacity(message.len() + 2);
    framed.extend_from_slice(&len.to_be_bytes());
    framed.extend_from_slice(message);
    wr.write_all(&framed).await?;
    wr.flush().await
}

/// The client's end of a TCP conversation.
struct Pipe(DuplexStream);

impl AsyncRead for Pipe {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for Pipe {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl ProxyStream for Pipe {}

/// A UDP conversation: each datagram sent is a query; replies (hijacked answers and the
/// upstream's) come back as if from the server the query was sent to.
struct DnsPackets {
    session: Arc<Session>,
    replies: mpsc::Sender<(Vec<u8>, Address)>,
    queue: Mutex<mpsc::Receiver<(Vec<u8>, Address)>>,
    /// Lookups and the upstream's reader; aborted when the conversation is dropped.
    tasks: Mutex<JoinSet<()>>,
    /// The upstream of the last forwarded query, its original destination and its reader.
    upstream: tokio::sync::Mutex<Option<(Address, Upstream, AbortHandle)>>,
}

impl DnsPackets {
    fn spawn(&self, task: impl std::future::Future<Output = ()> + Send + 'static) -> AbortHandle {
        let mut tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        // Reap finished tasks so the set stays as small as the work in flight.
        while tasks.try_join_next().is_some() {}
        tasks.spawn(task)
    }
}

impl PacketConn for DnsPackets {
    fn poll_recv_from(
        &self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<Address>> {
        let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        match queue.poll_recv(cx) {
            Poll::Ready(Some((reply, from))) => {
                let n = reply.len().min(buf.remaining());
                buf.put_slice(&reply[..n]);
                Poll::Ready(Ok(from))
            }
            // Not reached while this conversation holds a sender itself.
            Poll::Ready(None) => Poll::Ready(Err(io::ErrorKind::BrokenPipe.into())),
            Poll::Pending => Poll::Pending,
        }
    }

    fn send_to<'a>(
        &'a self,
        payload: &'a [u8],
        destination: &'a Address,
    ) -> BoxFuture<'a, io::Result<()>> {
        Box::pin(async move {
            if payload.len() > MAX_UDP_QUERY {
                tracing::debug!(len = payload.len(), "dns outbound: oversized query dropped");
                return Ok(());
            }
            let handler = self.session.handler();
            match handler.decide(payload) {
                Decision::Now(Outcome::Reply(r)) => {
                    let _ = self.replies.try_send((r, destination.clone()));
                }
                Decision::Now(Outcome::Drop) => {}
                Decision::Hijack(id, question) => {
                    // On its own task, so a slow lookup does not hold up the next datagram.
                    let replies = self.replies.clone();
                    let from = destination.clone();
                    self.spawn(async move {
                        if let Outcome::Reply(r) = handler.hijack(id, question).await {
                            // A client that reads nothing loses replies rather than memory.
                            let _ = replies.try_send((r, from));
                        }
                    });
                }
                Decision::Now(Outcome::Forward) => {
                    let mut upstream = self.upstream.lock().await;
                    let reuse = matches!(&*upstream,
                        Some((to, _, reader)) if to == destination && !reader.is_finished());
                    if !reuse {
                        let (u, reader) = self
                            .session
                            .open_upstream(destination, self.replies.clone())
                            .await?;
                        *upstream = Some((destination.clone(), u, self.spawn(reader)));
                    }
                    if let Some((_, u, _)) = upstream.as_mut()
                        && let Err(e) = u.send(payload).await
                    {
                        *upstream = None;
                        return Err(e);
                    }
                }
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{DnsConfig, HostEntry, HostValue};
    use crate::{Resolver, TlsRoots};
    use hickory_proto::rr::Name;
    use skiff_geodata::{Domain, DomainKind, DomainSet};

    /// A dialer that is never expected to be used.
    struct NoDial;

    impl Dialer for NoDial {
        fn dial<'a>(
            &'a self,
            _server: &'a Address,
            _meta: &'a Metadata,
        ) -> BoxFuture<'a, io::Result<BoxStream>> {
            Box::pin(async { Err(io::ErrorKind::Unsupported.into()) })
        }

        fn bind_via<'a>(
            &'a self,
            _meta: &'a Metadata,
        ) -> BoxFuture<'a, io::Result<Option<BoxPacketConn>>> {
            Box::pin(async { Ok(None) })
        }
    }

    fn outbound(rules: Vec<Rule>) -> DnsOutbound {
        let hosts = vec![HostEntry {
            key: "hijack.test".into(),
            matcher: Arc::new(
                DomainSet::new([Domain {
                    kind: DomainKind::Full,
                    value: "hijack.test".into(),
                }])
                .unwrap(),
            ),
            value: HostValue::Ips(vec!["127.0.0.9".parse().unwrap()]),
        }];
        let resolver = Resolver::new(
            DnsConfig {
                hosts,
                ..DnsConfig::default()
            },
            &TlsRoots::default(),
        )
        .unwrap();
        DnsOutbound::new(
            DnsOutboundConfig {
                rules,
                ..DnsOutboundConfig::default()
            },
            Arc::new(resolver),
            Arc::new(NoDial),
        )
    }

    fn query(id: u16, name: &str, qtype: RecordType) -> Vec<u8> {
        let mut m = Message::new(id, MessageType::Query, OpCode::Query);
        m.metadata.recursion_desired = true;
        m.add_query(Query::query(Name::from_ascii(name).unwrap(), qtype));
        m.to_vec().unwrap()
    }

    fn reply_of(outcome: Outcome) -> Message {
        match outcome {
            Outcome::Reply(bytes) => Message::from_vec(&bytes).unwrap(),
            other => panic!("expected a reply, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_query_is_answered_from_hosts() {
        let reply = reply_of(
            outbound(Vec::new())
                .handle(&query(0x4242, "hijack.test.", RecordType::A))
                .await,
        );
        assert_eq!(reply.metadata.id, 0x4242);
        assert_eq!(reply.metadata.message_type, MessageType::Response);
        assert_eq!(reply.metadata.response_code, ResponseCode::NoError);
        assert_eq!(reply.queries.len(), 1);
        assert_eq!(reply.queries[0].name().to_ascii(), "hijack.test.");
        assert_eq!(reply.queries[0].query_type(), RecordType::A);
        let ips: Vec<_> = reply
            .answers
            .iter()
            .filter_map(|r| r.data.ip_addr())
            .collect();
        assert_eq!(ips, vec!["127.0.0.9".parse::<IpAddr>().unwrap()]);
        assert_eq!(reply.answers[0].name.to_ascii(), "hijack.test.");
    }

    #[tokio::test]
    async fn aaaa_without_v6_address_is_an_empty_answer() {
        let reply = reply_of(
            outbound(Vec::new())
                .handle(&query(7, "hijack.test.", RecordType::AAAA))
                .await,
        );
        assert_eq!(reply.metadata.id, 7);
        assert_eq!(reply.metadata.response_code, ResponseCode::NoError);
        assert!(reply.answers.is_empty());
    }

    #[tokio::test]
    async fn txt_is_forwarded_by_a_direct_rule() {
        // What `nonIPQuery: "skip"` becomes: hijack A/AAAA, send the rest on.
        let rules = vec![
            Rule {
                action: Action::Hijack,
                qtypes: vec![(1, 1), (28, 28)],
                rcode: 0,
                domains: None,
            },
            Rule {
                action: Action::Direct,
                qtypes: Vec::new(),
                rcode: 0,
                domains: None,
            },
        ];
        let out = outbound(rules);
        let txt = query(9, "hijack.test.", RecordType::TXT);
        assert_eq!(out.handle(&txt).await, Outcome::Forward);
        // A is still answered here.
        let a = query(10, "hijack.test.", RecordType::A);
        assert!(matches!(out.handle(&a).await, Outcome::Reply(_)));
    }

    #[tokio::test]
    async fn non_ip_query_without_rules_gets_an_empty_noerror_reply() {
        let reply = reply_of(
            outbound(Vec::new())
                .handle(&query(11, "example.test.", RecordType::TXT))
                .await,
        );
        assert_eq!(reply.metadata.id, 11);
        assert_eq!(reply.metadata.response_code, ResponseCode::NoError);
        assert_eq!(reply.queries[0].query_type(), RecordType::TXT);
        assert!(reply.answers.is_empty());
    }

    #[tokio::test]
    async fn return_rule_answers_its_rcode_and_drop_rule_nothing() {
        let rules = vec![
            Rule {
                action: Action::Return,
                qtypes: vec![(16, 16)],
                rcode: 5,
                domains: None,
            },
            Rule {
                action: Action::Drop,
                qtypes: vec![(10, 15)],
                rcode: 0,
                domains: None,
            },
        ];
        let out = outbound(rules);
        let reply = reply_of(out.handle(&query(12, "x.test.", RecordType::TXT)).await);
        assert_eq!(reply.metadata.response_code, ResponseCode::Refused);
        assert_eq!(
            out.handle(&query(13, "x.test.", RecordType::MX)).await,
            Outcome::Drop
        );
    }

    #[tokio::test]
    async fn domain_rules_match_the_question_name() {
        let set = DomainSet::new([Domain {
            kind: DomainKind::Suffix,
            value: "blocked.test".into(),
        }])
        .unwrap();
        let rules = vec![Rule {
            action: Action::Return,
            qtypes: Vec::new(),
            rcode: 3,
            domains: Some(Arc::new(set)),
        }];
        let out = outbound(rules);
        // Case and the trailing dot do not matter; a subdomain matches `domain:`.
        let reply = reply_of(
            out.handle(&query(14, "A.Blocked.TEST.", RecordType::A))
                .await,
        );
        assert_eq!(reply.metadata.response_code, ResponseCode::NXDomain);
        assert!(reply.answers.is_empty());
        // Other names fall through to the default: A hijacked.
        let reply = reply_of(out.handle(&query(15, "hijack.test.", RecordType::A)).await);
        assert_eq!(reply.answers.len(), 1);
    }

    #[tokio::test]
    async fn garbage_and_replies_are_dropped() {
        let out = outbound(Vec::new());
        for bytes in [
            Vec::new(),
            vec![0x12],
            b"\x12\x34\xffnot a dns message at all".to_vec(),
            // A header announcing a question that is not there.
            vec![0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0],
            // No question at all.
            vec![0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        ] {
            assert_eq!(out.handle(&bytes).await, Outcome::Drop, "{bytes:?}");
        }
        // A response is not a query to answer.
        let mut reply = Message::from_vec(&query(1, "hijack.test.", RecordType::A)).unwrap();
        reply.metadata.message_type = MessageType::Response;
        assert_eq!(out.handle(&reply.to_vec().unwrap()).await, Outcome::Drop);
    }

    fn meta() -> Metadata {
        let any: SocketAddr = (std::net::Ipv4Addr::LOCALHOST, 0).into();
        Metadata::new(Arc::from("test"), any, any)
    }

    async fn recv(conn: &BoxPacketConn) -> (Vec<u8>, Address) {
        let mut buf = vec![0u8; 2048];
        let from = tokio::time::timeout(
            Duration::from_secs(5),
            std::future::poll_fn(|cx| {
                let mut rb = ReadBuf::new(&mut buf);
                conn.poll_recv_from(cx, &mut rb)
                    .map(|r| r.map(|from| (rb.filled().len(), from)))
            }),
        )
        .await
        .expect("a reply")
        .unwrap();
        (buf[..from.0].to_vec(), from.1)
    }

    #[tokio::test]
    async fn packet_conversation_answers_from_the_queried_server_and_skips_oversize() {
        let out = outbound(Vec::new());
        let conn = out.bind(&meta()).await.unwrap();
        let server = Address::Ip("10.0.0.53:53".parse().unwrap());
        // Oversized: dropped silently, so the next reply is the A answer's.
        let mut big = query(1, "hijack.test.", RecordType::A);
        big.resize(MAX_UDP_QUERY + 1, 0);
        conn.send_to(&big, &server).await.unwrap();
        conn.send_to(&query(2, "hijack.test.", RecordType::A), &server)
            .await
            .unwrap();
        let (bytes, from) = recv(&conn).await;
        assert_eq!(from, server);
        let reply = Message::from_vec(&bytes).unwrap();
        assert_eq!(reply.metadata.id, 2);
        assert_eq!(reply.answers.len(), 1);
    }

    #[tokio::test]
    async fn stream_conversation_reads_length_prefixed_queries() {
        let out = outbound(Vec::new());
        let server = Address::Ip("10.0.0.53:53".parse().unwrap());
        let mut stream = out.connect(&meta(), &server).await.unwrap();
        write_framed(&mut stream, &query(3, "hijack.test.", RecordType::A))
            .await
            .unwrap();
        let got = tokio::time::timeout(Duration::from_secs(5), read_framed(&mut stream))
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let reply = Message::from_vec(&got).unwrap();
        assert_eq!(reply.metadata.id, 3);
        assert_eq!(reply.answers.len(), 1);

        // A client that half-closes right after its query still gets the reply, then EOF.
        let mut stream = out.connect(&meta(), &server).await.unwrap();
        write_framed(&mut stream, &query(4, "hijack.test.", RecordType::A))
            .await
            .unwrap();
        stream.shutdown().await.unwrap();
        let got = tokio::time::timeout(Duration::from_secs(5), read_framed(&mut stream))
            .await
            .unwrap()
            .unwrap()
            .expect("the reply before EOF");
        assert_eq!(Message::from_vec(&got).unwrap().metadata.id, 4);
        let end = tokio::time::timeout(Duration::from_secs(5), read_framed(&mut stream))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(end, None);
    }
}
