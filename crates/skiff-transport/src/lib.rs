//! Every transport under a protocol, as [`skiff_core::Dialer`]s (a base connection to the
//! server) and [`skiff_core::ClientLayer`]/[`skiff_core::ServerLayer`]s (what runs over it):
//! the wire formats as sans-IO codecs (bytes in, values or bytes out), and the async code
//! around them, sockets and timers included. The runtime option types are this crate's own;
//! skiff-app translates the config into them.
//!
//! * [`tcp`]: the plain TCP dial (tuned), and resolving a server for the UDP transports.
//! * [`stack`]: one inbound's or outbound's base and layers in order (`ServerStack`,
//!   `LayeredDialer`); it knows no transport by name.
//! * [`ws`]: WebSocket (RFC 6455) as Xray / v2ray use it — frame header codec, fast masking,
//!   a streaming frame decoder, the HTTP/1.1 upgrade handshake (both sides), the
//!   `Sec-WebSocket-Protocol` / `?ed=N` / path-suffix early-data conventions, what a listener
//!   answers to a request it does not upgrade, and the async accept/connect and frame stream.
//! * [`httpupgrade`]: Xray's HTTPUpgrade: one HTTP/1.1 upgrade exchange, then the raw stream.
//! * [`grpc`]: Xray's gRPC transport ("gun"): Hunk messages over HTTP/2 calls, a
//!   multiplexing server and a client keeping one connection per server.
//! * [`http_header`]: Xray's HTTP header obfuscation on raw TCP: a request and a response
//!   head from templates in front of each side's first bytes.
//! * [`tls`]: TLS over rustls, then (TLS 1.3) our own record layer, which keeps every byte
//!   read so XTLS Vision can leave it one direction at a time; a bounded ClientHello peek
//!   (SNI, ALPN, versions) for fallbacks.
//! * [`reality`]: the REALITY server: ClientHello authentication, the temporary
//!   certificate, and the byte-for-byte relay to the target for everyone else.
//! * [`kcp`] and [`mkcp`]: the async edge of kcptun's KCP + smux and of V2Ray's mKCP: tokio
//!   UDP sockets and timers around skiff-kcp's sans-IO sessions, each connection or smux
//!   stream a [`skiff_core::BoxStream`]; [`udp_sessions`] caps what their listeners hold.
//! * [`fingerprint`]: browser-shaped ClientHellos (Xray's `fingerprint`); [`tls13_client`]: the
//!   TLS 1.3 client handshake that sends them (REALITY), ending in `tls/records.rs`.
//! * [`xhttp`]: Xray's XHTTP (SplitHTTP): packet-up, stream-up and stream-one over HTTP/1.1
//!   and HTTP/2, the server as a `MultiplexServer` with its session table, the client as a
//!   `Dialer` sharing HTTP/2 connections as xmux says.
//! * [`base64`]: the two base64 alphabets the handshake needs.
//! * [`fuzz`]: entry points for fuzzers (never panic on any input).

pub mod base64;
pub mod fingerprint;
pub mod fuzz;
pub mod grpc;
pub mod http_header;
pub mod httpupgrade;
pub mod kcp;
pub mod mkcp;
pub mod reality;
pub mod stack;
pub mod tcp;
pub mod tls;
pub mod tls13_client;
pub mod udp_sessions;
pub mod ws;
pub mod xhttp;

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
