//! UDP carried in one proxy stream (VLESS and VMess command 0x02, vless.md §4.2, vmess.md
//! §4.4) on the inbound side: the client's datagrams go to the routed outbound's packet
//! conversation, to the one destination of the request header; every datagram that comes back
//! goes to the client the same way, framed by the protocol's halves.
//!
//! The connection ends when the client closes it (after `downlinkOnly` more of replies), when
//! nothing moved either way for `connIdle`, or when the client's stream is cut inside a packet.

use std::future::poll_fn;
use std::io;
use std::pin::pin;
use std::time::Duration;

use skiff_core::{Address, Metadata, Network, PacketConn};
use skiff_proto::datagram::{self, BoxDatagramRecv, BoxDatagramSend, DatagramSend};
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

/// Why the client's direction stopped.
enum UplinkEnd {
    /// The client closed between packets.
    Closed,
    /// The stream ended or failed inside a packet: a broken client (or a lying length).
    Cut(io::Error),
    /// The stream failed between packets.
    Failed(io::Error),
}

/// Serves one accepted UDP request to `destination` until it ends, moving datagrams through
/// the protocol's halves.
pub async fn serve(
    shared: &Shared,
    inbound: &InboundHandler,
    mut meta: Metadata,
    destination: Address,
    (mut reader, mut writer): (BoxDatagramRecv, BoxDatagramSend),
) {
    let protocol = inbound.protocol_name();
    meta.network = Network::Udp;
    meta.destination = Some(destination.clone());
    let outbound = shared.pick(&meta).await;
    let email = meta
        .user
        .as_deref()
        .map(|u| format!(" email: {u}"))
        .unwrap_or_default();
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
        shared.access.write(format_args!(
            "from {} accepted udp:{} [{} -> {}]{}",
            meta.source, destination, inbound.tag, outbound.tag, email
        ));
    }
    let counters = shared.counters(inbound, outbound, &meta);
    let policy = shared.level(meta.level);
    let activity = Activity::new();

    let uplink = async {
        loop {
            match datagram::recv(&mut *reader).await {
                Ok(Some(packet)) => {
                    activity.touch();
                    counters.uplink.add(packet.len() as u64);
                    // A datagram the outbound cannot send is lost, as on any UDP path.
                    if let Err(e) = conn.send_to(&packet, &destination).await {
                        debug!(%destination, len = packet.len(), error = %e, "{protocol} UDP: datagram not sent");
                    }
                }
                Ok(None) => return UplinkEnd::Closed,
                Err(e) if reader.buffered() > 0 => return UplinkEnd::Cut(e),
                // A TLS peer gone without close_notify, between packets: an ordinary end.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return UplinkEnd::Closed,
                Err(e) => return UplinkEnd::Failed(e),
            }
        }
    };
    let mut downlink = pin!(downlink(&*conn, &mut *writer, &activity, |n| {
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
                info!(source = %meta.source, %destination, error = %e, "{protocol} UDP: client stream cut inside a packet; closing");
                return;
            }
            UplinkEnd::Failed(e) => format!("failed: {e}"),
        },
        r = &mut downlink => downlink_end(r),
        _ = activity.idle(policy.conn_idle) => "idle timeout".to_string(),
    };
    debug!(source = %meta.source, %destination, "{protocol} UDP connection {end}");
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
    writer: &mut dyn DatagramSend,
    activity: &Activity,
    count: impl Fn(usize),
) -> io::Result<()> {
    let mut buf = vec![0u8; DATAGRAM_MAX];
    loop {
        let mut read = ReadBuf::new(&mut buf);
        // These streams carry no per-packet address: whoever answered, it goes to the client.
        poll_fn(|cx| conn.poll_recv_from(cx, &mut read)).await?;
        let data = read.filled();
        activity.touch();
        count(data.len());
        datagram::send(writer, data).await?;
    }
}
