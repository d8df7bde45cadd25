//! Trojan as an [`Inbound`]: the fallback-aware first read and the handshake; UDP ASSOCIATE
//! hands over the packet stream.

use std::io;

use skiff_core::{Accepted, BoxFuture, BoxStream, Inbound, InboundContext, Reply};

use super::codec::AUTH_LEN;
use super::server::{TrojanAccept, TrojanServer, accept};
use crate::first_read::or_fallback;

impl Inbound for TrojanServer {
    fn accept<'a>(
        &'a self,
        stream: BoxStream,
        cx: &'a InboundContext<'a>,
    ) -> BoxFuture<'a, io::Result<Accepted>> {
        Box::pin(async move {
            // Recognisable: the password hash and its CRLF.
            let stream = match or_fallback(stream, cx.has_fallbacks, AUTH_LEN).await? {
                Ok(stream) => stream,
                Err(short) => return Ok(Accepted::Fallback { stream: short }),
            };
            Ok(match accept(stream, self).await? {
                TrojanAccept::Stream {
                    destination,
                    stream,
                    user,
                } => Accepted::Stream {
                    destination,
                    stream,
                    reply: Reply::None,
                    user,
                    level: None,
                },
                TrojanAccept::Udp { stream, user, .. } => Accepted::PacketStream { stream, user },
                TrojanAccept::Fallback { stream } => Accepted::Fallback { stream },
            })
        })
    }
}
