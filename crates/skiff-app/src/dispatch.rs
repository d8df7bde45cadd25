//! One TCP connection, top to bottom: handshake (bounded by the policy's handshake timeout) →
//! route → connect the outbound → tell the client → relay.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use skiff_core::{
    Accepted, Address, BoxFuture, BoxStream, ConnectOutcome, Connector, Counted, DirectionCounters,
    Metadata, Network, Prefixed, ProxyStream, RelayCounters, RelayEnd, Reply, relay,
};
use skiff_proto::datagram::{BoxDatagramRecv, BoxDatagramSend};
use skiff_proto::trojan::server::TrojanAccept;
use skiff_proto::vless::packet::VlessPacketStream;
use skiff_proto::vless::server::VlessAccept;
use skiff_proto::vmess::VmessAccept;
use skiff_proto::{http, mux, shadowsocks, socks, trojan, vless, vmess};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;
use tracing::debug;

use crate::fallback;
use crate::inbound::{InboundHandler, InboundKind};
use crate::shared::Shared;
use crate::stack::LayerSession;
use crate::udp;
use crate::{trojan_udp, udp_stream};

/// How long an outbound connect may take, as Go's default dialer roughly allows.
const DIAL_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a refused connection may take to say goodbye (Xray's `tlsCloseTimeout`).
const CLOSE_NOTIFY_TIMEOUT: Duration = Duration::from_millis(250);

pub async fn serve_tcp(
    shared: Arc<Shared>,
    inbound: Arc<InboundHandler>,
    stream: TcpStream,
    source: SocketAddr,
    local: SocketAddr,
) {
    // The tunnel's destination may come from the raw socket (SO_ORIGINAL_DST): read it first.
    let tunnel_destination = match &inbound.kind {
        InboundKind::Tunnel(config) => Some(config.destination_for(&stream)),
        _ => None,
    };
    serve_conn(
        shared,
        inbound,
        Box::new(stream),
        tunnel_destination,
        source,
        local,
    )
    .await;
}

/// A connection some transport accepted that is not a TCP socket (an mKCP connection): the
/// same path as a TCP connection, the inbound's layers and protocol included.
pub async fn serve_transport(
    shared: Arc<Shared>,
    inbound: Arc<InboundHandler>,
    stream: BoxStream,
    source: SocketAddr,
    local: SocketAddr,
) {
    let tunnel_destination =
        match &inbound.kind {
            InboundKind::Tunnel(config) => Some(config.destination.clone().ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidInput, "no configured address")
            })),
            _ => None,
        };
    serve_conn(shared, inbound, stream, tunnel_destination, source, local).await;
}

async fn serve_conn(
    shared: Arc<Shared>,
    inbound: Arc<InboundHandler>,
    stream: BoxStream,
    tunnel_destination: Option<io::Result<Address>>,
    source: SocketAddr,
    local: SocketAddr,
) {
    let mut meta = Metadata::new(inbound.tag.clone(), source, local);
    meta.level = inbound.level;
    let mut session = LayerSession::default();
    let shaken = handshake(
        &shared,
        &inbound,
        &meta,
        stream,
        tunnel_destination,
        &mut session,
    );
    let accepted = match shaken.await {
        Ok(Handshake::Accepted(accepted)) => accepted,
        Ok(Handshake::AcceptedUser { accepted, level }) => {
            meta.level = level;
            accepted
        }
        Ok(Handshake::Fallback(stream)) => {
            fall_back(&shared, &inbound, &meta, stream, &session).await;
            return;
        }
        Ok(Handshake::StreamUdp {
            destination,
            halves,
            user,
            level,
        }) => {
            meta.user = user.map(Arc::from);
            if let Some(level) = level {
                meta.level = level;
            }
            udp_stream::serve(&shared, &inbound, meta, destination, halves).await;
            return;
        }
        Ok(Handshake::TrojanUdp { stream, user }) => {
            meta.user = user.map(Arc::from);
            trojan_udp::serve(&shared, &inbound, meta, stream).await;
            return;
        }
        Err(e) if e.kind() == io::ErrorKind::TimedOut => {
            debug!(inbound = %inbound.tag, %source, error = %e, "handshake timed out; closing");
            return;
        }
        Err(e) => {
            debug!(inbound = %inbound.tag, %source, error = %e, "handshake failed; closing");
            return;
        }
    };
    match accepted {
        Accepted::Stream {
            destination,
            stream,
            reply,
            user,
        } => {
            meta.destination = Some(destination);
            meta.user = user.map(Arc::from);
            connect_and_relay(&shared, &inbound, meta, stream, reply).await;
        }
        Accepted::UdpAssociate {
            control,
            client_hint,
            user,
        } => {
            meta.user = user.map(Arc::from);
            meta.network = Network::Udp;
            if let Err(e) =
                udp::socks_associate(&shared, &inbound, meta, control, client_hint).await
            {
                debug!(inbound = %inbound.tag, %source, error = %e, "UDP association ended");
            }
        }
        Accepted::Done => {}
    }
}

