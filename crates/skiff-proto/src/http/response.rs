//! Sans-IO response heads: parsing what an origin answers, re-serialising it for the client,
//! and the few responses the proxy writes itself.
//!
//! The canned responses are the plain shapes any proxy sends (status line, the one field
//! the status needs, an empty body, `Connection: close`); nothing on the wire names us.

use super::body::{self, BodyKind};
use super::headers::{self, Header};
use super::request::wants_keep_alive;
use super::{MAX_HEAD_LEN, MAX_HEADERS, Parse, ParseError, from_httparse};

/// A parsed response head.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProxyResponse {
    pub status: u16,
    pub reason: String,
    /// Minor version of HTTP/1.x.
    pub version: u8,
    pub headers: Vec<Header>,
    /// Bytes of the head, including its final empty line.
    pub head_len: usize,
    /// Whether the upstream connection can carry another request after this response:
    /// the origin did not ask to close, and the body has an exact, trustworthy end.
    pub keep_alive: bool,
    pub body: BodyKind,
}

impl ProxyResponse {
    /// 1xx other than 101: an interim response; the final one follows on the same stream.
    pub fn is_interim(&self) -> bool {
        (100..200).contains(&self.status) && self.status != 101
    }
}

/// Parses one response head from the start of `buf`. `request_was_head` says whether it
/// answers a HEAD request (then it has no body whatever its length fields say).
pub fn parse_response(
    buf: &[u8],
    request_was_head: bool,
) -> Result<Parse<ProxyResponse>, ParseError> {
    let window = &buf[..buf.len().min(MAX_HEAD_LEN)];
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut slots);
    let head_len = match resp.parse(window).map_err(from_httparse)? {
        httparse::Status::Complete(n) => n,
        httparse::Status::Partial if buf.len() >= MAX_HEAD_LEN => {
            return Err(ParseError::HeadTooLarge);
        }
        httparse::Status::Partial => return Ok(Parse::Incomplete),
    };
    let (Some(version), Some(status)) = (resp.version, resp.code) else {
        return Err(ParseError::Malformed("incomplete status line"));
    };
    if !(100..1000).contains(&status) {
        return Err(ParseError::Malformed("invalid status code"));
    }
    let reason = resp.reason.unwrap_or("").to_owned();
    let headers = headers::to_owned(resp.headers);
    let (body, dubious) = body::response_body(status, request_was_head, &headers, version)
        .map_err(ParseError::BadFraming)?;
    let keep_alive =
        !dubious && body != BodyKind::UntilClose && wants_keep_alive(&headers, version);
    Ok(Parse::Complete(ProxyResponse {
        status,
        reason,
        version,
        headers,
        head_len,
        keep_alive,
        body,
    }))
}

