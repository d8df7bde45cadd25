//! Server side: parse the upgrade request, decide, build the 101.

use std::fmt::Write as _;

use super::{HandshakeError, Header, MAX_HEADERS, bounded, collect_headers, find, has_token};
use crate::Parsed;
use crate::base64;
use crate::ws::accept::accept_key;
use crate::ws::early_data::{self, EarlyDataCarrier};

/// What the server accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerOptions {
    /// Configured path (normalised: "" ⇒ "/", leading "/" added). Compared exactly with the
    /// request path without its query string (prefix match in path-suffix early-data mode).
    pub path: String,
    /// If set, the request `Host` must match (case-insensitive; a `:port` on the request is
    /// ignored when the configured host has none).
    pub host: Option<String>,
    /// Where early data is looked for. `None`: not at all.
    pub early_data: Option<EarlyDataCarrier>,
}

impl ServerOptions {
    /// Xray server: early data always read from `Sec-WebSocket-Protocol`. The path is the
    /// configured one after Xray's config processing (normalised, `ed` parameter removed).
    pub fn xray(path: &str) -> Self {
        ServerOptions {
            path: early_data::split_xray_ed(path).0,
            host: None,
            early_data: Some(EarlyDataCarrier::xray()),
        }
    }
}

/// A parsed HTTP request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpRequest {
    pub method: String,
    /// Request-target as sent.
    pub target: String,
    /// Target up to `?`.
    pub path: String,
    /// After `?`, if any.
    pub query: Option<String>,
    /// Minor HTTP version (1 for HTTP/1.1).
    pub version: u8,
    pub headers: Vec<Header>,
}

impl HttpRequest {
    /// First value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        find(&self.headers, name)
    }

    /// The `Host` header, if present and UTF-8.
    pub fn host(&self) -> Option<&str> {
        self.header("host")
            .and_then(|v| std::str::from_utf8(v).ok())
    }
}

/// An accepted upgrade.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upgrade {
    pub request: HttpRequest,
    /// `Sec-WebSocket-Key` as sent.
    pub key: String,
    /// Early data to prepend to the stream (empty if none).
    pub early_data: Vec<u8>,
    /// `Sec-WebSocket-Protocol` value to echo in the 101, if any.
    pub echo_protocol: Option<String>,
}

impl Upgrade {
    /// The 101 response for this upgrade.
    pub fn response(&self) -> Vec<u8> {
        let mut out = Vec::new();
        build_response(&self.key, self.echo_protocol.as_deref(), &mut out);
        out
    }
}

/// Why a request is not (an acceptable) WebSocket upgrade.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejection {
    /// Method other than GET.
    NotGet,
    /// HTTP/1.0.
    NotHttp11,
    /// No `Upgrade: websocket`.
    NoUpgradeHeader,
    /// `Connection` lacks `upgrade`.
    NoConnectionUpgrade,
    /// Path differs from the configured one.
    PathMismatch,
    /// Host differs from the configured one.
    HostMismatch,
    /// `Sec-WebSocket-Key` missing, repeated, or not base64 of 16 bytes.
    BadKey,
    /// `Sec-WebSocket-Version` is not 13.
    UnsupportedVersion,
}

impl Rejection {
    /// Status a server without fallback would answer.
    pub fn status(self) -> u16 {
        match self {
            Rejection::PathMismatch | Rejection::HostMismatch => 404,
            Rejection::NotGet => 405,
            Rejection::UnsupportedVersion => 426,
            _ => 400,
        }
    }

    /// Whether this is an ordinary HTTP request (not an upgrade attempt at all): the usual
    /// case for handing the connection to a fallback.
    pub fn is_plain_http(self) -> bool {
        matches!(
            self,
            Rejection::NotGet | Rejection::NoUpgradeHeader | Rejection::NoConnectionUpgrade
        )
    }
}

/// Outcome of a complete request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerRequest {
    Upgrade(Upgrade),
    /// Valid HTTP but not a WebSocket upgrade we accept: hand to a fallback, or answer
    /// as Xray's listener does ([`super::refusal`]).
    NotWebSocket {
        request: HttpRequest,
        reason: Rejection,
    },
}

