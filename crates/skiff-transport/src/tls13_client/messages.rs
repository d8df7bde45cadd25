//! The server's handshake messages a TLS 1.3 client reads (RFC 8446 §4), sans-IO: handshake
//! bytes from records in, whole messages out ([`MessageBuffer`]), and a parser per message.
//! Everything is bounds-checked through [`Reader`]; malformed input is a [`HandshakeError`].

use std::fmt;

use skiff_core::wire::Reader;

pub const SERVER_HELLO: u8 = 2;
pub const NEW_SESSION_TICKET: u8 = 4;
pub const ENCRYPTED_EXTENSIONS: u8 = 8;
pub const CERTIFICATE: u8 = 11;
pub const CERTIFICATE_REQUEST: u8 = 13;
pub const CERTIFICATE_VERIFY: u8 = 15;
pub const FINISHED: u8 = 20;

/// The ServerHello random that marks a HelloRetryRequest (RFC 8446 §4.1.3).
pub const RETRY_RANDOM: [u8; 32] = [
    0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
    0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
];

/// Largest handshake message we accept: a certificate chain of real sites fits well within
/// this; anything bigger costs the connection, not memory.
pub const MAX_MESSAGE_LEN: usize = 64 * 1024;

/// Why a handshake failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandshakeError(pub String);

impl fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TLS handshake: {}", self.0)
    }
}

impl std::error::Error for HandshakeError {}

pub(crate) fn err<T>(msg: impl Into<String>) -> Result<T, HandshakeError> {
    Err(HandshakeError(msg.into()))
}

fn truncated(what: &str) -> HandshakeError {
    HandshakeError(format!("truncated {what}"))
}

/// One whole handshake message: its type, its body, and the raw bytes the transcript hashes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub kind: u8,
    pub raw: Vec<u8>,
}

impl Message {
    pub fn body(&self) -> &[u8] {
        &self.raw[4..]
    }
}

/// Reassembles handshake messages that records may split or pack together.
#[derive(Debug, Default)]
pub struct MessageBuffer {
    bytes: Vec<u8>,
}

impl MessageBuffer {
    pub fn push(&mut self, fragment: &[u8]) {
        self.bytes.extend_from_slice(fragment);
    }

    /// True when bytes of an unfinished message are waiting (a record type change there is
    /// a protocol error).
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The next whole message, if there is one.
    pub fn next_message(&mut self) -> Result<Option<Message>, HandshakeError> {
        if self.bytes.len() < 4 {
            return Ok(None);
        }
        let len = u32::from_be_bytes([0, self.bytes[1], self.bytes[2], self.bytes[3]]) as usize;
        if len > MAX_MESSAGE_LEN {
            return err(format!("handshake message of {len} bytes is too long"));
        }
        if self.bytes.len() < 4 + len {
            return Ok(None);
        }
        let rest = self.bytes.split_off(4 + len);
        let raw = std::mem::replace(&mut self.bytes, rest);
        Ok(Some(Message { kind: raw[0], raw }))
    }
}

/// What a ServerHello (or HelloRetryRequest) says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerHello {
    pub random: [u8; 32],
    pub session_id: Vec<u8>,
    pub cipher_suite: u16,
    /// supported_versions' selection (0x0304 for TLS 1.3), if the extension is there.
    pub version: Option<u16>,
    /// key_share: the group and the server's share (for a retry: the group only, empty data).
    pub key_share: Option<(u16, Vec<u8>)>,
    pub is_retry: bool,
}

pub fn parse_server_hello(body: &[u8]) -> Result<ServerHello, HandshakeError> {
    let mut r = Reader::new(body);
    let t = || truncated("ServerHello");
    let _legacy_version = r.u16().ok_or_else(t)?;
    let random: [u8; 32] = r.array().ok_or_else(t)?;
    let session_id = r.vec8().ok_or_else(t)?.to_vec();
    if session_id.len() > 32 {
        return err("ServerHello session ID longer than 32 bytes");
    }
    let cipher_suite = r.u16().ok_or_else(t)?;
    let compression = r.u8().ok_or_else(t)?;
    if compression != 0 {
        return err("ServerHello chose compression");
    }
    let is_retry = random == RETRY_RANDOM;
    let mut hello = ServerHello {
        random,
        session_id,
        cipher_suite,
        version: None,
        key_share: None,
        is_retry,
    };
    if r.rest().is_empty() {
        // A TLS 1.2 (or older) ServerHello may omit extensions.
        return Ok(hello);
    }
    let mut exts = Reader::new(r.vec16().ok_or_else(t)?);
    if !r.rest().is_empty() {
        return err("bytes after the ServerHello's extensions");
    }
    while !exts.rest().is_empty() {
        let ext_type = exts.u16().ok_or_else(t)?;
        let mut data = Reader::new(exts.vec16().ok_or_else(t)?);
        match ext_type {
            0x002b => hello.version = Some(data.u16().ok_or_else(t)?),
            0x0033 => {
                let group = data.u16().ok_or_else(t)?;
                let share = if is_retry {
                    Vec::new()
                } else {
                    data.vec16().ok_or_else(t)?.to_vec()
                };
                hello.key_share = Some((group, share));
            }
            _ => {}
        }
    }
    Ok(hello)
}

