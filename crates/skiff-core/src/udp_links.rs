//! UDP through a proxy that carries one destination's datagrams per connection (VLESS and
//! VMess command 0x02, vless.md §4.2, vmess.md §4.4): a packet conversation that talks to
//! several destinations (SOCKS5 UDP ASSOCIATE) keeps one connection per destination, opened on
//! the first datagram to it, at most [`MAX_LINKS`] at once; all of them close when the
//! conversation is dropped. The protocol only says how to open one such connection
//! ([`LinkOpener`]); everything else is here.

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use crate::datagram::{self, BoxDatagramRecv, BoxDatagramSend};
use crate::{Address, BoxFuture, BoxPacketConn, PacketConn};
use bytes::Bytes;
use tokio::io::ReadBuf;
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;
use tokio::task::AbortHandle;
use tracing::debug;

/// Most connections (destinations) one packet conversation keeps; opening one more closes
/// the least recently used.
pub const MAX_LINKS: usize = 16;
/// Datagrams waiting for one destination's connection (while it is set up, or while TCP is
/// slower than the sender); beyond that they are dropped, as a full socket buffer would.
const LINK_QUEUE: usize = 32;
/// Received datagrams waiting for the conversation's reader, all destinations together.
pub const INBOX: usize = 64;
/// How long reaching the server and its transport layers may take.
const DIAL_TIMEOUT: Duration = Duration::from_secs(10);
/// After a connection failed, datagrams to its destination are dropped this long before the
/// next one opens, so an unreachable server is not redialled for every datagram.
pub const REDIAL_PAUSE: Duration = Duration::from_secs(1);

/// Opens the connection that carries one destination's datagrams; its request header leaves
/// with the first datagram.
pub trait LinkOpener: Send + Sync + 'static {
    fn open<'a>(
        &'a self,
        destination: &'a Address,
    ) -> BoxFuture<'a, io::Result<(BoxDatagramRecv, BoxDatagramSend)>>;

    /// The proxy server, for logs.
    fn server(&self) -> &Address;

    /// The protocol's name, for messages ("VLESS", "VMess").
    fn protocol(&self) -> &'static str;
}

/// The packet conversation of an outbound whose connections `opener` opens.
pub fn packet_conn(opener: Arc<dyn LinkOpener>) -> BoxPacketConn {
    Box::new(StreamPackets {
        opener,
        links: Mutex::new(Links::default()),
        inbox: Inbox::new(INBOX),
    })
}

/// Datagrams that came back on a conversation's connections, with who sent them, waiting
/// for the conversation's reader. Each connection's task holds a [`Inbox::sender`]; the inbox
/// holds one too, so it never reports a close.
pub struct Inbox {
    tx: mpsc::Sender<(Address, Bytes)>,
    rx: Mutex<mpsc::Receiver<(Address, Bytes)>>,
}

impl Inbox {
    pub fn new(capacity: usize) -> Inbox {
        let (tx, rx) = mpsc::channel(capacity);
        Inbox {
            tx,
            rx: Mutex::new(rx),
        }
    }

    /// For a connection's task to hand over what it receives.
    pub fn sender(&self) -> mpsc::Sender<(Address, Bytes)> {
        self.tx.clone()
    }

    /// [`PacketConn::poll_recv_from`] for the conversation.
    pub fn poll_recv_from(
        &self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<Address>> {
        let mut rx = self.rx.lock().unwrap_or_else(PoisonError::into_inner);
        match ready!(rx.poll_recv(cx)) {
            Some((from, packet)) => {
                // Longer than the caller's buffer: truncated, as a UDP socket does.
                let n = packet.len().min(buf.remaining());
                buf.put_slice(&packet[..n]);
                Poll::Ready(Ok(from))
            }
            // Unreachable while `tx` lives in self.
            None => Poll::Ready(Err(io::ErrorKind::BrokenPipe.into())),
        }
    }
}

/// One destination's connection, run by its own task.
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

/// The packet conversation. See the module docs.
struct StreamPackets {
    opener: Arc<dyn LinkOpener>,
    links: Mutex<Links>,
    inbox: Inbox,
}

impl StreamPackets {
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
            self.opener.clone(),
            destination.clone(),
            outgoing,
            self.inbox.sender(),
        ))
        .abort_handle();
        links.map.entry(destination.clone()).or_insert(Link {
            queue,
            task,
            last_used: 0,
        })
    }
}

impl PacketConn for StreamPackets {
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
                    format!(
                        "{} UDP queue to {destination} is full; datagram dropped",
                        self.opener.protocol()
                    ),
                )),
                Err(TrySendError::Closed(_)) => Err(io::Error::new(
                    io::ErrorKind::NotConnected,
                    format!(
                        "{} UDP connection to {destination} failed recently; datagram dropped",
                        self.opener.protocol()
                    ),
                )),
            }
        })
    }
}

impl Drop for StreamPackets {
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
    opener: Arc<dyn LinkOpener>,
    destination: Address,
    mut outgoing: mpsc::Receiver<Bytes>,
    inbox: mpsc::Sender<(Address, Bytes)>,
) {
    let (protocol, server) = (opener.protocol(), opener.server().clone());
    match carry(&*opener, &destination, &mut outgoing, &inbox).await {
        Ok(()) => debug!(%destination, %server, "{protocol} UDP connection ended"),
        Err(e) => {
            debug!(%destination, %server, error = %e, "{protocol} UDP connection failed");
            outgoing.close();
            drop(outgoing);
            tokio::time::sleep(REDIAL_PAUSE).await;
        }
    }
}

/// Opens the connection, then moves datagrams both ways until either side ends.
async fn carry(
    opener: &dyn LinkOpener,
    destination: &Address,
    outgoing: &mut mpsc::Receiver<Bytes>,
    inbox: &mpsc::Sender<(Address, Bytes)>,
) -> io::Result<()> {
    let (mut reader, mut writer) =
        match tokio::time::timeout(DIAL_TIMEOUT, opener.open(destination)).await {
            Ok(halves) => halves?,
            Err(_) => return Err(io::Error::new(io::ErrorKind::TimedOut, "dial timed out")),
        };
    let uplink = async {
        while let Some(packet) = outgoing.recv().await {
            datagram::send(&mut *writer, &packet).await?;
        }
        // Every sender is gone: the conversation dropped this link.
        Ok(())
    };
    let downlink = async {
        // The server closing between packets (e.g. its idle timeout) is a normal end; the
        // next datagram to this destination opens a new connection.
        while let Some(packet) = datagram::recv(&mut *reader).await? {
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
