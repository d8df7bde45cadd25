//! SOCKS4/4a/5 as an [`Inbound`]: the reply is written by the dispatcher once it has
//! connected ([`skiff_core::Reply`]).

use std::io;

use skiff_core::{Accepted, BoxFuture, BoxStream, Inbound, InboundContext};

use super::server::{SocksServerConfig, handshake};

impl Inbound for SocksServerConfig {
    fn accept<'a>(
        &'a self,
        stream: BoxStream,
        _cx: &'a InboundContext<'a>,
    ) -> BoxFuture<'a, io::Result<Accepted>> {
        Box::pin(async move { handshake(stream, self).await.map_err(io::Error::other) })
    }
}
