//! Packet conversations for a protocol server that keeps its own UDP sessions (Shadowsocks
//! UDP, `skiff_proto::shadowsocks::udp_server`): each session is routed by its first
//! destination, logged, and counted on the inbound.

use std::io;
use std::sync::Arc;

use skiff_core::{BoxFuture, Metadata, PacketConnector, RoutedPackets};

use crate::inbound::InboundHandler;
use crate::shared::Shared;

pub struct RoutedPacketConnector {
    pub shared: Arc<Shared>,
    pub inbound: Arc<InboundHandler>,
}

impl PacketConnector for RoutedPacketConnector {
    fn bind<'a>(&'a self, meta: &'a Metadata) -> BoxFuture<'a, io::Result<RoutedPackets>> {
        Box::pin(async move {
            let outbound = self.shared.pick(meta).await;
            let conn = outbound.handler.bind(meta).await?;
            if self.shared.access.enabled()
                && let Some(destination) = &meta.destination
            {
                let email = meta
                    .user
                    .as_deref()
                    .map(|u| format!(" email: {u}"))
                    .unwrap_or_default();
                self.shared.access.write(format_args!(
                    "from {} accepted udp:{destination} [{} -> {}]{email}",
                    meta.source, self.inbound.tag, outbound.tag
                ));
            }
            Ok(RoutedPackets {
                conn,
                idle: self.shared.level(meta.level).conn_idle,
                uplink: self.inbound.uplink.clone(),
                downlink: self.inbound.downlink.clone(),
            })
        })
    }
}