/// Writes the head to send the client: the status line, every end-to-end field, and our
/// own `Connection` (`close` unless `keep_alive`; `keep-alive` spelled out for HTTP/1.0).
/// Content-Length is dropped when Transfer-Encoding overrides it (RFC 9112 §6.3 rule 3).
/// Interim (1xx) heads get no Connection field: they do not end the exchange.
pub fn rewrite_for_client(resp: &ProxyResponse, keep_alive: bool, out: &mut Vec<u8>) {
    out.extend_from_slice(if resp.version == 0 {
        b"HTTP/1.0 "
    } else {
        b"HTTP/1.1 "
    });
    out.extend_from_slice(resp.status.to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(resp.reason.as_bytes());
    out.extend_from_slice(b"\r\n");
    let drop_length = resp.body == BodyKind::Chunked;
    for h in &resp.headers {
        if headers::is_hop_by_hop(h, &resp.headers) || (drop_length && h.is("content-length")) {
            continue;
        }
        headers::write_header(out, &h.name, &h.value);
    }
    if !(100..200).contains(&resp.status) {
        if !keep_alive {
            headers::write_header(out, "Connection", b"close");
        } else if resp.version == 0 {
            headers::write_header(out, "Connection", b"keep-alive");
        }
    }
    out.extend_from_slice(b"\r\n");
}

/// Answer to a CONNECT once the tunnel's far end is connected.
pub const CONNECTION_ESTABLISHED: &[u8] = b"HTTP/1.1 200 Connection established\r\n\r\n";

/// Challenge for missing or wrong credentials.
pub const PROXY_AUTH_REQUIRED: &[u8] = b"HTTP/1.1 407 Proxy Authentication Required\r\n\
Proxy-Authenticate: Basic realm=\"proxy\"\r\n\
Content-Length: 0\r\n\
Connection: close\r\n\r\n";

/// An error the proxy answers itself; every one closes the connection afterwards.
pub fn error_response(status: u16) -> Vec<u8> {
    let reason = match status {
        400 => "Bad Request",
        407 => return PROXY_AUTH_REQUIRED.to_vec(),
        431 => "Request Header Fields Too Large",
        502 => "Bad Gateway",
        504 => "Gateway Timeout",
        _ => "Error",
    };
    format!("HTTP/1.1 {status} {reason}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str, head: bool) -> Result<ProxyResponse, ParseError> {
        match parse_response(text.as_bytes(), head)? {
            Parse::Complete(resp) => Ok(resp),
            Parse::Incomplete => panic!("incomplete: {text:?}"),
        }
    }

    fn rewrite(resp: &ProxyResponse, keep_alive: bool) -> String {
        let mut out = Vec::new();
        rewrite_for_client(resp, keep_alive, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn parses_status_and_framing() {
        let r = parse("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", false).unwrap();
        assert_eq!((r.status, r.reason.as_str(), r.version), (200, "OK", 1));
        assert_eq!(r.body, BodyKind::Length(5));
        assert_eq!(r.head_len, 38);
        assert!(r.keep_alive);

        let head = parse("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", true).unwrap();
        assert_eq!(head.body, BodyKind::None);
        assert!(head.keep_alive);

        let chunked = parse(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            false,
        )
        .unwrap();
        assert_eq!(chunked.body, BodyKind::Chunked);
        assert!(chunked.keep_alive);

        let no_len = parse("HTTP/1.1 200 OK\r\n\r\n", false).unwrap();
        assert_eq!(no_len.body, BodyKind::UntilClose);
        assert!(!no_len.keep_alive);

        for status in [204, 304] {
            let r = parse(
                &format!("HTTP/1.1 {status} X\r\nContent-Length: 9\r\n\r\n"),
                false,
            );
            assert_eq!(r.unwrap().body, BodyKind::None);
        }
        let cont = parse("HTTP/1.1 100 Continue\r\n\r\n", false).unwrap();
        assert!(cont.is_interim());
        assert_eq!(cont.body, BodyKind::None);
    }

    #[test]
    fn keep_alive_of_responses() {
        let ka = |t: &str| parse(t, false).unwrap().keep_alive;
        assert!(!ka(
            "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
        ));
        assert!(!ka("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n"));
        assert!(ka(
            "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n"
        ));
        // Transfer-Encoding and Content-Length together: chunked wins, no reuse.
        let both = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert!(!ka(both));
    }

    #[test]
    fn rejects_bad_heads() {
        assert_eq!(
            parse_response(b"HTTP/1.1 200", false),
            Ok(Parse::Incomplete)
        );
        for bad in [
            "HTTP/2 200 OK\r\n\r\n",
            "HTTP/1.1 20 OK\r\n\r\n",
            "HTTP/1.1 099 Odd\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
            "SSH-2.0-OpenSSH\r\n\r\n",
        ] {
            assert!(parse_response(bad.as_bytes(), false).is_err(), "{bad:?}");
        }
        let mut big = b"HTTP/1.1 200 OK\r\nX: ".to_vec();
        big.resize(MAX_HEAD_LEN + 10, b'a');
        assert_eq!(parse_response(&big, false), Err(ParseError::HeadTooLarge));
    }

    #[test]
    fn rewrite_drops_hop_by_hop_and_sets_connection() {
        let r = parse(
            "HTTP/1.1 200 OK\r\nConnection: X-Hop\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\n\
             Content-Length: 2\r\nServer: origin\r\n\r\nhi",
            false,
        )
        .unwrap();
        assert_eq!(
            rewrite(&r, true),
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nServer: origin\r\n\r\n"
        );
        assert_eq!(
            rewrite(&r, false),
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nServer: origin\r\nConnection: close\r\n\r\n"
        );
        let both = parse(
            "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
            false,
        )
        .unwrap();
        assert_eq!(
            rewrite(&both, false),
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        );
        let old = parse(
            "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n",
            false,
        )
        .unwrap();
        assert_eq!(
            rewrite(&old, true),
            "HTTP/1.0 200 OK\r\nContent-Length: 0\r\nConnection: keep-alive\r\n\r\n"
        );
        let interim = parse("HTTP/1.1 100 Continue\r\n\r\n", false).unwrap();
        assert_eq!(rewrite(&interim, false), "HTTP/1.1 100 Continue\r\n\r\n");
    }

    #[test]
    fn canned_responses_are_generic() {
        assert_eq!(
            CONNECTION_ESTABLISHED,
            b"HTTP/1.1 200 Connection established\r\n\r\n"
        );
        for status in [400, 407, 431, 502, 504] {
            let bytes = error_response(status);
            let text = String::from_utf8(bytes.clone()).unwrap();
            assert!(text.starts_with(&format!("HTTP/1.1 {status} ")), "{text}");
            assert!(!text.to_ascii_lowercase().contains("skiff"));
            // Each parses as a complete, bodiless, closing response.
            let r = parse(&text, false).unwrap();
            assert_eq!(
                (r.status, r.body, r.keep_alive, r.head_len),
                (status, BodyKind::None, false, bytes.len())
            );
        }
        let auth = String::from_utf8(error_response(407)).unwrap();
        assert!(auth.contains("\r\nProxy-Authenticate: Basic realm=\"proxy\"\r\n"));
    }
}
