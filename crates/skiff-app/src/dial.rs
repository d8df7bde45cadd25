//! Reaching a proxy server: TCP tuned as the stream settings say (no delay, congestion
//! control), or through a chained outbound (`proxySettings.tag`). The transport layers (TLS,
//! WebSocket) come on top, in the caller.

use std::io;
use std::sync::Arc;

use skiff_core::tcp_tuning::TcpTuning;
use skiff_core::{Address, BoxStream, Metadata, Outbound};
use tokio::net::TcpStream;

/// Connects to `server` directly, or through `via` when the outbound is chained.
pub async fn dial(
    server: &Address,
    via: Option<&Arc<dyn Outbound>>,
    meta: &Metadata,
    tuning: &TcpTuning,
) -> io::Result<BoxStream> {
    if let Some(via) = via {
        return via.connect(meta, server).await;
    }
    let stream = match server {
        Address::Ip(sa) => TcpStream::connect(sa).await?,
        Address::Domain(host, port) => TcpStream::connect((host.as_str(), *port)).await?,
    };
    tuning.apply(&stream)?;
    Ok(Box::new(stream))
}

/// The first address of `server` (a UDP transport has no connect to try them in turn).
pub async fn resolve(server: &Address) -> io::Result<std::net::SocketAddr> {
    match server {
        Address::Ip(sa) => Ok(*sa),
        Address::Domain(host, port) => tokio::net::lookup_host((host.as_str(), *port))
            .await?
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{host}: no address"))),
    }
}
