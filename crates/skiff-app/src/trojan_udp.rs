//! Trojan UDP ASSOCIATE (trojan.md §2) on the inbound side: every packet from the client
//! names its own destination; they all go through one packet conversation of the outbound
//! routed for the first packet's destination (as a SOCKS5 association is), and every datagram
//! that comes back is framed towards the client with the address that sent it.
//!
//! The association ends when the client closes it (after `downlinkOnly` more of replies), when
//! nothing moved either way for `connIdle`, or when the client's stream is cut inside a packet
//! or carries a malformed one.

use std::future::poll_fn;
use std::io;
use std::pin::pin;
use std::time::Duration;

use skiff_core::{BoxStream, Metadata, Network, PacketConn};
use skiff_proto::trojan::packet::{TrojanPacketStream, TrojanPacketWriter};
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

/// Serves one accepted Trojan UDP ASSOCIATE until it ends.
pub async fn serve(
    shared: &Shared,
    inbound: &InboundHandler,
    mut meta: Metadata,
    stream: BoxStream,
) {
    meta.network = Network::Udp;
    let policy = shared.level(meta.level);
    let (mut reader, mut writer) = TrojanPacketStream::new(stream).into_split();
    // The first packet's destination routes the association.
    let (first_to, first) = match timeout(policy.conn_idle, reader.recv_packet()).await {
        Ok(Ok(Some(packet))) => packet,
        Ok(Ok(None)) | Err(_) => return,
        Ok(Err(e)) => {
            debug!(source = %meta.source, error = %e, "Trojan UDP: no first packet");
            return;
        }
    };
    meta.destination = Some(first_to.clone());
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
                    meta.source, first_to, inbound.tag, outbound.tag, e
                ));
            }
            debug!(destination = %first_to, outbound = %outbound.tag, error = %e, "Trojan UDP: outbound bind failed");
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
            meta.source, first_to, inbound.tag, outbound.tag, email
        ));
    }
    let counters = shared.counters(inbound, outbound, &meta);
    let activity = Activity::new();
    counters.uplink.add(first.len() as u64);
    if let Err(e) = conn.send_to(&first, &first_to).await {
        debug!(destination = %first_to, len = first.len(), error = %e, "Trojan UDP: datagram not sent");
    }

    let uplink = async {
        loop {
            match reader.recv_packet().await {
                Ok(Some((to, packet))) => {
                    activity.touch();
                    counters.uplink.add(packet.len() as u64);
                    // A datagram the outbound cannot send is lost, as on any UDP path.
                    if let Err(e) = conn.send_to(&packet, &to).await {
                        debug!(destination = %to, len = packet.len(), error = %e, "Trojan UDP: datagram not sent");
                    }
                }
                Ok(None) => return Ok(()),
                // A TLS peer gone without close_notify, between packets: an ordinary end.
                Err(e) if reader.buffered() == 0 && e.kind() == io::ErrorKind::UnexpectedEof => {
                    return Ok(());
                }
                Err(e) => return Err(e),
            }
        }
    };
    let mut downlink = pin!(downlink(&*conn, &mut writer, &activity, |n| {
        counters.downlink.add(n as u64)
    }));

    let end = tokio::select! {
        end = uplink => match end {
            Ok(()) => {
                // The client is done sending; replies may still come for downlinkOnly.
                activity.touch();
                tokio::select! {
                    r = &mut downlink => downlink_end(r),
                    _ = activity.idle(policy.downlink_only) => "client closed".to_string(),
                }
            }
            Err(e) => {
                info!(source = %meta.source, error = %e, "Trojan UDP: client stream cut or malformed; closing");
                return;
            }
        },
        r = &mut downlink => downlink_end(r),
        _ = activity.idle(policy.conn_idle) => "idle timeout".to_string(),
    };
    debug!(source = %meta.source, "Trojan UDP association {end}");
}

fn downlink_end(result: io::Result<()>) -> String {
    match result {
        Ok(()) => "finished".to_string(),
        Err(e) => format!("failed on the way back: {e}"),
    }
}

/// Frames every datagram the outbound receives towards the client, with its source address.
/// Only errors end it.
async fn downlink(
    conn: &dyn PacketConn,
    writer: &mut TrojanPacketWriter,
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
        writer.send(&from, data).await?;
    }
}
