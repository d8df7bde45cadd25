//! A transport layer: something that runs over a stream already connected to the peer and
//! hands back the stream the next layer (or the protocol) speaks on — TLS, WebSocket,
//! HTTPUpgrade. The two sides are two traits because they are built from different settings
//! (a TLS server holds certificates, a client a server name to verify).

use std::io;
use std::sync::Arc;

use crate::{BoxFuture, BoxStream};

/// What the server-side layers learned about a connection: what fallbacks select on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LayerSession {
    /// SNI the client sent in TLS, lower-cased.
    pub sni: Option<String>,
    /// ALPN protocol negotiated in TLS, lower-cased.
    pub alpn: Option<String>,
}

/// The client side of a layer: wraps a stream dialed to the server.
pub trait ClientLayer: Send + Sync {
    fn connect<'a>(&'a self, stream: BoxStream) -> BoxFuture<'a, io::Result<BoxStream>>;
}

/// The server side of a layer: accepts over an accepted stream, noting in `session` what it
/// learned. A peer that does not speak the layer is an error (after whatever answer the layer
/// owes it, e.g. the refusal a WebSocket listener gives a plain HTTP request).
pub trait ServerLayer: Send + Sync {
    fn accept<'a>(
        &'a self,
        stream: BoxStream,
        session: &'a mut LayerSession,
    ) -> BoxFuture<'a, io::Result<BoxStream>>;
}

/// Where a multiplexing transport hands each tunnel it accepted, with what its layers learned.
/// The receiver runs the inbound's protocol over the tunnel; it must not block (it spawns).
pub type TunnelSink = Arc<dyn Fn(BoxStream, LayerSession) + Send + Sync>;

/// The server side of a transport that does not map one connection to one tunnel: many
/// tunnels over one connection (gRPC's streams over HTTP/2), or one tunnel over several
/// connections (XHTTP's uploads as separate requests). It ends an inbound's stack: instead of
/// returning a stream it hands each tunnel to `tunnels` and returns when the connection is
/// done. State that spans connections (XHTTP's sessions) lives in the value, one per inbound.
pub trait MultiplexServer: Send + Sync {
    fn serve<'a>(
        &'a self,
        stream: BoxStream,
        session: LayerSession,
        tunnels: TunnelSink,
    ) -> BoxFuture<'a, io::Result<()>>;
}
