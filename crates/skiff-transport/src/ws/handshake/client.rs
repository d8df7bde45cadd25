//! Client side: build the upgrade request, validate the 101.

use super::{HandshakeError, Header, MAX_HEADERS, bounded, collect_headers, find, has_token};
use crate::Parsed;
use crate::ws::accept::{accept_key, client_key};
use crate::ws::early_data::{self, EarlyDataCarrier};

/// Everything the client request needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientRequest<'a> {
    /// Path (query allowed; `ed` should already be stripped, see
    /// [`early_data::split_xray_ed`]). Normalised: "" ⇒ "/", leading "/" added.
    pub path: &'a str,
    /// `Host` header value.
    pub host: &'a str,
    /// Extra headers (e.g. User-Agent). Ones the handshake sets itself are skipped.
    pub headers: &'a [(&'a str, &'a str)],
    /// 16 random bytes for `Sec-WebSocket-Key`.
    pub key: [u8; 16],
    /// Early data and where it goes (already cut to size with
    /// [`early_data::ClientEarlyData::split`]). Empty data ⇒ nothing is sent.
    pub early_data: Option<(&'a EarlyDataCarrier, &'a [u8])>,
}

const RESERVED: [&str; 5] = [
    "host",
    "upgrade",
    "connection",
    "sec-websocket-key",
    "sec-websocket-version",
];

fn clean(s: &str) -> bool {
    !s.bytes().any(|c| c == b'\r' || c == b'\n' || c == 0)
}

/// Writes the upgrade request; returns the `Sec-WebSocket-Accept` value to expect.
pub fn build_request(req: &ClientRequest<'_>, out: &mut Vec<u8>) -> Result<String, HandshakeError> {
    if req.host.is_empty() || !clean(req.host) {
        return Err(HandshakeError::InvalidInput("host"));
    }
    if !clean(req.path) || req.path.bytes().any(|c| c == b' ' || c == b'\t') {
        return Err(HandshakeError::InvalidInput("path"));
    }
    let key = client_key(&req.key);
    let mut target = early_data::normalize_path(req.path);
    let mut early_header = None;
    if let Some((carrier, data)) = req.early_data
        && !data.is_empty()
    {
        let enc = early_data::encode(data);
        match carrier {
            EarlyDataCarrier::PathSuffix => target.push_str(&enc),
            EarlyDataCarrier::Header(name) => {
                let valid =
                    !name.is_empty() && name.bytes().all(|c| c.is_ascii_graphic() && c != b':');
                if !valid || RESERVED.iter().any(|r| name.eq_ignore_ascii_case(r)) {
                    return Err(HandshakeError::InvalidInput("early data header name"));
                }
                early_header = Some((name.as_str(), enc));
            }
        }
    }
    let mut s = format!(
        "GET {target} HTTP/1.1\r\nHost: {}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n",
        req.host
    );
    if let Some((name, value)) = &early_header {
        s.push_str(&format!("{name}: {value}\r\n"));
    }
    for (name, value) in req.headers {
        let skip = RESERVED.iter().any(|r| name.eq_ignore_ascii_case(r))
            || early_header
                .as_ref()
                .is_some_and(|(n, _)| name.eq_ignore_ascii_case(n));
        if skip {
            continue;
        }
        let name_ok = !name.is_empty() && name.bytes().all(|c| c.is_ascii_graphic() && c != b':');
        if !name_ok || !clean(value) {
            return Err(HandshakeError::InvalidInput("extra header"));
        }
        s.push_str(&format!("{name}: {value}\r\n"));
    }
    s.push_str("\r\n");
    out.extend_from_slice(s.as_bytes());
    Ok(accept_key(key.as_bytes()))
}

/// A validated 101.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerResponse {
    pub headers: Vec<Header>,
    /// Echoed `Sec-WebSocket-Protocol`, if any (Xray echoes accepted early data; its absence
    /// after sending early data in that header means the server did not take it).
    pub protocol: Option<String>,
}

/// Parses and validates the server's response against the expected accept value (as
/// returned by [`build_request`]). Bytes after the head are WebSocket frames.
pub fn parse_response(
    buf: &[u8],
    expected_accept: &str,
) -> Result<Parsed<ServerResponse>, HandshakeError> {
    bounded(buf, |view| {
        let mut raw = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut raw);
        let n = match resp.parse(view).map_err(super::map_httparse)? {
            httparse::Status::Complete(n) => n,
            httparse::Status::Partial => return Ok(None),
        };
        let code = resp.code.unwrap_or(0);
        if code != 101 {
            return Err(HandshakeError::BadStatus(code));
        }
        let headers = collect_headers(resp.headers);
        if !has_token(&headers, "upgrade", "websocket")
            || !has_token(&headers, "connection", "upgrade")
        {
            return Err(HandshakeError::MissingUpgrade);
        }
        let accept = find(&headers, "sec-websocket-accept").map(<[u8]>::trim_ascii);
        if accept != Some(expected_accept.as_bytes()) {
            return Err(HandshakeError::BadAccept);
        }
        let protocol = find(&headers, "sec-websocket-protocol")
            .and_then(|v| std::str::from_utf8(v).ok())
            .map(|v| v.trim().to_owned());
        Ok(Some((ServerResponse { headers, protocol }, n)))
    })
}