/// A stream some transport already accepted with its destination fixed (a kcptun inbound's
/// smux stream): route, connect, relay, as for a dokodemo-door connection.
pub async fn serve_stream(
    shared: Arc<Shared>,
    inbound: Arc<InboundHandler>,
    stream: BoxStream,
    source: SocketAddr,
    local: SocketAddr,
    destination: Address,
) {
    let mut meta = Metadata::new(inbound.tag.clone(), source, local);
    meta.level = inbound.level;
    meta.destination = Some(destination);
    connect_and_relay(&shared, &inbound, meta, stream, Reply::None).await;
}

enum Handshake {
    Accepted(Accepted),
    /// Accepted for a user with a policy level of their own (VMess).
    AcceptedUser {
        accepted: Accepted,
        level: u32,
    },
    /// Not a valid request for a known user: try the inbound's fallbacks with this stream,
    /// which replays every byte read so far.
    Fallback(BoxStream),
    /// A UDP request carried in the protocol's stream (VLESS/VMess command 0x02): datagrams
    /// to one destination, through these halves.
    StreamUdp {
        destination: Address,
        halves: (BoxDatagramRecv, BoxDatagramSend),
        user: Option<String>,
        /// The user's own policy level (VMess), else the inbound's.
        level: Option<u32>,
    },
    /// A Trojan UDP ASSOCIATE: packets each carrying their own destination.
    TrojanUdp {
        stream: BoxStream,
        user: Option<String>,
    },
}

