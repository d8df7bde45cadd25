//! HTTP/1.1 upgrade handshake (RFC 6455 §4), Xray / v2ray flavour. Both sides are bounded
//! ([`MAX_HEAD_LEN`] bytes, [`MAX_HEADERS`] headers) and report how many bytes the head used:
//! anything after it (pipelined frames) belongs to the WebSocket stream.

mod client;
mod refusal;
mod server;

pub use client::{ClientRequest, ServerResponse, build_request, parse_response};
pub use refusal::{Refusal, refuse_malformed, refuse_request};
pub use server::{
    HttpRequest, Rejection, ServerOptions, ServerRequest, Upgrade, build_response, parse_request,
};

use std::fmt;

/// Largest request/response head accepted.
pub const MAX_HEAD_LEN: usize = 16 * 1024;
/// Most headers accepted.
pub const MAX_HEADERS: usize = 64;

/// One header as received (name as spelled on the wire, raw value bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub name: String,
    pub value: Vec<u8>,
}

/// Handshake failure (malformed HTTP, limits, or a failed client-side validation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandshakeError {
    /// Head longer than [`MAX_HEAD_LEN`].
    TooLarge,
    /// More than [`MAX_HEADERS`] headers.
    TooManyHeaders,
    /// Not parseable as HTTP/1.x.
    Malformed(String),
    /// Client side: caller-supplied field unusable (CR/LF, empty host…).
    InvalidInput(&'static str),
    /// Client side: the server answered something other than 101.
    BadStatus(u16),
    /// Client side: `Upgrade: websocket` / `Connection: upgrade` missing in the 101.
    MissingUpgrade,
    /// Client side: `Sec-WebSocket-Accept` missing or wrong.
    BadAccept,
}

impl fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HandshakeError::TooLarge => write!(f, "HTTP head exceeds {MAX_HEAD_LEN} bytes"),
            HandshakeError::TooManyHeaders => write!(f, "more than {MAX_HEADERS} headers"),
            HandshakeError::Malformed(e) => write!(f, "malformed HTTP: {e}"),
            HandshakeError::InvalidInput(e) => write!(f, "invalid handshake input: {e}"),
            HandshakeError::BadStatus(s) => write!(f, "server answered {s}, not 101"),
            HandshakeError::MissingUpgrade => f.write_str("101 without websocket upgrade headers"),
            HandshakeError::BadAccept => f.write_str("wrong Sec-WebSocket-Accept"),
        }
    }
}

impl std::error::Error for HandshakeError {}

fn map_httparse(e: httparse::Error) -> HandshakeError {
    match e {
        httparse::Error::TooManyHeaders => HandshakeError::TooManyHeaders,
        other => HandshakeError::Malformed(other.to_string()),
    }
}

fn collect_headers(raw: &[httparse::Header<'_>]) -> Vec<Header> {
    raw.iter()
        .map(|h| Header {
            name: h.name.to_owned(),
            value: h.value.to_vec(),
        })
        .collect()
}

/// First value of header `name` (case-insensitive).
fn find<'h>(headers: &'h [Header], name: &str) -> Option<&'h [u8]> {
    headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case(name))
        .map(|h| h.value.as_slice())
}

/// Whether any header `name` carries `token` in its comma-separated list (case-insensitive).
fn has_token(headers: &[Header], name: &str, token: &str) -> bool {
    headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case(name))
        .flat_map(|h| h.value.split(|&c| c == b','))
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

/// Runs `parse` on at most [`MAX_HEAD_LEN`] bytes; turns "still partial at the cap" into
/// [`HandshakeError::TooLarge`].
fn bounded<T>(
    buf: &[u8],
    parse: impl FnOnce(&[u8]) -> Result<Option<(T, usize)>, HandshakeError>,
) -> Result<crate::Parsed<T>, HandshakeError> {
    let view = &buf[..buf.len().min(MAX_HEAD_LEN)];
    match parse(view)? {
        Some((v, n)) => Ok(crate::Parsed::Complete(v, n)),
        None if buf.len() >= MAX_HEAD_LEN => Err(HandshakeError::TooLarge),
        None => Ok(crate::Parsed::Incomplete),
    }
}
