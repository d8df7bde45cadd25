//! The VLESS outbound: dial the server (directly or through a chained outbound), run the
//! transport layers (TLS, WebSocket) over it, then speak VLESS inside.
//!
//! UDP (`bind`) uses command 0x02 (vless.md §4.2): one VLESS connection carries the datagrams
//! of one destination, as length-prefixed packets. A packet conversation that talks to several
//! destinations (SOCKS5 UDP ASSOCIATE) therefore keeps one connection per destination, opened
//! on the first datagram to it, at most [`MAX_LINKS`] at once; all of them close when the
//! conversation is dropped.

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use skiff_core::{Address, BoxFuture, BoxPacketConn, BoxStream, Metadata, Outbound, PacketConn};
use skiff_proto::vless::client;
use skiff_proto::vless::codec::Command;
use skiff_proto::vless::packet::VlessPacketStream;
use skiff_proto::vless::user::UserId;
use tokio::io::ReadBuf;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;
use tokio::task::AbortHandle;
use tracing::debug;

use crate::stack::OutboundLayers;

/// Most VLESS connections (destinations) one packet conversation keeps; opening one more
/// closes the least recently used.
const MAX_LINKS: usize = 16;
/// Datagrams waiting for one destination's connection (while it is set up, or while TCP is
/// slower than the sender); beyond that they are dropped, as a full socket buffer would.
const LINK_QUEUE: usize = 32;
/// Received datagrams waiting for the conversation's reader, all destinations together.
const INBOX: usize = 64;
/// How long reaching the server and its transport layers may take.
const DIAL_TIMEOUT: Duration = Duration::from_secs(10);
/// After a connection failed, datagrams to its destination are dropped this long before the
/// next one opens, so an unreachable server is not redialled for every datagram.
const REDIAL_PAUSE: Duration = Duration::from_secs(1);

pub struct VlessOutbound {
    pub server: Address,
    pub user: UserId,
    pub layers: OutboundLayers,
    /// Chained outbound (`proxySettings.tag`): reach the server through it.
    pub via: Option<Arc<dyn Outbound>>,
}

/// Reaches the VLESS server: TCP (or the chained outbound), without the transport layers.
pub(crate) async fn dial(
    server: &Address,
    via: Option<&Arc<dyn Outbound>>,
    meta: &Metadata,
) -> io::Result<BoxStream> {
    if let Some(via) = via {
        return via.connect(meta, server).await;
    }
    let stream = match server {
        Address::Ip(sa) => TcpStream::connect(sa).await?,
        Address::Domain(host, port) => TcpStream::connect((host.as_str(), *port)).await?,
    };
    stream.set_nodelay(true)?;
    Ok(Box::new(stream))
}

impl Outbound for VlessOutbound {
    fn connect<'a>(
        &'a self,
        meta: &'a Metadata,
        destination: &'a Address,
    ) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(async move {
            let stream = dial(&self.server, self.via.as_ref(), meta).await?;
            let stream = self.layers.wrap(stream).await?;
            Ok(client::connect(
                stream,
                &self.user,
                destination,
                Command::Tcp,
            ))
        })
    }

    fn bind<'a>(&'a self, meta: &'a Metadata) -> BoxFuture<'a, io::Result<BoxPacketConn>> {
        Box::pin(async move {
            let dialer = Arc::new(Dialer {
                server: self.server.clone(),
                user: self.user,
                layers: self.layers.clone(),
                via: self.via.clone(),
                meta: meta.clone(),
            });
            let (inbox_tx, inbox_rx) = mpsc::channel(INBOX);
            let conn: BoxPacketConn = Box::new(VlessPackets {
                dialer,
                links: Mutex::new(Links::default()),
                inbox_tx,
                inbox: Mutex::new(inbox_rx),
            });
            Ok(conn)
        })
    }
}

/// What opening a VLESS UDP connection needs, owned: links open after `bind` returned.
struct Dialer {
    server: Address,
    user: UserId,
    layers: OutboundLayers,
    via: Option<Arc<dyn Outbound>>,
    meta: Metadata,
}

