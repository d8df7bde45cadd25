//! A plain TCP [`Dialer`] for the outbounds' tests: the app's dialer (transport layers,
//! chaining) is not theirs to test.

use std::io;

use skiff_core::{Address, BoxFuture, BoxPacketConn, BoxStream, Dialer, Metadata};
use tokio::net::TcpStream;

pub struct TcpDialer;

impl Dialer for TcpDialer {
    fn dial<'a>(
        &'a self,
        server: &'a Address,
        _meta: &'a Metadata,
    ) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(async move {
            let stream = match server {
                Address::Ip(addr) => TcpStream::connect(addr).await?,
                Address::Domain(host, port) => TcpStream::connect((host.as_str(), *port)).await?,
            };
            Ok(Box::new(stream) as BoxStream)
        })
    }

    fn bind_via<'a>(
        &'a self,
        _meta: &'a Metadata,
    ) -> BoxFuture<'a, io::Result<Option<BoxPacketConn>>> {
        Box::pin(async { Ok(None) })
    }
}
