//! The layer stack of one inbound or outbound: a base (raw TCP, mKCP or kcptun) and the
//! layers over it in order (TLS, then WebSocket or HTTPUpgrade), and on the server side
//! possibly a multiplexing transport ending it (gRPC, XHTTP). skiff-app builds it from the
//! stream settings; nothing here knows which layers exist.

use std::io;
use std::sync::Arc;

use skiff_core::{
    Address, BoxFuture, BoxPacketConn, BoxStream, ClientLayer, Dialer, LayerSession, Metadata,
    MultiplexServer, ServerLayer,
};
use skiff_kcp::mkcp::MkcpConfig;

use crate::kcp::TunnelParams;

/// What an inbound listens on.
#[derive(Clone, Debug)]
pub enum ServerBase {
    Tcp,
    /// UDP: every mKCP connection is a connection.
    Mkcp(MkcpConfig),
    /// UDP: every smux stream of the KCP sessions is a connection.
    Kcptun(TunnelParams),
}

/// An inbound's base and the server side of its layers.
pub struct ServerStack {
    pub base: ServerBase,
    pub layers: Vec<Arc<dyn ServerLayer>>,
    /// Ends the stack when the network carries tunnels not one per connection (gRPC,
    /// XHTTP): after `layers`, the connection goes to it, and each tunnel to the protocol.
    pub multiplex: Option<Arc<dyn MultiplexServer>>,
}

impl ServerStack {
    /// No layer runs over the accepted stream (it goes straight to the protocol).
    pub fn is_empty(&self) -> bool {
        self.layers.is_empty() && self.multiplex.is_none()
    }

    /// The protocol speaks directly on a TCP socket.
    pub fn is_raw_tcp(&self) -> bool {
        self.is_empty() && matches!(self.base, ServerBase::Tcp)
    }

    /// The mKCP settings when this inbound listens for mKCP instead of TCP.
    pub fn mkcp(&self) -> Option<&MkcpConfig> {
        match &self.base {
            ServerBase::Mkcp(config) => Some(config),
            _ => None,
        }
    }

    /// The kcptun tunnel parameters when this inbound takes kcptun streams instead of TCP.
    pub fn kcptun(&self) -> Option<&TunnelParams> {
        match &self.base {
            ServerBase::Kcptun(params) => Some(params),
            _ => None,
        }
    }

    /// Runs the layers' server side, in order, over an accepted connection: the protocol
    /// speaks on the stream returned.
    pub async fn accept(
        &self,
        mut stream: BoxStream,
        session: &mut LayerSession,
    ) -> io::Result<BoxStream> {
        for layer in &self.layers {
            stream = layer.accept(stream, session).await?;
        }
        Ok(stream)
    }
}

/// An outbound's way to its server: the base dialer (TCP, mKCP, kcptun, or a chained
/// outbound), then the client side of each layer in order.
pub struct LayeredDialer {
    pub base: Arc<dyn Dialer>,
    pub layers: Vec<Arc<dyn ClientLayer>>,
}

impl Dialer for LayeredDialer {
    fn dial<'a>(
        &'a self,
        server: &'a Address,
        meta: &'a Metadata,
    ) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(async move {
            let mut stream = self.base.dial(server, meta).await?;
            for layer in &self.layers {
                stream = layer.connect(stream).await?;
            }
            Ok(stream)
        })
    }

    fn bind_via<'a>(
        &'a self,
        meta: &'a Metadata,
    ) -> BoxFuture<'a, io::Result<Option<BoxPacketConn>>> {
        self.base.bind_via(meta)
    }

    fn is_chained(&self) -> bool {
        self.base.is_chained()
    }
}

/// A UDP base (mKCP, kcptun) asked to run through a chained outbound: every dial fails with
/// the reason, when the connection is attempted; a protocol's own datagrams still go through
/// the chain.
pub struct Unchainable {
    pub reason: &'static str,
    pub chained: Arc<dyn Dialer>,
}

impl Dialer for Unchainable {
    fn dial<'a>(
        &'a self,
        _server: &'a Address,
        _meta: &'a Metadata,
    ) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(async { Err(io::Error::new(io::ErrorKind::Unsupported, self.reason)) })
    }

    fn bind_via<'a>(
        &'a self,
        meta: &'a Metadata,
    ) -> BoxFuture<'a, io::Result<Option<BoxPacketConn>>> {
        self.chained.bind_via(meta)
    }

    fn is_chained(&self) -> bool {
        true
    }
}
