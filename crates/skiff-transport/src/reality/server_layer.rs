//! The REALITY server as a layer of an inbound's stack.

use std::io;

use skiff_core::{BoxFuture, BoxStream, LayerSession, ServerLayer};

use super::RealityServer;

impl ServerLayer for RealityServer {
    fn accept<'a>(
        &'a self,
        stream: BoxStream,
        session: &'a mut LayerSession,
    ) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(async move {
            let (stream, sni) = RealityServer::accept(self, stream).await?;
            // Fallbacks match SNI case-insensitively; REALITY negotiates no ALPN.
            session.sni = Some(sni.to_ascii_lowercase()).filter(|s| !s.is_empty());
            session.alpn = None;
            Ok(stream)
        })
    }
}
