//! VMess as an [`Inbound`]. Over raw TCP a refused connection is drained before it closes, as
//! Xray does; over TLS or WebSocket it closes at once (Xray drains only on `*net.TCPConn`).

use std::io;

use skiff_core::{Accepted, BoxFuture, BoxStream, Inbound, InboundContext, Reply};

use super::server::{VmessAccept, accept};
use super::users::VmessServer;

impl Inbound for VmessServer {
    fn accept<'a>(
        &'a self,
        stream: BoxStream,
        cx: &'a InboundContext<'a>,
    ) -> BoxFuture<'a, io::Result<Accepted>> {
        Box::pin(async move {
            Ok(match accept(stream, self, cx.raw_tcp).await? {
                VmessAccept::Stream {
                    destination,
                    stream,
                    user,
                    level,
                } => Accepted::Stream {
                    destination,
                    stream: Box::new(stream),
                    reply: Reply::None,
                    user,
                    level: Some(level),
                },
                VmessAccept::Udp {
                    destination,
                    reader,
                    writer,
                    user,
                    level,
                } => Accepted::Datagrams {
                    destination,
                    recv: Box::new(reader),
                    send: Box::new(writer),
                    user,
                    level: Some(level),
                },
            })
        })
    }
}
