//! Owned header fields and the hop-by-hop rules a proxy applies when it forwards a message.
//!
//! Heads are re-serialised, never copied raw: httparse tolerates bare-LF line endings and
//! similar leniencies, and emitting our own canonical `name: value\r\n` lines means the next
//! hop never sees an ambiguity we accepted.

/// One header field, owned so a parsed head outlives the read buffer. Values stay bytes:
/// RFC 9110 §5.5 allows obs-text, which is not UTF-8.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub name: String,
    pub value: Vec<u8>,
}

impl Header {
    pub fn new(name: impl Into<String>, value: impl Into<Vec<u8>>) -> Header {
        Header {
            name: name.into(),
            value: value.into(),
        }
    }

    pub fn is(&self, name: &str) -> bool {
        self.name.eq_ignore_ascii_case(name)
    }
}

/// Copies httparse's borrowed fields into owned ones.
pub(crate) fn to_owned(parsed: &[httparse::Header<'_>]) -> Vec<Header> {
    parsed
        .iter()
        .map(|h| Header::new(h.name, h.value))
        .collect()
}

/// Values of every field called `name`, in order.
pub fn values<'a>(headers: &'a [Header], name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
    headers
        .iter()
        .filter(move |h| h.is(name))
        .map(|h| h.value.as_slice())
}

/// Splits a comma-separated list value (RFC 9110 §5.6.1) into trimmed, non-empty elements.
pub fn list_items(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|&b| b == b',')
        .map(trim_ows)
        .filter(|item| !item.is_empty())
}

/// Strips optional whitespace (SP / HTAB) from both ends.
pub fn trim_ows(mut bytes: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = bytes {
        bytes = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = bytes {
        bytes = rest;
    }
    bytes
}

/// Whether any element of any `name` field equals `token`, case-insensitively.
pub fn has_token(headers: &[Header], name: &str, token: &str) -> bool {
    values(headers, name)
        .flat_map(list_items)
        .any(|item| item.eq_ignore_ascii_case(token.as_bytes()))
}

/// Fields that describe one hop (client↔proxy or proxy↔origin) and so are never forwarded.
///
/// `Transfer-Encoding` is deliberately absent: we relay bodies byte for byte, so the framing
/// header has to travel with the bytes it frames. `Trailer` is absent too: RFC 9110 §6.6.2
/// makes it end-to-end, and the chunked trailer section it announces is relayed verbatim.
/// `Upgrade` is dropped: protocol switches over a forwarded request are not supported
/// (WebSocket clients behind an HTTP proxy use CONNECT, which is a plain tunnel).
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "proxy-connection",
    "keep-alive",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "upgrade",
];

/// Whether `header` must be dropped when forwarding, given the whole field list (for the
/// fields the `Connection` header nominates as hop-by-hop, RFC 9110 §7.6.1).
pub fn is_hop_by_hop(header: &Header, all: &[Header]) -> bool {
    let name = header.name.as_str();
    HOP_BY_HOP.iter().any(|h| name.eq_ignore_ascii_case(h)) || nominated_by_connection(all, name)
}

fn nominated_by_connection(all: &[Header], name: &str) -> bool {
    let framing = name.eq_ignore_ascii_case("transfer-encoding")
        || name.eq_ignore_ascii_case("content-length")
        || name.eq_ignore_ascii_case("host");
    // A Connection option must not strip the fields we rely on to frame and route the
    // message; a client listing them is confused, and honouring it would desynchronise us
    // from the next hop.
    !framing
        && ["connection", "proxy-connection"]
            .iter()
            .any(|conn| has_token(all, conn, name))
}

/// Appends `name: value\r\n`.
pub fn write_header(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_tokens() {
        let hs = vec![
            Header::new("Connection", "keep-alive, X-Foo ,,"),
            Header::new("connection", "Upgrade"),
            Header::new("X-Foo", "1"),
            Header::new("X-Bar", "2"),
        ];
        assert!(has_token(&hs, "connection", "x-foo"));
        assert!(has_token(&hs, "CONNECTION", "upgrade"));
        assert!(!has_token(&hs, "connection", "close"));
        assert!(is_hop_by_hop(&hs[2], &hs));
        assert!(!is_hop_by_hop(&hs[3], &hs));
        assert_eq!(trim_ows(b" \t a b\t "), b"a b");
        assert_eq!(list_items(b" , ,").count(), 0);
    }

    #[test]
    fn framing_fields_survive_connection_nomination() {
        let hs = vec![
            Header::new("Connection", "content-length, transfer-encoding, host"),
            Header::new("Content-Length", "3"),
        ];
        assert!(!is_hop_by_hop(&hs[1], &hs));
    }
}