impl Dialer {
    /// A VLESS UDP stream to `destination`; the request header leaves with the first datagram.
    async fn open(&self, destination: &Address) -> io::Result<VlessPacketStream> {
        let stream = dial(&self.server, self.via.as_ref(), &self.meta).await?;
        let stream = self.layers.wrap(stream).await?;
        Ok(VlessPacketStream::new(client::connect(
            stream,
            &self.user,
            destination,
            Command::Udp,
        )))
    }
}

/// One destination's VLESS connection, run by its own task.
struct Link {
    queue: mpsc::Sender<Bytes>,
    task: AbortHandle,
    /// `Links::clock` at the last datagram sent.
    last_used: u64,
}

#[derive(Default)]
struct Links {
    map: HashMap<Address, Link>,
    clock: u64,
}

/// The packet conversation of a VLESS outbound. See the module docs.
struct VlessPackets {
    dialer: Arc<Dialer>,
    links: Mutex<Links>,
    /// Cloned into every link; held here too so the inbox never reports a close.
    inbox_tx: mpsc::Sender<(Address, Bytes)>,
    inbox: Mutex<mpsc::Receiver<(Address, Bytes)>>,
}

impl VlessPackets {
    /// Starts a connection to `destination` in `links`, making room first.
    fn open_link<'l>(&self, links: &'l mut Links, destination: &Address) -> &'l mut Link {
        if let Some(old) = links.map.remove(destination) {
            old.task.abort();
        }
        if links.map.len() >= MAX_LINKS {
            // Finished links go first, then the least recently used.
            let victim = links
                .map
                .iter()
                .min_by_key(|(_, link)| (!link.task.is_finished(), link.last_used))
                .map(|(address, _)| address.clone());
            if let Some(victim) = victim.and_then(|v| links.map.remove(&v)) {
                victim.task.abort();
            }
        }
        let (queue, outgoing) = mpsc::channel(LINK_QUEUE);
        let task = tokio::spawn(run_link(
            self.dialer.clone(),
            destination.clone(),
            outgoing,
            self.inbox_tx.clone(),
        ))
        .abort_handle();
        links.map.entry(destination.clone()).or_insert(Link {
            queue,
            task,
            last_used: 0,
        })
    }
}

impl PacketConn for VlessPackets {
    fn poll_recv_from(
        &self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<Address>> {
        let mut inbox = self.inbox.lock().unwrap_or_else(PoisonError::into_inner);
        match ready!(inbox.poll_recv(cx)) {
            Some((from, packet)) => {
                // Longer than the caller's buffer: truncated, as a UDP socket does.
                let n = packet.len().min(buf.remaining());
                buf.put_slice(&packet[..n]);
                Poll::Ready(Ok(from))
            }
            // Unreachable while `inbox_tx` lives in self.
            None => Poll::Ready(Err(io::ErrorKind::BrokenPipe.into())),
        }
    }

    fn send_to<'a>(
        &'a self,
        payload: &'a [u8],
        destination: &'a Address,
    ) -> BoxFuture<'a, io::Result<()>> {
        Box::pin(async move {
            let packet = Bytes::copy_from_slice(payload);
            let mut links = self.links.lock().unwrap_or_else(PoisonError::into_inner);
            links.clock += 1;
            let now = links.clock;
            let reuse = links
                .map
                .get(destination)
                .is_some_and(|link| !link.task.is_finished());
            let link = if reuse {
                links.map.get_mut(destination)
            } else {
                None
            };
            let link = match link {
                Some(link) => link,
                None => self.open_link(&mut links, destination),
            };
            link.last_used = now;
            match link.queue.try_send(packet) {
                Ok(()) => Ok(()),
                Err(TrySendError::Full(_)) => Err(io::Error::new(
                    io::ErrorKind::WouldBlock,
                    format!("VLESS UDP queue to {destination} is full; datagram dropped"),
                )),
                Err(TrySendError::Closed(_)) => Err(io::Error::new(
                    io::ErrorKind::NotConnected,
                    format!(
                        "VLESS UDP connection to {destination} failed recently; datagram dropped"
                    ),
                )),
            }
        })
    }
}

impl Drop for VlessPackets {
    fn drop(&mut self) {
        let links = self.links.get_mut().unwrap_or_else(PoisonError::into_inner);
        for link in links.map.values() {
            link.task.abort();
        }
    }
}

