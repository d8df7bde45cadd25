//! VLESS as an [`Inbound`]: the fallback-aware first read, the handshake, and UDP (command
//! 0x02) turned into datagram halves; Mux.Cool (command 0x03) handed on as a stream to
//! `v1.mux.cool`.

use std::io;

use skiff_core::{Accepted, Address, BoxFuture, BoxStream, Inbound, InboundContext, Reply};

use super::packet::VlessPacketStream;
use super::server::{VlessAccept, VlessServer, accept};
use crate::first_read::or_fallback;
use crate::mux;

/// Bytes a first read needs before VLESS can tell its client: the version and the id.
const RECOGNISABLE: usize = 18;

impl Inbound for VlessServer {
    fn accept<'a>(
        &'a self,
        stream: BoxStream,
        cx: &'a InboundContext<'a>,
    ) -> BoxFuture<'a, io::Result<Accepted>> {
        Box::pin(async move {
            let stream = match or_fallback(stream, cx.has_fallbacks, RECOGNISABLE).await? {
                Ok(stream) => stream,
                Err(short) => return Ok(Accepted::Fallback { stream: short }),
            };
            Ok(match accept(stream, self).await? {
                VlessAccept::Stream {
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
                VlessAccept::Fallback { stream } => Accepted::Fallback { stream },
                // Mux.Cool (sub-connections, or Xray's XUDP under Vision): the dispatcher
                // serves it by its destination.
                VlessAccept::Mux { stream, user } => Accepted::Stream {
                    destination: Address::Domain(mux::MUX_COOL_DOMAIN.into(), 0),
                    stream,
                    reply: Reply::None,
                    user,
                    level: None,
                },
                VlessAccept::Udp {
                    destination,
                    stream,
                    user,
                } => {
                    let (reader, writer) = VlessPacketStream::new(stream).into_split();
                    Accepted::Datagrams {
                        destination,
                        recv: Box::new(reader),
                        send: Box::new(writer),
                        user,
                        level: None,
                    }
                }
            })
        })
    }
}
