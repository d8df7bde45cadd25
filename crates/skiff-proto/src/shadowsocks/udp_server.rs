//! Shadowsocks UDP on the inbound side (shadowsocks.md §1.5, §2.5–§2.7): every packet names
//! its destination; replies go back sealed, naming their source.
//!
//! Sessions: AEAD-2017 has none on the wire, so a session is a client address; 2022 sessions
//! are the client's session id (the client may move; replies go to where it last sent from).
//! Each session has its own outbound packet conversation (routed by its first destination, as
//! SOCKS5 UDP ASSOCIATE is; the app's [`PacketConnector`] routes, logs and counts it) and, for
//! 2022, our own random session id and packet counter. A session ends after the policy's
//! connIdle without traffic (2022: at least 60 s, so a replayed packet meets either its
//! session's packet-id window or a stale timestamp); their number is capped.
//! Packets that do not open are dropped without a word.

use std::collections::HashMap;
use std::future::poll_fn;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use skiff_core::activity::Activity;
use skiff_core::{Address, Metadata, Network, PacketConnector, RoutedPackets};
use tokio::io::ReadBuf;
use tokio::net::UdpSocket;
use tokio::sync::watch;
use tracing::debug;

use super::codec::random_salt;
use super::server::ShadowsocksServer;
use super::udp2022::{self, PeerKey, Receiver, Sender};
use super::{Method, udp, unix_now};

/// Largest datagram a UDP socket hands us.
const DATAGRAM_MAX: usize = 65_535;
/// 2022 sessions live at least this long (twice the timestamp tolerance).
const MIN_2022_SESSION: Duration = Duration::from_secs(60);
/// Room for what a reply adds around the datagram (salt or headers, address, tag).
const SEAL_ROOM: usize = 512;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum SessionKey {
    /// AEAD-2017: the client's address.
    Source(SocketAddr),
    /// 2022: the client's session id.
    Client(u64),
}

/// How replies are sealed.
enum Seal {
    Aead {
        method: Method,
        key: Vec<u8>,
    },
    V2022 {
        sender: Box<Mutex<Sender>>,
        client_session: u64,
    },
}

struct Session {
    /// The routed conversation, its idle limit and counters.
    routed: RoutedPackets,
    activity: Activity,
    /// Where the client last sent from: replies go there.
    client: Mutex<SocketAddr>,
    user: usize,
    /// 2022: the client session's key and packet-id window.
    receiver: Option<Mutex<Receiver>>,
    seal: Seal,
}

type Sessions = Arc<Mutex<HashMap<SessionKey, Arc<Session>>>>;

/// A packet opened in the receive buffer.
struct Incoming {
    key: SessionKey,
    user: usize,
    target: Address,
    payload: std::ops::Range<usize>,
    /// 2022, new session: its receiver (already past this packet).
    receiver: Option<Receiver>,
}

/// Serves one Shadowsocks inbound's UDP socket until shutdown; `tag` names the inbound, at
/// most `max_sessions` sessions live at once (packets opening more are dropped).
pub async fn serve(
    tag: Arc<str>,
    socket: Arc<UdpSocket>,
    server: Arc<ShadowsocksServer>,
    connector: Arc<dyn PacketConnector>,
    max_sessions: usize,
    mut shutdown: watch::Receiver<bool>,
) {
    let sessions: Sessions = Arc::default();
    let mut buf = vec![0u8; DATAGRAM_MAX];
    // Multi-user AEAD-2017 tries each key on a fresh copy.
    let mut scratch = if server.method_2022().is_none() && server.users().len() > 1 {
        vec![0u8; DATAGRAM_MAX]
    } else {
        Vec::new()
    };
    let users = server.users();
    let keys: Vec<(Method, &[u8])> = users.iter().map(|u| (u.method, u.key.as_slice())).collect();
    let peer = server.method_2022().map(|m| {
        let key = server
            .identity_key()
            .or_else(|| users.first().map(|u| u.key.as_slice()))
            .unwrap_or_default();
        PeerKey::new(m, key)
    });
    let local = socket
        .local_addr()
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
    loop {
        let (n, source) = tokio::select! {
            _ = shutdown.changed() => break,
            r = socket.recv_from(&mut buf) => match r {
                Ok(r) => r,
                Err(e) => {
                    debug!(inbound = %tag, error = %e, "UDP receive failed");
                    continue;
                }
            },
        };
        let packet = &mut buf[..n];
        let incoming = match (&peer, server.method_2022()) {
            (Some(peer), Some(method)) => open_2022(&server, &sessions, peer, method, packet),
            _ => udp::open_packet_any(&keys, packet, &mut scratch).ok().map(
                |(user, target, payload)| Incoming {
                    key: SessionKey::Source(source),
                    user,
                    target,
                    payload,
                    receiver: None,
                },
            ),
        };
        let Some(mut incoming) = incoming else {
            debug!(inbound = %tag, %source, "Shadowsocks UDP: packet that does not open dropped");
            continue;
        };
        let existing = sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&incoming.key)
            .cloned();
        let session = match existing {
            Some(session) => session,
            None => {
                let count = sessions.lock().map(|m| m.len()).unwrap_or(usize::MAX);
                if count >= max_sessions {
                    debug!(inbound = %tag, %source, "UDP session cap reached; dropping");
                    continue;
                }
                let Some(session) =
                    open_session(&tag, &*connector, &server, &mut incoming, source, local).await
                else {
                    continue;
                };
                sessions
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(incoming.key, session.clone());
                let mut idle = session.routed.idle;
                if matches!(incoming.key, SessionKey::Client(_)) {
                    // A 2022 session outlives the timestamp window (shadowsocks.md §2.5), or a
                    // packet replayed after it ended would open a fresh packet-id window.
                    idle = idle.max(MIN_2022_SESSION);
                }
                tokio::spawn(replies(
                    session.clone(),
                    socket.clone(),
                    incoming.key,
                    sessions.clone(),
                    idle,
                ));
                session
            }
        };
        *session
            .client
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = source;
        session.activity.touch();
        let payload = &buf[incoming.payload.clone()];
        session.routed.uplink.add(payload.len() as u64);
        if let Err(e) = session.routed.conn.send_to(payload, &incoming.target).await {
            debug!(destination = %incoming.target, error = %e, "UDP send failed");
        }
    }
}

