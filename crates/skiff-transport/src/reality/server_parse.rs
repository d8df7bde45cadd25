//! Sans-IO parsing for the REALITY server: the client's ClientHello (reassembled from its
//! records, with what authentication needs) and the target's ServerHello (whose cipher suite
//! and key exchange group the server's own handshake copies).
//!
//! Strict where Go's crypto/tls is strict (REALITY's server is a fork of it): a message Go
//! would refuse is not authenticated here either, and the connection goes to the target.

/// TLS record types and handshake message types used here.
const RECORD_HANDSHAKE: u8 = 22;
const HANDSHAKE_CLIENT_HELLO: u8 = 1;
const HANDSHAKE_SERVER_HELLO: u8 = 2;
const RECORD_HEADER_LEN: usize = 5;
/// Go's limits (crypto/tls common.go): a record's ciphertext and a handshake message.
const MAX_RECORD_LEN: usize = 16384 + 2048;
pub const MAX_HANDSHAKE_LEN: usize = 65536;
/// The most client bytes the server holds while reading a ClientHello: the largest message
/// plus a header per minimal-size fragment would be far more, but no real client fragments
/// below 512 bytes; past this the connection is simply forwarded.
pub const MAX_CLIENT_HELLO_BYTES: usize = MAX_HANDSHAKE_LEN + 4 + 64 * RECORD_HEADER_LEN;

const EXT_SERVER_NAME: u16 = 0;
const EXT_ALPN: u16 = 16;
const EXT_SUPPORTED_VERSIONS: u16 = 43;
const EXT_KEY_SHARE: u16 = 51;
const TLS13: u16 = 0x0304;
pub const GROUP_X25519: u16 = 0x001d;
pub const GROUP_X25519_MLKEM768: u16 = 0x11ec;
/// ML-KEM-768's encapsulation key and ciphertext sizes (FIPS 203).
pub const MLKEM768_ENCAPSULATION_KEY_LEN: usize = 1184;
pub const MLKEM768_CIPHERTEXT_LEN: usize = 1088;
pub const TLS13_AES_128_GCM_SHA256: u16 = 0x1301;
pub const TLS13_AES_256_GCM_SHA384: u16 = 0x1302;
pub const TLS13_CHACHA20_POLY1305_SHA256: u16 = 0x1303;

/// Reading a ClientHello from the client's first bytes.
#[derive(Debug, PartialEq, Eq)]
pub enum HelloRead {
    /// More bytes are needed.
    Incomplete,
    /// The handshake message (header included), and how many input bytes its records took.
    Complete(Vec<u8>, usize),
    /// Not a ClientHello Go would read: the connection belongs to the target.
    NotHello,
}

/// Reassembles the first handshake message from `input`'s records. Only handshake records
/// may carry it; a record over Go's limit or a message over 64 KiB is not a hello.
pub fn read_client_hello(input: &[u8]) -> HelloRead {
    let mut message = Vec::new();
    let mut at = 0;
    loop {
        let Some(header) = input.get(at..at + RECORD_HEADER_LEN) else {
            return HelloRead::Incomplete;
        };
        let len = usize::from(u16::from_be_bytes([header[3], header[4]]));
        if header[0] != RECORD_HANDSHAKE || header[1] != 3 || len == 0 || len > MAX_RECORD_LEN {
            return HelloRead::NotHello;
        }
        let Some(body) = input.get(at + RECORD_HEADER_LEN..at + RECORD_HEADER_LEN + len) else {
            return HelloRead::Incomplete;
        };
        message.extend_from_slice(body);
        at += RECORD_HEADER_LEN + len;
        if message.len() >= 4 {
            if message[0] != HANDSHAKE_CLIENT_HELLO {
                return HelloRead::NotHello;
            }
            let want = 4 + u32::from_be_bytes([0, message[1], message[2], message[3]]) as usize;
            if want > MAX_HANDSHAKE_LEN + 4 {
                return HelloRead::NotHello;
            }
            if message.len() >= want {
                // A record carrying the hello's end and something after it: Go would go on
                // reading that as the next message; nothing of ours, so the target's.
                if message.len() > want {
                    return HelloRead::NotHello;
                }
                return HelloRead::Complete(message, at);
            }
        }
    }
}

