//! The async edge of KCP: tokio UDP sockets and timers around the sans-IO layers of
//! `skiff-kcp` (KCP packets, snappy framing, smux), exposing smux streams as [`BoxStream`]s.
//!
//! * [`conn`]: one KCP session + its smux session behind a mutex, driven by one task with one
//!   timer (sleep until the next KCP update or smux keepalive; no busy polling, no thread).
//! * [`stream`]: a smux stream as AsyncRead/AsyncWrite with backpressure; a FIN either way
//!   ends both directions as in kcptun, unless the session keeps half-close (Skiff-only network).
//! * [`client`]: sessions to a kcptun server, one connected UDP socket and random conv each.
//! * [`dial`]: kcptun as a base [`skiff_core::Dialer`], one client per outbound.
//! * [`server`]: one UDP socket, peers demultiplexed by source address.
//!
//! [`BoxStream`]: skiff_core::BoxStream

pub mod client;
pub mod conn;
pub mod dial;
pub mod server;
pub mod stream;

use skiff_kcp::KcpConfig;
use skiff_kcp::smux::SmuxConfig;

/// Everything both ends of a kcptun tunnel must agree on, plus the local tuning.
#[derive(Clone, Debug)]
pub struct TunnelParams {
    pub kcp: KcpConfig,
    pub smux: SmuxConfig,
    /// Snappy framing on the KCP stream (kcptun's default; off with `nocomp`).
    pub compress: bool,
    /// DSCP bits for the IP header (0 = leave alone).
    pub dscp: u8,
    /// Socket send and receive buffer sizes (kcptun `--sockbuf`).
    pub sockbuf: usize,
}

/// Sets DSCP and buffer sizes on a UDP socket, as kcptun does; failures are only logged
/// (an unprivileged process may be capped below the asked size).
pub fn tune_socket(socket: &tokio::net::UdpSocket, params: &TunnelParams) {
    let sock = socket2::SockRef::from(socket);
    if params.sockbuf > 0 {
        let _ = sock.set_recv_buffer_size(params.sockbuf);
        let _ = sock.set_send_buffer_size(params.sockbuf);
    }
    if params.dscp > 0 {
        let tos = u32::from(params.dscp) << 2;
        let is_v6 = socket.local_addr().is_ok_and(|a| a.is_ipv6());
        let result = if is_v6 {
            sock.set_tclass_v6(tos)
        } else {
            sock.set_tos_v4(tos)
        };
        if let Err(e) = result {
            tracing::debug!(error = %e, "cannot set DSCP on the KCP socket");
        }
    }
}

#[cfg(test)]
mod flood_tests;
#[cfg(test)]
mod tests;
