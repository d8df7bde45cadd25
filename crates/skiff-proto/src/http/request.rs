//! Sans-IO request-head parsing for a proxy (RFC 9112 §3), and the rewrite that turns a
//! proxy request into the origin-form request the next hop expects.

use std::net::Ipv6Addr;

use skiff_core::Address;

use super::auth;
use super::body::{self, BodyFramer, BodyKind};
use super::headers::{self, Header};
use super::response;
use super::{MAX_HEAD_LEN, MAX_HEADERS, Parse, ParseError, from_httparse};

/// What the client asked the proxy to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RequestKind {
    /// `CONNECT host:port`: open a tunnel.
    Connect,
    /// Forward the request itself to `target`.
    Forward {
        /// Origin-form target to send upstream (`/path?query`, never empty).
        path_and_query: String,
        /// The `Host` value to send upstream: the authority of an absolute-form target
        /// (RFC 9112 §3.2.2 says it replaces any received Host), or the received Host in
        /// transparent mode.
        host: String,
    },
}

/// A parsed request head.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProxyRequest {
    pub method: String,
    /// Where to connect: the CONNECT authority, the absolute-form authority (port 80 by
    /// default), or the Host header in transparent mode.
    pub target: Address,
    pub kind: RequestKind,
    /// Minor version of HTTP/1.x.
    pub version: u8,
    pub headers: Vec<Header>,
    /// Bytes of the head, including its final empty line; what follows is body or tunnel data.
    pub head_len: usize,
    /// Whether the client wants the connection kept open after this exchange.
    pub keep_alive: bool,
    /// Decoded Basic `Proxy-Authorization`, if present and well formed.
    pub proxy_auth: Option<(String, String)>,
    /// How the request body is delimited (always `None` for CONNECT, whose following bytes
    /// are tunnel payload).
    pub body: BodyKind,
}

/// Parses one request head from the start of `buf`.
///
/// Origin-form targets (`GET /x`) are accepted only with `allow_transparent`, taking the
/// destination from the Host header; otherwise they are [`ParseError::NotProxyRequest`].
pub fn parse_request(
    buf: &[u8],
    allow_transparent: bool,
) -> Result<Parse<ProxyRequest>, ParseError> {
    let window = &buf[..buf.len().min(MAX_HEAD_LEN)];
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut slots);
    let head_len = match req.parse(window).map_err(from_httparse)? {
        httparse::Status::Complete(n) => n,
        httparse::Status::Partial if buf.len() >= MAX_HEAD_LEN => {
            return Err(ParseError::HeadTooLarge);
        }
        httparse::Status::Partial => return Ok(Parse::Incomplete),
    };
    // Complete implies all three are set; treat a surprise as malformed rather than panic.
    let (Some(method), Some(path), Some(version)) = (req.method, req.path, req.version) else {
        return Err(ParseError::Malformed("incomplete request line"));
    };
    let headers = headers::to_owned(req.headers);

    let (target, kind) = if method == "CONNECT" {
        // RFC 9112 §3.2.3: authority-form, port required.
        (parse_authority(path, None)?, RequestKind::Connect)
    } else if path.starts_with('/') {
        if !allow_transparent {
            return Err(ParseError::NotProxyRequest);
        }
        let host = single_host(&headers)?;
        let target = parse_authority(&host, Some(80))?;
        let kind = RequestKind::Forward {
            path_and_query: path.to_owned(),
            host,
        };
        (target, kind)
    } else {
        parse_absolute(path)?
    };

    let body = match kind {
        RequestKind::Connect => BodyKind::None,
        RequestKind::Forward { .. } => {
            body::request_body(&headers, version).map_err(ParseError::BadFraming)?
        }
    };
    let keep_alive = wants_keep_alive(&headers, version);
    let proxy_auth = headers::values(&headers, "proxy-authorization")
        .next()
        .and_then(auth::parse_basic);

    Ok(Parse::Complete(ProxyRequest {
        method: method.to_owned(),
        target,
        kind,
        version,
        headers,
        head_len,
        keep_alive,
        proxy_auth,
        body,
    }))
}

