//! The VMess outbound: reach the server through the [`Dialer`] it holds (transport layers,
//! and any chained outbound, are the dialer's business), then speak VMess inside.
//!
//! UDP (`bind`) uses command 0x02 (vmess.md §4.4): one VMess connection carries the datagrams
//! of one destination, one chunk each; [`skiff_core::udp_links`] keeps one such connection per
//! destination, as for VLESS.

use std::io;
use std::sync::Arc;

use skiff_core::datagram::{BoxDatagramRecv, BoxDatagramSend};
use skiff_core::udp_links::{self, LinkOpener};
use skiff_core::{Address, BoxFuture, BoxPacketConn, BoxStream, Dialer, Metadata, Outbound};

use super::{Command, VmessClient};

pub struct VmessOutbound {
    pub server: Address,
    /// The user's keys and security, derived once.
    pub client: Arc<VmessClient>,
    /// How to reach the server (its layers, directly or through a chained outbound).
    pub dialer: Arc<dyn Dialer>,
}

impl Outbound for VmessOutbound {
    fn connect<'a>(
        &'a self,
        meta: &'a Metadata,
        destination: &'a Address,
    ) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(async move {
            let stream = self.dialer.dial(&self.server, meta).await?;
            // An outbound's mux pool asks for `v1.mux.cool`: VMess says it with its command.
            let command = if crate::mux::is_mux_cool(destination) {
                Command::Mux
            } else {
                Command::Tcp
            };
            let stream = self.client.connect(stream, destination, command)?;
            Ok(Box::new(stream) as BoxStream)
        })
    }

    fn bind<'a>(&'a self, meta: &'a Metadata) -> BoxFuture<'a, io::Result<BoxPacketConn>> {
        Box::pin(async move {
            let opener = Arc::new(Links {
                server: self.server.clone(),
                client: self.client.clone(),
                dialer: self.dialer.clone(),
                meta: meta.clone(),
            });
            Ok(udp_links::packet_conn(opener))
        })
    }
}

/// What opening a VMess UDP connection needs, owned: links open after `bind` returned.
struct Links {
    server: Address,
    client: Arc<VmessClient>,
    dialer: Arc<dyn Dialer>,
    meta: Metadata,
}

impl LinkOpener for Links {
    /// A VMess UDP connection to `destination`; the request header leaves with the first
    /// datagram.
    fn open<'a>(
        &'a self,
        destination: &'a Address,
    ) -> BoxFuture<'a, io::Result<(BoxDatagramRecv, BoxDatagramSend)>> {
        Box::pin(async move {
            let stream = self.dialer.dial(&self.server, &self.meta).await?;
            let (reader, writer) = self
                .client
                .connect(stream, destination, Command::Udp)?
                .into_packets();
            Ok((
                Box::new(reader) as BoxDatagramRecv,
                Box::new(writer) as BoxDatagramSend,
            ))
        })
    }

    fn server(&self) -> &Address {
        &self.server
    }

    fn protocol(&self) -> &'static str {
        "VMess"
    }
}
