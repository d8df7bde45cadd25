//! The inbound side of the vocabulary: the [`Inbound`] trait every protocol's server
//! implements, what its handshake hands to the dispatcher ([`Accepted`]), and the small
//! capabilities a protocol needs when it must open outbound streams itself (HTTP forwarding
//! opens one per request) or packet conversations (Shadowsocks UDP keeps its own sessions).

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::datagram::{BoxDatagramRecv, BoxDatagramSend};
use crate::{Address, BoxPacketConn, BoxStream, Counter, Metadata};

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// How a handshake told the client the outcome of connecting to its destination. The
/// dispatcher connects first, then asks the protocol to write this reply, so a client sees a
/// real "connection refused" instead of a success followed by a close.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reply {
    /// Nothing to send (tunnel, or the protocol already answered).
    None,
    /// A SOCKS5 reply (version 5) carrying the bound address.
    Socks5,
    /// A SOCKS4 reply.
    Socks4,
    /// `HTTP/1.1 200 Connection established`.
    HttpConnect,
}

/// Outcome of connecting, as a reply encoder sees it.
pub enum ConnectOutcome<'a> {
    Connected { bound: Option<SocketAddr> },
    Failed(&'a io::Error),
}

/// The result of an inbound handshake.
pub enum Accepted {
    /// Relay `stream` to `destination` once the dispatcher has connected, after sending `reply`.
    Stream {
        destination: Address,
        stream: BoxStream,
        reply: Reply,
        /// Authenticated user (account name or email), for routing and per-user counters.
        user: Option<String>,
        /// The user's own policy level (VMess users carry one), else the inbound's applies.
        level: Option<u32>,
    },
    /// Datagrams to and from one destination, carried in the protocol's stream (VLESS and
    /// VMess command 0x02, a Mux.Cool/XUDP session).
    Datagrams {
        destination: Address,
        recv: BoxDatagramRecv,
        send: BoxDatagramSend,
        user: Option<String>,
        level: Option<u32>,
    },
    /// A packet stream whose packets each carry their own destination (Trojan UDP
    /// ASSOCIATE): `stream` is the protocol's stream after its header.
    PacketStream {
        stream: BoxStream,
        user: Option<String>,
    },
    /// Not a valid request for a known user: hand `stream`, which replays every byte read,
    /// to the inbound's fallbacks (or close it when none applies).
    Fallback { stream: BoxStream },
    /// SOCKS5 UDP ASSOCIATE: keep `control` open; the client will send datagrams from
    /// `client_hint` (may be unspecified) to the UDP port the dispatcher announces.
    UdpAssociate {
        control: BoxStream,
        client_hint: Address,
        user: Option<String>,
    },
    /// The protocol finished the connection on its own (an answered error, forwarded HTTP).
    Done,
}

/// Lets a protocol open outbound streams through the router (HTTP proxy forwarding).
pub trait Connector: Send + Sync {
    /// Opens a stream to `destination` for the authenticated `user` (None: anonymous), routed
    /// and counted like any other session of the inbound.
    fn connect<'a>(
        &'a self,
        destination: &'a Address,
        user: Option<&'a str>,
    ) -> BoxFuture<'a, io::Result<BoxStream>>;
}

/// Lets a protocol server that keeps its own UDP sessions (Shadowsocks UDP: one socket, every
/// client) open each session's outbound packet conversation through the router.
pub trait PacketConnector: Send + Sync {
    /// The routed packet conversation for a new session: `meta` names its source, user, level
    /// and first destination (which routes it, as a SOCKS5 association is routed).
    fn bind<'a>(&'a self, meta: &'a Metadata) -> BoxFuture<'a, io::Result<RoutedPackets>>;
}

/// A session's routed packet conversation, with what the app decides about it.
pub struct RoutedPackets {
    pub conn: BoxPacketConn,
    /// How long the session may go without a datagram either way (the policy's connIdle).
    pub idle: Duration,
    /// Where the session's datagram bytes are counted, each way.
    pub uplink: Arc<Counter>,
    pub downlink: Arc<Counter>,
}

/// What the dispatcher tells an inbound about the connection it hands over.
pub struct InboundContext<'a> {
    /// The inbound has fallbacks: a client that sends too little to be recognised goes there
    /// at once, as Xray does, instead of waiting for the handshake timeout.
    pub has_fallbacks: bool,
    /// The stream is the raw TCP socket (no TLS or WebSocket under the protocol): VMess
    /// drains refused connections only there, as Xray does.
    pub raw_tcp: bool,
    /// A tunnel's destination (configured, or read from SO_ORIGINAL_DST).
    pub destination: Option<Address>,
    /// How long the first request may take, for a protocol that bounds itself
    /// ([`Inbound::times_itself`]).
    pub first_request: std::time::Duration,
    /// Opens routed outbound streams for a protocol that forwards requests itself.
    pub connector: &'a dyn Connector,
}

/// A protocol's server side: one handshake on an accepted stream, bounded by the
/// dispatcher's handshake timeout (which also bounds whatever the protocol does to refuse a
/// connection, such as VMess's drain).
pub trait Inbound: Send + Sync {
    /// Runs the handshake on `stream` (the transport layers are already done).
    fn accept<'a>(
        &'a self,
        stream: BoxStream,
        cx: &'a InboundContext<'a>,
    ) -> BoxFuture<'a, io::Result<Accepted>>;

    /// The protocol applies its own time limits ([`InboundContext::first_request`]) and may
    /// serve the connection for longer inside `accept` (HTTP forwarding of keep-alive
    /// requests): the dispatcher then does not put its timeout around `accept`.
    fn times_itself(&self) -> bool {
        false
    }
}