/// EncryptedExtensions: the ALPN protocol the server chose, if any.
pub fn parse_encrypted_extensions(body: &[u8]) -> Result<Option<Vec<u8>>, HandshakeError> {
    let t = || truncated("EncryptedExtensions");
    let mut r = Reader::new(body);
    let mut exts = Reader::new(r.vec16().ok_or_else(t)?);
    if !r.rest().is_empty() {
        return err("bytes after EncryptedExtensions");
    }
    let mut alpn = None;
    while !exts.rest().is_empty() {
        let ext_type = exts.u16().ok_or_else(t)?;
        let data = exts.vec16().ok_or_else(t)?;
        if ext_type == 0x0010 {
            let mut d = Reader::new(data);
            let mut list = Reader::new(d.vec16().ok_or_else(t)?);
            let proto = list.vec8().ok_or_else(t)?;
            if proto.is_empty() || !list.rest().is_empty() {
                return err("ALPN answer must name one protocol");
            }
            alpn = Some(proto.to_vec());
        }
    }
    Ok(alpn)
}

/// Certificate: the DER of each certificate in the chain, leaf first.
pub fn parse_certificate(body: &[u8]) -> Result<Vec<Vec<u8>>, HandshakeError> {
    let t = || truncated("Certificate");
    let mut r = Reader::new(body);
    let _context = r.vec8().ok_or_else(t)?;
    let list_len = {
        let b = r.take(3).ok_or_else(t)?;
        u32::from_be_bytes([0, b[0], b[1], b[2]]) as usize
    };
    let mut list = Reader::new(r.take(list_len).ok_or_else(t)?);
    if !r.rest().is_empty() {
        return err("bytes after the certificate list");
    }
    let mut chain = Vec::new();
    while !list.rest().is_empty() {
        let b = list.take(3).ok_or_else(t)?;
        let len = u32::from_be_bytes([0, b[0], b[1], b[2]]) as usize;
        let der = list.take(len).ok_or_else(t)?;
        if der.is_empty() {
            return err("empty certificate");
        }
        let _extensions = list.vec16().ok_or_else(t)?;
        chain.push(der.to_vec());
    }
    if chain.is_empty() {
        return err("the server sent no certificate");
    }
    Ok(chain)
}

/// CertificateVerify: the signature scheme and the signature.
pub fn parse_certificate_verify(body: &[u8]) -> Result<(u16, Vec<u8>), HandshakeError> {
    let t = || truncated("CertificateVerify");
    let mut r = Reader::new(body);
    let scheme = r.u16().ok_or_else(t)?;
    let signature = r.vec16().ok_or_else(t)?.to_vec();
    if !r.rest().is_empty() {
        return err("bytes after the CertificateVerify signature");
    }
    Ok((scheme, signature))
}

