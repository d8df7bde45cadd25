//! The VLESS outbound: dial the server (directly or through a chained outbound), run the
//! transport layers (TLS, WebSocket) over it, then speak VLESS inside.

use std::io;
use std::sync::Arc;

use skiff_core::{Address, BoxFuture, BoxPacketConn, BoxStream, Metadata, Outbound};
use skiff_proto::vless::client;
use skiff_proto::vless::codec::Command;
use skiff_proto::vless::user::UserId;
use tokio::net::TcpStream;

use crate::stack::OutboundLayers;

pub struct VlessOutbound {
    pub server: Address,
    pub user: UserId,
    pub layers: OutboundLayers,
    /// Chained outbound (`proxySettings.tag`): reach the server through it.
    pub via: Option<Arc<dyn Outbound>>,
}

impl VlessOutbound {
    async fn dial(&self, meta: &Metadata) -> io::Result<BoxStream> {
        if let Some(via) = &self.via {
            return via.connect(meta, &self.server).await;
        }
        let stream = match &self.server {
            Address::Ip(sa) => TcpStream::connect(sa).await?,
            Address::Domain(host, port) => TcpStream::connect((host.as_str(), *port)).await?,
        };
        stream.set_nodelay(true)?;
        Ok(Box::new(stream))
    }
}

impl Outbound for VlessOutbound {
    fn connect<'a>(
        &'a self,
        meta: &'a Metadata,
        destination: &'a Address,
    ) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(async move {
            let stream = self.dial(meta).await?;
            let stream = self.layers.wrap(stream).await?;
            Ok(client::connect(
                stream,
                &self.user,
                destination,
                Command::Tcp,
            ))
        })
    }

    fn bind<'a>(&'a self, _meta: &'a Metadata) -> BoxFuture<'a, io::Result<BoxPacketConn>> {
        Box::pin(async {
            Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "UDP through a VLESS outbound is not wired up yet",
            ))
        })
    }
}
