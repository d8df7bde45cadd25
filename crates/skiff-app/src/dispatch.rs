//! One TCP connection, top to bottom: handshake (bounded by the policy's handshake timeout) →
//! route → connect the outbound → tell the client → relay.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use skiff_core::{
    Accepted, Address, BoxFuture, BoxStream, ConnectOutcome, Connector, Counted, DirectionCounters,
    HandshakeFailure, InboundContext, LayerSession, Metadata, Network, Prefixed, ProxyStream,
    RelayCounters, RelayEnd, Reply, TunnelSink, relay,
};
use skiff_proto::{http, socks};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::time::timeout;
use tracing::debug;

use crate::fallback;
use crate::inbound::{InboundHandler, InboundKind};
use crate::shared::Shared;
use crate::sniffing;
use crate::udp;
use crate::udp_stream;

/// How long an outbound connect may take, as Go's default dialer roughly allows.
const DIAL_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a refused connection may take to say goodbye (Xray's `tlsCloseTimeout`).
const CLOSE_NOTIFY_TIMEOUT: Duration = Duration::from_millis(250);

pub async fn serve_tcp(
    shared: Arc<Shared>,
    inbound: Arc<InboundHandler>,
    stream: TcpStream,
    source: SocketAddr,
    local: SocketAddr,
) {
    // The tunnel's destination may come from the raw socket (SO_ORIGINAL_DST): read it first.
    let tunnel_destination = match &inbound.kind {
        InboundKind::Tunnel(config) => Some(config.destination_for(&stream)),
        _ => None,
    };
    serve_conn(
        shared,
        inbound,
        Box::new(stream),
        tunnel_destination,
        source,
        local,
    )
    .await;
}

/// A connection some transport accepted that is not a TCP socket (an mKCP connection, a
/// kcptun smux stream): the same path as a TCP connection, the inbound's layers and protocol
/// included.
pub async fn serve_transport(
    shared: Arc<Shared>,
    inbound: Arc<InboundHandler>,
    stream: BoxStream,
    source: SocketAddr,
    local: SocketAddr,
) {
    let tunnel_destination =
        match &inbound.kind {
            InboundKind::Tunnel(config) => Some(config.destination.clone().ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidInput, "no configured address")
            })),
            InboundKind::Kcptun { target } => Some(Ok(target.clone())),
            _ => None,
        };
    serve_conn(shared, inbound, stream, tunnel_destination, source, local).await;
}

/// Where the protocol starts: on the accepted connection (its layers still to run), or on a
/// tunnel a multiplexing transport found in it (layers done).
enum Start {
    Connection(BoxStream),
    Tunnel(BoxStream, LayerSession),
}

async fn serve_conn(
    shared: Arc<Shared>,
    inbound: Arc<InboundHandler>,
    stream: BoxStream,
    tunnel_destination: Option<io::Result<Address>>,
    source: SocketAddr,
    local: SocketAddr,
) {
    if inbound.layers.multiplex.is_some() {
        serve_multiplexed(shared, inbound, stream, source, local).await;
        return;
    }
    serve_protocol(
        shared,
        inbound,
        Start::Connection(stream),
        tunnel_destination,
        source,
        local,
    )
    .await;
}

/// A connection of a multiplexing transport (gRPC, XHTTP): its layers (TLS) under the
/// handshake timeout, then the transport, which hands over every tunnel it carries; each
/// tunnel is served as a connection of its own, in its own task.
async fn serve_multiplexed(
    shared: Arc<Shared>,
    inbound: Arc<InboundHandler>,
    stream: BoxStream,
    source: SocketAddr,
    local: SocketAddr,
) {
    let Some(multiplex) = inbound.layers.multiplex.clone() else {
        return;
    };
    let limit = shared.level(inbound.level).handshake;
    let mut session = LayerSession::default();
    let stream = match within(limit, inbound.layers.accept(stream, &mut session)).await {
        Ok(stream) => stream,
        Err(e) => {
            shared.stats.handshake_failures().count(failure_reason(&e));
            debug!(inbound = %inbound.tag, %source, error = %e, "transport handshake failed; closing");
            return;
        }
    };
    let tunnels: TunnelSink = {
        let (shared, inbound) = (shared.clone(), inbound.clone());
        Arc::new(move |tunnel, session| {
            let start = Start::Tunnel(tunnel, session);
            tokio::spawn(serve_protocol(
                shared.clone(),
                inbound.clone(),
                start,
                None,
                source,
                local,
            ));
        })
    };
    if let Err(e) = multiplex.serve(stream, session, tunnels).await {
        debug!(inbound = %inbound.tag, %source, error = %e, "transport connection ended");
    }
}