/// Runs the inbound's transport layers and protocol handshake under the policy's handshake
/// timeout (a timeout is an error of kind TimedOut). Handshake futures are boxed: each is sized
/// for its own protocol's buffers and freed when the handshake ends, instead of every
/// connection task carrying the largest one (the HTTP forwarder's) for its whole life.
async fn handshake(
    shared: &Arc<Shared>,
    inbound: &Arc<InboundHandler>,
    meta: &Metadata,
    stream: BoxStream,
    tunnel_destination: Option<io::Result<Address>>,
    session: &mut LayerSession,
) -> io::Result<Handshake> {
    let limit = shared.level(inbound.level).handshake;
    let timed_out = || io::Error::new(io::ErrorKind::TimedOut, "no complete request in time");
    let tunnel_destination = tunnel_destination.transpose()?;
    let stream: BoxStream = if inbound.layers.is_empty() {
        stream
    } else {
        match timeout(limit, Box::pin(inbound.layers.accept(stream, session))).await {
            Ok(Ok(stream)) => stream,
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(timed_out()),
        }
    };
    let accepted = match &inbound.kind {
        InboundKind::Socks { config, .. } => {
            match timeout(limit, Box::pin(socks::server::handshake(stream, config))).await {
                Ok(result) => result.map_err(io::Error::other),
                Err(_) => Err(timed_out()),
            }
        }
        InboundKind::Vless(server) => {
            let accept = vless_accept(stream, server, !inbound.fallbacks.is_empty());
            match timeout(limit, Box::pin(accept)).await {
                Ok(Ok(VlessAccept::Stream {
                    destination,
                    stream,
                    user,
                })) => Ok(Accepted::Stream {
                    destination,
                    stream,
                    reply: Reply::None,
                    user,
                }),
                Ok(Ok(VlessAccept::Fallback { stream })) => return Ok(Handshake::Fallback(stream)),
                Ok(Ok(VlessAccept::Mux { stream, user })) => {
                    // Xray clients' UDP (XUDP): the first frame opens the session.
                    let udp = match timeout(limit, Box::pin(mux::accept_udp(stream))).await {
                        Ok(result) => result?,
                        Err(_) => return Err(timed_out()),
                    };
                    return Ok(Handshake::StreamUdp {
                        destination: udp.destination,
                        halves: (Box::new(udp.reader), Box::new(udp.writer)),
                        user,
                        level: None,
                    });
                }
                Ok(Ok(VlessAccept::Udp {
                    destination,
                    stream,
                    user,
                })) => {
                    let (reader, writer) = VlessPacketStream::new(stream).into_split();
                    return Ok(Handshake::StreamUdp {
                        destination,
                        halves: (Box::new(reader), Box::new(writer)),
                        user,
                        level: None,
                    });
                }
                Ok(Err(e)) => Err(e),
                Err(_) => Err(timed_out()),
            }
        }
        InboundKind::Vmess(server) => {
            // Raw TCP drains a refused connection before closing, as Xray does; over TLS or
            // WebSocket it closes at once (Xray drains only on *net.TCPConn).
            let drain = inbound.layers.is_raw_tcp();
            match timeout(limit, Box::pin(vmess::accept(stream, server, drain))).await {
                Ok(Ok(VmessAccept::Stream {
                    destination,
                    stream,
                    user,
                    level,
                })) => {
                    return Ok(Handshake::AcceptedUser {
                        accepted: Accepted::Stream {
                            destination,
                            stream: Box::new(stream),
                            reply: Reply::None,
                            user,
                        },
                        level,
                    });
                }
                Ok(Ok(VmessAccept::Udp {
                    destination,
                    reader,
                    writer,
                    user,
                    level,
                })) => {
                    return Ok(Handshake::StreamUdp {
                        destination,
                        halves: (Box::new(reader), Box::new(writer)),
                        user,
                        level: Some(level),
                    });
                }
                Ok(Err(e)) => Err(e),
                Err(_) => Err(timed_out()),
            }
        }
        InboundKind::Trojan(server) => {
            let accept = trojan_accept(stream, server, !inbound.fallbacks.is_empty());
            match timeout(limit, Box::pin(accept)).await {
                Ok(Ok(TrojanAccept::Stream {
                    destination,
                    stream,
                    user,
                })) => Ok(Accepted::Stream {
                    destination,
                    stream,
                    reply: Reply::None,
                    user,
                }),
                Ok(Ok(TrojanAccept::Fallback { stream })) => {
                    return Ok(Handshake::Fallback(stream));
                }
                Ok(Ok(TrojanAccept::Udp { stream, user, .. })) => {
                    return Ok(Handshake::TrojanUdp { stream, user });
                }
                Ok(Err(e)) => Err(e),
                Err(_) => Err(timed_out()),
            }
        }
        InboundKind::Shadowsocks(server) => {
            // A refused request is drained inside `accept` until the client gives up; the
            // handshake timeout bounds that wait (shadowsocks.md §2.4).
            match timeout(limit, Box::pin(shadowsocks::server::accept(stream, server))).await {
                Ok(Ok(accepted)) => {
                    let user = server
                        .users()
                        .get(accepted.user)
                        .and_then(|u| u.email.clone());
                    Ok(Accepted::Stream {
                        destination: accepted.destination,
                        stream: Box::new(accepted.stream),
                        reply: Reply::None,
                        user,
                    })
                }
                Ok(Err(e)) => Err(e),
                Err(_) => Err(timed_out()),
            }
        }
        InboundKind::Http(config) => {
            // The HTTP inbound forwards plain requests itself for as long as the client keeps
            // the connection alive, so only its first request is bounded by the handshake
            // timeout (inside serve_timed), not the whole exchange.
            let connector = RoutedConnector {
                shared: shared.clone(),
                inbound: inbound.clone(),
                meta: meta.clone(),
            };
            Box::pin(http::server::serve_timed(
                stream,
                config,
                &connector,
                Some(limit),
            ))
            .await
        }
        InboundKind::Kcptun { .. } => {
            Err(io::Error::other("kcptun inbounds take no TCP connections"))
        }
        InboundKind::Tunnel(_) => {
            let destination = tunnel_destination
                .ok_or_else(|| io::Error::other("tunnel without a destination"))?;
            Ok(Accepted::Stream {
                destination,
                stream,
                reply: Reply::None,
                user: None,
            })
        }
    };
    accepted.map(Handshake::Accepted)
}

