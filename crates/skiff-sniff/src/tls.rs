//! The TLS sniffer: the SNI of the ClientHello at the start of a TCP stream.

use crate::client_hello::{Peek, peek_client_hello};
use crate::{Protocol, Sniff, Sniffed};

/// SNI of a ClientHello, lower-cased. A ClientHello without SNI (or with a name ending in a
/// dot, which RFC 6066 forbids) names nothing, as in Xray.
pub fn sniff_tls(prefix: &[u8]) -> Sniff {
    match peek_client_hello(prefix) {
        Peek::Incomplete => Sniff::NeedMore,
        Peek::NotTls | Peek::Malformed(_) => Sniff::NotThis,
        Peek::ClientHello(info) => found(info.sni),
    }
}

/// The answer for a parsed ClientHello's SNI (shared with the QUIC sniffer).
pub(crate) fn found_sni(protocol: Protocol, sni: Option<String>) -> Sniff {
    match sni {
        Some(name) if !name.ends_with('.') => Sniff::Found(Sniffed {
            protocol,
            domain: name.to_ascii_lowercase(),
            attributes: Vec::new(),
        }),
        _ => Sniff::NotThis,
    }
}

fn found(sni: Option<String>) -> Sniff {
    found_sni(Protocol::Tls, sni)
}

#[cfg(test)]
mod tests {
    use super::test_support::client_hello_record as client_hello;
    use super::*;

    #[test]
    fn finds_sni_and_waits_for_the_rest() {
        let hello = client_hello(Some("A.Example"));
        for cut in 0..hello.len() {
            assert_eq!(sniff_tls(&hello[..cut]), Sniff::NeedMore, "cut {cut}");
        }
        let Sniff::Found(found) = sniff_tls(&hello) else {
            panic!("no SNI found");
        };
        assert_eq!(found.domain, "a.example");
        assert_eq!(found.protocol, Protocol::Tls);
        assert_eq!(sniff_tls(&client_hello(None)), Sniff::NotThis);
        assert_eq!(sniff_tls(b"GET / HTTP/1.1\r\n"), Sniff::NotThis);
        assert_eq!(
            sniff_tls(&client_hello(Some("trailing.dot."))),
            Sniff::NotThis
        );
    }
}

/// ClientHello builders for this crate's tests and the property tests.
#[doc(hidden)]
pub mod test_support {
    /// A ClientHello handshake message (type, length, body) with `sni` (or none).
    pub fn client_hello_message(sni: Option<&str>) -> Vec<u8> {
        let mut body = vec![0x03, 0x03];
        body.extend_from_slice(&[7; 32]); // random
        body.push(0); // session id
        body.extend_from_slice(&[0, 2, 0x13, 0x01]); // one cipher suite
        body.extend_from_slice(&[1, 0]); // null compression
        let mut exts = Vec::new();
        if let Some(name) = sni {
            let n = name.len() as u16;
            exts.extend_from_slice(&[0, 0]);
            exts.extend_from_slice(&(n + 5).to_be_bytes());
            exts.extend_from_slice(&(n + 3).to_be_bytes());
            exts.push(0);
            exts.extend_from_slice(&n.to_be_bytes());
            exts.extend_from_slice(name.as_bytes());
        }
        // supported_versions: TLS 1.3
        exts.extend_from_slice(&[0, 43, 0, 3, 2, 3, 4]);
        body.extend_from_slice(&(exts.len() as u16).to_be_bytes());
        body.extend_from_slice(&exts);
        let mut message = vec![1];
        message.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
        message.extend_from_slice(&body);
        message
    }

    /// The same message in one TLS handshake record.
    pub fn client_hello_record(sni: Option<&str>) -> Vec<u8> {
        let message = client_hello_message(sni);
        let mut record = vec![0x16, 0x03, 0x01];
        record.extend_from_slice(&(message.len() as u16).to_be_bytes());
        record.extend_from_slice(&message);
        record
    }
}
