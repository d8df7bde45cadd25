//! Client side, as kcptun-client: `conn` session slots used round-robin, each a KCP session
//! on its own UDP socket connected to the server with a random conv, created on first use and
//! again whenever the previous one has died.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use skiff_core::Address;
use skiff_kcp::KcpSession;
use skiff_kcp::smux::Session;
use tokio::net::UdpSocket;
use tokio::sync::watch;
use tokio::time::Instant;

use super::conn::{Conn, Incoming, Wire};
use super::stream::KcpStream;
use super::{TunnelParams, tune_socket};

pub struct KcpClient {
    params: TunnelParams,
    server: Address,
    slots: Vec<Mutex<Option<Arc<Conn>>>>,
    next: AtomicUsize,
    /// Dropped with the client: ends the session tasks.
    stop: watch::Sender<bool>,
}

impl KcpClient {
    pub fn new(params: TunnelParams, server: Address, conns: usize) -> KcpClient {
        KcpClient {
            params,
            server,
            slots: (0..conns.max(1)).map(|_| Mutex::new(None)).collect(),
            next: AtomicUsize::new(0),
            stop: watch::channel(false).0,
        }
    }

    /// Opens a stream on the next slot's session, dialling a new session if it has none.
    pub async fn open(&self) -> io::Result<KcpStream> {
        let index = self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len();
        let current = self.slot(index).filter(|c| !c.is_dead());
        let conn = match current {
            Some(conn) => conn,
            None => {
                let conn = self.dial().await?;
                let mut slot = self.slots[index].lock().unwrap_or_else(|e| e.into_inner());
                // Another connection may have dialled meanwhile: keep the live one.
                match slot.as_ref().filter(|c| !c.is_dead()) {
                    Some(existing) => existing.clone(),
                    None => {
                        *slot = Some(conn.clone());
                        conn
                    }
                }
            }
        };
        conn.open()
    }

    fn slot(&self, index: usize) -> Option<Arc<Conn>> {
        self.slots[index]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    async fn dial(&self) -> io::Result<Arc<Conn>> {
        let peer = resolve(&self.server).await?;
        let local: SocketAddr = if peer.is_ipv4() {
            ([0, 0, 0, 0], 0).into()
        } else {
            ([0u16; 8], 0).into()
        };
        let socket = UdpSocket::bind(local).await?;
        socket.connect(peer).await?;
        tune_socket(&socket, &self.params);
        let socket = Arc::new(socket);
        let mut conv = [0u8; 4];
        skiff_crypto::random::fill(&mut conv);
        let conv = u32::from_le_bytes(conv);
        let kcp = KcpSession::new(conv, &self.params.kcp)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        let epoch = Instant::now();
        let smux = Session::new(self.params.smux, true, 0);
        let conn = Conn::new(
            kcp,
            smux,
            &self.params,
            Wire::Connected(socket.clone()),
            peer,
            epoch,
        );
        tracing::debug!(server = %peer, conv, "new KCP session");
        tokio::spawn(
            conn.clone()
                .drive(Incoming::Socket(socket), None, self.stop.subscribe()),
        );
        Ok(conn)
    }
}

impl Drop for KcpClient {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

async fn resolve(server: &Address) -> io::Result<SocketAddr> {
    match server {
        Address::Ip(sa) => Ok(*sa),
        Address::Domain(host, port) => tokio::net::lookup_host((host.as_str(), *port))
            .await?
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{host}: no address"))),
    }
}