/// With fallbacks, Xray reads a VLESS or Trojan request in one read of up to 8 KiB; when that
/// read brought fewer bytes than the protocol needs to recognise its client (VLESS: 18, the
/// version and id; Trojan: 58, the hash and its CRLF) it falls back at once instead of waiting
/// for the rest (proxy/vless/inbound/inbound.go and proxy/trojan/server.go `Process`:
/// `isfb && firstLen < …`). A prober sending a few bytes therefore gets the fallback's
/// answer, not a silent wait for the handshake timeout. An end of stream before any byte is
/// an error there too (no fallback is dialled).
enum FirstRead {
    /// Enough to decide: the protocol handshake goes on with this stream (which replays it).
    Enough(BoxStream),
    /// Too short: straight to the fallback with this stream (which replays it).
    Short(BoxStream),
}

async fn first_read(mut stream: BoxStream, fallback_below: usize) -> io::Result<FirstRead> {
    const FIRST_READ: usize = 8192;
    // Allocate only once bytes are there: silent connections stay small.
    std::future::poll_fn(|cx| stream.poll_read_ready(cx)).await?;
    let mut buf = vec![0u8; FIRST_READ];
    let n = stream.read(&mut buf).await?;
    if n == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "closed before sending anything",
        ));
    }
    let first = Bytes::copy_from_slice(&buf[..n]);
    drop(buf);
    let stream: BoxStream = Box::new(Prefixed::new(first, stream));
    Ok(if n < fallback_below {
        FirstRead::Short(stream)
    } else {
        FirstRead::Enough(stream)
    })
}

async fn vless_accept(
    stream: BoxStream,
    server: &vless::server::VlessServer,
    has_fallbacks: bool,
) -> io::Result<VlessAccept> {
    if !has_fallbacks {
        return vless::server::accept(stream, server).await;
    }
    match first_read(stream, 18).await? {
        FirstRead::Short(stream) => Ok(VlessAccept::Fallback { stream }),
        FirstRead::Enough(stream) => vless::server::accept(stream, server).await,
    }
}

async fn trojan_accept(
    stream: BoxStream,
    server: &trojan::server::TrojanServer,
    has_fallbacks: bool,
) -> io::Result<TrojanAccept> {
    if !has_fallbacks {
        return trojan::server::accept(stream, server).await;
    }
    match first_read(stream, trojan::codec::AUTH_LEN).await? {
        FirstRead::Short(stream) => Ok(TrojanAccept::Fallback { stream }),
        FirstRead::Enough(stream) => trojan::server::accept(stream, server).await,
    }
}

/// Hands a connection that is not for us to the inbound's fallback, or closes it (without a
/// byte of our own) when none applies.
async fn fall_back(
    shared: &Shared,
    inbound: &InboundHandler,
    meta: &Metadata,
    mut stream: BoxStream,
    session: &LayerSession,
) {
    let first = stream.take_read_residue().unwrap_or_default();
    let chain = shared.fallback_chains.chain_of(meta.source);
    let me = fallback::inbound_id(inbound);
    if chain.contains(&me) {
        // Our own fallback brought this connection back to an inbound it already left: a
        // loop in the config. Going round again would only open connections until the
        // descriptors run out.
        tracing::warn!(inbound = %inbound.tag, "fallback loop: this connection came back through this inbound's own fallback chain; closing");
        let _ = timeout(CLOSE_NOTIFY_TIMEOUT, stream.shutdown()).await;
        return;
    }
    let Some(fallback) = fallback::select(&inbound.fallbacks, session, &first) else {
        debug!(inbound = %inbound.tag, source = %meta.source, "not a valid request and no fallback; closing");
        // Xray closes through its TLS connection: a close_notify (given 250 ms) before the
        // FIN (transport/internet/tls/tls.go `Conn.Close`). Over raw TCP this is the FIN.
        let _ = timeout(CLOSE_NOTIFY_TIMEOUT, stream.shutdown()).await;
        return;
    };
    let stream: BoxStream = Box::new(Prefixed::new(first, stream));
    let counters = RelayCounters {
        uplink: DirectionCounters::new(vec![inbound.uplink.clone()]),
        downlink: DirectionCounters::new(vec![inbound.downlink.clone()]),
        spliced: shared.stats.spliced().clone(),
        copied: shared.stats.copied().clone(),
    };
    let policy = shared.relay_policy(meta.level);
    if let Err(e) = fallback::serve(
        stream,
        fallback,
        meta.source,
        meta.local,
        &policy,
        &counters,
        &shared.fallback_chains,
        chain.iter().copied().chain([me]).collect(),
    )
    .await
    {
        debug!(inbound = %inbound.tag, source = %meta.source, error = %e, "fallback failed");
    }
}