/// What the server needs from a ClientHello.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientHello {
    pub random: [u8; 32],
    pub session_id_len: usize,
    pub server_name: Option<String>,
    /// TLS 1.3 among `supported_versions`.
    pub offers_tls13: bool,
    /// Key shares: (group, data), in order.
    pub key_shares: Vec<(u16, Vec<u8>)>,
    pub alpn: Vec<Vec<u8>>,
    pub cipher_suites: Vec<u16>,
}

impl ClientHello {
    /// The client's X25519 public key: its X25519 share, else the X25519 half of its
    /// X25519MLKEM768 share (the last 32 bytes), as REALITY looks for it.
    pub fn x25519_public(&self) -> Option<[u8; 32]> {
        let plain = self
            .key_shares
            .iter()
            .find(|(g, d)| *g == GROUP_X25519 && d.len() == 32)
            .map(|(_, d)| &d[..]);
        let hybrid = || {
            self.key_shares
                .iter()
                .find(|(g, d)| {
                    *g == GROUP_X25519_MLKEM768 && d.len() == MLKEM768_ENCAPSULATION_KEY_LEN + 32
                })
                .map(|(_, d)| &d[MLKEM768_ENCAPSULATION_KEY_LEN..])
        };
        plain.or_else(hybrid)?.try_into().ok()
    }

    /// The client offered a key share of `group`.
    pub fn has_share(&self, group: u16) -> bool {
        self.key_shares.iter().any(|(g, _)| *g == group)
    }
}

/// A byte reader over one structure; every read is bounds-checked.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn u16(&mut self) -> Option<u16> {
        let b = self.take(2)?;
        Some(u16::from_be_bytes([b[0], b[1]]))
    }
    fn vec8(&mut self) -> Option<&'a [u8]> {
        let n = usize::from(self.u8()?);
        self.take(n)
    }
    fn vec16(&mut self) -> Option<&'a [u8]> {
        let n = usize::from(self.u16()?);
        self.take(n)
    }
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Parses a ClientHello handshake message (header included). None for anything Go's
/// `clientHelloMsg.unmarshal` refuses in the parts read here: bad lengths, trailing bytes,
/// a duplicated extension, an SNI that is not one host name without a trailing dot.
pub fn parse_client_hello(message: &[u8]) -> Option<ClientHello> {
    let mut header = Cursor(message);
    if header.u8()? != HANDSHAKE_CLIENT_HELLO {
        return None;
    }
    let len = header.take(3)?;
    let len = u32::from_be_bytes([0, len[0], len[1], len[2]]) as usize;
    let mut c = Cursor(header.take(len)?);
    if !header.is_empty() {
        return None;
    }
    let _legacy_version = c.u16()?;
    let random: [u8; 32] = c.take(32)?.try_into().ok()?;
    let session_id = c.vec8()?;
    if session_id.len() > 32 {
        return None;
    }
    let suites = c.vec16()?;
    if suites.len() % 2 != 0 {
        return None;
    }
    let cipher_suites = suites
        .chunks_exact(2)
        .map(|s| u16::from_be_bytes([s[0], s[1]]))
        .collect();
    let _compression = c.vec8()?;
    let mut hello = ClientHello {
        random,
        session_id_len: session_id.len(),
        server_name: None,
        offers_tls13: false,
        key_shares: Vec::new(),
        alpn: Vec::new(),
        cipher_suites,
    };
    if c.is_empty() {
        return Some(hello);
    }
    let mut extensions = Cursor(c.vec16()?);
    if !c.is_empty() {
        return None;
    }
    let mut seen = Vec::new();
    while !extensions.is_empty() {
        let kind = extensions.u16()?;
        let mut data = Cursor(extensions.vec16()?);
        if seen.contains(&kind) {
            return None;
        }
        seen.push(kind);
        match kind {
            EXT_SERVER_NAME => {
                let mut list = Cursor(data.vec16()?);
                while !list.is_empty() {
                    let name_type = list.u8()?;
                    let name = list.vec16()?;
                    if name_type != 0 {
                        continue;
                    }
                    if hello.server_name.is_some() {
                        return None;
                    }
                    let name = std::str::from_utf8(name).ok()?;
                    if name.ends_with('.') {
                        return None;
                    }
                    hello.server_name = Some(name.to_owned());
                }
            }
            EXT_SUPPORTED_VERSIONS => {
                let list = data.vec8()?;
                if list.is_empty() || list.len() % 2 != 0 {
                    return None;
                }
                hello.offers_tls13 = list
                    .chunks_exact(2)
                    .any(|v| u16::from_be_bytes([v[0], v[1]]) == TLS13);
            }
            EXT_KEY_SHARE => {
                let mut list = Cursor(data.vec16()?);
                while !list.is_empty() {
                    let group = list.u16()?;
                    let share = list.vec16()?;
                    if share.is_empty() {
                        return None;
                    }
                    hello.key_shares.push((group, share.to_vec()));
                }
            }
            EXT_ALPN => {
                let mut list = Cursor(data.vec16()?);
                if list.is_empty() {
                    return None;
                }
                while !list.is_empty() {
                    let proto = list.vec8()?;
                    if proto.is_empty() {
                        return None;
                    }
                    hello.alpn.push(proto.to_vec());
                }
            }
            _ => {
                data = Cursor(&[]);
            }
        }
        if !data.is_empty() {
            return None;
        }
    }
    Some(hello)
}

