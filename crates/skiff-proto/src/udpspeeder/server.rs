//! The udpspeeder inbound: one UDP socket; every client address whose datagrams pass the
//! outer checksum gets a FEC session, and every conversation inside it a routed packet
//! conversation to the fixed target. Peers and conversations are capped and expire.

use std::collections::HashMap;
use std::future::poll_fn;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use skiff_core::activity::Activity;
use skiff_core::datagram_batch::{BATCH, RecvBatch, send_batch};
use skiff_core::{Address, Metadata, Network, PacketConnector, RoutedPackets};
use skiff_udpfec::MAX_DATAGRAM;
use tokio::io::ReadBuf;
use tokio::net::UdpSocket;
use tokio::sync::watch;
use tracing::debug;

use super::{SharedSession, UdpspeederConfig};

/// Most client addresses served at once (speederv2's `max_conn_num`).
pub const MAX_PEERS: usize = 200;
/// Most conversations per client address.
pub const MAX_CONVERSATIONS: usize = 1024;
/// A client address with no conversation left is forgotten after this long without traffic.
const PEER_IDLE: Duration = Duration::from_secs(60);

pub struct UdpspeederServer {
    pub config: UdpspeederConfig,
    /// Where every conversation goes (speederv2's `-r` on the server).
    pub target: Address,
}

struct Peer {
    address: SocketAddr,
    fec: SharedSession,
    conversations: Mutex<HashMap<u32, Arc<Conversation>>>,
    activity: Activity,
}

/// One flow inside a peer's tunnel; its activity counts both ways.
struct Conversation {
    routed: RoutedPackets,
    activity: Activity,
}

type Peers = Arc<Mutex<HashMap<SocketAddr, Arc<Peer>>>>;

pub async fn serve(
    tag: Arc<str>,
    socket: Arc<UdpSocket>,
    server: Arc<UdpspeederServer>,
    connector: Arc<dyn PacketConnector>,
    mut shutdown: watch::Receiver<bool>,
) {
    super::size_buffers(&socket);
    let peers: Peers = Arc::default();
    let local = socket
        .local_addr()
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
    // One byte more than speederv2 accepts, to notice (and drop) larger datagrams.
    let mut batch = RecvBatch::new(BATCH, MAX_DATAGRAM + 1);
    let mut received = Vec::new();
    let stopped = shutdown.changed();
    tokio::pin!(stopped);
    loop {
        // Every datagram already queued, in one call: a group's shards arrive together.
        let count = tokio::select! {
            _ = &mut stopped => break,
            r = batch.recv(&socket) => match r {
                Ok(n) => n,
                Err(e) => {
                    debug!(inbound = %tag, error = %e, "udpspeeder receive failed");
                    continue;
                }
            },
        };
        for i in 0..count {
            let (buf, source) = batch.get(i);
            let Some(source) = source else { continue };
            let inbound = Inbound {
                tag: &tag,
                server: &server,
                connector: &connector,
                socket: &socket,
                peers: &peers,
                local,
            };
            inbound.handle(buf, source, &mut received).await;
        }
    }
}

/// What a received datagram is handled with.
struct Inbound<'a> {
    tag: &'a Arc<str>,
    server: &'a Arc<UdpspeederServer>,
    connector: &'a Arc<dyn PacketConnector>,
    socket: &'a Arc<UdpSocket>,
    peers: &'a Peers,
    local: SocketAddr,
}

