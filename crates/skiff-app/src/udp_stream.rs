//! UDP carried in one client stream, on the inbound side: VLESS and VMess command 0x02
//! (vless.md §4.2, vmess.md §4.4: datagrams for the one destination of the request header)
//! and Trojan UDP ASSOCIATE (trojan.md §2: every packet names its own destination). Either
//! way the packets go through one packet conversation of the outbound routed for the first
//! destination (as a SOCKS5 association is), and every datagram that comes back goes to the
//! client framed by the protocol (Trojan's naming the address that sent it).
//!
//! The stream ends when the client closes it (after `downlinkOnly` more of replies), when
//! nothing moved either way for `connIdle`, or when the client's stream is cut inside a packet
//! (or, for Trojan, carries a malformed one).

use std::future::poll_fn;
use std::io;
use std::pin::pin;
use std::time::Duration;

use bytes::Bytes;
use skiff_core::datagram::{self, BoxDatagramRecv, BoxDatagramSend};
use skiff_core::{Address, BoxStream, Metadata, Network, PacketConn};
use skiff_proto::trojan::packet::{TrojanPacketReader, TrojanPacketStream, TrojanPacketWriter};
use tokio::io::ReadBuf;
use tokio::time::timeout;
use tracing::{debug, info};

use crate::inbound::InboundHandler;
use crate::shared::Shared;
use skiff_core::activity::Activity;

/// How long opening the outbound's packet conversation may take.
const BIND_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest datagram a UDP socket can hand us.
const DATAGRAM_MAX: usize = 65_535;

/// The client's direction.
enum ClientRecv {
    /// VLESS, VMess: datagrams for the destination of the request header.
    OneDestination(Address, BoxDatagramRecv),
    /// Trojan: packets that each name their destination.
    Addressed(TrojanPacketReader),
}

/// The direction back to the client.
enum ClientSend {
    /// VLESS, VMess: no per-packet address; whoever answered, it goes to the client.
    OneDestination(BoxDatagramSend),
    /// Trojan: each packet names the address that sent it.
    Addressed(TrojanPacketWriter),
}

/// Why the client's direction stopped.
enum UplinkEnd {
    /// The client closed between packets.
    Closed,
    /// The stream ended or failed inside a packet (a broken client, or a lying length), or
    /// carried a malformed packet.
    Cut(io::Error),
    /// The stream failed between packets.
    Failed(io::Error),
}

impl ClientRecv {
    /// The next packet from the client and where it goes.
    async fn recv(&mut self) -> io::Result<Option<(Address, Bytes)>> {
        match self {
            ClientRecv::OneDestination(destination, recv) => Ok(datagram::recv(&mut **recv)
                .await?
                .map(|packet| (destination.clone(), packet))),
            ClientRecv::Addressed(reader) => reader.recv_packet().await,
        }
    }

    /// How the client's direction ended after `error`. A TLS peer gone without
    /// close_notify, between packets, is an ordinary end.
    fn ended_by(&self, error: io::Error) -> UplinkEnd {
        let eof = error.kind() == io::ErrorKind::UnexpectedEof;
        match self {
            ClientRecv::OneDestination(_, recv) if recv.buffered() > 0 => UplinkEnd::Cut(error),
            ClientRecv::OneDestination(..) if eof => UplinkEnd::Closed,
            ClientRecv::OneDestination(..) => UplinkEnd::Failed(error),
            ClientRecv::Addressed(reader) if reader.buffered() == 0 && eof => UplinkEnd::Closed,
            ClientRecv::Addressed(_) => UplinkEnd::Cut(error),
        }
    }
}

impl ClientSend {
    async fn send(&mut self, from: &Address, data: &[u8]) -> io::Result<()> {
        match self {
            ClientSend::OneDestination(send) => datagram::send(&mut **send, data).await,
            ClientSend::Addressed(writer) => writer.send(from, data).await,
        }
    }
}

/// Serves one accepted VLESS or VMess UDP request to `destination` until it ends, moving
/// datagrams through the protocol's halves.
pub async fn serve(
    shared: &Shared,
    inbound: &InboundHandler,
    meta: Metadata,
    destination: Address,
    (recv, send): (BoxDatagramRecv, BoxDatagramSend),
) {
    let client = ClientRecv::OneDestination(destination.clone(), recv);
    let back = ClientSend::OneDestination(send);
    serve_packets(shared, inbound, meta, destination, None, client, back).await;
}

