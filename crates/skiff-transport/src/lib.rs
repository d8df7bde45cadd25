//! The transports under a protocol: sans-IO codecs (bytes in, values or bytes out) and the
//! async streams built on them, which is where this crate meets sockets.
//!
//! * [`ws`]: WebSocket (RFC 6455) as Xray / v2ray use it — frame header codec, fast masking,
//!   a streaming frame decoder, the HTTP/1.1 upgrade handshake (both sides), the
//!   `Sec-WebSocket-Protocol` / `?ed=N` / path-suffix early-data conventions, what a listener
//!   answers to a request it does not upgrade, and the async accept/connect and frame stream.
//! * [`tls`]: TLS over rustls, then (TLS 1.3) our own record layer, which keeps every byte
//!   read so XTLS Vision can leave it one direction at a time; a bounded ClientHello peek
//!   (SNI, ALPN, versions) for fallbacks.
//! * [`kcp`] and [`mkcp`]: the async edge of kcptun's KCP + smux and of V2Ray's mKCP: tokio
//!   UDP sockets and timers around skiff-kcp's sans-IO sessions, each connection or smux
//!   stream a [`skiff_core::BoxStream`]; [`udp_sessions`] caps what their listeners hold.
//! * [`base64`]: the two base64 alphabets the handshake needs.
//! * [`fuzz`]: entry points for fuzzers (never panic on any input).
//!
//! The TCP dial and the layer stack still live in skiff-app (docs/architecture.md says what
//! is where).

pub mod base64;
pub mod fuzz;
pub mod kcp;
pub mod mkcp;
pub mod tls;
pub mod udp_sessions;
pub mod ws;

/// Result of an incremental parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed<T> {
    /// More bytes are needed; nothing was consumed.
    Incomplete,
    /// A value and the number of input bytes it occupied.
    Complete(T, usize),
}

impl<T> Parsed<T> {
    /// The value, if complete.
    pub fn complete(self) -> Option<(T, usize)> {
        match self {
            Parsed::Complete(v, n) => Some((v, n)),
            Parsed::Incomplete => None,
        }
    }
}
