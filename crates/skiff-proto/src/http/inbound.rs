//! The HTTP proxy as an [`Inbound`]. It forwards plain requests itself for as long as the
//! client keeps the connection alive, so only its first request is bounded by the handshake
//! timeout (inside `serve_timed`), not the whole exchange: it times itself.

use std::io;

use skiff_core::{Accepted, BoxFuture, BoxStream, Inbound, InboundContext};

use super::server::{HttpServerConfig, serve_timed};

impl Inbound for HttpServerConfig {
    fn accept<'a>(
        &'a self,
        stream: BoxStream,
        cx: &'a InboundContext<'a>,
    ) -> BoxFuture<'a, io::Result<Accepted>> {
        Box::pin(serve_timed(
            stream,
            self,
            cx.connector,
            Some(cx.first_request),
        ))
    }

    fn times_itself(&self) -> bool {
        true
    }
}
