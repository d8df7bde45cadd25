//! What an inbound's handshake hands to the dispatcher, and the small capability a protocol
//! needs when it must open outbound streams itself (HTTP forwarding opens one per request).

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;

use crate::{Address, BoxStream};

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
    },
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
