//! WebSocket 0-RTT early data, as Xray and v2fly carry it (spec §1.3).
//!
//! * Xray client: config path `…?ed=N` → `ed` stripped from the path; a first write of at most
//!   N bytes goes into `Sec-WebSocket-Protocol` as base64url (no padding) and is *not* repeated
//!   in a frame; a larger first write is sent normally after the handshake.
//! * v2fly client: `maxEarlyData` + `earlyDataHeaderName`; the first `maxEarlyData` bytes go
//!   into that header, or (header name empty) are appended to the URL path; the rest follows
//!   in frames.
//! * Servers: Xray always decodes `Sec-WebSocket-Protocol` (after `+`→`-`, `/`→`_`, dropping
//!   `=`); success and non-empty ⇒ early data, and the value is echoed in the 101. Failure ⇒
//!   header ignored, not echoed.

use crate::base64;

/// Header Xray always uses.
pub const PROTOCOL_HEADER: &str = "Sec-WebSocket-Protocol";

/// How the early data travels in the upgrade request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EarlyDataCarrier {
    /// In the named header (Xray: always `Sec-WebSocket-Protocol`).
    Header(String),
    /// Appended to the URL path (v2fly with an empty `earlyDataHeaderName`).
    PathSuffix,
}

impl EarlyDataCarrier {
    /// Xray's (and v2fly-compatible) `Sec-WebSocket-Protocol` header.
    pub fn xray() -> Self {
        EarlyDataCarrier::Header(PROTOCOL_HEADER.to_owned())
    }
}

/// Client-side early-data policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientEarlyData {
    /// N of `?ed=N` / `maxEarlyData`.
    pub max: usize,
    pub carrier: EarlyDataCarrier,
    /// Xray: a first write longer than `max` is not split (sent entirely after the handshake).
    /// v2fly: the first `max` bytes go early and the rest follows.
    pub split_oversized: bool,
}

impl ClientEarlyData {
    /// Xray's `?ed=N` behaviour.
    pub fn xray(max: usize) -> Self {
        ClientEarlyData {
            max,
            carrier: EarlyDataCarrier::xray(),
            split_oversized: false,
        }
    }

    /// v2fly's `maxEarlyData` / `earlyDataHeaderName` (empty name ⇒ path suffix).
    pub fn v2fly(max: usize, header_name: &str) -> Self {
        let carrier = if header_name.is_empty() {
            EarlyDataCarrier::PathSuffix
        } else {
            EarlyDataCarrier::Header(header_name.to_owned())
        };
        ClientEarlyData {
            max,
            carrier,
            split_oversized: true,
        }
    }

    /// Splits the first write into (bytes for the handshake, bytes for frames afterwards).
    pub fn split<'a>(&self, first: &'a [u8]) -> (&'a [u8], &'a [u8]) {
        if first.len() <= self.max {
            (first, &[])
        } else if self.split_oversized {
            first.split_at(self.max)
        } else {
            (&[], first)
        }
    }
}

/// Splits an Xray client path: removes the `ed` query parameter (keeping the others) and
/// returns it as N. Also normalises the path ("" ⇒ "/", leading "/" added). An `ed` value
/// that is not a number is treated as absent (Xray ignores it), but still removed.
pub fn split_xray_ed(path: &str) -> (String, Option<usize>) {
    let (p, query) = match path.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (path, None),
    };
    let mut ed = None;
    let mut kept = Vec::new();
    for param in query.into_iter().flat_map(|q| q.split('&')) {
        match param.split_once('=') {
            Some(("ed", v)) => ed = v.parse::<usize>().ok().or(ed),
            _ if param == "ed" => {}
            _ => kept.push(param),
        }
    }
    let mut out = normalize_path(p);
    let kept: Vec<&str> = kept.into_iter().filter(|s| !s.is_empty()).collect();
    if !kept.is_empty() {
        out.push('?');
        out.push_str(&kept.join("&"));
    }
    (out, ed.filter(|&n| n > 0))
}

