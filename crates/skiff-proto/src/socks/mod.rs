//! SOCKS5 (and SOCKS4/4a) server: sans-IO codec and async adapter.
//!
//! - [`codec`]: the wire format, bytes in and values out (what tests and fuzzing drive);
//! - [`auth`]: RFC 1929 credential checks in constant time;
//! - [`server`]: the handshake over a stream, and the replies the dispatcher triggers;
//! - [`udp`]: the header of UDP ASSOCIATE datagrams.

pub mod auth;
pub mod codec;
mod inbound;
pub mod server;
pub mod udp;

#[cfg(test)]
mod tests;

pub use codec::{Parsed, SocksError, fuzz_parse_all};
pub use server::{
    HandshakeError, SocksServerConfig, handshake, write_reply, write_udp_associate_reply,
};
pub use udp::{datagram_header_len, encode_datagram_header, parse_datagram};