async fn serve_protocol(
    shared: Arc<Shared>,
    inbound: Arc<InboundHandler>,
    start: Start,
    tunnel_destination: Option<io::Result<Address>>,
    source: SocketAddr,
    local: SocketAddr,
) {
    let _live = inbound.live.enter();
    let mut meta = Metadata::new(inbound.tag.clone(), source, local);
    meta.level = inbound.level;
    let (stream, layers_done, mut session) = match start {
        Start::Connection(stream) => (stream, false, LayerSession::default()),
        Start::Tunnel(stream, session) => (stream, true, session),
    };
    let shaken = handshake(
        &shared,
        &inbound,
        &meta,
        stream,
        tunnel_destination,
        layers_done,
        &mut session,
    );
    let accepted = match shaken.await {
        Ok(accepted) => accepted,
        Err(e) if e.kind() == io::ErrorKind::TimedOut => {
            shared
                .stats
                .handshake_failures()
                .count(HandshakeFailure::Timeout);
            debug!(inbound = %inbound.tag, %source, error = %e, "handshake timed out; closing");
            return;
        }
        Err(e) => {
            shared.stats.handshake_failures().count(failure_reason(&e));
            debug!(inbound = %inbound.tag, %source, error = %e, "handshake failed; closing");
            return;
        }
    };
    // A user the API may remove: its connection closes when it is (or already was).
    let removed = match (&inbound.users, accepted_user(&accepted)) {
        (Some(users), Some(email)) => match users.watch(email) {
            Some(signal) => Some(signal),
            None => {
                debug!(inbound = %inbound.tag, %source, "user removed during the handshake; closing");
                return;
            }
        },
        _ => None,
    };
    // The user's online IP (statsUserOnline) and live count, held until the connection ends.
    let _online = online(&shared, &accepted, meta.level, source);
    let _user_live = accepted_user(&accepted)
        .filter(|email| !email.is_empty())
        .map(|email| shared.stats.live().enter_user(email));
    let serve = serve_accepted(&shared, &inbound, meta, accepted, &session, source);
    match removed {
        None => serve.await,
        Some(mut signal) => {
            tokio::select! {
                () = serve => {}
                _ = signal.wait_for(|removed| *removed) => {
                    debug!(inbound = %inbound.tag, %source, "user removed through the API; closing its connection");
                }
            }
        }
    }
}

/// Why a handshake failed, as far as its error says: the protocols' authentication and replay
/// errors are told apart by their type, a timeout by its kind.
fn failure_reason(e: &io::Error) -> HandshakeFailure {
    use skiff_proto::shadowsocks::SsError;
    use skiff_proto::vmess::VmessError;
    if e.kind() == io::ErrorKind::TimedOut {
        return HandshakeFailure::Timeout;
    }
    let inner = e.get_ref();
    if let Some(ss) = inner.and_then(|i| i.downcast_ref::<SsError>()) {
        return match ss {
            SsError::Replay => HandshakeFailure::Replay,
            SsError::Auth | SsError::UnknownUser => HandshakeFailure::BadAuth,
            _ => HandshakeFailure::Other,
        };
    }
    if let Some(vmess) = inner.and_then(|i| i.downcast_ref::<VmessError>()) {
        return match vmess {
            VmessError::ReplayedSession => HandshakeFailure::Replay,
            VmessError::InvalidUser | VmessError::HeaderAuth => HandshakeFailure::BadAuth,
            _ => HandshakeFailure::Other,
        };
    }
    HandshakeFailure::Other
}

/// The user an accepted connection authenticated as.
fn accepted_user(accepted: &Accepted) -> Option<&str> {
    match accepted {
        Accepted::Stream { user, .. }
        | Accepted::Datagrams { user, .. }
        | Accepted::PacketStream { user, .. }
        | Accepted::UdpAssociate { user, .. } => user.as_deref(),
        Accepted::Fallback { .. } | Accepted::Done => None,
    }
}