/// "" ⇒ "/", and a missing leading "/" is added.
pub fn normalize_path(path: &str) -> String {
    if path.starts_with('/') {
        path.to_owned()
    } else {
        format!("/{path}")
    }
}

/// Encodes early data for the header / path (base64url, no padding).
pub fn encode(data: &[u8]) -> String {
    base64::encode_url_nopad(data)
}

/// Server-side decoding as Xray does it: `+`→`-`, `/`→`_`, `=` dropped, then base64url.
/// `None` when decoding fails or yields nothing (then the header is to be ignored).
pub fn decode_lenient(value: &[u8]) -> Option<Vec<u8>> {
    let cleaned: Vec<u8> = value
        .iter()
        .filter(|&&c| c != b'=')
        .map(|&c| match c {
            b'+' => b'-',
            b'/' => b'_',
            c => c,
        })
        .collect();
    base64::decode_url_nopad(&cleaned)
        .ok()
        .filter(|d| !d.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn spec_live_vectors() {
        let vless = hex("00b831381d63244d53ad4f8cda48b30811000101bb020b6578616d706c652e636f6d");
        assert_eq!(
            encode(&vless),
            "ALgxOB1jJE1TrU-M2kizCBEAAQG7AgtleGFtcGxlLmNvbQ"
        );
        assert_eq!(
            decode_lenient(b"ALgxOB1jJE1TrU-M2kizCBEAAQG7AgtleGFtcGxlLmNvbQ").unwrap(),
            vless
        );
        let first = decode_lenient(b"ALgxOB1jJE1TrU-M2kizCBEAAU7oAX8AAAFlYXJseS1kYXRhIQ").unwrap();
        assert!(first.ends_with(b"early-data!"));
        assert_eq!(&first[..17], &vless[..17]);
        assert_eq!(&first[19..21], &[0x4e, 0xe8]); // port 20200
    }

    #[test]
    fn lenient_accepts_std_alphabet_and_padding() {
        assert_eq!(decode_lenient(b"+/+/").unwrap(), [0xfb, 0xff, 0xbf]);
        assert_eq!(decode_lenient(b"Zg==").unwrap(), b"f");
        assert_eq!(decode_lenient(b""), None);
        assert_eq!(decode_lenient(b"==="), None);
        assert_eq!(decode_lenient(b"not base64!"), None);
        // The documented caveat: a real subprotocol token may decode.
        assert_eq!(decode_lenient(b"chat").unwrap(), [0x72, 0x16, 0xad]);
    }

    #[test]
    fn ed_path_split() {
        assert_eq!(split_xray_ed("/ws?ed=2048"), ("/ws".into(), Some(2048)));
        assert_eq!(
            split_xray_ed("/ws?a=1&ed=10&b=2"),
            ("/ws?a=1&b=2".into(), Some(10))
        );
        assert_eq!(split_xray_ed("ws"), ("/ws".into(), None));
        assert_eq!(split_xray_ed(""), ("/".into(), None));
        assert_eq!(split_xray_ed("?ed=5"), ("/".into(), Some(5)));
        assert_eq!(split_xray_ed("/ws?ed=x"), ("/ws".into(), None));
        assert_eq!(split_xray_ed("/ws?ed=0"), ("/ws".into(), None));
    }

    #[test]
    fn client_split_policies() {
        let x = ClientEarlyData::xray(4);
        assert_eq!(x.split(b"abcd"), (&b"abcd"[..], &b""[..]));
        assert_eq!(x.split(b"abcde"), (&b""[..], &b"abcde"[..]));
        let v = ClientEarlyData::v2fly(4, "");
        assert_eq!(v.carrier, EarlyDataCarrier::PathSuffix);
        assert_eq!(v.split(b"abcde"), (&b"abcd"[..], &b"e"[..]));
    }
}
