//! WebSocket as a layer of the stack, on both sides.

use std::io;

use skiff_core::{BoxFuture, BoxStream, ClientLayer, LayerSession, ServerLayer};

use super::{WsAccepted, WsClientOptions, WsServerOptions, accept, connect, refuse};

impl ClientLayer for WsClientOptions {
    fn connect<'a>(&'a self, stream: BoxStream) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(connect(stream, self))
    }
}

impl ServerLayer for WsServerOptions {
    fn accept<'a>(
        &'a self,
        stream: BoxStream,
        _session: &'a mut LayerSession,
    ) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(async move {
            match accept(stream, self).await? {
                WsAccepted::Upgraded { stream, .. } => Ok(stream),
                WsAccepted::NotWebSocket { stream, .. } => {
                    // A WebSocket inbound has no fallbacks (they need raw TCP): answer as
                    // Xray's listener does, so a prober meets an ordinary Go web server.
                    refuse(stream, self).await?;
                    Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "not a WebSocket upgrade for this inbound; answered as Xray does",
                    ))
                }
            }
        })
    }
}