/// Serves one accepted Trojan UDP ASSOCIATE until it ends; the first packet's destination
/// routes it.
pub async fn serve_trojan(
    shared: &Shared,
    inbound: &InboundHandler,
    meta: Metadata,
    stream: BoxStream,
) {
    let (mut reader, writer) = TrojanPacketStream::new(stream).into_split();
    let conn_idle = shared.level(meta.level).conn_idle;
    let (first_to, first) = match timeout(conn_idle, reader.recv_packet()).await {
        Ok(Ok(Some(packet))) => packet,
        Ok(Ok(None)) | Err(_) => return,
        Ok(Err(e)) => {
            debug!(source = %meta.source, error = %e, "Trojan UDP: no first packet");
            return;
        }
    };
    let client = ClientRecv::Addressed(reader);
    let back = ClientSend::Addressed(writer);
    serve_packets(
        shared,
        inbound,
        meta,
        first_to.clone(),
        Some((first_to, first)),
        client,
        back,
    )
    .await;
}

/// Routes the stream by `destination`, sends `first` (a packet already read), then moves
/// packets both ways until the stream ends.
async fn serve_packets(
    shared: &Shared,
    inbound: &InboundHandler,
    mut meta: Metadata,
    destination: Address,
    first: Option<(Address, Bytes)>,
    mut client: ClientRecv,
    mut back: ClientSend,
) {
    let protocol = inbound.protocol_name();
    meta.network = Network::Udp;
    meta.destination = Some(destination.clone());
    let outbound = shared.pick(&meta).await;
    let bound = match timeout(BIND_TIMEOUT, outbound.handler.bind(&meta)).await {
        Ok(result) => result,
        Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "bind timed out")),
    };
    let conn = match bound {
        Ok(conn) => conn,
        Err(e) => {
            if shared.access.enabled() {
                shared.access.write(format_args!(
                    "from {} rejected udp:{} [{} -> {}] {}",
                    meta.source, destination, inbound.tag, outbound.tag, e
                ));
            }
            debug!(%destination, outbound = %outbound.tag, error = %e, "{protocol} UDP: outbound bind failed");
            return;
        }
    };
    if shared.access.enabled() {
        let email = meta
            .user
            .as_deref()
            .map(|u| format!(" email: {u}"))
            .unwrap_or_default();
        shared.access.write(format_args!(
            "from {} accepted udp:{} [{} -> {}]{}",
            meta.source, destination, inbound.tag, outbound.tag, email
        ));
    }
    let counters = shared.counters(inbound, &outbound, &meta);
    let policy = shared.level(meta.level);
    let activity = Activity::new();
    let send = |to: Address, packet: Bytes| {
        counters.uplink.add(packet.len() as u64);
        let conn = &conn;
        async move {
            // A datagram the outbound cannot send is lost, as on any UDP path.
            if let Err(e) = conn.send_to(&packet, &to).await {
                debug!(destination = %to, len = packet.len(), error = %e, "{protocol} UDP: datagram not sent");
            }
        }
    };
    if let Some((to, packet)) = first {
        send(to, packet).await;
    }

    let uplink = async {
        loop {
            match client.recv().await {
                Ok(Some((to, packet))) => {
                    activity.touch();
                    send(to, packet).await;
                }
                Ok(None) => return UplinkEnd::Closed,
                Err(e) => return client.ended_by(e),
            }
        }
    };
    let mut downlink = pin!(downlink(&*conn, &mut back, &activity, |n| {
        counters.downlink.add(n as u64)
    }));

    let end = tokio::select! {
        end = uplink => match end {
            UplinkEnd::Closed => {
                // The client is done sending; replies may still come for downlinkOnly.
                activity.touch();
                tokio::select! {
                    r = &mut downlink => downlink_end(r),
                    _ = activity.idle(policy.downlink_only) => "client closed".to_string(),
                }
            }
            UplinkEnd::Cut(e) => {
                info!(source = %meta.source, %destination, error = %e, "{protocol} UDP: client stream cut inside a packet or malformed; closing");
                return;
            }
            UplinkEnd::Failed(e) => format!("failed: {e}"),
        },
        r = &mut downlink => downlink_end(r),
        _ = activity.idle(policy.conn_idle) => "idle timeout".to_string(),
    };
    debug!(source = %meta.source, %destination, "{protocol} UDP stream {end}");
}

fn downlink_end(result: io::Result<()>) -> String {
    match result {
        Ok(()) => "finished".to_string(),
        Err(e) => format!("failed on the way back: {e}"),
    }
}

/// Frames every datagram the outbound receives towards the client. Only errors end it.
async fn downlink(
    conn: &dyn PacketConn,
    back: &mut ClientSend,
    activity: &Activity,
    count: impl Fn(usize),
) -> io::Result<()> {
    let mut buf = vec![0u8; DATAGRAM_MAX];
    loop {
        let mut read = ReadBuf::new(&mut buf);
        let from = poll_fn(|cx| conn.poll_recv_from(cx, &mut read)).await?;
        let data = read.filled();
        activity.touch();
        count(data.len());
        back.send(&from, data).await?;
    }
}
