//! mKCP: V2Ray's own KCP (`streamSettings.network: "kcp"`), sans-IO. Not wire-compatible with
//! kcp-go/kcptun (the rest of this crate): different segments, different ARQ, no FEC, no smux.
//!
//! A packet is `[header][seal(segments)]` ([`PacketFormat`]): an optional header imitating
//! another protocol ([`HeaderKind`]), then V2Ray's simple FNV authenticator or, with a seed,
//! AES-128-GCM ([`seal`]), around one or more [`Segment`]s. A connection ([`MkcpSession`]) is
//! identified by the peer's address and a 16-bit conversation number chosen by the client;
//! there is no handshake: the server creates a connection on the first data it hears.
//!
//! Files: `segment` (wire format), `header`, `seal`, `packet` (the two around segments),
//! `config` (V2Ray's kcpSettings and the windows it derives), `send` / `recv` (the two halves
//! of the ARQ), `rtt`, `output` (packing segments into packets), `session` (state machine).
//! What V2Ray 4.34 does was read from its behaviour on the wire and checked against it.

mod config;
mod header;
mod output;
mod packet;
mod recv;
mod rtt;
pub mod seal;
mod segment;
mod send;
mod session;
mod time;

pub use config::MkcpConfig;
pub use header::{Header, HeaderKind};
pub use packet::{PacketFormat, PacketWriter};
pub use segment::{ACK_LIMIT, Cmd, DATA_OVERHEAD, OPT_CLOSE, Segment, segments};
pub use session::{Closed, MkcpSession, State};

/// What a listener needs to know about a packet from an unknown peer: its conversation, and
/// whether it may start a connection (it carries data within the first receive window, as
/// a client's first packets do; stray acks, pings and terminates of a finished connection
/// do not). `plain` is the opened packet.
pub fn first_segment(plain: &[u8], window: u32) -> Option<(u16, bool)> {
    let (first, _) = Segment::parse(plain)?;
    let conv = first.conv();
    let starts = segments(plain)
        .take_while(|s| s.conv() == conv)
        .any(|s| matches!(s, Segment::Data { sn, .. } if sn < window));
    Some((conv, starts))
}

#[cfg(test)]
mod tests;
