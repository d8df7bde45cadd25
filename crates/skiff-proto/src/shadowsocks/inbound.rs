//! Shadowsocks (TCP) as an [`Inbound`]. A refused request is drained inside `accept` until the
//! client gives up; the dispatcher's handshake timeout bounds that wait (shadowsocks.md §2.4).

use std::io;

use skiff_core::{Accepted, BoxFuture, BoxStream, Inbound, InboundContext, Reply};

use super::server::{ShadowsocksServer, accept};

impl Inbound for ShadowsocksServer {
    fn accept<'a>(
        &'a self,
        stream: BoxStream,
        _cx: &'a InboundContext<'a>,
    ) -> BoxFuture<'a, io::Result<Accepted>> {
        Box::pin(async move {
            let accepted = accept(stream, self).await?;
            let user = accepted.email;
            Ok(Accepted::Stream {
                destination: accepted.destination,
                stream: Box::new(accepted.stream),
                reply: Reply::None,
                user,
                level: None,
            })
        })
    }
}
