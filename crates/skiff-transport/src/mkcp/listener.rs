//! Server side, as V2Ray's mKCP listener: one UDP socket; a connection is the peer's address
//! plus the conv the client chose. A packet that opens (right header and seal) and carries
//! data near the start of a stream creates a connection; each connection has a bounded queue
//! (full = dropped, mKCP resends) and its own task, and leaves the table when it ends.

use std::net::SocketAddr;
use std::sync::Arc;

use skiff_kcp::mkcp::{MkcpConfig, MkcpSession, PacketFormat, first_segment};
use tokio::net::UdpSocket;
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::debug;

use super::conn::{Conn, Incoming, Wire};
use super::stream::MkcpStream;
use crate::udp_sessions::{Limits, SessionTable};

/// Receive buffer (any UDP datagram fits).
const DATAGRAM: usize = 65_536;

/// Serves mKCP clients on `socket` until `stop` fires; every new connection is handed to
/// `on_conn` with the client's address.
pub async fn serve(
    socket: Arc<UdpSocket>,
    config: MkcpConfig,
    on_conn: Arc<dyn Fn(MkcpStream, SocketAddr) + Send + Sync>,
    stop: watch::Receiver<bool>,
) {
    serve_with_limits(socket, config, on_conn, stop, Limits::MKCP_SERVER).await;
}

/// [`serve`] with the connection table's caps given.
pub async fn serve_with_limits(
    socket: Arc<UdpSocket>,
    config: MkcpConfig,
    on_conn: Arc<dyn Fn(MkcpStream, SocketAddr) + Send + Sync>,
    mut stop: watch::Receiver<bool>,
    limits: Limits,
) {
    super::tune_socket(&socket);
    let format = PacketFormat::new(config.header, config.seed.as_deref());
    let window = config.receiving_window();
    let epoch = Instant::now();
    let mut peers: SessionTable<(SocketAddr, u16)> = SessionTable::new(limits);
    let mut buf = vec![0u8; DATAGRAM];
    loop {
        let received = tokio::select! {
            _ = stop.changed() => return,
            r = socket.recv_from(&mut buf) => r,
        };
        let (n, from) = match received {
            Ok(r) => r,
            Err(e) => {
                debug!(error = %e, "mKCP socket receive failed");
                continue;
            }
        };
        let Some(datagram) = buf.get_mut(..n) else {
            continue;
        };
        let Some(plain) = format.open(datagram) else {
            continue;
        };
        let Some((conv, starts)) = first_segment(plain, window) else {
            continue;
        };
        if peers.deliver(&(from, conv), plain) {
            continue;
        }
        if !starts {
            continue;
        }
        if !peers.admit(from.ip()) {
            debug!(%from, "mKCP connection cap reached; dropping");
            continue;
        }
        let mut random = [0u8; 2];
        skiff_crypto::random::fill(&mut random);
        let now = epoch.elapsed().as_millis() as u32;
        let session = MkcpSession::new(
            conv,
            &config,
            format.writer(u16::from_le_bytes(random)),
            now,
        );
        let conn = Conn::new(session, Wire::To(socket.clone(), from), from, epoch);
        let rx = peers.insert((from, conv), from.ip(), plain);
        debug!(%from, conv, "new mKCP connection");
        tokio::spawn(conn.clone().drive(Incoming::Queue(rx), stop.clone()));
        on_conn(MkcpStream::new(conn), from);
    }
}
