//! The Trojan outbound: reach the server through the [`Dialer`] it holds (transport layers,
//! and any chained outbound, are the dialer's business), then speak Trojan inside.
//!
//! UDP (`bind`) uses UDP ASSOCIATE (trojan.md §2): every packet carries its own address, so
//! one Trojan connection carries a whole packet conversation, whatever destinations it talks
//! to. It opens on the first datagram (whose destination the request header names, as
//! Xray's client does) and reopens on the next datagram after it ended.

use std::io;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use skiff_core::{
    Address, BoxFuture, BoxPacketConn, BoxStream, Dialer, Metadata, Outbound, PacketConn,
};
use tokio::io::ReadBuf;
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;
use tokio::task::AbortHandle;
use tracing::debug;

use skiff_core::udp_links::{INBOX, Inbox};

use super::client;
use super::codec::{Command, PasswordHash};
use super::packet::TrojanPacketStream;

/// Datagrams waiting for the connection (while it is set up, or while TCP is slower than the
/// sender); beyond that they are dropped, as a full socket buffer would.
const QUEUE: usize = 64;
/// How long reaching the server and its transport layers may take.
const DIAL_TIMEOUT: Duration = Duration::from_secs(10);
/// After the connection failed, datagrams are dropped this long before the next one opens a
/// new connection, so an unreachable server is not redialled for every datagram.
const REDIAL_PAUSE: Duration = Duration::from_secs(1);

pub struct TrojanOutbound {
    pub server: Address,
    pub hash: PasswordHash,
    /// How to reach the server (its layers, directly or through a chained outbound).
    pub dialer: Arc<dyn Dialer>,
}

impl Outbound for TrojanOutbound {
    fn connect<'a>(
        &'a self,
        meta: &'a Metadata,
        destination: &'a Address,
    ) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(async move {
            let stream = self.dialer.dial(&self.server, meta).await?;
            Ok(client::connect(
                stream,
                &self.hash,
                destination,
                Command::Connect,
            ))
        })
    }

    fn bind<'a>(&'a self, meta: &'a Metadata) -> BoxFuture<'a, io::Result<BoxPacketConn>> {
        Box::pin(async move {
            let dialer = Arc::new(UdpOpener {
                server: self.server.clone(),
                hash: self.hash,
                dialer: self.dialer.clone(),
                meta: meta.clone(),
            });
            let conn: BoxPacketConn = Box::new(TrojanPackets {
                dialer,
                link: Mutex::new(None),
                inbox: Inbox::new(INBOX),
            });
            Ok(conn)
        })
    }
}

/// What opening the UDP connection needs, owned: it opens after `bind` returned.
struct UdpOpener {
    server: Address,
    hash: PasswordHash,
    dialer: Arc<dyn Dialer>,
    meta: Metadata,
}

/// The running connection: its queue and the task that carries it.
struct Link {
    queue: mpsc::Sender<(Address, Bytes)>,
    task: AbortHandle,
}

/// The packet conversation of a Trojan outbound. See the module docs.
struct TrojanPackets {
    dialer: Arc<UdpOpener>,
    link: Mutex<Option<Link>>,
    inbox: Inbox,
}

impl PacketConn for TrojanPackets {
    fn poll_recv_from(
        &self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<Address>> {
        self.inbox.poll_recv_from(cx, buf)
    }

    fn send_to<'a>(
        &'a self,
        payload: &'a [u8],
        destination: &'a Address,
    ) -> BoxFuture<'a, io::Result<()>> {
        Box::pin(async move {
            let packet = Bytes::copy_from_slice(payload);
            let mut link = self.link.lock().unwrap_or_else(PoisonError::into_inner);
            let link = match &mut *link {
                Some(running) if !running.task.is_finished() => running,
                slot => {
                    let (queue, outgoing) = mpsc::channel(QUEUE);
                    let task =
                        tokio::spawn(run_link(self.dialer.clone(), outgoing, self.inbox.sender()))
                            .abort_handle();
                    slot.insert(Link { queue, task })
                }
            };
            match link.queue.try_send((destination.clone(), packet)) {
                Ok(()) => Ok(()),
                Err(TrySendError::Full(_)) => Err(io::Error::new(
                    io::ErrorKind::WouldBlock,
                    format!("Trojan UDP queue is full; datagram to {destination} dropped"),
                )),
                Err(TrySendError::Closed(_)) => Err(io::Error::new(
                    io::ErrorKind::NotConnected,
                    format!(
                        "Trojan UDP connection failed recently; datagram to {destination} dropped"
                    ),
                )),
            }
        })
    }
}

impl Drop for TrojanPackets {
    fn drop(&mut self) {
        let link = self.link.get_mut().unwrap_or_else(PoisonError::into_inner);
        if let Some(link) = link {
            link.task.abort();
        }
    }
}

