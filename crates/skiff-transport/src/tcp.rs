//! The plain TCP dial: a socket to the server, tuned as the stream settings say (no delay,
//! congestion control). Every stream-based transport starts here unless chained.

use std::io;
use std::net::SocketAddr;

use skiff_core::tcp_tuning::TcpTuning;
use skiff_core::{Address, BoxFuture, BoxPacketConn, BoxStream, Dialer, Metadata};
use tokio::net::TcpStream;

/// Dials TCP directly from this host.
#[derive(Clone, Debug, Default)]
pub struct TcpDialer {
    pub tuning: TcpTuning,
}

impl Dialer for TcpDialer {
    fn dial<'a>(
        &'a self,
        server: &'a Address,
        _meta: &'a Metadata,
    ) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(async move {
            // A domain: tokio tries each of its addresses in turn.
            let stream = match server {
                Address::Ip(sa) => TcpStream::connect(sa).await?,
                Address::Domain(host, port) => TcpStream::connect((host.as_str(), *port)).await?,
            };
            self.tuning.apply(&stream)?;
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

/// The first address of `server` (a UDP transport has no connect to try them in turn).
pub async fn resolve_first(server: &Address) -> io::Result<SocketAddr> {
    match server {
        Address::Ip(sa) => Ok(*sa),
        Address::Domain(host, port) => tokio::net::lookup_host((host.as_str(), *port))
            .await?
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{host}: no address"))),
    }
}
