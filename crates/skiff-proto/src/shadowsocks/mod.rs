//! Shadowsocks (shadowsocks.md): AEAD-2017 and 2022 (SIP022, with SIP023 identity headers for
//! multi-user servers), TCP and UDP.
//!
//! Sans-IO codecs first: [`method`] (names, keys), [`address`] (SOCKS5 addresses), [`cipher`]
//! (nonce-counted AEAD, length-prefixed chunks), [`header`] (the 2022 request and response
//! headers), [`codec`] (whole TCP directions: salt, headers, chunks), [`udp`] and [`udp2022`]
//! (packets), [`replay`] (salt pool, packet-id window). The async adapters sit on top:
//! [`stream`] (an encrypted stream over any [`skiff_core::BoxStream`]), [`server`] (the
//! inbound handshake) and [`client`] (the outbound stream).

pub mod address;
pub mod cipher;
pub mod client;
pub mod codec;
pub mod header;
mod inbound;
pub mod method;
mod outbound;
pub mod replay;
pub mod server;
pub mod stream;
pub mod udp;
pub mod udp2022;
pub mod udp_server;

#[cfg(test)]
mod tests;

use skiff_core::wire::Reader;
use std::fmt;

pub use method::{Method, MethodError};
pub use outbound::ShadowsocksOutbound;
pub use server::{ServerUser, ShadowsocksAccept, ShadowsocksServer};

/// How far a 2022 timestamp may be from our clock, in seconds (both directions).
pub const MAX_TIME_DIFF: u64 = 30;

/// Why Shadowsocks bytes were refused. Deliberately vague about authentication: which part of
/// a message failed is no business of a prober's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SsError {
    /// A message failed authentication (wrong key, tampering, or not Shadowsocks at all).
    Auth,
    /// No configured user matches (multi-user servers).
    UnknownUser,
    /// An address type other than IPv4, domain or IPv6.
    BadAddressType(u8),
    /// An empty or non-UTF-8 domain name.
    BadDomain,
    /// A chunk length over the method's limit.
    BadLength(usize),
    /// A 2022 header with the wrong type byte (0 for requests, 1 for responses).
    BadType(u8),
    /// A 2022 timestamp more than [`MAX_TIME_DIFF`] seconds from ours.
    Timestamp { theirs: u64, ours: u64 },
    /// A salt (or packet id) seen before.
    Replay,
    /// A 2022 request header with neither padding nor initial payload, or padding that runs
    /// past its chunk.
    BadPadding,
    /// A 2022 response that answers another request (wrong request salt or session id).
    WrongRequest,
    /// A message too short to be what it claims.
    Truncated,
    /// A destination or payload the format cannot carry (encoding only).
    TooLong,
}

impl fmt::Display for SsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SsError::Auth => f.write_str("Shadowsocks message authentication failed"),
            SsError::UnknownUser => f.write_str("no Shadowsocks user matches"),
            SsError::BadAddressType(t) => write!(f, "unknown Shadowsocks address type {t:#04x}"),
            SsError::BadDomain => f.write_str("invalid domain name in Shadowsocks address"),
            SsError::BadLength(len) => write!(f, "Shadowsocks chunk length {len} over the limit"),
            SsError::BadType(t) => write!(f, "unexpected Shadowsocks 2022 header type {t:#04x}"),
            SsError::Timestamp { theirs, ours } => write!(
                f,
                "Shadowsocks 2022 timestamp {theirs} is more than {MAX_TIME_DIFF} s from ours ({ours})"
            ),
            SsError::Replay => f.write_str("Shadowsocks salt or packet id replayed"),
            SsError::BadPadding => f.write_str("Shadowsocks 2022 request header with bad padding"),
            SsError::WrongRequest => {
                f.write_str("Shadowsocks 2022 response does not answer our request")
            }
            SsError::Truncated => f.write_str("truncated Shadowsocks message"),
            SsError::TooLong => f.write_str("too long for a Shadowsocks message"),
        }
    }
}

impl std::error::Error for SsError {}

impl From<SsError> for std::io::Error {
    fn from(e: SsError) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::InvalidData, e)
    }
}

/// Seconds since the Unix epoch (0 if the clock is before it).
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Checks a 2022 timestamp against `now`.
pub fn check_time(theirs: u64, now: u64) -> Result<(), SsError> {
    if theirs.abs_diff(now) > MAX_TIME_DIFF {
        return Err(SsError::Timestamp { theirs, ours: now });
    }
    Ok(())
}

/// Reads a Shadowsocks address (SOCKS form) at the reader's position and moves past it.
pub(crate) fn read_address(r: &mut Reader<'_>) -> Result<skiff_core::Address, SsError> {
    match address::parse(r.rest())? {
        address::Parsed::Complete(addr, len) => {
            r.take(len).ok_or(SsError::Truncated)?;
            Ok(addr)
        }
        address::Parsed::Incomplete => Err(SsError::Truncated),
    }
}

/// Fuzz entry point: every decoder on arbitrary bytes, with fixed keys. Besides "never
/// panics" it checks that a stream decoded at once and byte by byte gives the same bytes.
pub fn fuzz_parse_all(data: &[u8]) {
    tests_support::fuzz(data);
}

mod tests_support;
