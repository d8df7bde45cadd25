//! A Mux.Cool connection on an inbound (a stream addressed to `v1.mux.cool`: VLESS and VMess
//! command Mux, or any protocol carrying that name, as Trojan does): each sub-connection is
//! routed and relayed like a connection of its own, with the inbound's tag and the mux
//! connection's user and level; its destination comes from its New frame.

use std::sync::Arc;

use skiff_core::{BoxStream, Metadata, Network, Reply};
use skiff_proto::mux::{self, Incoming, Limits};
use tracing::debug;

use crate::dispatch;
use crate::inbound::InboundHandler;
use crate::shared::Shared;
use crate::udp_stream;

pub async fn serve(
    shared: Arc<Shared>,
    inbound: Arc<InboundHandler>,
    meta: Metadata,
    stream: BoxStream,
) {
    let peer = meta.source.to_string();
    let open = |incoming: Incoming| {
        let (shared, inbound, mut meta) = (shared.clone(), inbound.clone(), meta.clone());
        let task: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> =
            Box::pin(async move {
                match incoming {
                    Incoming::Stream {
                        destination,
                        stream,
                    } => {
                        dispatch::route_stream(
                            &shared,
                            &inbound,
                            meta,
                            destination,
                            Box::new(stream),
                            Reply::None,
                        )
                        .await
                    }
                    Incoming::Datagrams {
                        destination,
                        recv,
                        send,
                    } => {
                        meta.network = Network::Udp;
                        udp_stream::serve(
                            &shared,
                            &inbound,
                            meta,
                            destination,
                            (Box::new(recv), Box::new(send)),
                        )
                        .await
                    }
                }
            });
        task
    };
    if let Err(e) = mux::serve(stream, Limits::default(), &peer, open).await {
        debug!(inbound = %inbound.tag, source = %peer, error = %e, "Mux connection ended");
    }
}
