//! Server side, as kcptun-server: one UDP socket, sessions keyed by the peer's address. A
//! datagram from an unknown address whose conv can be read (right key and crypt, a data
//! packet) starts a session; each session has a bounded queue (full = datagram dropped, KCP
//! resends) and its own task, and leaves the table when it dies.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use skiff_kcp::smux::Session;
use skiff_kcp::{KcpSession, peek_conv};
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tracing::{debug, warn};

use super::conn::{Conn, Incoming, Wire};
use super::stream::KcpStream;
use super::{TunnelParams, tune_socket};

/// Most peers (sessions) served at once; datagrams from further new addresses are dropped.
pub const MAX_SESSIONS: usize = 4096;
/// Datagrams queued per session before the demultiplexer drops.
const QUEUE: usize = 1024;

struct Peer {
    tx: mpsc::Sender<Bytes>,
}

/// Serves kcptun clients on `socket` until `stop` fires; every smux stream a client opens is
/// handed to `on_stream` with the client's address.
pub async fn serve(
    socket: Arc<UdpSocket>,
    params: TunnelParams,
    on_stream: Arc<dyn Fn(KcpStream, SocketAddr) + Send + Sync>,
    mut stop: watch::Receiver<bool>,
) {
    tune_socket(&socket, &params);
    let mut peers: HashMap<SocketAddr, Peer> = HashMap::new();
    let mut buf = BytesMut::new();
    loop {
        if buf.capacity() < 2048 {
            buf.reserve(64 * 1024);
        }
        let received = tokio::select! {
            _ = stop.changed() => return,
            r = socket.recv_buf_from(&mut buf) => r,
        };
        let (_, from) = match received {
            Ok(r) => r,
            Err(e) => {
                debug!(error = %e, "KCP socket receive failed");
                buf.clear();
                continue;
            }
        };
        let datagram = buf.split().freeze();
        if let Some(peer) = peers.get(&from)
            && !peer.tx.is_closed()
        {
            let _ = peer.tx.try_send(datagram);
            continue;
        }
        // A new peer (or one whose session ended): only a readable data packet starts one.
        let Some(conv) = peek_conv(&params.kcp, &datagram) else {
            continue;
        };
        if peers.len() >= MAX_SESSIONS {
            peers.retain(|_, p| !p.tx.is_closed());
            if peers.len() >= MAX_SESSIONS {
                warn!(%from, "KCP session cap reached; dropping");
                continue;
            }
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
        let (tx, rx) = mpsc::channel(QUEUE);
        let _ = tx.try_send(datagram);
        peers.insert(from, Peer { tx });
        debug!(%from, conv, "new KCP session");
        let f = on_stream.clone();
        let callback: Arc<dyn Fn(KcpStream) + Send + Sync> = Arc::new(move |s| f(s, from));
        tokio::spawn(conn.drive(Incoming::Queue(rx), Some(callback), stop.clone()));
    }
}