/// Counts the connection in its user's online map when the user's level asks for it
/// (Xray's `statsUserOnline`): once here, released when the guard drops.
fn online(
    shared: &Shared,
    accepted: &Accepted,
    inbound_level: u32,
    source: SocketAddr,
) -> Option<skiff_core::online::OnlineGuard> {
    let email = accepted_user(accepted).filter(|email| !email.is_empty())?;
    let level = match accepted {
        Accepted::Stream { level, .. } | Accepted::Datagrams { level, .. } => *level,
        _ => None,
    };
    if !shared
        .level(level.unwrap_or(inbound_level))
        .stats_user_online
    {
        return None;
    }
    shared.stats.online().of_user(email).enter(source.ip())
}

/// Serves what the handshake accepted.
async fn serve_accepted(
    shared: &Arc<Shared>,
    inbound: &Arc<InboundHandler>,
    mut meta: Metadata,
    accepted: Accepted,
    session: &LayerSession,
    source: SocketAddr,
) {
    let mut identify = |user: Option<String>, level: Option<u32>| {
        meta.user = user.map(Arc::from);
        if let Some(level) = level {
            meta.level = level;
        }
    };
    match accepted {
        Accepted::Stream {
            destination,
            stream,
            reply,
            user,
            level,
        } => {
            identify(user, level);
            if skiff_proto::mux::is_mux_cool(&destination) {
                // Mux.Cool: every sub-connection takes the path below on its own.
                crate::mux::serve(shared.clone(), inbound.clone(), meta, stream).await;
                return;
            }
            route_stream(shared, inbound, meta, destination, stream, reply).await;
        }
        Accepted::Datagrams {
            destination,
            recv,
            send,
            user,
            level,
        } => {
            identify(user, level);
            udp_stream::serve(shared, inbound, meta, destination, (recv, send)).await;
        }
        Accepted::PacketStream { stream, user } => {
            identify(user, None);
            udp_stream::serve_trojan(shared, inbound, meta, stream).await;
        }
        Accepted::UdpAssociate {
            control,
            client_hint,
            user,
        } => {
            identify(user, None);
            meta.network = Network::Udp;
            if let Err(e) = udp::socks_associate(shared, inbound, meta, control, client_hint).await
            {
                debug!(inbound = %inbound.tag, %source, error = %e, "UDP association ended");
            }
        }
        Accepted::Fallback { stream } => fall_back(shared, inbound, &meta, stream, session).await,
        Accepted::Done => {}
    }
}

/// Sniffs (when the inbound says so), routes, connects and relays one client stream to
/// `destination`: a connection's, or a Mux.Cool sub-connection's (`mux.rs`).
pub(crate) async fn route_stream(
    shared: &Shared,
    inbound: &InboundHandler,
    mut meta: Metadata,
    destination: Address,
    stream: BoxStream,
    reply: Reply,
) {
    match &inbound.sniffing {
        Some(plan) if !plan.metadata_only => {
            sniff_then_relay(shared, inbound, plan, meta, destination, stream, reply).await
        }
        // No sniffing (or metadata only, which skiff has no sniffer for): no read
        // here, so Vision and splice keep their path untouched.
        _ => {
            meta.destination = Some(destination);
            connect_and_relay(shared, inbound, meta, stream, reply).await;
        }
    }
}

/// Sniffs the client's first bytes before routing. A SOCKS or HTTP CONNECT client sends
/// nothing until it is told the tunnel is up, so those get their success reply first (as
/// Xray answers before it dispatches); a failed connect then closes the tunnel instead of
/// refusing it.
async fn sniff_then_relay(
    shared: &Shared,
    inbound: &InboundHandler,
    plan: &skiff_config::SniffingPlan,
    mut meta: Metadata,
    destination: Address,
    mut stream: BoxStream,
    reply: Reply,
) {
    let early = ConnectOutcome::Connected { bound: None };
    let replied = match reply {
        Reply::None => Ok(()),
        Reply::Socks5 | Reply::Socks4 => {
            socks::server::write_reply(&mut stream, reply, early).await
        }
        Reply::HttpConnect => http::server::write_connect_reply(&mut stream, early).await,
    };
    if let Err(e) = replied {
        debug!(source = %meta.source, error = %e, "client went away before the reply");
        return;
    }
    let (first, found) = match sniffing::sniff_stream(&mut stream).await {
        Ok(sniffed) => sniffed,
        Err(e) => {
            debug!(source = %meta.source, error = %e, "client failed while sniffing");
            return;
        }
    };
    let destination = match found {
        Some(found) => sniffing::apply(plan, found, &mut meta, destination),
        None => destination,
    };
    meta.destination = Some(destination);
    let stream: BoxStream = if first.is_empty() {
        stream
    } else {
        Box::new(Prefixed::new(first, stream))
    };
    connect_and_relay(shared, inbound, meta, stream, Reply::None).await;
}

