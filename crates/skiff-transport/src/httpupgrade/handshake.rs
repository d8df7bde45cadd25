//! The HTTPUpgrade heads, sans-IO: the client's request, the server's verdict on it, the 101
//! and the client's check of it. Each parse reports how many bytes the head used: whatever
//! follows already belongs to the stream.

use crate::Parsed;

/// Longest head read: Xray reads the request through a 12 KiB limit.
pub const MAX_HEAD_LEN: usize = 12 * 1024;
const MAX_HEADERS: usize = 64;

/// The server's whole answer to an upgrade, as Xray's Go server writes it.
pub const RESPONSE: &[u8] =
    b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n";

/// The client's request. `path` is sent as given (normalised, `ed` already removed);
/// `headers` come from the config, which has refused `Host` and line breaks among them.
pub fn request(path: &str, host: &str, headers: &[(String, String)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    for part in ["GET ", path, " HTTP/1.1\r\nHost: ", host, "\r\n"] {
        out.extend_from_slice(part.as_bytes());
    }
    for (name, value) in headers {
        let reserved = ["connection", "upgrade"];
        if reserved.iter().any(|r| name.eq_ignore_ascii_case(r)) {
            continue;
        }
        for part in [name.as_str(), ": ", value.as_str(), "\r\n"] {
            out.extend_from_slice(part.as_bytes());
        }
    }
    out.extend_from_slice(b"Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
    out
}

/// What the server decided on a complete request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Upgrade,
    /// Not an upgrade for this inbound; the reason is for the log only.
    Refuse(&'static str),
}

/// Judges the request at the start of `buf` as Xray's server does: the path (without its
/// query, percent-decoded) must equal `path`; `host`, when configured, must equal the request
/// host without its port (case-insensitive); `Connection` must be `upgrade` and `Upgrade`
/// `websocket`, each the whole (first) value, any case. The method is not checked. Err: not
/// HTTP, or no complete head within [`MAX_HEAD_LEN`].
pub fn parse_request(
    buf: &[u8],
    path: &str,
    host: Option<&str>,
) -> Result<Parsed<Verdict>, &'static str> {
    let view = &buf[..buf.len().min(MAX_HEAD_LEN)];
    let mut raw = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut raw);
    let n = match req.parse(view) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() >= MAX_HEAD_LEN => {
            return Err("request head too large");
        }
        Ok(httparse::Status::Partial) => return Ok(Parsed::Incomplete),
        Err(_) => return Err("not an HTTP request"),
    };
    let target = req.path.unwrap_or("");
    let Some(got_path) = percent_decoded(target.split('?').next().unwrap_or("")) else {
        return Err("bad escape in the request path");
    };
    let verdict = if got_path != path {
        Verdict::Refuse("bad path")
    } else if host.is_some_and(|want| !host_matches(header(req.headers, "host"), want)) {
        Verdict::Refuse("bad host")
    } else if !is(header(req.headers, "connection"), "upgrade")
        || !is(header(req.headers, "upgrade"), "websocket")
    {
        Verdict::Refuse("not an upgrade request")
    } else {
        Verdict::Upgrade
    };
    Ok(Parsed::Complete(verdict, n))
}

/// Checks the server's answer at the start of `buf` as Xray's client does: the status line
/// must read `101 Switching Protocols`, with `Upgrade: websocket` and `Connection: upgrade`.
pub fn parse_response(buf: &[u8]) -> Result<Parsed<()>, &'static str> {
    let view = &buf[..buf.len().min(MAX_HEAD_LEN)];
    let mut raw = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut raw);
    let n = match resp.parse(view) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() >= MAX_HEAD_LEN => {
            return Err("response head too large");
        }
        Ok(httparse::Status::Partial) => return Ok(Parsed::Incomplete),
        Err(_) => return Err("not an HTTP response"),
    };
    let switching = resp.code == Some(101) && resp.reason == Some("Switching Protocols");
    if !switching
        || !is(header(resp.headers, "upgrade"), "websocket")
        || !is(header(resp.headers, "connection"), "upgrade")
    {
        return Err("unrecognized reply to the upgrade");
    }
    Ok(Parsed::Complete((), n))
}

/// The first value of header `name`.
fn header<'h>(headers: &'h [httparse::Header<'_>], name: &str) -> Option<&'h [u8]> {
    headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case(name))
        .map(|h| h.value.trim_ascii())
}