/// 2022: identifies the packet's session and user, then opens it with the session's window
/// (a known session) or a new receiver (kept only if the packet opens).
fn open_2022(
    server: &ShadowsocksServer,
    sessions: &Sessions,
    peer: &PeerKey,
    method: Method,
    packet: &mut [u8],
) -> Option<Incoming> {
    let identity = server.identity_key().is_some();
    let id = udp2022::identify(peer, identity, packet).ok()?;
    let user = match &id.user_hash {
        Some(hash) => server.user_by_hash(hash)?,
        None => 0,
    };
    let key = SessionKey::Client(id.session_id);
    let now = unix_now();
    let known = sessions
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&key)
        .cloned();
    if let Some(session) = known {
        if session.user != user {
            return None;
        }
        let receiver = session.receiver.as_ref()?;
        let opened = receiver
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .open(&id, packet, true, now)
            .ok()?;
        return Some(Incoming {
            key,
            user,
            target: opened.address,
            payload: opened.payload,
            receiver: None,
        });
    }
    let users = server.users();
    let user_key = &users.get(user)?.key;
    let mut receiver = Receiver::new(method, user_key, id.session_id);
    let opened = receiver.open(&id, packet, true, now).ok()?;
    Some(Incoming {
        key,
        user,
        target: opened.address,
        payload: opened.payload,
        receiver: Some(receiver),
    })
}

/// Has a new session routed by its first destination and opens its outbound conversation.
async fn open_session(
    tag: &Arc<str>,
    connector: &dyn PacketConnector,
    server: &ShadowsocksServer,
    incoming: &mut Incoming,
    source: SocketAddr,
    local: SocketAddr,
) -> Option<Arc<Session>> {
    let users = server.users();
    let user = users.get(incoming.user)?;
    let mut meta = Metadata::new(tag.clone(), source, local);
    meta.network = Network::Udp;
    meta.level = user.level;
    meta.user = user.email.as_deref().map(Arc::from);
    meta.destination = Some(incoming.target.clone());
    let routed = match connector.bind(&meta).await {
        Ok(routed) => routed,
        Err(e) => {
            debug!(%source, error = %e, "UDP outbound bind failed");
            return None;
        }
    };
    let seal = match (&incoming.key, server.method_2022()) {
        (SessionKey::Client(client_session), Some(method)) => Seal::V2022 {
            sender: Box::new(Mutex::new(Sender::server(
                method,
                &user.key,
                fresh_session_id(*client_session),
            ))),
            client_session: *client_session,
        },
        _ => Seal::Aead {
            method: user.method,
            key: user.key.clone(),
        },
    };
    let receiver = incoming.receiver.take().map(Mutex::new);
    Some(Arc::new(Session {
        routed,
        activity: Activity::new(),
        client: Mutex::new(source),
        user: incoming.user,
        receiver,
        seal,
    }))
}

/// A random server session id different from the client's.
fn fresh_session_id(client: u64) -> u64 {
    loop {
        let id = udp2022::random_session_id();
        if id != client {
            return id;
        }
    }
}

/// Seals every datagram the session's outbound receives back to the client; ends the session
/// after `idle` without traffic either way.
async fn replies(
    session: Arc<Session>,
    socket: Arc<UdpSocket>,
    key: SessionKey,
    sessions: Sessions,
    idle: Duration,
) {
    let mut buf = vec![0u8; DATAGRAM_MAX];
    let mut out = vec![0u8; DATAGRAM_MAX + SEAL_ROOM];
    loop {
        let mut read = ReadBuf::new(&mut buf);
        let received = tokio::time::timeout(
            idle,
            poll_fn(|cx| session.routed.conn.poll_recv_from(cx, &mut read)),
        )
        .await;
        let from = match received {
            Ok(Ok(from)) => from,
            Ok(Err(e)) => {
                debug!(error = %e, "UDP outbound receive failed");
                break;
            }
            Err(_) if session.activity.idle_for() >= idle => break,
            Err(_) => continue,
        };
        let data = read.filled();
        session.activity.touch();
        let sealed = match &session.seal {
            Seal::Aead { method, key } => {
                let salt = random_salt(*method);
                udp::seal_packet(*method, key, &salt, &from, data, &mut out)
            }
            Seal::V2022 {
                sender,
                client_session,
            } => sender
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .seal_response(unix_now(), *client_session, &from, data, &mut out),
        };
        let n = match sealed {
            Ok(n) => n,
            Err(e) => {
                debug!(%from, error = %e, "UDP reply cannot be sealed; dropped");
                continue;
            }
        };
        session.routed.downlink.add(data.len() as u64);
        let client = *session
            .client
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Err(e) = socket.send_to(&out[..n], client).await {
            debug!(%client, error = %e, "UDP reply failed");
        }
    }
    sessions
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .remove(&key);
}
