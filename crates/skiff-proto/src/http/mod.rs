//! HTTP proxy server: CONNECT and absolute-form forwarding.
//!
//! Layout, one idea per file:
//! - [`headers`]: owned header lists and the hop-by-hop rules (RFC 9110 §7.6.1).
//! - [`auth`]: Basic `Proxy-Authorization` decoding and constant-time credential checks.
//! - [`request`]: sans-IO request-head parser (targets, keep-alive, framing) and the upstream
//!   rewrite.
//! - [`body`]: sans-IO message-body framing (Content-Length, chunked, none, until-close).
//! - [`response`]: sans-IO response-head parser and the proxy's own canned responses.
//! - [`server`]: the async adapter that ties them to sockets.

pub mod auth;
pub mod body;
pub mod headers;
mod inbound;
pub mod request;
pub mod response;
pub mod server;

use std::fmt;
use std::io;

pub use body::{BodyError, BodyFramer, BodyKind};
pub use headers::Header;
pub use request::{ProxyRequest, RequestKind, fuzz_parse_all, parse_request, rewrite_for_upstream};
pub use response::{ProxyResponse, parse_response};
pub use server::{HttpServerConfig, serve, write_connect_reply};

/// Most header fields a message head may carry; more is answered with 431.
pub const MAX_HEADERS: usize = 64;
/// Largest message head (request line or status line plus fields) we buffer; more is 431.
pub const MAX_HEAD_LEN: usize = 16 * 1024;

/// Result of feeding a possibly partial message head to a parser.
#[derive(Debug, PartialEq, Eq)]
pub enum Parse<T> {
    /// More bytes are needed (and the buffer is still under [`MAX_HEAD_LEN`]).
    Incomplete,
    Complete(T),
}

/// Why a message head was rejected. [`ParseError::status`] says what to answer a client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// The head exceeds [`MAX_HEAD_LEN`].
    HeadTooLarge,
    /// The head has more than [`MAX_HEADERS`] fields.
    TooManyHeaders,
    /// The bytes are not an HTTP/1.x message head.
    Malformed(&'static str),
    /// The request target is not usable (bad authority, unsupported scheme, ...).
    BadTarget(&'static str),
    /// An origin-form request arrived but transparent proxying is off.
    NotProxyRequest,
    /// Content-Length / Transfer-Encoding cannot be trusted to delimit the body.
    BadFraming(BodyError),
}

impl ParseError {
    /// The status code a proxy answers a client with for this error.
    pub fn status(&self) -> u16 {
        match self {
            ParseError::HeadTooLarge | ParseError::TooManyHeaders => 431,
            _ => 400,
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::HeadTooLarge => write!(f, "http head larger than {MAX_HEAD_LEN} bytes"),
            ParseError::TooManyHeaders => write!(f, "more than {MAX_HEADERS} header fields"),
            ParseError::Malformed(why) => write!(f, "malformed http head: {why}"),
            ParseError::BadTarget(why) => write!(f, "bad request target: {why}"),
            ParseError::NotProxyRequest => {
                write!(f, "origin-form request to a non-transparent proxy")
            }
            ParseError::BadFraming(err) => write!(f, "bad message framing: {err}"),
        }
    }
}

impl std::error::Error for ParseError {}

impl From<ParseError> for io::Error {
    fn from(err: ParseError) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidData, err)
    }
}

/// Maps httparse's error onto ours; only the "too many headers" case gets its own status.
fn from_httparse(err: httparse::Error) -> ParseError {
    match err {
        httparse::Error::TooManyHeaders => ParseError::TooManyHeaders,
        httparse::Error::Version => ParseError::Malformed("unsupported http version"),
        httparse::Error::Status => ParseError::Malformed("invalid status code"),
        httparse::Error::Token => ParseError::Malformed("invalid token"),
        httparse::Error::NewLine => ParseError::Malformed("invalid line ending"),
        httparse::Error::HeaderName => ParseError::Malformed("invalid header name"),
        httparse::Error::HeaderValue => ParseError::Malformed("invalid header value"),
    }
}
