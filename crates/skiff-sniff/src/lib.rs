//! Sniffers: given the first bytes a client sent, name the protocol and the domain it is
//! for, so routing can match domain rules on connections that arrived by IP address. Each is
//! a pure function of a byte prefix (sans-IO): the caller reads, asks, and reads more while
//! the answer is [`Sniff::NeedMore`], within its own byte and time bounds.
//!
//! - [`http::sniff_http`]: the `Host` header of an HTTP/1 request (and its attributes).
//! - [`tls::sniff_tls`]: the SNI of a TLS ClientHello ([`client_hello`] is the parser,
//!   shared with the fallbacks' peek).
//! - [`quic::sniff_quic`]: the SNI inside a QUIC client's Initial packets, decrypted with
//!   the RFC 9001 Initial keys.

pub mod client_hello;
pub mod fuzz;
pub mod http;
pub mod quic;
pub mod tls;

/// A sniffed protocol, named as Xray names it in routing rules' `protocol`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Protocol {
    Http,
    Tls,
    Quic,
}

impl Protocol {
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Http => "http",
            Protocol::Tls => "tls",
            Protocol::Quic => "quic",
        }
    }
}

/// What one sniffer made of a prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sniff {
    /// The prefix is a valid beginning of this protocol; more bytes may name the domain.
    NeedMore,
    /// Not this protocol (or this protocol without a usable name).
    NotThis,
    Found(Sniffed),
}

/// A sniffer's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sniffed {
    pub protocol: Protocol,
    /// Lower-case host name (or IP literal, for HTTP's `Host`), without a port.
    pub domain: String,
    /// HTTP only: header names (lower case) and `:method`/`:path`, for rules' `attrs`.
    pub attributes: Vec<(String, String)>,
}

/// Runs `sniffers` over `prefix` in order: the first that finds a name wins; otherwise
/// `NeedMore` if any still might, else `NotThis`.
pub fn sniff_any(prefix: &[u8], sniffers: &[Protocol]) -> Sniff {
    let mut need_more = false;
    for protocol in sniffers {
        let answer = match protocol {
            Protocol::Http => http::sniff_http(prefix),
            Protocol::Tls => tls::sniff_tls(prefix),
            Protocol::Quic => quic::sniff_quic(prefix),
        };
        match answer {
            Sniff::Found(found) => return Sniff::Found(found),
            Sniff::NeedMore => need_more = true,
            Sniff::NotThis => {}
        }
    }
    if need_more {
        Sniff::NeedMore
    } else {
        Sniff::NotThis
    }
}