async fn connect_and_relay(
    shared: &Shared,
    inbound: &InboundHandler,
    meta: Metadata,
    mut client: BoxStream,
    reply: Reply,
) {
    let Some(destination) = meta.destination.clone() else {
        return;
    };
    let outbound = shared.pick(&meta).await;
    let connected = match timeout(DIAL_TIMEOUT, outbound.handler.connect(&meta, &destination)).await
    {
        Ok(result) => result,
        Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "connect timed out")),
    };
    let outcome = match &connected {
        Ok(server) => ConnectOutcome::Connected {
            bound: server.raw_tcp().and_then(|s| s.local_addr().ok()),
        },
        Err(e) => ConnectOutcome::Failed(e),
    };
    let replied = match reply {
        Reply::None => Ok(()),
        Reply::Socks5 | Reply::Socks4 => {
            socks::server::write_reply(&mut client, reply, outcome).await
        }
        Reply::HttpConnect => http::server::write_connect_reply(&mut client, outcome).await,
    };
    let server = match connected {
        Ok(server) => server,
        Err(e) => {
            if shared.access.enabled() {
                shared.access.write(format_args!(
                    "from {} rejected tcp:{} [{} -> {}] {}",
                    meta.source, destination, inbound.tag, outbound.tag, e
                ));
            }
            debug!(%destination, outbound = %outbound.tag, error = %e, "outbound connect failed");
            return;
        }
    };
    if let Err(e) = replied {
        debug!(source = %meta.source, error = %e, "client went away before the reply");
        return;
    }
    if shared.access.enabled() {
        let email = meta
            .user
            .as_deref()
            .map(|u| format!(" email: {u}"))
            .unwrap_or_default();
        shared.access.write(format_args!(
            "from {} accepted tcp:{} [{} -> {}]{}",
            meta.source, destination, inbound.tag, outbound.tag, email
        ));
    }
    let counters = shared.counters(inbound, outbound, &meta);
    let result = relay(client, server, &shared.relay_policy(meta.level), &counters).await;
    let end = match &result.end {
        RelayEnd::Finished => "finished".to_string(),
        RelayEnd::IdleTimeout => "idle timeout".to_string(),
        RelayEnd::Failed(e) => format!("failed: {e}"),
        RelayEnd::Cut => "cut at the end of the grace period".to_string(),
    };
    debug!(
        source = %meta.source, %destination,
        up = result.uplink_bytes, down = result.downlink_bytes,
        spliced = result.spliced, "connection {end}"
    );
}

/// Opens outbound streams on behalf of a protocol that forwards requests itself (HTTP proxy
/// in absolute-form mode): every request is routed on its own.
struct RoutedConnector {
    shared: Arc<Shared>,
    inbound: Arc<InboundHandler>,
    meta: Metadata,
}

impl Connector for RoutedConnector {
    fn connect<'a>(
        &'a self,
        destination: &'a Address,
        user: Option<&'a str>,
    ) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(async move {
            let mut meta = self.meta.clone();
            meta.destination = Some(destination.clone());
            meta.user = user.map(Arc::from);
            let outbound = self.shared.pick(&meta).await;
            if self.shared.access.enabled() {
                self.shared.access.write(format_args!(
                    "from {} accepted tcp:{} [{} -> {}]",
                    meta.source, destination, meta.inbound_tag, outbound.tag
                ));
            }
            let stream = match timeout(DIAL_TIMEOUT, outbound.handler.connect(&meta, destination))
                .await
            {
                Ok(result) => result?,
                Err(_) => return Err(io::Error::new(io::ErrorKind::TimedOut, "connect timed out")),
            };
            let counters = self.shared.counters(&self.inbound, outbound, &meta);
            let counted: BoxStream =
                Box::new(Counted::new(stream, counters.uplink, counters.downlink));
            Ok(counted)
        })
    }
}
