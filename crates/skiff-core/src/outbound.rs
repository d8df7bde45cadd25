//! What every outbound can do: open a stream to a destination, or a packet conversation.

use std::io;
use std::task::{Context, Poll};

use tokio::io::ReadBuf;

use crate::{Address, BoxFuture, BoxStream, Metadata};

/// A packet conversation through an outbound (UDP, or UDP carried inside a proxy protocol).
pub trait PacketConn: Send + Sync {
    /// Receives the next datagram into `buf`, returning who sent it.
    fn poll_recv_from(
        &self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<Address>>;

    /// Sends one datagram to `destination`.
    fn send_to<'a>(
        &'a self,
        payload: &'a [u8],
        destination: &'a Address,
    ) -> BoxFuture<'a, io::Result<()>>;
}

pub type BoxPacketConn = Box<dyn PacketConn>;

/// An outbound handler. Setup is async and may allocate; the returned stream is the hot path.
pub trait Outbound: Send + Sync {
    /// Opens a stream to `destination` on behalf of the session `meta`.
    fn connect<'a>(
        &'a self,
        meta: &'a Metadata,
        destination: &'a Address,
    ) -> BoxFuture<'a, io::Result<BoxStream>>;

    /// Opens a packet conversation for the session `meta`.
    fn bind<'a>(&'a self, meta: &'a Metadata) -> BoxFuture<'a, io::Result<BoxPacketConn>>;
}

/// How an outbound reaches its own server: the base connection (TCP, or a UDP transport) and
/// the layers over it (TLS, WebSocket), directly or through another outbound. Chaining
/// (`proxySettings`) is an outbound used as a dialer: the outbound holding this does not know
/// which.
pub trait Dialer: Send + Sync {
    /// A stream to `server` with the transport layers done, for the session `meta`.
    fn dial<'a>(
        &'a self,
        server: &'a Address,
        meta: &'a Metadata,
    ) -> BoxFuture<'a, io::Result<BoxStream>>;

    /// For a protocol that sends its own datagrams to the server (Shadowsocks UDP): the
    /// chained outbound's packet conversation, or None when there is no chain (the protocol
    /// then uses a UDP socket of its own).
    fn bind_via<'a>(
        &'a self,
        meta: &'a Metadata,
    ) -> BoxFuture<'a, io::Result<Option<BoxPacketConn>>>;

    /// True when connections go through another outbound, which resolves names at its far
    /// end: a caller that resolves names itself (freedom's `domainStrategy`) then passes the
    /// name on instead of resolving here.
    fn is_chained(&self) -> bool {
        false
    }
}

/// An outbound used as a dialer (`proxySettings.tag`): streams to the server are opened
/// through it, and a protocol's own datagrams go through its packet conversation.
pub struct OutboundDialer(pub std::sync::Arc<dyn Outbound>);

impl Dialer for OutboundDialer {
    fn dial<'a>(
        &'a self,
        server: &'a Address,
        meta: &'a Metadata,
    ) -> BoxFuture<'a, io::Result<BoxStream>> {
        self.0.connect(meta, server)
    }

    fn bind_via<'a>(
        &'a self,
        meta: &'a Metadata,
    ) -> BoxFuture<'a, io::Result<Option<BoxPacketConn>>> {
        Box::pin(async move { self.0.bind(meta).await.map(Some) })
    }

    fn is_chained(&self) -> bool {
        true
    }
}