impl Inbound<'_> {
    /// One datagram from `source`: uncooked, decoded, and what it completes sent on to the
    /// target, each conversation routed on its first packet.
    async fn handle(&self, buf: &mut [u8], source: SocketAddr, received: &mut Vec<(u32, Vec<u8>)>) {
        let Inbound {
            tag,
            server,
            connector,
            socket,
            peers,
            local,
        } = *self;
        let n = buf.len();
        if n > MAX_DATAGRAM {
            debug!(inbound = %tag, %source, "udpspeeder datagram too large; dropped");
            return;
        }
        // The outer layer first: garbage never creates state.
        let len = match server.config.cook.uncook(&mut buf[..n]) {
            Ok(len) => len,
            Err(e) => {
                debug!(inbound = %tag, %source, error = %e, "udpspeeder datagram refused");
                return;
            }
        };
        let Some(peer) = peer_for(peers, source, server, socket) else {
            debug!(inbound = %tag, %source, "udpspeeder peer cap reached; dropped");
            return;
        };
        peer.activity.touch();
        received.clear();
        let decoded = match peer.fec.session.lock() {
            Ok(mut s) => s.receive_uncooked(&buf[..len], received),
            Err(_) => return,
        };
        if let Err(e) = decoded {
            debug!(inbound = %tag, %source, error = %e, "udpspeeder packet refused");
        }
        for (conv, payload) in received.drain(..) {
            let existing = peer
                .conversations
                .lock()
                .ok()
                .and_then(|m| m.get(&conv).cloned());
            let routed = match existing {
                Some(r) => r,
                None => {
                    let count = peer
                        .conversations
                        .lock()
                        .map(|m| m.len())
                        .unwrap_or(usize::MAX);
                    if count >= MAX_CONVERSATIONS {
                        debug!(inbound = %tag, %source, "udpspeeder conversation cap reached");
                        continue;
                    }
                    let mut meta = Metadata::new(tag.clone(), source, local);
                    meta.network = Network::Udp;
                    meta.destination = Some(server.target.clone());
                    let routed = match connector.bind(&meta).await {
                        Ok(routed) => Arc::new(Conversation {
                            routed,
                            activity: Activity::new(),
                        }),
                        Err(e) => {
                            debug!(inbound = %tag, %source, error = %e, "udpspeeder route failed");
                            continue;
                        }
                    };
                    if let Ok(mut m) = peer.conversations.lock() {
                        m.insert(conv, routed.clone());
                    }
                    tokio::spawn(replies(peer.clone(), conv, routed.clone(), socket.clone()));
                    routed
                }
            };
            routed.activity.touch();
            routed.routed.uplink.add(payload.len() as u64);
            if let Err(e) = routed.routed.conn.send_to(&payload, &server.target).await {
                debug!(inbound = %tag, %source, error = %e, "udpspeeder send to target failed");
            }
        }
    }
}

/// The peer at `source`, created (with its flush timer) if there is room.
fn peer_for(
    peers: &Peers,
    source: SocketAddr,
    server: &UdpspeederServer,
    socket: &Arc<UdpSocket>,
) -> Option<Arc<Peer>> {
    let mut map = peers.lock().ok()?;
    if let Some(p) = map.get(&source) {
        return Some(p.clone());
    }
    if map.len() >= MAX_PEERS {
        return None;
    }
    let peer = Arc::new(Peer {
        address: source,
        fec: SharedSession::new(&server.config),
        conversations: Mutex::default(),
        activity: Activity::new(),
    });
    map.insert(source, peer.clone());
    tokio::spawn(flusher(peer.clone(), peers.clone(), socket.clone()));
    Some(peer)
}

/// Sends each group when its timeout passes; forgets the peer once it is idle and empty.
async fn flusher(peer: Arc<Peer>, peers: Peers, socket: Arc<UdpSocket>) {
    // One timer for the idle check, not one armed and cancelled per group.
    let mut idle_check = tokio::time::interval(PEER_IDLE);
    idle_check.reset();
    loop {
        tokio::select! {
            datagrams = peer.fec.next_flush() => {
                let _ = send_batch(&socket, &datagrams, Some(peer.address)).await;
            }
            _ = idle_check.tick() => {
                let empty = peer
                    .conversations
                    .lock()
                    .map(|m| m.is_empty())
                    .unwrap_or(true);
                if empty && peer.activity.idle_for() >= PEER_IDLE {
                    if let Ok(mut map) = peers.lock() {
                        map.remove(&peer.address);
                    }
                    return;
                }
            }
        }
    }
}

/// One conversation's replies from the target, FEC-encoded back to the peer, until idle.
async fn replies(
    peer: Arc<Peer>,
    conv: u32,
    conversation: Arc<Conversation>,
    socket: Arc<UdpSocket>,
) {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    let (routed, activity) = (&conversation.routed, &conversation.activity);
    // One idle timer for the conversation's life, not one per datagram.
    let idle = activity.idle(routed.idle);
    tokio::pin!(idle);
    loop {
        let mut read = ReadBuf::new(&mut buf);
        let received = tokio::select! {
            r = poll_fn(|cx| routed.conn.poll_recv_from(cx, &mut read)) => r,
            _ = &mut idle => break,
        };
        match received {
            Ok(_from) => {
                activity.touch();
                let data = read.filled();
                routed.downlink.add(data.len() as u64);
                match peer.fec.send(conv, data) {
                    Ok(datagrams) => {
                        let _ = send_batch(&socket, &datagrams, Some(peer.address)).await;
                    }
                    Err(e) => debug!(peer = %peer.address, error = %e, "udpspeeder reply dropped"),
                }
            }
            Err(e) => {
                debug!(peer = %peer.address, error = %e, "udpspeeder target receive failed");
                break;
            }
        }
    }
    if let Ok(mut m) = peer.conversations.lock() {
        m.remove(&conv);
    }
}