/// Runs every parser over `bytes` as a sequence of handshake messages (the fuzz target's
/// entry): nothing here may panic or allocate without bound.
pub fn parse_any(bytes: &[u8]) {
    let mut buffer = MessageBuffer::default();
    buffer.push(bytes);
    while let Ok(Some(message)) = buffer.next_message() {
        let body = message.body();
        let _ = parse_server_hello(body);
        let _ = parse_encrypted_extensions(body);
        let _ = parse_certificate(body);
        let _ = parse_certificate_verify(body);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn message(kind: u8, body: &[u8]) -> Vec<u8> {
        let mut m = vec![kind];
        m.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
        m.extend_from_slice(body);
        m
    }

    fn server_hello(random: [u8; 32], exts: &[u8]) -> Vec<u8> {
        let mut b = vec![3, 3];
        b.extend_from_slice(&random);
        b.push(32);
        b.extend_from_slice(&[7; 32]);
        b.extend_from_slice(&[0x13, 0x01, 0]);
        b.extend_from_slice(&(exts.len() as u16).to_be_bytes());
        b.extend_from_slice(exts);
        b
    }

    #[test]
    fn server_hello_with_x25519_share() {
        let mut exts = vec![0, 0x2b, 0, 2, 3, 4, 0, 0x33, 0, 36, 0, 0x1d, 0, 32];
        exts.extend_from_slice(&[9; 32]);
        let hello = parse_server_hello(&server_hello([1; 32], &exts)).unwrap();
        assert_eq!(hello.cipher_suite, 0x1301);
        assert_eq!(hello.version, Some(0x0304));
        assert_eq!(hello.key_share, Some((0x1d, vec![9; 32])));
        assert_eq!(hello.session_id, vec![7; 32]);
        assert!(!hello.is_retry);
    }

    #[test]
    fn retry_request_is_recognised() {
        let exts = [0, 0x2b, 0, 2, 3, 4, 0, 0x33, 0, 2, 0, 0x17];
        let hello = parse_server_hello(&server_hello(RETRY_RANDOM, &exts)).unwrap();
        assert!(hello.is_retry);
        assert_eq!(hello.key_share, Some((0x17, vec![])));
    }

    #[test]
    fn messages_split_and_packed_across_fragments() {
        let mut bytes = message(8, &[0, 0]);
        bytes.extend_from_slice(&message(20, &[5; 32]));
        let mut buf = MessageBuffer::default();
        buf.push(&bytes[..3]);
        assert_eq!(buf.next_message().unwrap(), None);
        buf.push(&bytes[3..10]);
        let first = buf.next_message().unwrap().unwrap();
        assert_eq!((first.kind, first.body()), (8, &[0u8, 0][..]));
        assert_eq!(parse_encrypted_extensions(first.body()).unwrap(), None);
        assert_eq!(buf.next_message().unwrap(), None);
        buf.push(&bytes[10..]);
        assert_eq!(buf.next_message().unwrap().unwrap().body(), &[5; 32]);
        assert!(buf.is_empty());
    }

    #[test]
    fn oversized_message_is_refused_before_buffering_it() {
        let mut buf = MessageBuffer::default();
        buf.push(&[11, 0xff, 0xff, 0xff]);
        assert!(buf.next_message().is_err());
    }

    #[test]
    fn certificate_chain_and_verify() {
        let mut list = Vec::new();
        for der in [&b"leaf"[..], &b"ca"[..]] {
            list.extend_from_slice(&(der.len() as u32).to_be_bytes()[1..]);
            list.extend_from_slice(der);
            list.extend_from_slice(&[0, 0]);
        }
        let mut body = vec![0];
        body.extend_from_slice(&(list.len() as u32).to_be_bytes()[1..]);
        body.extend_from_slice(&list);
        let chain = parse_certificate(&body).unwrap();
        assert_eq!(chain, vec![b"leaf".to_vec(), b"ca".to_vec()]);
        assert_eq!(
            parse_certificate_verify(&[8, 7, 0, 2, 1, 2]).unwrap(),
            (0x0807, vec![1, 2])
        );
        assert!(parse_certificate(&[0, 0, 0, 0]).is_err());
    }

    proptest! {
        /// Any bytes: every parser returns, none panics.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            parse_any(&bytes);
            let _ = parse_server_hello(&bytes);
            let _ = parse_certificate(&bytes);
        }

        /// A ServerHello's share comes back as written.
        #[test]
        fn server_hello_share_round_trips(group in any::<u16>(), share in proptest::collection::vec(any::<u8>(), 1..200), random in any::<[u8; 32]>()) {
            prop_assume!(random != RETRY_RANDOM);
            let mut exts = vec![0, 0x33];
            exts.extend_from_slice(&((share.len() + 4) as u16).to_be_bytes());
            exts.extend_from_slice(&group.to_be_bytes());
            exts.extend_from_slice(&(share.len() as u16).to_be_bytes());
            exts.extend_from_slice(&share);
            let hello = parse_server_hello(&server_hello(random, &exts)).unwrap();
            prop_assert_eq!(hello.key_share, Some((group, share)));
            prop_assert_eq!(hello.random, random);
        }
    }
}