/// Parses an upgrade request from the start of `buf`. The count in `Parsed::Complete` is the
/// length of the head; bytes after it are already WebSocket frames.
pub fn parse_request(
    buf: &[u8],
    opts: &ServerOptions,
) -> Result<Parsed<ServerRequest>, HandshakeError> {
    bounded(buf, |view| {
        let mut raw = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut raw);
        let n = match req.parse(view).map_err(super::map_httparse)? {
            httparse::Status::Complete(n) => n,
            httparse::Status::Partial => return Ok(None),
        };
        let target = req.path.unwrap_or("/").to_owned();
        let (path, query) = match target.split_once('?') {
            Some((p, q)) => (p.to_owned(), Some(q.to_owned())),
            None => (target.clone(), None),
        };
        let request = HttpRequest {
            method: req.method.unwrap_or("").to_owned(),
            target,
            path,
            query,
            version: req.version.unwrap_or(0),
            headers: collect_headers(req.headers),
        };
        Ok(Some((decide(request, opts), n)))
    })
}

fn decide(request: HttpRequest, opts: &ServerOptions) -> ServerRequest {
    let reject = |request, reason| ServerRequest::NotWebSocket { request, reason };
    let h = &request.headers;
    if request.method != "GET" {
        return reject(request, Rejection::NotGet);
    }
    if !has_token(h, "upgrade", "websocket") {
        return reject(request, Rejection::NoUpgradeHeader);
    }
    if !has_token(h, "connection", "upgrade") {
        return reject(request, Rejection::NoConnectionUpgrade);
    }
    if request.version < 1 {
        return reject(request, Rejection::NotHttp11);
    }
    if let Some(want) = &opts.host
        && !host_matches(request.host(), want)
    {
        return reject(request, Rejection::HostMismatch);
    }
    let mut early = Vec::new();
    let mut echo = None;
    match &opts.early_data {
        Some(EarlyDataCarrier::PathSuffix) => {
            let Some(rest) = request.path.strip_prefix(opts.path.as_str()) else {
                return reject(request, Rejection::PathMismatch);
            };
            if !rest.is_empty() {
                match base64::decode_url_nopad(rest.as_bytes()) {
                    Ok(d) => early = d,
                    Err(_) => return reject(request, Rejection::PathMismatch),
                }
            }
        }
        other => {
            if request.path != opts.path {
                return reject(request, Rejection::PathMismatch);
            }
            if let Some(EarlyDataCarrier::Header(name)) = other
                && let Some(value) = request.header(name)
                && let Some(d) = early_data::decode_lenient(value)
            {
                early = d;
                if name.eq_ignore_ascii_case(early_data::PROTOCOL_HEADER) {
                    // Decoding succeeded, so the value is ASCII.
                    echo = Some(String::from_utf8_lossy(value).into_owned());
                }
            }
        }
    }
    let key = match key_of(h) {
        Some(k) => k,
        None => return reject(request, Rejection::BadKey),
    };
    let version_ok = find(h, "sec-websocket-version").is_some_and(|v| v.trim_ascii() == b"13");
    if !version_ok {
        return reject(request, Rejection::UnsupportedVersion);
    }
    ServerRequest::Upgrade(Upgrade {
        request,
        key,
        early_data: early,
        echo_protocol: echo,
    })
}

fn key_of(h: &[Header]) -> Option<String> {
    let mut keys = h
        .iter()
        .filter(|x| x.name.eq_ignore_ascii_case("sec-websocket-key"));
    let k = keys.next()?.value.trim_ascii();
    if keys.next().is_some() || base64::decode_std(k).ok()?.len() != 16 {
        return None;
    }
    Some(String::from_utf8_lossy(k).into_owned())
}

pub(super) fn host_matches(got: Option<&str>, want: &str) -> bool {
    let Some(got) = got.map(str::trim) else {
        return false;
    };
    if got.eq_ignore_ascii_case(want) {
        return true;
    }
    // Strip a port from the request host unless the configured host has one.
    let want_has_port = want.rsplit_once(':').is_some_and(|(_, p)| !p.contains(']'));
    if !want_has_port
        && let Some((h, p)) = got.rsplit_once(':')
        && !p.is_empty()
        && p.bytes().all(|c| c.is_ascii_digit())
    {
        return h.eq_ignore_ascii_case(want);
    }
    false
}

/// Writes `HTTP/1.1 101 Switching Protocols` with `Sec-WebSocket-Accept` for `key`, and the
/// echoed `Sec-WebSocket-Protocol` if given.
pub fn build_response(key: &str, protocol: Option<&str>, out: &mut Vec<u8>) {
    let mut s = String::with_capacity(160);
    s.push_str("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n");
    let _ = write!(
        s,
        "Sec-WebSocket-Accept: {}\r\n",
        accept_key(key.as_bytes())
    );
    if let Some(p) = protocol {
        let _ = write!(s, "Sec-WebSocket-Protocol: {p}\r\n");
    }
    s.push_str("\r\n");
    out.extend_from_slice(s.as_bytes());
}