/// HTTP/1.1 persists unless told `close`; HTTP/1.0 only with `keep-alive` (RFC 9112 §9.3).
/// Old clients say it in `Proxy-Connection`, so that counts too.
pub(crate) fn wants_keep_alive(headers: &[Header], version: u8) -> bool {
    let said = |token| {
        headers::has_token(headers, "connection", token)
            || headers::has_token(headers, "proxy-connection", token)
    };
    !said("close") && (version >= 1 || said("keep-alive"))
}

/// The Host header of a transparent request: exactly one, valid UTF-8 (RFC 9112 §3.2).
fn single_host(headers: &[Header]) -> Result<String, ParseError> {
    let mut hosts = headers::values(headers, "host");
    match (hosts.next(), hosts.next()) {
        (Some(host), None) => std::str::from_utf8(host)
            .map(str::to_owned)
            .map_err(|_| ParseError::BadTarget("Host is not text")),
        (None, _) => Err(ParseError::BadTarget("missing Host")),
        (Some(_), Some(_)) => Err(ParseError::BadTarget("several Host fields")),
    }
}

/// `http://[userinfo@]host[:port][/path][?query][#fragment]` (RFC 9112 §3.2.2).
fn parse_absolute(uri: &str) -> Result<(Address, RequestKind), ParseError> {
    let (scheme, rest) = uri
        .split_once("://")
        .ok_or(ParseError::BadTarget("not an absolute URI"))?;
    if !scheme.eq_ignore_ascii_case("http") {
        // https:// and others would need us to speak TLS upstream; clients use CONNECT.
        return Err(ParseError::BadTarget("unsupported scheme"));
    }
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    // Userinfo in a URI is deprecated (RFC 9110 §4.2.4) and never forwarded.
    let authority = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let target = parse_authority(authority, Some(80))?;
    let tail = tail.split_once('#').map_or(tail, |(before, _)| before);
    let path_and_query = match tail.as_bytes().first() {
        None => "/".to_owned(),
        Some(b'?') => format!("/{tail}"),
        Some(_) => tail.to_owned(),
    };
    let kind = RequestKind::Forward {
        path_and_query,
        host: authority.to_owned(),
    };
    Ok((target, kind))
}

/// `host[:port]` or `[v6][:port]`. `default_port` is used when the port is absent or empty
/// (RFC 3986 allows `host:`); `None` makes the port mandatory, as CONNECT requires.
fn parse_authority(text: &str, default_port: Option<u16>) -> Result<Address, ParseError> {
    let (host, port) = if let Some(bracketed) = text.strip_prefix('[') {
        let (inside, after) = bracketed
            .split_once(']')
            .ok_or(ParseError::BadTarget("unclosed IPv6 literal"))?;
        let ip: Ipv6Addr = inside
            .parse()
            .map_err(|_| ParseError::BadTarget("bad IPv6 literal"))?;
        let port = match after {
            "" => None,
            _ => Some(
                after
                    .strip_prefix(':')
                    .ok_or(ParseError::BadTarget("junk after IPv6 literal"))?,
            ),
        };
        (HostPart::Ip(ip), port)
    } else {
        let (host, port) = match text.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (text, None),
        };
        if !is_reg_name(host) {
            return Err(ParseError::BadTarget("bad host"));
        }
        (HostPart::Name(host), port)
    };
    let port = match port {
        None | Some("") => default_port.ok_or(ParseError::BadTarget("missing port"))?,
        Some(digits) => parse_port(digits).ok_or(ParseError::BadTarget("bad port"))?,
    };
    Ok(match host {
        HostPart::Ip(ip) => Address::Ip((ip, port).into()),
        // Domain names are case-insensitive; lower-case them so routing rules match.
        HostPart::Name(name) => Address::from_host(&name.to_ascii_lowercase(), port),
    })
}

enum HostPart<'a> {
    Ip(Ipv6Addr),
    Name(&'a str),
}

