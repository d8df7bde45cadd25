//! Trojan as an [`Inbound`]: the fallback-aware first read and the handshake; UDP ASSOCIATE
//! hands over the packet stream.

use std::io;

use skiff_core::{Accepted, BoxFuture, BoxStream, Inbound, InboundContext, Reply};

use super::codec::AUTH_LEN;
use super::server::{TrojanAccept, TrojanServer, accept};
use crate::first_read::{FirstRead, first_read};

impl Inbound for TrojanServer {
    fn accept<'a>(
        &'a self,
        stream: BoxStream,
        cx: &'a InboundContext<'a>,
    ) -> BoxFuture<'a, io::Result<Accepted>> {
        Box::pin(async move {
            let stream = if cx.has_fallbacks {
                // The password hash and its CRLF.
                match first_read(stream, AUTH_LEN).await? {
                    FirstRead::Short(stream) => return Ok(Accepted::Fallback { stream }),
                    FirstRead::Enough(stream) => stream,
                }
            } else {
                stream
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
