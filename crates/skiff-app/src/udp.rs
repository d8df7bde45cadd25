//! UDP: tunnel (dokodemo-door) UDP listeners with per-source sessions, and SOCKS5 UDP
//! ASSOCIATE. Sessions expire after the policy's connIdle without traffic; their number is
//! capped so a flood of spoofed sources cannot exhaust sockets.

use std::collections::HashMap;
use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use skiff_core::{Address, BoxPacketConn, BoxStream, Metadata, Network};
use skiff_proto::socks;
use tokio::io::{AsyncReadExt, ReadBuf};
use tokio::net::UdpSocket;
use tokio::sync::watch;
use tracing::debug;

use crate::inbound::InboundHandler;
use crate::shared::Shared;
use skiff_core::activity::Activity;

/// Most UDP sessions one tunnel listener keeps at once; packets from new sources beyond it
/// are dropped until old sessions expire.
pub const MAX_UDP_SESSIONS: usize = 4096;

/// Largest datagram we relay (the UDP maximum).
const DATAGRAM_MAX: usize = 65_535;

struct Session {
    conn: BoxPacketConn,
    activity: Activity,
}

type Sessions = Arc<Mutex<HashMap<SocketAddr, Arc<Session>>>>;

/// Serves one tunnel UDP listener: every source address gets its own outbound conversation
/// to the fixed destination; replies go back from the listening socket.
pub async fn serve_tunnel(
    shared: Arc<Shared>,
    inbound: Arc<InboundHandler>,
    socket: Arc<UdpSocket>,
    destination: Address,
    mut shutdown: watch::Receiver<bool>,
) {
    let sessions: Sessions = Arc::default();
    let mut buf = vec![0u8; DATAGRAM_MAX];
    let local = socket
        .local_addr()
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
    loop {
        let (n, source) = tokio::select! {
            _ = shutdown.changed() => break,
            r = socket.recv_from(&mut buf) => match r {
                Ok(r) => r,
                Err(e) => {
                    debug!(inbound = %inbound.tag, error = %e, "UDP receive failed");
                    continue;
                }
            },
        };
        let existing = sessions
            .lock()
            .ok()
            .and_then(|map| map.get(&source).cloned());
        let session = match existing {
            Some(s) => s,
            None => {
                let count = sessions.lock().map(|m| m.len()).unwrap_or(usize::MAX);
                if count >= MAX_UDP_SESSIONS {
                    debug!(inbound = %inbound.tag, %source, "UDP session cap reached; dropping");
                    continue;
                }
                let mut meta = Metadata::new(inbound.tag.clone(), source, local);
                meta.network = Network::Udp;
                meta.level = inbound.level;
                meta.destination = Some(destination.clone());
                if let Some(plan) = &inbound.sniffing {
                    crate::sniffing::sniff_first_datagram(plan, &buf[..n], &mut meta);
                }
                let outbound = shared.pick(&meta).await;
                let conn = match outbound.handler.bind(&meta).await {
                    Ok(c) => c,
                    Err(e) => {
                        debug!(%source, error = %e, "UDP outbound bind failed");
                        continue;
                    }
                };
                if shared.access.enabled() {
                    shared.access.write(format_args!(
                        "from {source} accepted udp:{destination} [{} -> {}]",
                        inbound.tag, outbound.tag
                    ));
                }
                let session = Arc::new(Session {
                    conn,
                    activity: Activity::new(),
                });
                if let Ok(mut map) = sessions.lock() {
                    map.insert(source, session.clone());
                }
                let idle = shared.level(inbound.level).conn_idle;
                tokio::spawn(tunnel_replies(
                    session.clone(),
                    socket.clone(),
                    source,
                    sessions.clone(),
                    inbound.clone(),
                    idle,
                ));
                session
            }
        };
        session.activity.touch();
        inbound.uplink.add(n as u64);
        if let Err(e) = session.conn.send_to(&buf[..n], &destination).await {
            debug!(%source, error = %e, "UDP send failed");
        }
    }
}

