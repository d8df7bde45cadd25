//! TLS as a layer of the stack, on both sides.

use std::io;

use skiff_core::{BoxFuture, BoxStream, ClientLayer, LayerSession, ServerLayer};

use super::{TlsClient, TlsServer};

impl ClientLayer for TlsClient {
    fn connect<'a>(&'a self, stream: BoxStream) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(TlsClient::connect(self, stream))
    }
}

impl ServerLayer for TlsServer {
    fn accept<'a>(
        &'a self,
        stream: BoxStream,
        session: &'a mut LayerSession,
    ) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(async move {
            let (stream, tls) = TlsServer::accept(self, stream).await?;
            // Fallbacks match SNI and ALPN case-insensitively.
            session.sni = tls.sni.map(|n| n.to_ascii_lowercase());
            session.alpn = tls.alpn.map(|a| a.to_ascii_lowercase());
            Ok(stream)
        })
    }
}