/// A DNS name or IPv4 literal. Stricter than RFC 3986's reg-name (no percent-encoding or
/// sub-delims): those never name a reachable host, and letting them through would hand odd
/// strings to routing and DNS.
fn is_reg_name(host: &str) -> bool {
    !host.is_empty()
        && host.len() <= 255
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
}

fn parse_port(digits: &str) -> Option<u16> {
    if digits.is_empty() || digits.len() > 5 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|&p| p != 0)
}

/// Writes the head to send upstream for a forwarded request:
/// - the request line in origin-form, with the client's HTTP version;
/// - `Host` first, from the target (any received Host is replaced);
/// - every other field except the hop-by-hop ones ([`headers::is_hop_by_hop`]): in
///   particular `Proxy-Authorization` never leaves the proxy, and `Upgrade` is dropped
///   (no protocol switching on forwarded requests);
/// - `Transfer-Encoding` / `Content-Length` kept, because the body is relayed verbatim;
/// - our own `Connection`: `close` if the client is not keep-alive, `keep-alive` for a
///   persistent HTTP/1.0 client, nothing otherwise (1.1 persists by default).
///
/// For a CONNECT request it writes the equivalent CONNECT head (used only by tests and
/// the fuzz harness; the server tunnels CONNECT itself).
pub fn rewrite_for_upstream(req: &ProxyRequest, out: &mut Vec<u8>) {
    let (target, host) = match &req.kind {
        RequestKind::Connect => {
            let authority = req.target.to_string();
            (authority.clone(), authority)
        }
        RequestKind::Forward {
            path_and_query,
            host,
        } => (path_and_query.clone(), host.clone()),
    };
    out.extend_from_slice(req.method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(target.as_bytes());
    out.extend_from_slice(if req.version == 0 {
        b" HTTP/1.0\r\n"
    } else {
        b" HTTP/1.1\r\n"
    });
    headers::write_header(out, "Host", host.as_bytes());
    for h in &req.headers {
        if h.is("host") || headers::is_hop_by_hop(h, &req.headers) {
            continue;
        }
        headers::write_header(out, &h.name, &h.value);
    }
    if !req.keep_alive {
        headers::write_header(out, "Connection", b"close");
    } else if req.version == 0 {
        headers::write_header(out, "Connection", b"keep-alive");
    }
    out.extend_from_slice(b"\r\n");
}

/// Runs every parser on arbitrary input: the request parser (both modes) and its rewrite,
/// the response parser (after GET and after HEAD) and its rewrite, and the body framer in
/// each mode, fed whole and split. Panics only on a broken invariant; the fuzz target
/// and the property tests call it.
pub fn fuzz_parse_all(data: &[u8]) {
    for transparent in [false, true] {
        if let Ok(Parse::Complete(req)) = parse_request(data, transparent) {
            assert!(req.head_len <= data.len() && req.head_len <= MAX_HEAD_LEN);
            let mut out = Vec::new();
            rewrite_for_upstream(&req, &mut out);
            if let RequestKind::Forward { .. } = req.kind {
                // What we send upstream must parse back to the same request.
                match parse_request(&out, true) {
                    Ok(Parse::Complete(again)) => {
                        assert_eq!(again.target, req.target);
                        assert_eq!(again.method, req.method);
                        assert_eq!(again.body, req.body);
                        assert_eq!(again.keep_alive, req.keep_alive);
                        assert_eq!(again.proxy_auth, None);
                        assert_eq!(again.head_len, out.len());
                    }
                    // Only possible when the rewrite adds fields past the limits.
                    Ok(Parse::Incomplete) => panic!("rewritten head is incomplete"),
                    Err(err) => assert!(err.status() == 431, "rewrite did not parse: {err}"),
                }
            }
            frame_consistently(req.body, &data[req.head_len..]);
        }
    }
    for head in [false, true] {
        if let Ok(Parse::Complete(resp)) = response::parse_response(data, head) {
            assert!(resp.head_len <= data.len() && resp.head_len <= MAX_HEAD_LEN);
            let mut out = Vec::new();
            response::rewrite_for_client(&resp, resp.keep_alive, &mut out);
            // What we send the client must parse back to the same status and framing.
            match response::parse_response(&out, head) {
                Ok(Parse::Complete(again)) => {
                    assert_eq!((again.status, again.body), (resp.status, resp.body));
                    assert_eq!(again.head_len, out.len());
                }
                Ok(Parse::Incomplete) => panic!("rewritten response head is incomplete"),
                Err(err) => assert!(err.status() == 431, "rewrite did not parse: {err}"),
            }
            frame_consistently(resp.body, &data[resp.head_len..]);
        }
    }
    for kind in [
        BodyKind::Chunked,
        BodyKind::Length(data.len() as u64 / 2),
        BodyKind::UntilClose,
    ] {
        frame_consistently(kind, data);
    }
}

/// Framing must not depend on how the input is split.
fn frame_consistently(kind: BodyKind, data: &[u8]) {
    let mut whole = BodyFramer::new(kind);
    let one = whole.feed(data);
    let mut split = BodyFramer::new(kind);
    let mid = data.len() / 2;
    let two = split.feed(&data[..mid]).and_then(|a| {
        if split.is_complete() {
            Ok(a)
        } else {
            split.feed(&data[mid..]).map(|b| a + b)
        }
    });
    match (&one, &two) {
        (Ok(a), Ok(b)) => {
            assert_eq!(a, b);
            assert!(*a <= data.len());
            assert_eq!(whole.is_complete(), split.is_complete());
        }
        (Err(_), Err(_)) => {}
        _ => panic!("framing depends on the split: {one:?} vs {two:?}"),
    }
    let _ = whole.finish_eof();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ProxyRequest, ParseError> {
        match parse_request(text.as_bytes(), false)? {
            Parse::Complete(req) => Ok(req),
            Parse::Incomplete => panic!("incomplete: {text:?}"),
        }
    }

    fn rewrite(req: &ProxyRequest) -> String {
        let mut out = Vec::new();
        rewrite_for_upstream(req, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn connect_authority_form() {
        let text = "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\nTLS";
        let req = parse(text).unwrap();
        assert_eq!(req.kind, RequestKind::Connect);
        assert_eq!(req.target, Address::Domain("example.com".into(), 443));
        assert_eq!(req.head_len, text.len() - 3);
        assert_eq!(req.body, BodyKind::None);
        assert!(req.keep_alive);

        let v6 = parse("CONNECT [2001:db8::1]:8443 HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!(
            v6.target,
            Address::Ip("[2001:db8::1]:8443".parse().unwrap())
        );
        let v4 = parse("CONNECT 10.0.0.1:22 HTTP/1.0\r\n\r\n").unwrap();
        assert_eq!(v4.target, Address::Ip("10.0.0.1:22".parse().unwrap()));
        assert!(!v4.keep_alive);
        let upper = parse("CONNECT ExAmple.COM:443 HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!(upper.target, Address::Domain("example.com".into(), 443));
    }

    #[test]
    fn connect_rejects_bad_authorities() {
        for target in [
            "example.com",
            "example.com:",
            "example.com:0",
            "example.com:65536",
            "example.com:+443",
            ":443",
            "[::1]",
            "[::1:443",
            "[zz::1]:443",
            "[::1]x:443",
            "2001:db8::1:443",
            "exa%20mple.com:443",
            "user@example.com:443",
            "http://example.com:443",
        ] {
            let text = format!("CONNECT {target} HTTP/1.1\r\n\r\n");
            let err = parse(&text).unwrap_err();
            assert!(matches!(err, ParseError::BadTarget(_)), "{target}: {err:?}");
            assert_eq!(err.status(), 400);
        }
    }

    #[test]
    fn absolute_form_targets() {
        let req =
            parse("GET http://example.com/a/b?c=d#frag HTTP/1.1\r\nHost: evil\r\n\r\n").unwrap();
        assert_eq!(req.target, Address::Domain("example.com".into(), 80));
        assert_eq!(
            req.kind,
            RequestKind::Forward {
                path_and_query: "/a/b?c=d".into(),
                host: "example.com".into()
            }
        );
        let cases = [
            (
                "http://example.com:8080",
                Address::Domain("example.com".into(), 8080),
                "/",
            ),
            (
                "HTTP://example.com?q",
                Address::Domain("example.com".into(), 80),
                "/?q",
            ),
            (
                "http://example.com:/x",
                Address::Domain("example.com".into(), 80),
                "/x",
            ),
            (
                "http://u:p@example.com/x",
                Address::Domain("example.com".into(), 80),
                "/x",
            ),
            (
                "http://[::1]:81/",
                Address::Ip("[::1]:81".parse().unwrap()),
                "/",
            ),
            (
                "http://[::1]/",
                Address::Ip("[::1]:80".parse().unwrap()),
                "/",
            ),
            (
                "http://127.0.0.1/",
                Address::Ip("127.0.0.1:80".parse().unwrap()),
                "/",
            ),
        ];
        for (uri, target, path) in cases {
            let req = parse(&format!("GET {uri} HTTP/1.1\r\n\r\n")).unwrap();
            assert_eq!(req.target, target, "{uri}");
            match req.kind {
                RequestKind::Forward { path_and_query, .. } => assert_eq!(path_and_query, path),
                other => panic!("{other:?}"),
            }
        }
        for bad in [
            "https://example.com/",
            "ftp://x/",
            "*",
            "example.com/",
            "http:///x",
            "http://a b/",
        ] {
            let text = format!("GET {bad} HTTP/1.1\r\n\r\n");
            assert!(parse(&text).is_err(), "{bad}");
        }
    }

    #[test]
    fn origin_form_needs_transparent_mode() {
        let text = "GET /x?y HTTP/1.1\r\nHost: Example.com:8080\r\n\r\n";
        assert_eq!(parse(text), Err(ParseError::NotProxyRequest));
        let Ok(Parse::Complete(req)) = parse_request(text.as_bytes(), true) else {
            panic!("transparent parse failed");
        };
        assert_eq!(req.target, Address::Domain("example.com".into(), 8080));
        assert_eq!(
            req.kind,
            RequestKind::Forward {
                path_and_query: "/x?y".into(),
                host: "Example.com:8080".into()
            }
        );
        let missing = parse_request(b"GET / HTTP/1.1\r\n\r\n", true);
        assert_eq!(missing, Err(ParseError::BadTarget("missing Host")));
        let twice = parse_request(b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", true);
        assert_eq!(twice, Err(ParseError::BadTarget("several Host fields")));
    }

    #[test]
    fn incomplete_and_oversized_heads() {
        let text = b"GET http://example.com/ HTTP/1.1\r\nAccept: */*\r\n\r\n";
        for cut in 0..text.len() {
            assert_eq!(
                parse_request(&text[..cut], false),
                Ok(Parse::Incomplete),
                "cut {cut}"
            );
        }
        let mut big = b"GET http://example.com/ HTTP/1.1\r\nX: ".to_vec();
        big.resize(MAX_HEAD_LEN, b'a');
        assert_eq!(parse_request(&big, false), Err(ParseError::HeadTooLarge));
        big.truncate(MAX_HEAD_LEN - 1);
        assert_eq!(parse_request(&big, false), Ok(Parse::Incomplete));

        let mut many = "GET http://example.com/ HTTP/1.1\r\n".to_owned();
        for i in 0..=MAX_HEADERS {
            many.push_str(&format!("X-{i}: v\r\n"));
        }
        many.push_str("\r\n");
        let err = parse(&many).unwrap_err();
        assert_eq!(err, ParseError::TooManyHeaders);
        assert_eq!(err.status(), 431);
    }

    #[test]
    fn malformed_heads() {
        let tls_hello: &[u8] = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03";
        assert!(parse_request(tls_hello, false).is_err());
        for bad in [
            "GET http://example.com/ HTTP/2.0\r\n\r\n",
            "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
            "GET  http://example.com/ HTTP/1.1\r\n\r\n",
            "GET http://example.com/ HTTP/1.1\r\nBad Name: x\r\n\r\n",
            "GET http://example.com/ HTTP/1.1\r\nX: a\r\n b\r\n\r\n",
            "GET http://example.com/ HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
            "POST http://example.com/ HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
        ] {
            let err = parse_request(bad.as_bytes(), false);
            assert!(err.is_err(), "{bad:?}: {err:?}");
        }
    }

    #[test]
    fn keep_alive_rules() {
        let ka = |text: &str| parse(text).unwrap().keep_alive;
        assert!(ka("GET http://a/ HTTP/1.1\r\n\r\n"));
        assert!(!ka("GET http://a/ HTTP/1.1\r\nConnection: Close\r\n\r\n"));
        assert!(!ka(
            "GET http://a/ HTTP/1.1\r\nProxy-Connection: close\r\n\r\n"
        ));
        assert!(!ka("GET http://a/ HTTP/1.0\r\n\r\n"));
        assert!(ka(
            "GET http://a/ HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"
        ));
        assert!(ka(
            "GET http://a/ HTTP/1.0\r\nProxy-Connection: keep-alive\r\n\r\n"
        ));
    }

    #[test]
    fn proxy_authorization() {
        let req =
            parse("GET http://a/ HTTP/1.1\r\nProxy-Authorization: Basic dTpw\r\n\r\n").unwrap();
        assert_eq!(req.proxy_auth, Some(("u".into(), "p".into())));
        let bad = parse("GET http://a/ HTTP/1.1\r\nProxy-Authorization: Basic !!\r\n\r\n").unwrap();
        assert_eq!(bad.proxy_auth, None);
        let none = parse("GET http://a/ HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!(none.proxy_auth, None);
    }

    #[test]
    fn rewrite_strips_hop_by_hop() {
        let req = parse(
            "POST http://example.com:8080/p?q HTTP/1.1\r\n\
             Host: wrong\r\n\
             Proxy-Authorization: Basic dTpw\r\n\
             Proxy-Connection: keep-alive\r\n\
             Connection: keep-alive, X-Secret\r\n\
             Keep-Alive: timeout=5\r\n\
             TE: trailers\r\n\
             Upgrade: websocket\r\n\
             X-Secret: 1\r\n\
             Trailer: X-Sum\r\n\
             Transfer-Encoding: chunked\r\n\
             Accept: */*\r\n\r\n",
        )
        .unwrap();
        assert_eq!(req.body, BodyKind::Chunked);
        assert_eq!(
            rewrite(&req),
            "POST /p?q HTTP/1.1\r\n\
             Host: example.com:8080\r\n\
             Trailer: X-Sum\r\n\
             Transfer-Encoding: chunked\r\n\
             Accept: */*\r\n\r\n"
        );
    }

    #[test]
    fn rewrite_connection_and_version() {
        let closing = parse("GET http://a/ HTTP/1.1\r\nConnection: close\r\n\r\n").unwrap();
        assert_eq!(
            rewrite(&closing),
            "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
        );
        let old = parse("GET http://a/ HTTP/1.0\r\nProxy-Connection: keep-alive\r\n\r\n").unwrap();
        assert_eq!(
            rewrite(&old),
            "GET / HTTP/1.0\r\nHost: a\r\nConnection: keep-alive\r\n\r\n"
        );
        let old_close = parse("GET http://a/ HTTP/1.0\r\n\r\n").unwrap();
        assert_eq!(
            rewrite(&old_close),
            "GET / HTTP/1.0\r\nHost: a\r\nConnection: close\r\n\r\n"
        );
        let v6 = parse("GET http://[::1]:81/ HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!(rewrite(&v6), "GET / HTTP/1.1\r\nHost: [::1]:81\r\n\r\n");
    }

    #[test]
    fn fuzz_entry_handles_samples() {
        fuzz_parse_all(b"");
        fuzz_parse_all(
            b"GET http://a/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
        );
        fuzz_parse_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi");
        fuzz_parse_all(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: host\r\n\r\n");
    }
}