fn is(value: Option<&[u8]>, want: &str) -> bool {
    value.is_some_and(|v| v.eq_ignore_ascii_case(want.as_bytes()))
}

/// The request host equals `want` (case-insensitive), a port ignored; a host with a colon
/// that is not `name:port` or `[v6]:port` matches nothing, as Go's `SplitHostPort` fails.
fn host_matches(got: Option<&[u8]>, want: &str) -> bool {
    let Some(got) = got.and_then(|g| std::str::from_utf8(g).ok()) else {
        return false;
    };
    let name = if got.contains(':') {
        without_port(got).unwrap_or("")
    } else {
        got
    };
    name.eq_ignore_ascii_case(want)
}

fn without_port(host: &str) -> Option<&str> {
    match host.strip_prefix('[') {
        Some(rest) => {
            let (name, after) = rest.split_once(']')?;
            after.starts_with(':').then_some(name)
        }
        None => {
            let (name, _port) = host.rsplit_once(':')?;
            (!name.contains(':')).then_some(name)
        }
    }
}

/// `%XX` escapes decoded; None for a malformed escape or a result that is not UTF-8.
fn percent_decoded(path: &str) -> Option<String> {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(head: &str, host: Option<&str>) -> Verdict {
        match parse_request(head.as_bytes(), "/up", host) {
            Ok(Parsed::Complete(v, n)) => {
                assert_eq!(n, head.len());
                v
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn requests_are_judged_as_xray_judges_them() {
        let up = "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n";
        let head =
            |target: &str, host: &str| format!("GET {target} HTTP/1.1\r\nHost: {host}\r\n{up}");
        assert_eq!(
            verdict(&head("/up", "h.example"), Some("h.example")),
            Verdict::Upgrade
        );
        assert_eq!(
            verdict(&head("/up?x=1", "H.example:8080"), Some("h.example")),
            Verdict::Upgrade
        );
        assert_eq!(verdict(&head("/u%70", "a"), None), Verdict::Upgrade);
        assert_eq!(
            verdict(&head("/upx", "a"), None),
            Verdict::Refuse("bad path")
        );
        assert_eq!(
            verdict(&head("/up", "other"), Some("h.example")),
            Verdict::Refuse("bad host")
        );
        // The whole value must be `upgrade`: a token list does not do (Xray compares strings).
        let listed = "GET /up HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n\r\n";
        assert_eq!(
            verdict(listed, None),
            Verdict::Refuse("not an upgrade request")
        );
        let plain = "GET /up HTTP/1.1\r\nHost: a\r\n\r\n";
        assert_eq!(
            verdict(plain, None),
            Verdict::Refuse("not an upgrade request")
        );
        assert!(parse_request(b"garbage\r\n\r\n", "/up", None).is_err());
        assert_eq!(
            parse_request(b"GET /up HTTP/1.1\r\n", "/up", None),
            Ok(Parsed::Incomplete)
        );
        assert!(parse_request(&vec![b'a'; MAX_HEAD_LEN], "/up", None).is_err());
    }

    #[test]
    fn the_request_and_the_101_meet() {
        let headers = [
            ("X-A".to_owned(), "1".to_owned()),
            ("connection".to_owned(), "x".to_owned()),
        ];
        let mut sent = request("/up", "h.example", &headers);
        let head_len = sent.len();
        sent.extend_from_slice(b"first bytes");
        let text = String::from_utf8_lossy(&sent[..head_len]).into_owned();
        assert!(
            text.contains("\r\nX-A: 1\r\n") && !text.contains("connection: x"),
            "{text}"
        );
        assert_eq!(
            parse_request(&sent, "/up", Some("h.example")),
            Ok(Parsed::Complete(Verdict::Upgrade, head_len))
        );
        let mut answer = RESPONSE.to_vec();
        answer.extend_from_slice(b"data");
        assert_eq!(
            parse_response(&answer),
            Ok(Parsed::Complete((), RESPONSE.len()))
        );
        assert_eq!(parse_response(&RESPONSE[..10]), Ok(Parsed::Incomplete));
        assert!(parse_response(b"HTTP/1.1 200 OK\r\n\r\n").is_err());
        assert!(
            parse_response(
                b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: upgrade\r\n\r\n"
            )
            .is_err()
        );
    }
}
