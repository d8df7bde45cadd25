//! Client side, as V2Ray's mKCP dialer: every connection has its own UDP socket connected to
//! the server and the next conversation number of a counter that starts at random.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, OnceLock};

use skiff_kcp::mkcp::{MkcpConfig, MkcpSession, PacketFormat};
use tokio::net::UdpSocket;
use tokio::sync::watch;
use tokio::time::Instant;

use super::conn::{Conn, Incoming, Wire};
use super::stream::MkcpStream;

/// What an outbound needs to open mKCP connections.
#[derive(Clone, Debug)]
pub struct MkcpDialer {
    config: MkcpConfig,
    format: PacketFormat,
}

fn random_u16() -> u16 {
    let mut random = [0u8; 2];
    skiff_crypto::random::fill(&mut random);
    u16::from_le_bytes(random)
}

/// The next conversation number (V2Ray: a process-wide counter from a random start).
fn next_conv() -> u16 {
    static NEXT: OnceLock<AtomicU16> = OnceLock::new();
    NEXT.get_or_init(|| AtomicU16::new(random_u16()))
        .fetch_add(1, Ordering::Relaxed)
}

impl MkcpDialer {
    pub fn new(config: MkcpConfig) -> MkcpDialer {
        let format = PacketFormat::new(config.header, config.seed.as_deref());
        MkcpDialer { config, format }
    }

    /// Opens a connection to `server`. There is no handshake: this returns at once and the
    /// first write goes out as the first packet.
    pub async fn connect(&self, server: SocketAddr) -> io::Result<MkcpStream> {
        let local: SocketAddr = if server.is_ipv4() {
            ([0, 0, 0, 0], 0).into()
        } else {
            ([0u16; 8], 0).into()
        };
        let socket = UdpSocket::bind(local).await?;
        socket.connect(server).await?;
        super::tune_socket(&socket);
        let socket = Arc::new(socket);
        let conv = next_conv();
        let session = MkcpSession::new(conv, &self.config, self.format.writer(random_u16()), 0);
        let conn = Conn::new(
            session,
            Wire::Connected(socket.clone()),
            server,
            Instant::now(),
        );
        tracing::debug!(%server, conv, "new mKCP connection");
        // The task ends with the session, whose close handshake is bounded by its timers;
        // nothing else stops it, so the sender lives inside the task.
        let (keep, stop) = watch::channel(false);
        let incoming = Incoming::Socket(socket, self.format.clone());
        let driver = conn.clone();
        tokio::spawn(async move {
            driver.drive(incoming, stop).await;
            drop(keep);
        });
        Ok(MkcpStream::new(conn))
    }
}

impl skiff_core::Dialer for MkcpDialer {
    fn dial<'a>(
        &'a self,
        server: &'a skiff_core::Address,
        _meta: &'a skiff_core::Metadata,
    ) -> skiff_core::BoxFuture<'a, io::Result<skiff_core::BoxStream>> {
        Box::pin(async move {
            let addr = crate::tcp::resolve_first(server).await?;
            Ok(Box::new(self.connect(addr).await?) as skiff_core::BoxStream)
        })
    }

    fn bind_via<'a>(
        &'a self,
        _meta: &'a skiff_core::Metadata,
    ) -> skiff_core::BoxFuture<'a, io::Result<Option<skiff_core::BoxPacketConn>>> {
        Box::pin(async { Ok(None) })
    }
}