/// Runs the connection until it ends; after a failure it refuses datagrams for
/// [`REDIAL_PAUSE`] before finishing, so the next datagram opens a fresh one only then.
async fn run_link(
    dialer: Arc<UdpOpener>,
    mut outgoing: mpsc::Receiver<(Address, Bytes)>,
    inbox: mpsc::Sender<(Address, Bytes)>,
) {
    match carry(&dialer, &mut outgoing, &inbox).await {
        Ok(()) => debug!(server = %dialer.server, "Trojan UDP connection ended"),
        Err(e) => {
            debug!(server = %dialer.server, error = %e, "Trojan UDP connection failed");
            outgoing.close();
            drop(outgoing);
            tokio::time::sleep(REDIAL_PAUSE).await;
        }
    }
}

/// Opens the connection with the first datagram's destination in the request header, then
/// moves datagrams both ways until either side ends.
async fn carry(
    dialer: &UdpOpener,
    outgoing: &mut mpsc::Receiver<(Address, Bytes)>,
    inbox: &mpsc::Sender<(Address, Bytes)>,
) -> io::Result<()> {
    let Some((first_to, first)) = outgoing.recv().await else {
        return Ok(());
    };
    let open = dialer.dialer.dial(&dialer.server, &dialer.meta);
    let stream = match tokio::time::timeout(DIAL_TIMEOUT, open).await {
        Ok(stream) => stream?,
        Err(_) => return Err(io::Error::new(io::ErrorKind::TimedOut, "dial timed out")),
    };
    let stream = client::connect(stream, &dialer.hash, &first_to, Command::UdpAssociate);
    let (mut reader, mut writer) = TrojanPacketStream::new(stream).into_split();
    // The request header leaves together with the first datagram.
    writer.send(&first_to, &first).await?;
    let uplink = async {
        while let Some((to, packet)) = outgoing.recv().await {
            writer.send(&to, &packet).await?;
        }
        // Every sender is gone: the conversation was dropped.
        Ok(())
    };
    let downlink = async {
        // The server closing between packets (e.g. its idle timeout) is a normal end; the
        // next datagram opens a new connection.
        while let Some(packet) = reader.recv_packet().await? {
            if inbox.send(packet).await.is_err() {
                break;
            }
        }
        Ok(())
    };
    tokio::select! {
        r = uplink => r,
        r = downlink => r,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_dialer::TcpDialer;
    use crate::trojan::server::{TrojanAccept, TrojanServer, TrojanUser, accept};
    use std::future::poll_fn;
    use std::net::SocketAddr;
    use tokio::net::TcpListener;

    /// A Trojan server that echoes every UDP packet back to its address, and reports each
    /// connection it accepts.
    async fn echo_server() -> (SocketAddr, mpsc::UnboundedReceiver<Address>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (events, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let server = Arc::new(TrojanServer::new([(
                PasswordHash::of("pw"),
                TrojanUser::default(),
            )]));
            loop {
                let (tcp, _) = listener.accept().await.unwrap();
                let server = server.clone();
                let events = events.clone();
                tokio::spawn(async move {
                    let Ok(TrojanAccept::Udp {
                        destination,
                        stream,
                        ..
                    }) = accept(tcp, &server).await
                    else {
                        panic!("not a Trojan UDP request");
                    };
                    events.send(destination).unwrap();
                    let (mut rx, mut tx) = TrojanPacketStream::new(stream).into_split();
                    while let Ok(Some((to, packet))) = rx.recv_packet().await {
                        if tx.send(&to, &packet).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        (addr, rx)
    }

    fn meta() -> Metadata {
        let any = SocketAddr::from(([127, 0, 0, 1], 1));
        Metadata::new(Arc::from("test"), any, any)
    }

    #[tokio::test]
    async fn one_connection_carries_every_destination() {
        tokio::time::timeout(Duration::from_secs(30), async {
            let (server, mut events) = echo_server().await;
            let outbound = TrojanOutbound {
                server: Address::Ip(server),
                hash: PasswordHash::of("pw"),
                dialer: Arc::new(TcpDialer),
            };
            let conn = outbound.bind(&meta()).await.unwrap();
            let destinations: Vec<Address> = (0..20u16)
                .map(|i| Address::from_host("example.com", 1000 + i))
                .chain([Address::Ip("10.0.0.1:53".parse().unwrap())])
                .collect();
            for round in 0..2u8 {
                for destination in &destinations {
                    let payload = [round, destination.port() as u8];
                    conn.send_to(&payload, destination).await.unwrap();
                    let mut buf = [0u8; 16];
                    let mut read = ReadBuf::new(&mut buf);
                    let from = poll_fn(|cx| conn.poll_recv_from(cx, &mut read))
                        .await
                        .unwrap();
                    assert_eq!((&from, read.filled()), (destination, &payload[..]));
                }
            }
            // One connection, named after the first datagram's destination.
            assert_eq!(events.recv().await, Some(destinations[0].clone()));
            tokio::time::sleep(Duration::from_millis(100)).await;
            assert!(events.try_recv().is_err(), "more than one connection");
        })
        .await
        .unwrap();
    }
}
