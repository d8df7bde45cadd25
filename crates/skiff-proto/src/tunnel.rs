//! The tunnel (`dokodemo-door`) inbound: no handshake at all; every connection goes to the
//! destination the dispatcher found for it (configured, or the socket's original destination
//! under `followRedirect`).

use std::io;

use skiff_core::{Accepted, BoxFuture, BoxStream, Inbound, InboundContext, Reply};

/// The tunnel's protocol side (its destination rules live with the listener).
#[derive(Clone, Copy, Debug, Default)]
pub struct TunnelInbound;

impl Inbound for TunnelInbound {
    fn accept<'a>(
        &'a self,
        stream: BoxStream,
        cx: &'a InboundContext<'a>,
    ) -> BoxFuture<'a, io::Result<Accepted>> {
        Box::pin(async move {
            let destination = cx
                .destination
                .clone()
                .ok_or_else(|| io::Error::other("tunnel without a destination"))?;
            Ok(Accepted::Stream {
                destination,
                stream,
                reply: Reply::None,
                user: None,
                level: None,
            })
        })
    }
}