/// What the target chose in its ServerHello.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TargetChoice {
    pub cipher_suite: u16,
    pub group: u16,
}

/// Reading the target's first record.
#[derive(Debug, PartialEq, Eq)]
pub enum TargetHello {
    Incomplete,
    /// A TLS 1.3 ServerHello REALITY can copy, and the bytes of its record.
    Usable(TargetChoice, usize),
    /// Anything else (TLS 1.2, a HelloRetryRequest, an alert, not TLS): the connection
    /// is forwarded as it is, as REALITY does.
    Unusable,
}

/// The HelloRetryRequest's fixed random (RFC 8446 §4.1.3).
const HELLO_RETRY_RANDOM: [u8; 32] = [
    0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
    0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
];

/// The target's first record must be a whole ServerHello for TLS 1.3 with a known suite and
/// an X25519 or X25519MLKEM768 share of the right size (REALITY's conditions).
pub fn read_target_hello(input: &[u8]) -> TargetHello {
    let Some(header) = input.get(..RECORD_HEADER_LEN) else {
        return TargetHello::Incomplete;
    };
    let len = usize::from(u16::from_be_bytes([header[3], header[4]]));
    if header[0] != RECORD_HANDSHAKE || header[1..3] != [3, 3] || len > 8192 - RECORD_HEADER_LEN {
        return TargetHello::Unusable;
    }
    if input.len() > RECORD_HEADER_LEN && input[RECORD_HEADER_LEN] != HANDSHAKE_SERVER_HELLO {
        return TargetHello::Unusable;
    }
    let Some(body) = input.get(RECORD_HEADER_LEN..RECORD_HEADER_LEN + len) else {
        return TargetHello::Incomplete;
    };
    match parse_server_hello(body) {
        Some(choice) => TargetHello::Usable(choice, RECORD_HEADER_LEN + len),
        None => TargetHello::Unusable,
    }
}