/// Runs the inbound's transport layers (unless `layers_done`), then its protocol's handshake, under the policy's
/// handshake timeout (a timeout is an error of kind TimedOut); a protocol that times itself
/// (HTTP forwarding) gets the limit for its first request instead. Handshake futures are
/// boxed: each is sized for its own protocol's buffers and freed when the handshake ends,
/// instead of every connection task carrying the largest one for its whole life.
async fn handshake(
    shared: &Arc<Shared>,
    inbound: &Arc<InboundHandler>,
    meta: &Metadata,
    stream: BoxStream,
    tunnel_destination: Option<io::Result<Address>>,
    layers_done: bool,
    session: &mut LayerSession,
) -> io::Result<Accepted> {
    let limit = shared.level(inbound.level).handshake;
    let Some(protocol) = inbound.protocol() else {
        return Err(io::Error::other("this inbound takes no TCP connections"));
    };
    let connector = RoutedConnector {
        shared: shared.clone(),
        inbound: inbound.clone(),
        meta: meta.clone(),
    };
    let cx = InboundContext {
        has_fallbacks: !inbound.fallbacks.is_empty(),
        raw_tcp: inbound.layers.is_raw_tcp(),
        destination: tunnel_destination.transpose()?,
        first_request: limit,
        connector: &connector,
    };
    let layers = async {
        if layers_done || inbound.layers.is_empty() {
            Ok(stream)
        } else {
            Box::pin(inbound.layers.accept(stream, session)).await
        }
    };
    if protocol.times_itself() {
        let stream = within(limit, layers).await?;
        protocol.accept(stream, &cx).await
    } else {
        within(limit, async { protocol.accept(layers.await?, &cx).await }).await
    }
}

/// `work`, or a TimedOut error once `limit` has passed.
async fn within<T>(limit: Duration, work: impl Future<Output = io::Result<T>>) -> io::Result<T> {
    match timeout(limit, work).await {
        Ok(result) => result,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "no complete request in time",
        )),
    }
}

/// Hands a connection that is not for us to the inbound's fallback, or closes it (without a
/// byte of our own) when none applies.
async fn fall_back(
    shared: &Shared,
    inbound: &InboundHandler,
    meta: &Metadata,
    mut stream: BoxStream,
    session: &LayerSession,
) {
    let first = stream.take_read_residue().unwrap_or_default();
    let chain = shared.fallback_chains.chain_of(meta.source);
    let me = fallback::inbound_id(inbound);
    if chain.contains(&me) {
        // Our own fallback brought this connection back to an inbound it already left: a
        // loop in the config. Going round again would only open connections until the
        // descriptors run out.
        tracing::warn!(inbound = %inbound.tag, "fallback loop: this connection came back through this inbound's own fallback chain; closing");
        let _ = timeout(CLOSE_NOTIFY_TIMEOUT, stream.shutdown()).await;
        return;
    }
    let Some(fallback) = fallback::select(&inbound.fallbacks, session, &first) else {
        shared
            .stats
            .handshake_failures()
            .count(HandshakeFailure::Rejected);
        debug!(inbound = %inbound.tag, source = %meta.source, "not a valid request and no fallback; closing");
        // Xray closes through its TLS connection: a close_notify (given 250 ms) before the
        // FIN (transport/internet/tls/tls.go `Conn.Close`). Over raw TCP this is the FIN.
        let _ = timeout(CLOSE_NOTIFY_TIMEOUT, stream.shutdown()).await;
        return;
    };
    shared
        .stats
        .handshake_failures()
        .count(HandshakeFailure::Fallback);
    let stream: BoxStream = Box::new(Prefixed::new(first, stream));
    let counters = RelayCounters {
        uplink: DirectionCounters::new(vec![inbound.uplink.clone()]),
        downlink: DirectionCounters::new(vec![inbound.downlink.clone()]),
        spliced: shared.stats.spliced().clone(),
        copied: shared.stats.copied().clone(),
    };
    let policy = shared.relay_policy(meta.level);
    if let Err(e) = fallback::serve(
        stream,
        fallback,
        meta.source,
        meta.local,
        &policy,
        &counters,
        &shared.fallback_chains,
        chain.iter().copied().chain([me]).collect(),
    )
    .await
    {
        debug!(inbound = %inbound.tag, source = %meta.source, error = %e, "fallback failed");
    }
}