async fn tunnel_replies(
    session: Arc<Session>,
    socket: Arc<UdpSocket>,
    client: SocketAddr,
    sessions: Sessions,
    inbound: Arc<InboundHandler>,
    idle: Duration,
) {
    let mut buf = vec![0u8; DATAGRAM_MAX];
    // One idle timer for the session's life, not one per datagram.
    let idle = session.activity.idle(idle);
    tokio::pin!(idle);
    loop {
        let mut read = ReadBuf::new(&mut buf);
        let received = tokio::select! {
            r = poll_fn(|cx| session.conn.poll_recv_from(cx, &mut read)) => r,
            _ = &mut idle => break,
        };
        match received {
            Ok(_from) => {
                let data = read.filled();
                session.activity.touch();
                inbound.downlink.add(data.len() as u64);
                if let Err(e) = socket.send_to(data, client).await {
                    debug!(%client, error = %e, "UDP reply failed");
                }
            }
            Err(e) => {
                debug!(%client, error = %e, "UDP outbound receive failed");
                break;
            }
        }
    }
    if let Ok(mut map) = sessions.lock() {
        map.remove(&client);
    }
}

/// SOCKS5 UDP ASSOCIATE: announce a UDP port, relay the client's datagrams (each carrying its
/// own destination) until the control connection closes or the association goes idle.
pub async fn socks_associate(
    shared: &Shared,
    inbound: &InboundHandler,
    mut meta: Metadata,
    mut control: BoxStream,
    _client_hint: Address,
) -> io::Result<()> {
    let announce_ip = match &inbound.kind {
        crate::inbound::InboundKind::Socks { announce_ip, .. } => *announce_ip,
        _ => None,
    };
    let socket = UdpSocket::bind(SocketAddr::new(meta.local.ip(), 0)).await?;
    let bound = socket.local_addr()?;
    let announce = SocketAddr::new(announce_ip.unwrap_or(bound.ip()), bound.port());
    socks::server::write_udp_associate_reply(&mut control, announce).await?;

    let idle = shared.level(meta.level).conn_idle;
    let client_ip = meta.source.ip();
    let mut client: Option<SocketAddr> = None;
    let mut outbound_conn: Option<BoxPacketConn> = None;
    let mut up = vec![0u8; DATAGRAM_MAX];
    let mut down = vec![0u8; DATAGRAM_MAX];
    let mut packet = Vec::with_capacity(DATAGRAM_MAX);
    let mut control_byte = [0u8; 1];
    let activity = Activity::new();
    loop {
        let reply = async {
            match &outbound_conn {
                Some(conn) => {
                    let mut read = ReadBuf::new(&mut down);
                    let from = poll_fn(|cx| conn.poll_recv_from(cx, &mut read)).await;
                    from.map(|from| (from, read.filled().len()))
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = control.read(&mut control_byte) => {
                // The association lives as long as its TCP connection (RFC 1928 §7).
                match r {
                    Ok(0) | Err(_) => return Ok(()),
                    Ok(_) => continue,
                }
            }
            _ = tokio::time::sleep(idle) => {
                if activity.idle_for() >= idle {
                    return Ok(());
                }
            }
            r = socket.recv_from(&mut up) => {
                let (n, from) = r?;
                // Only the client that opened the association may use it.
                if from.ip() != client_ip {
                    continue;
                }
                client = Some(from);
                let Ok((destination, payload)) = socks::udp::parse_datagram(&up[..n]) else {
                    debug!(%from, "malformed SOCKS5 UDP datagram dropped");
                    continue;
                };
                activity.touch();
                if outbound_conn.is_none() {
                    meta.destination = Some(destination.clone());
                    if let Some(plan) = &inbound.sniffing {
                        crate::sniffing::sniff_first_datagram(plan, payload, &mut meta);
                    }
                    let outbound = shared.pick(&meta).await;
                    if shared.access.enabled() {
                        shared.access.write(format_args!(
                            "from {} accepted udp:{} [{} -> {}]",
                            meta.source, destination, inbound.tag, outbound.tag
                        ));
                    }
                    outbound_conn = Some(outbound.handler.bind(&meta).await?);
                }
                if let Some(conn) = &outbound_conn {
                    inbound.uplink.add(payload.len() as u64);
                    if let Err(e) = conn.send_to(payload, &destination).await {
                        debug!(%destination, error = %e, "UDP send failed");
                    }
                }
            }
            r = reply => {
                let (from, n) = r?;
                let Some(client) = client else { continue };
                activity.touch();
                packet.clear();
                if socks::udp::encode_datagram_header(&from, &mut packet).is_err() {
                    continue;
                }
                packet.extend_from_slice(&down[..n]);
                inbound.downlink.add(n as u64);
                if let Err(e) = socket.send_to(&packet, client).await {
                    debug!(%client, error = %e, "UDP reply failed");
                }
            }
        }
    }
}
