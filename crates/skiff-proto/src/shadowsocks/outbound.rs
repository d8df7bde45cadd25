//! The Shadowsocks outbound: reach the server through the [`Dialer`] it holds (transport
//! layers, and any chained outbound, are the dialer's business), then speak Shadowsocks inside.
//!
//! UDP (`bind`) is native Shadowsocks UDP: one socket per packet conversation to the server,
//! every datagram carrying its own destination (shadowsocks.md §1.5, §2.5), so one association
//! reaches any number of destinations. A 2022 conversation is one client session: a random
//! session id and counted packet ids; replies are checked against the server's session and
//! its packet-id window.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, ready};

use skiff_core::{
    Address, BoxFuture, BoxPacketConn, BoxStream, Dialer, Metadata, Outbound, PacketConn,
};
use tokio::io::ReadBuf;
use tokio::net::UdpSocket;
use tracing::debug;

use super::client::{self, ClientConfig};
use super::codec::{random_padding, random_salt};
use super::udp2022::{self, PeerKey, Receiver, Sender};
use super::{Method, udp, unix_now};

/// Largest datagram a UDP socket carries.
const DATAGRAM_MAX: usize = 65_535;
/// 2022: server sessions a conversation keeps windows for (a server restart starts another).
const SERVER_SESSIONS: usize = 4;

pub struct ShadowsocksOutbound {
    pub server: Address,
    pub config: ClientConfig,
    /// How to reach the server (its layers, directly or through a chained outbound).
    pub dialer: Arc<dyn Dialer>,
}

impl Outbound for ShadowsocksOutbound {
    fn connect<'a>(
        &'a self,
        meta: &'a Metadata,
        destination: &'a Address,
    ) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(async move {
            let stream = self.dialer.dial(&self.server, meta).await?;
            let ss: BoxStream = Box::new(client::connect(stream, &self.config, destination)?);
            Ok(ss)
        })
    }

    fn bind<'a>(&'a self, meta: &'a Metadata) -> BoxFuture<'a, io::Result<BoxPacketConn>> {
        Box::pin(async move {
            let path = match self.dialer.bind_via(meta).await? {
                Some(conn) => Path::Via(conn),
                None => {
                    let server = resolve(&self.server).await?;
                    let local: SocketAddr = if server.is_ipv4() {
                        ([0, 0, 0, 0], 0).into()
                    } else {
                        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
                    };
                    let socket = UdpSocket::bind(local).await?;
                    socket.connect(server).await?;
                    Path::Socket(socket)
                }
            };
            let method = self.config.method;
            let (sender, replies) = if method.is_2022() {
                let session = udp2022::random_session_id();
                (
                    Some(Sender::client(
                        method,
                        &self.config.key,
                        &self.config.identity_keys,
                        session,
                    )),
                    Some(Replies {
                        peer: PeerKey::new(method, &self.config.key),
                        sessions: VecDeque::new(),
                        ours: session,
                    }),
                )
            } else {
                (None, None)
            };
            let conn: BoxPacketConn = Box::new(SsPackets {
                path,
                server: self.server.clone(),
                method,
                key: self.config.key.clone(),
                send: tokio::sync::Mutex::new(SendState {
                    buf: Vec::new(),
                    sender,
                }),
                replies: Mutex::new(replies),
            });
            Ok(conn)
        })
    }
}

async fn resolve(server: &Address) -> io::Result<SocketAddr> {
    match server {
        Address::Ip(sa) => Ok(*sa),
        Address::Domain(host, port) => tokio::net::lookup_host((host.as_str(), *port))
            .await?
            .next()
            .ok_or_else(|| {
                io::Error::new(io::ErrorKind::NotFound, format!("{host} has no address"))
            }),
    }
}

/// How packets reach the server.
enum Path {
    Socket(UdpSocket),
    /// Through a chained outbound's packet conversation.
    Via(BoxPacketConn),
}

struct SendState {
    /// Sealing buffer, reused for every datagram.
    buf: Vec<u8>,
    /// 2022: the session's id and packet counter.
    sender: Option<Sender>,
}

/// 2022: what checks the server's replies.
struct Replies {
    /// Opens the separate header (AES) or the whole packet (ChaCha) with the user key.
    peer: PeerKey,
    /// The server sessions seen, newest last.
    sessions: VecDeque<Receiver>,
    /// Our client session id: replies must name it.
    ours: u64,
}

struct SsPackets {
    path: Path,
    server: Address,
    method: Method,
    key: Vec<u8>,
    send: tokio::sync::Mutex<SendState>,
    replies: Mutex<Option<Replies>>,
}

impl SsPackets {
    /// Opens a received packet in place; the source address and the datagram's place.
    fn open(&self, packet: &mut [u8]) -> Option<(Address, std::ops::Range<usize>)> {
        if !self.method.is_2022() {
            return udp::open_packet(self.method, &self.key, packet).ok();
        }
        let mut guard = self.replies.lock().unwrap_or_else(PoisonError::into_inner);
        let replies = guard.as_mut()?;
        let id = udp2022::identify(&replies.peer, false, packet).ok()?;
        let index = match replies
            .sessions
            .iter()
            .position(|r| r.session_id() == id.session_id)
        {
            Some(i) => i,
            None => {
                if replies.sessions.len() >= SERVER_SESSIONS {
                    replies.sessions.pop_front();
                }
                replies
                    .sessions
                    .push_back(Receiver::new(self.method, &self.key, id.session_id));
                replies.sessions.len() - 1
            }
        };
        let opened = replies.sessions[index]
            .open(&id, packet, false, unix_now())
            .ok()?;
        if opened.client_session_id != Some(replies.ours) {
            return None;
        }
        Some((opened.address, opened.payload))
    }
}

impl PacketConn for SsPackets {
    fn poll_recv_from(
        &self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<Address>> {
        let start = buf.filled().len();
        loop {
            let received = match &self.path {
                Path::Socket(socket) => socket.poll_recv(cx, buf),
                Path::Via(conn) => conn.poll_recv_from(cx, buf).map_ok(|_| ()),
            };
            ready!(received)?;
            let packet = &mut buf.filled_mut()[start..];
            match self.open(packet) {
                Some((from, range)) => {
                    let len = range.len();
                    packet.copy_within(range, 0);
                    buf.set_filled(start + len);
                    return Poll::Ready(Ok(from));
                }
                None => {
                    // Not from our server, or not for us: dropped, as a UDP socket would.
                    debug!(server = %self.server, "Shadowsocks UDP: undecryptable reply dropped");
                    buf.set_filled(start);
                }
            }
        }
    }

    fn send_to<'a>(
        &'a self,
        payload: &'a [u8],
        destination: &'a Address,
    ) -> BoxFuture<'a, io::Result<()>> {
        Box::pin(async move {
            let mut state = self.send.lock().await;
            let SendState { buf, sender } = &mut *state;
            if buf.is_empty() {
                buf.resize(DATAGRAM_MAX + 512, 0);
            }
            let sealed = match sender {
                None => {
                    let salt = random_salt(self.method);
                    udp::seal_packet(self.method, &self.key, &salt, destination, payload, buf)
                }
                Some(sender) => {
                    let padding = if payload.is_empty() {
                        random_padding()
                    } else {
                        0
                    };
                    sender.seal_request(unix_now(), padding, destination, payload, buf)
                }
            };
            let n = sealed.map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
            match &self.path {
                Path::Socket(socket) => {
                    socket.send(&buf[..n]).await?;
                }
                Path::Via(conn) => conn.send_to(&buf[..n], &self.server).await?,
            }
            Ok(())
        })
    }
}