async fn connect_and_relay(
    shared: &Shared,
    inbound: &InboundHandler,
    meta: Metadata,
    mut client: BoxStream,
    reply: Reply,
) {
    let Some(destination) = meta.destination.clone() else {
        return;
    };
    // The access log names what the client asked for, as Xray's does, even when sniffing
    // replaced it.
    let logged = meta
        .requested_destination
        .clone()
        .unwrap_or_else(|| destination.clone());
    let outbound = shared.pick(&meta).await;
    let connected = match timeout(DIAL_TIMEOUT, outbound.handler.connect(&meta, &destination)).await
    {
        Ok(result) => result,
        Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "connect timed out")),
    };
    let outcome = match &connected {
        Ok(server) => ConnectOutcome::Connected {
            bound: server.raw_tcp().and_then(|s| s.local_addr().ok()),
        },
        Err(e) => ConnectOutcome::Failed(e),
    };
    let replied = match reply {
        Reply::None => Ok(()),
        Reply::Socks5 | Reply::Socks4 => {
            socks::server::write_reply(&mut client, reply, outcome).await
        }
        Reply::HttpConnect => http::server::write_connect_reply(&mut client, outcome).await,
    };
    let server = match connected {
        Ok(server) => server,
        Err(e) => {
            if shared.access.enabled() {
                shared.access.write(format_args!(
                    "from {} rejected tcp:{} [{} -> {}] {}",
                    meta.source, logged, inbound.tag, outbound.tag, e
                ));
            }
            debug!(%destination, outbound = %outbound.tag, error = %e, "outbound connect failed");
            return;
        }
    };
    if let Err(e) = replied {
        debug!(source = %meta.source, error = %e, "client went away before the reply");
        return;
    }
    if shared.access.enabled() {
        let email = meta
            .user
            .as_deref()
            .map(|u| format!(" email: {u}"))
            .unwrap_or_default();
        shared.access.write(format_args!(
            "from {} accepted tcp:{} [{} -> {}]{}",
            meta.source, logged, inbound.tag, outbound.tag, email
        ));
    }
    let counters = shared.counters(inbound, &outbound, &meta);
    let result = relay(client, server, &shared.relay_policy(meta.level), &counters).await;
    let end = match &result.end {
        RelayEnd::Finished => "finished".to_string(),
        RelayEnd::IdleTimeout => "idle timeout".to_string(),
        RelayEnd::Failed(e) => format!("failed: {e}"),
        RelayEnd::Cut => "cut at the end of the grace period".to_string(),
    };
    debug!(
        source = %meta.source, %destination,
        up = result.uplink_bytes, down = result.downlink_bytes,
        spliced = result.spliced, "connection {end}"
    );
}

/// Opens outbound streams on behalf of a protocol that forwards requests itself (HTTP proxy
/// in absolute-form mode): every request is routed on its own.
struct RoutedConnector {
    shared: Arc<Shared>,
    inbound: Arc<InboundHandler>,
    meta: Metadata,
}

impl Connector for RoutedConnector {
    fn connect<'a>(
        &'a self,
        destination: &'a Address,
        user: Option<&'a str>,
    ) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(async move {
            let mut meta = self.meta.clone();
            meta.destination = Some(destination.clone());
            meta.user = user.map(Arc::from);
            let outbound = self.shared.pick(&meta).await;
            if self.shared.access.enabled() {
                self.shared.access.write(format_args!(
                    "from {} accepted tcp:{} [{} -> {}]",
                    meta.source, destination, meta.inbound_tag, outbound.tag
                ));
            }
            let stream = match timeout(DIAL_TIMEOUT, outbound.handler.connect(&meta, destination))
                .await
            {
                Ok(result) => result?,
                Err(_) => return Err(io::Error::new(io::ErrorKind::TimedOut, "connect timed out")),
            };
            let counters = self.shared.counters(&self.inbound, &outbound, &meta);
            let counted: BoxStream =
                Box::new(Counted::new(stream, counters.uplink, counters.downlink));
            Ok(counted)
        })
    }
}
