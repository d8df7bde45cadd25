//! kcptun as a base dialer: one [`KcpClient`] (KCP sessions + smux) made on the first dial for
//! the server dialed, each dial one smux stream on it.

use std::io;
use std::sync::OnceLock;

use skiff_core::{Address, BoxFuture, BoxPacketConn, BoxStream, Dialer, Metadata};

use super::TunnelParams;
use super::client::KcpClient;

pub struct KcptunDialer {
    params: TunnelParams,
    /// KCP sessions used round-robin (kcptun `--conn`).
    conns: usize,
    client: OnceLock<KcpClient>,
}

impl KcptunDialer {
    pub fn new(params: TunnelParams, conns: usize) -> KcptunDialer {
        KcptunDialer {
            params,
            conns,
            client: OnceLock::new(),
        }
    }
}

impl Dialer for KcptunDialer {
    /// Every dial goes to the server of the first: an outbound has one server.
    fn dial<'a>(
        &'a self,
        server: &'a Address,
        _meta: &'a Metadata,
    ) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(async move {
            let client = self
                .client
                .get_or_init(|| KcpClient::new(self.params.clone(), server.clone(), self.conns));
            Ok(Box::new(client.open().await?) as BoxStream)
        })
    }

    fn bind_via<'a>(
        &'a self,
        _meta: &'a Metadata,
    ) -> BoxFuture<'a, io::Result<Option<BoxPacketConn>>> {
        Box::pin(async { Ok(None) })
    }
}
