//! The kcptun outbound: every connection routed here becomes one smux stream to a kcptun
//! server. As in kcptun, the destination is not sent: the server's `target` decides where the
//! stream goes.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

use skiff_core::{Address, BoxFuture, BoxPacketConn, BoxStream, Metadata, Outbound};
use tracing::info;

use skiff_transport::kcp::client::KcpClient;

pub struct KcptunOutbound {
    pub client: KcpClient,
    pub server: Address,
    /// The "destination is fixed by the server" note is logged once.
    pub told: AtomicBool,
}

impl Outbound for KcptunOutbound {
    fn connect<'a>(
        &'a self,
        _meta: &'a Metadata,
        destination: &'a Address,
    ) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(async move {
            if !self.told.swap(true, Ordering::Relaxed) {
                info!(
                    server = %self.server, first = %destination,
                    "kcptun outbound: destinations are not sent; the kcptun server's target decides"
                );
            }
            let stream = self.client.open().await?;
            Ok(Box::new(stream) as BoxStream)
        })
    }

    fn bind<'a>(&'a self, _meta: &'a Metadata) -> BoxFuture<'a, io::Result<BoxPacketConn>> {
        Box::pin(async {
            Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "kcptun carries TCP streams only",
            ))
        })
    }
}
