//! The udpspeeder outbound: one tunnel (a connected UDP socket and one FEC session) to the
//! server, opened on first use; every routed UDP session is one conversation in it, with a
//! random conversation id as speederv2's client draws. The destination is not sent: the
//! server's target decides, as with speederv2.

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use skiff_core::datagram_batch::{BATCH, RecvBatch, send_batch};
use skiff_core::{Address, BoxFuture, BoxPacketConn, BoxStream, Metadata, Outbound, PacketConn};
use skiff_udpfec::MAX_DATAGRAM;
use tokio::io::ReadBuf;
use tokio::net::UdpSocket;
use tokio::sync::{OnceCell, mpsc};
use tracing::debug;

use super::{SharedSession, UdpspeederConfig};

/// Most conversations one tunnel carries (speederv2's `max_conv_num`).
pub const MAX_CONVERSATIONS: usize = 10_000;
/// Datagrams queued for one conversation before newer ones are dropped (UDP semantics).
const CONVERSATION_QUEUE: usize = 512;

pub struct UdpspeederClient {
    config: UdpspeederConfig,
    host: String,
    port: u16,
    tunnel: OnceCell<Arc<Tunnel>>,
}

struct Tunnel {
    socket: UdpSocket,
    fec: SharedSession,
    conversations: Mutex<HashMap<u32, mpsc::Sender<Vec<u8>>>>,
    server: Address,
}

impl UdpspeederClient {
    pub fn new(config: UdpspeederConfig, host: String, port: u16) -> Self {
        UdpspeederClient {
            config,
            host,
            port,
            tunnel: OnceCell::new(),
        }
    }

    async fn tunnel(&self) -> io::Result<Arc<Tunnel>> {
        self.tunnel
            .get_or_try_init(|| async {
                let server = tokio::net::lookup_host((self.host.as_str(), self.port))
                    .await?
                    .next()
                    .ok_or_else(|| {
                        io::Error::new(io::ErrorKind::NotFound, "udpspeeder server has no address")
                    })?;
                let any: std::net::SocketAddr = if server.is_ipv4() {
                    ([0, 0, 0, 0], 0).into()
                } else {
                    (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
                };
                let socket = UdpSocket::bind(any).await?;
                super::size_buffers(&socket);
                socket.connect(server).await?;
                let tunnel = Arc::new(Tunnel {
                    socket,
                    fec: SharedSession::new(&self.config),
                    conversations: Mutex::default(),
                    server: Address::Ip(server),
                });
                tokio::spawn(receive(tunnel.clone()));
                tokio::spawn(flush(tunnel.clone()));
                Ok(tunnel)
            })
            .await
            .cloned()
    }
}

impl Outbound for UdpspeederClient {
    fn connect<'a>(
        &'a self,
        _meta: &'a Metadata,
        _destination: &'a Address,
    ) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(async {
            Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "udpspeeder carries UDP only",
            ))
        })
    }

    fn bind<'a>(&'a self, _meta: &'a Metadata) -> BoxFuture<'a, io::Result<BoxPacketConn>> {
        Box::pin(async move {
            let tunnel = self.tunnel().await?;
            let (tx, rx) = mpsc::channel(CONVERSATION_QUEUE);
            let conv = {
                let mut map = tunnel
                    .conversations
                    .lock()
                    .map_err(|_| io::Error::other("udpspeeder tunnel poisoned"))?;
                if map.len() >= MAX_CONVERSATIONS {
                    return Err(io::Error::other("udpspeeder: too many conversations"));
                }
                let conv = loop {
                    let mut id = [0u8; 4];
                    skiff_crypto::random::fill(&mut id);
                    let id = u32::from_be_bytes(id);
                    if !map.contains_key(&id) {
                        break id;
                    }
                };
                map.insert(conv, tx);
                conv
            };
            Ok(Box::new(Conversation {
                tunnel,
                conv,
                replies: Mutex::new(rx),
            }) as BoxPacketConn)
        })
    }
}

/// Datagrams from the server, decoded and handed to their conversations: every datagram
/// already queued in one call (a group's shards arrive together), under one lock.
async fn receive(tunnel: Arc<Tunnel>) {
    let mut batch = RecvBatch::new(BATCH, MAX_DATAGRAM + 1);
    let mut decoded = Vec::new();
    loop {
        let count = match batch.recv(&tunnel.socket).await {
            Ok(n) => n,
            Err(e) => {
                // A refused port (ICMP) is reported once per datagram; keep listening.
                debug!(server = %tunnel.server, error = %e, "udpspeeder receive failed");
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            }
        };
        decoded.clear();
        {
            let Ok(mut session) = tunnel.fec.session.lock() else {
                return;
            };
            for i in 0..count {
                let (datagram, _) = batch.get(i);
                if datagram.len() > MAX_DATAGRAM {
                    continue;
                }
                if let Err(e) = session.receive(datagram, &mut decoded) {
                    debug!(server = %tunnel.server, error = %e, "udpspeeder datagram refused");
                }
            }
        }
        for (conv, payload) in decoded.drain(..) {
            let sender = tunnel
                .conversations
                .lock()
                .ok()
                .and_then(|m| m.get(&conv).cloned());
            if let Some(sender) = sender {
                let _ = sender.try_send(payload);
            }
        }
    }
}

/// Sends each group when its timeout passes, its shards in one call.
async fn flush(tunnel: Arc<Tunnel>) {
    loop {
        let datagrams = tunnel.fec.next_flush().await;
        let _ = send_batch(&tunnel.socket, &datagrams, None).await;
    }
}

struct Conversation {
    tunnel: Arc<Tunnel>,
    conv: u32,
    replies: Mutex<mpsc::Receiver<Vec<u8>>>,
}

impl PacketConn for Conversation {
    fn poll_recv_from(
        &self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<Address>> {
        let Ok(mut replies) = self.replies.lock() else {
            return Poll::Ready(Err(io::Error::other("udpspeeder conversation poisoned")));
        };
        match replies.poll_recv(cx) {
            Poll::Ready(Some(data)) => {
                let n = data.len().min(buf.remaining());
                buf.put_slice(&data[..n]);
                Poll::Ready(Ok(self.tunnel.server.clone()))
            }
            Poll::Ready(None) => Poll::Ready(Err(io::Error::from(io::ErrorKind::BrokenPipe))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn send_to<'a>(
        &'a self,
        payload: &'a [u8],
        _destination: &'a Address,
    ) -> BoxFuture<'a, io::Result<()>> {
        Box::pin(async move {
            let datagrams = self
                .tunnel
                .fec
                .send(self.conv, payload)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
            send_batch(&self.tunnel.socket, &datagrams, None).await
        })
    }
}

impl Drop for Conversation {
    fn drop(&mut self) {
        if let Ok(mut map) = self.tunnel.conversations.lock() {
            map.remove(&self.conv);
        }
    }
}
