//! Server side, as kcptun-server: one UDP socket, sessions keyed by the peer's address. A
//! datagram from an unknown address whose conv can be read (right key and crypt, a data
//! packet) starts a session; each session has a bounded queue (full = datagram dropped, KCP
//! resends) and its own task, and leaves the table when it dies.

use std::net::SocketAddr;
use std::sync::Arc;

use skiff_kcp::smux::Session;
use skiff_kcp::{KcpSession, peek_conv};
use tokio::net::UdpSocket;
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{debug, warn};

use super::conn::{Conn, Incoming, Wire};
use super::stream::KcpStream;
use super::{TunnelParams, tune_socket};
use crate::udp_sessions::{Limits, SessionTable};

/// Receive buffer: any UDP datagram fits.
const DATAGRAM: usize = 65_536;

/// Serves kcptun clients on `socket` until `stop` fires; every smux stream a client opens is
/// handed to `on_stream` with the client's address.
pub async fn serve(
    socket: Arc<UdpSocket>,
    params: TunnelParams,
    on_stream: Arc<dyn Fn(KcpStream, SocketAddr) + Send + Sync>,
    stop: watch::Receiver<bool>,
) {
    serve_with_limits(socket, params, on_stream, stop, Limits::KCPTUN_SERVER).await;
}

/// [`serve`] with the session table's caps given.
pub async fn serve_with_limits(
    socket: Arc<UdpSocket>,
    params: TunnelParams,
    on_stream: Arc<dyn Fn(KcpStream, SocketAddr) + Send + Sync>,
    mut stop: watch::Receiver<bool>,
    limits: Limits,
) {
    tune_socket(&socket, &params);
    let mut peers: SessionTable<SocketAddr> = SessionTable::new(limits);
    let mut buf = vec![0u8; DATAGRAM];
    loop {
        let received = tokio::select! {
            _ = stop.changed() => return,
            r = socket.recv_from(&mut buf) => r,
        };
        let (n, from) = match received {
            Ok(r) => r,
            Err(e) => {
                debug!(error = %e, "KCP socket receive failed");
                continue;
            }
        };
        let datagram = buf.get(..n).unwrap_or_default();
        if peers.deliver(&from, datagram) {
            continue;
        }
        // A new peer (or one whose session ended): only a readable data packet starts one.
        let Some(conv) = peek_conv(&params.kcp, datagram) else {
            continue;
        };
        if !peers.admit(from.ip()) {
            debug!(%from, "KCP session cap reached; dropping");
            continue;
        }
        let kcp = match KcpSession::new(conv, &params.kcp) {
            Ok(k) => k,
            Err(e) => {
                warn!(error = %e, "cannot create a KCP session");
                continue;
            }
        };
        let conn = Conn::new(
            kcp,
            Session::new(params.smux, false, 0),
            &params,
            Wire::To(socket.clone(), from),
            from,
            Instant::now(),
        );
        let rx = peers.insert(from, from.ip(), datagram);
        debug!(%from, conv, "new KCP session");
        let f = on_stream.clone();
        let callback: Arc<dyn Fn(KcpStream) + Send + Sync> = Arc::new(move |s| f(s, from));
        tokio::spawn(conn.drive(Incoming::Queue(rx), Some(callback), stop.clone()));
    }
}