fn parse_server_hello(message: &[u8]) -> Option<TargetChoice> {
    let mut header = Cursor(message);
    if header.u8()? != HANDSHAKE_SERVER_HELLO {
        return None;
    }
    let len = header.take(3)?;
    let len = u32::from_be_bytes([0, len[0], len[1], len[2]]) as usize;
    let mut c = Cursor(header.take(len)?);
    if !header.is_empty() || c.u16()? != 0x0303 {
        return None;
    }
    if c.take(32)? == HELLO_RETRY_RANDOM {
        return None;
    }
    let _session_id = c.vec8()?;
    let cipher_suite = c.u16()?;
    let _compression = c.u8()?;
    let mut extensions = Cursor(c.vec16()?);
    let (mut version, mut share) = (None, None);
    while !extensions.is_empty() {
        let kind = extensions.u16()?;
        let mut data = Cursor(extensions.vec16()?);
        match kind {
            EXT_SUPPORTED_VERSIONS => version = Some(data.u16()?),
            EXT_KEY_SHARE => share = Some((data.u16()?, data.vec16()?.len())),
            _ => data = Cursor(&[]),
        }
        if !data.is_empty() {
            return None;
        }
    }
    let known_suite = matches!(
        cipher_suite,
        TLS13_AES_128_GCM_SHA256 | TLS13_AES_256_GCM_SHA384 | TLS13_CHACHA20_POLY1305_SHA256
    );
    let (group, share_len) = share?;
    let share_ok = (group == GROUP_X25519 && share_len == 32)
        || (group == GROUP_X25519_MLKEM768 && share_len == MLKEM768_CIPHERTEXT_LEN + 32);
    (version == Some(TLS13) && known_suite && share_ok).then_some(TargetChoice {
        cipher_suite,
        group,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A ClientHello record as a TLS 1.3 client sends it, with the given SNI and shares.
    pub(crate) fn client_hello_record(
        sni: Option<&str>,
        shares: &[(u16, Vec<u8>)],
        random: [u8; 32],
    ) -> Vec<u8> {
        let mut body = vec![3, 3];
        body.extend_from_slice(&random);
        body.push(32);
        body.extend_from_slice(&[0xaa; 32]);
        body.extend_from_slice(&[0, 6, 0x13, 0x01, 0x13, 0x02, 0x13, 0x03]);
        body.extend_from_slice(&[1, 0]);
        let mut ext = Vec::new();
        let mut push_ext = |kind: u16, data: &[u8]| {
            ext.extend_from_slice(&kind.to_be_bytes());
            ext.extend_from_slice(&(data.len() as u16).to_be_bytes());
            ext.extend_from_slice(data);
        };
        if let Some(sni) = sni {
            let mut d = ((sni.len() + 3) as u16).to_be_bytes().to_vec();
            d.push(0);
            d.extend_from_slice(&(sni.len() as u16).to_be_bytes());
            d.extend_from_slice(sni.as_bytes());
            push_ext(EXT_SERVER_NAME, &d);
        }
        push_ext(EXT_SUPPORTED_VERSIONS, &[2, 0x03, 0x04]);
        push_ext(13, &[0, 4, 0x08, 0x07, 0x04, 0x03]);
        push_ext(10, &[0, 4, 0x11, 0xec, 0x00, 0x1d]);
        let mut ks = Vec::new();
        for (g, d) in shares {
            ks.extend_from_slice(&g.to_be_bytes());
            ks.extend_from_slice(&(d.len() as u16).to_be_bytes());
            ks.extend_from_slice(d);
        }
        let mut d = (ks.len() as u16).to_be_bytes().to_vec();
        d.extend_from_slice(&ks);
        push_ext(EXT_KEY_SHARE, &d);
        body.extend_from_slice(&(ext.len() as u16).to_be_bytes());
        body.extend_from_slice(&ext);
        let mut message = vec![HANDSHAKE_CLIENT_HELLO];
        message.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
        message.extend_from_slice(&body);
        let mut record = vec![RECORD_HANDSHAKE, 3, 1];
        record.extend_from_slice(&(message.len() as u16).to_be_bytes());
        record.extend_from_slice(&message);
        record
    }

    #[test]
    fn reads_a_hello_whole_or_in_fragments() {
        let record = client_hello_record(Some("a.test"), &[(GROUP_X25519, vec![9; 32])], [1; 32]);
        let HelloRead::Complete(message, used) = read_client_hello(&record) else {
            panic!("not complete")
        };
        assert_eq!(used, record.len());
        let hello = parse_client_hello(&message).unwrap();
        assert_eq!(hello.server_name.as_deref(), Some("a.test"));
        assert!(hello.offers_tls13);
        assert_eq!(hello.x25519_public(), Some([9; 32]));
        assert_eq!(hello.session_id_len, 32);
        for cut in 0..record.len() {
            assert_eq!(
                read_client_hello(&record[..cut]),
                HelloRead::Incomplete,
                "{cut}"
            );
        }
        // The same message split over two records.
        let (a, b) = message.split_at(40);
        let mut split = Vec::new();
        for part in [a, b] {
            split.extend_from_slice(&[22, 3, 3]);
            split.extend_from_slice(&(part.len() as u16).to_be_bytes());
            split.extend_from_slice(part);
        }
        assert_eq!(
            read_client_hello(&split),
            HelloRead::Complete(message.clone(), split.len())
        );
        assert_eq!(
            read_client_hello(b"GET / HTTP/1.1\r\n"),
            HelloRead::NotHello
        );
    }

    #[test]
    fn the_hybrid_share_gives_its_x25519_half() {
        let mut hybrid = vec![1; MLKEM768_ENCAPSULATION_KEY_LEN];
        hybrid.extend_from_slice(&[5; 32]);
        let record = client_hello_record(None, &[(GROUP_X25519_MLKEM768, hybrid)], [0; 32]);
        let HelloRead::Complete(message, _) = read_client_hello(&record) else {
            panic!()
        };
        let hello = parse_client_hello(&message).unwrap();
        assert_eq!(hello.x25519_public(), Some([5; 32]));
        assert!(hello.has_share(GROUP_X25519_MLKEM768));
        assert!(!hello.has_share(GROUP_X25519));
    }

    fn server_hello(suite: u16, group: u16, share_len: usize, random: [u8; 32]) -> Vec<u8> {
        let mut body = vec![3, 3];
        body.extend_from_slice(&random);
        body.push(0);
        body.extend_from_slice(&suite.to_be_bytes());
        body.push(0);
        let mut ext = vec![0, 43, 0, 2, 3, 4, 0, 51];
        ext.extend_from_slice(&((share_len + 4) as u16).to_be_bytes());
        ext.extend_from_slice(&group.to_be_bytes());
        ext.extend_from_slice(&(share_len as u16).to_be_bytes());
        ext.extend(std::iter::repeat_n(7, share_len));
        body.extend_from_slice(&(ext.len() as u16).to_be_bytes());
        body.extend_from_slice(&ext);
        let mut m = vec![2];
        m.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
        m.extend_from_slice(&body);
        let mut r = vec![22, 3, 3];
        r.extend_from_slice(&(m.len() as u16).to_be_bytes());
        r.extend_from_slice(&m);
        r
    }

    #[test]
    fn target_hellos_usable_or_not() {
        let ok = server_hello(0x1301, GROUP_X25519, 32, [3; 32]);
        assert_eq!(
            read_target_hello(&ok),
            TargetHello::Usable(
                TargetChoice {
                    cipher_suite: 0x1301,
                    group: GROUP_X25519
                },
                ok.len()
            )
        );
        for cut in 0..ok.len() {
            assert_eq!(read_target_hello(&ok[..cut]), TargetHello::Incomplete);
        }
        let pq = server_hello(0x1302, GROUP_X25519_MLKEM768, 1120, [3; 32]);
        assert!(matches!(read_target_hello(&pq), TargetHello::Usable(..)));
        for bad in [
            server_hello(0x1301, 0x0017, 65, [3; 32]),
            server_hello(0xc02f, GROUP_X25519, 32, [3; 32]),
            server_hello(0x1301, GROUP_X25519, 31, [3; 32]),
            server_hello(0x1301, GROUP_X25519, 32, HELLO_RETRY_RANDOM),
            b"HTTP/1.1 400 Bad Request\r\n".to_vec(),
            vec![21, 3, 3, 0, 2, 2, 40],
        ] {
            assert_eq!(read_target_hello(&bad), TargetHello::Unusable);
        }
    }

    proptest! {
        /// Any bytes: an answer, never a panic; a Complete message always re-parses from
        /// the bytes it says it used.
        #[test]
        fn client_hello_reading_never_panics(input in proptest::collection::vec(any::<u8>(), 0..600)) {
            if let HelloRead::Complete(message, used) = read_client_hello(&input) {
                prop_assert!(used <= input.len());
                prop_assert!(message.len() <= MAX_HANDSHAKE_LEN + 4);
                let _ = parse_client_hello(&message);
            }
            let _ = read_target_hello(&input);
        }

        /// A valid hello with any one byte changed still parses or is refused, never panics;
        /// and every truncation of the record is Incomplete.
        #[test]
        fn mutated_hellos_never_panic(at in 0usize..200, byte in any::<u8>(), sni in "[a-z]{1,20}") {
            let mut record = client_hello_record(Some(&sni), &[(GROUP_X25519, vec![9; 32])], [1; 32]);
            let at = at % record.len();
            record[at] = byte;
            if let HelloRead::Complete(message, _) = read_client_hello(&record) {
                let _ = parse_client_hello(&message);
            }
        }
    }
}