/// Runs one destination's connection until it ends; after a failure it refuses datagrams for
/// [`REDIAL_PAUSE`] before finishing, so the next datagram opens a fresh one only then.
async fn run_link(
    dialer: Arc<Dialer>,
    destination: Address,
    mut outgoing: mpsc::Receiver<Bytes>,
    inbox: mpsc::Sender<(Address, Bytes)>,
) {
    match carry(&dialer, &destination, &mut outgoing, &inbox).await {
        Ok(()) => debug!(%destination, server = %dialer.server, "VLESS UDP connection ended"),
        Err(e) => {
            debug!(%destination, server = %dialer.server, error = %e, "VLESS UDP connection failed");
            outgoing.close();
            drop(outgoing);
            tokio::time::sleep(REDIAL_PAUSE).await;
        }
    }
}

/// Opens the connection, then moves datagrams both ways until either side ends.
async fn carry(
    dialer: &Dialer,
    destination: &Address,
    outgoing: &mut mpsc::Receiver<Bytes>,
    inbox: &mpsc::Sender<(Address, Bytes)>,
) -> io::Result<()> {
    let stream = match tokio::time::timeout(DIAL_TIMEOUT, dialer.open(destination)).await {
        Ok(stream) => stream?,
        Err(_) => return Err(io::Error::new(io::ErrorKind::TimedOut, "dial timed out")),
    };
    let (mut reader, mut writer) = stream.into_split();
    let uplink = async {
        while let Some(packet) = outgoing.recv().await {
            writer.send(&packet).await?;
        }
        // Every sender is gone: the conversation dropped this link.
        Ok(())
    };
    let downlink = async {
        // The server closing between packets (e.g. its idle timeout) is a normal end; the
        // next datagram to this destination opens a new connection.
        while let Some(packet) = reader.recv_packet().await? {
            if inbox.send((destination.clone(), packet)).await.is_err() {
                break;
            }
        }
        Ok(())
    };
    // Uplink first: the request header leaves together with the first datagram.
    tokio::select! {
        biased;
        r = uplink => r,
        r = downlink => r,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use skiff_config::StreamPlan;
    use skiff_proto::vless::server::{VlessAccept, VlessServer, VlessUser, accept};
    use std::future::poll_fn;
    use std::net::SocketAddr;
    use tokio::net::TcpListener;

    const ID: [u8; 16] = [7; 16];

    /// A VLESS server that echoes every UDP packet back on its connection (closing it cleanly
    /// after `close_after` packets, if given) and reports each connection's destination port
    /// when it opens and again, negated, when it closes.
    async fn echo_server(close_after: Option<usize>) -> (SocketAddr, mpsc::UnboundedReceiver<i32>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (events, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let server = VlessServer {
                users: vec![VlessUser {
                    id: UserId::from_bytes(ID),
                    email: None,
                }],
            };
            loop {
                let (tcp, _) = listener.accept().await.unwrap();
                let server = server.clone();
                let events = events.clone();
                tokio::spawn(async move {
                    let Ok(VlessAccept::Udp {
                        destination,
                        stream,
                        ..
                    }) = accept(tcp, &server).await
                    else {
                        panic!("not a VLESS UDP request");
                    };
                    let port = i32::from(destination.port());
                    events.send(port).unwrap();
                    let (mut rx, mut tx) = VlessPacketStream::new(stream).into_split();
                    let mut echoed = 0;
                    while let Ok(Some(packet)) = rx.recv_packet().await {
                        if tx.send(&packet).await.is_err() {
                            break;
                        }
                        echoed += 1;
                        if close_after == Some(echoed) {
                            let _ = tx.shutdown().await;
                            break;
                        }
                    }
                    events.send(-port).unwrap();
                });
            }
        });
        (addr, rx)
    }

    fn outbound(server: SocketAddr) -> VlessOutbound {
        VlessOutbound {
            server: Address::Ip(server),
            user: UserId::from_bytes(ID),
            layers: OutboundLayers::build(&StreamPlan::default(), "127.0.0.1").unwrap(),
            via: None,
        }
    }

    fn meta() -> Metadata {
        let any = SocketAddr::from(([127, 0, 0, 1], 1));
        Metadata::new(Arc::from("test"), any, any)
    }

    async fn recv(conn: &BoxPacketConn) -> (Address, Vec<u8>) {
        let mut buf = [0u8; 64];
        let mut read = ReadBuf::new(&mut buf);
        let from = poll_fn(|cx| conn.poll_recv_from(cx, &mut read))
            .await
            .unwrap();
        (from, read.filled().to_vec())
    }

    #[tokio::test]
    async fn one_connection_per_destination_bounded_and_closed_on_drop() {
        tokio::time::timeout(Duration::from_secs(30), async {
            let (server, mut events) = echo_server(None).await;
            let conn = outbound(server).bind(&meta()).await.unwrap();
            let destinations: Vec<Address> = (0..MAX_LINKS as u16 + 4)
                .map(|i| Address::from_host("example.com", 1000 + i))
                .collect();
            // Twice round all destinations: each answers from its own connection.
            for round in 0..2u8 {
                for destination in &destinations {
                    let payload = [round, destination.port() as u8];
                    conn.send_to(&payload, destination).await.unwrap();
                    let (from, got) = recv(&conn).await;
                    assert_eq!((&from, &got[..]), (destination, &payload[..]));
                }
            }
            // Each visit past the bound opened a connection and closed the least recently
            // used one (the server reports closes a little later), so exactly MAX_LINKS stay
            // open after 2 × 20 openings.
            let (mut open, mut opened) = (0i32, 0usize);
            while opened < 2 * destinations.len() || open != MAX_LINKS as i32 {
                let event = events.recv().await.unwrap();
                open += event.signum();
                opened += usize::from(event > 0);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            assert!(events.try_recv().is_err(), "more connections than visits");
            drop(conn);
            for _ in 0..MAX_LINKS {
                assert!(events.recv().await.unwrap() < 0);
            }
        })
        .await
        .unwrap();
    }

    #[tokio::test]
    async fn a_failed_connection_pauses_then_reopens() {
        tokio::time::timeout(Duration::from_secs(30), async {
            // The server takes the request and closes without answering.
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let conn = outbound(listener.local_addr().unwrap())
                .bind(&meta())
                .await
                .unwrap();
            let destination = Address::from_host("example.com", 53);
            conn.send_to(b"one", &destination).await.unwrap();
            let (tcp, _) = listener.accept().await.unwrap();
            drop(tcp);
            // The failed link refuses datagrams for a while instead of redialling.
            let mut refused = false;
            for _ in 0..50 {
                tokio::time::sleep(Duration::from_millis(10)).await;
                if conn.send_to(b"two", &destination).await.is_err() {
                    refused = true;
                    break;
                }
            }
            assert!(refused, "a failed link keeps taking datagrams");
            // After the pause the next datagram dials again.
            tokio::time::sleep(REDIAL_PAUSE + Duration::from_millis(100)).await;
            conn.send_to(b"three", &destination).await.unwrap();
            let (_tcp, _) = listener.accept().await.unwrap();
        })
        .await
        .unwrap();
    }

    #[tokio::test]
    async fn a_server_close_between_packets_reopens() {
        tokio::time::timeout(Duration::from_secs(30), async {
            // The server closes each connection cleanly after one packet (as an idle close).
            let (server, mut events) = echo_server(Some(1)).await;
            let conn = outbound(server).bind(&meta()).await.unwrap();
            let destination = Address::from_host("example.com", 53);
            for payload in [&b"one"[..], b"two", b"three"] {
                // A datagram racing the close is lost, as on any UDP path: resend until
                // the link has seen the end (no redial pause follows a clean end).
                let mut echoed = None;
                for _ in 0..20 {
                    conn.send_to(payload, &destination).await.unwrap();
                    if let Ok((_, got)) =
                        tokio::time::timeout(Duration::from_secs(1), recv(&conn)).await
                    {
                        echoed = Some(got);
                        break;
                    }
                }
                assert_eq!(echoed.as_deref(), Some(payload));
                assert_eq!(events.recv().await, Some(53));
                assert_eq!(events.recv().await, Some(-53));
            }
        })
        .await
        .unwrap();
    }
}
