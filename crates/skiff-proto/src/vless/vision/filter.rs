//! Recognising inner TLS (vless.md §7.6): Vision only leaves the outer TLS when the proxied
//! connection is TLS 1.3 with a suite it can pass through, so both ends watch the first few
//! buffers of each direction for a ClientHello and a ServerHello.

/// How many buffers (both directions together) are inspected before giving up.
const PACKETS_TO_FILTER: u32 = 8;
/// `supported_versions` extension announcing TLS 1.3 inside a ServerHello.
const TLS13_SUPPORTED_VERSIONS: [u8; 6] = [0x00, 0x2b, 0x00, 0x02, 0x03, 0x04];
/// TLS_AES_128_CCM_8_SHA256: TLS 1.3, but Vision does not go direct with it.
const SUITE_CCM_8: u16 = 0x1305;
/// A ServerHello long enough to hold the cipher suite after a 32-byte session id.
const SERVER_HELLO_WITH_SUITE: usize = 79;

/// One endpoint's view of the inner traffic, shared by its reading and writing directions.
#[derive(Clone, Debug)]
pub struct TlsFilter {
    packets_left: u32,
    /// A ClientHello or ServerHello was seen.
    pub is_tls: bool,
    /// A ServerHello was seen (TLS 1.2 or later).
    pub is_tls12_or_above: bool,
    /// Inner TLS 1.3 with a suite that may go direct.
    pub enable_direct: bool,
    cipher: u16,
    server_hello_left: usize,
}

impl Default for TlsFilter {
    fn default() -> Self {
        TlsFilter {
            packets_left: PACKETS_TO_FILTER,
            is_tls: false,
            is_tls12_or_above: false,
            enable_direct: false,
            cipher: 0,
            server_hello_left: 0,
        }
    }
}

impl TlsFilter {
    /// Whether buffers are still being inspected.
    pub fn active(&self) -> bool {
        self.packets_left > 0
    }

    /// Buffers left to inspect: the sender ends padding early for non-TLS traffic when this
    /// reaches one (vless.md §7.4 b).
    pub fn packets_left(&self) -> u32 {
        self.packets_left
    }

    /// Inspects one buffer of inner traffic (either direction).
    pub fn observe(&mut self, b: &[u8]) {
        if self.packets_left == 0 {
            return;
        }
        self.packets_left -= 1;
        if b.len() >= 6 {
            if b[..3] == [0x16, 0x03, 0x03] && b[5] == 0x02 {
                // ServerHello: its record length bounds where supported_versions may be.
                self.server_hello_left = usize::from(u16::from_be_bytes([b[3], b[4]])) + 5;
                self.is_tls = true;
                self.is_tls12_or_above = true;
                if b.len() >= SERVER_HELLO_WITH_SUITE
                    && self.server_hello_left >= SERVER_HELLO_WITH_SUITE
                {
                    let at = 44 + usize::from(b[43]);
                    if let Some(suite) = b.get(at..at + 2) {
                        self.cipher = u16::from_be_bytes([suite[0], suite[1]]);
                    }
                }
            } else if b[..2] == [0x16, 0x03] && b[5] == 0x01 {
                self.is_tls = true;
            }
        }
        if self.server_hello_left > 0 {
            let end = self.server_hello_left.min(b.len());
            self.server_hello_left = self.server_hello_left.saturating_sub(b.len());
            if contains(&b[..end], &TLS13_SUPPORTED_VERSIONS) {
                // TLS 1.3: 0x1301..=0x1304 go direct; CCM_8 and anything odd stay inside.
                self.enable_direct =
                    (0x1301..=0x1304).contains(&self.cipher) && self.cipher != SUITE_CCM_8;
                self.packets_left = 0;
            } else if self.server_hello_left == 0 {
                // The whole ServerHello without TLS 1.3: TLS 1.2, never direct.
                self.packets_left = 0;
            }
        }
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Whether `b` is one or more complete TLS application-data records and nothing else: the
/// condition for ending padding with a Direct (or End) frame (vless.md §7.4 a).
pub fn is_complete_app_records(mut b: &[u8]) -> bool {
    if b.is_empty() {
        return false;
    }
    while !b.is_empty() {
        if b.len() < 5 || b[..3] != [0x17, 0x03, 0x03] {
            return false;
        }
        let len = 5 + usize::from(u16::from_be_bytes([b[3], b[4]]));
        let Some(rest) = b.get(len..) else {
            return false;
        };
        b = rest;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A TLS 1.3 ServerHello record with `suite`, a 32-byte session id and supported_versions.
    fn server_hello(suite: u16, tls13: bool) -> Vec<u8> {
        let mut body = vec![0x02, 0, 0, 0, 0x03, 0x03];
        body.extend_from_slice(&[7; 32]); // random
        body.push(32);
        body.extend_from_slice(&[9; 32]); // session id
        body.extend_from_slice(&suite.to_be_bytes());
        body.push(0); // compression
        let mut ext = Vec::new();
        if tls13 {
            ext.extend_from_slice(&TLS13_SUPPORTED_VERSIONS);
        }
        ext.extend_from_slice(&[0x00, 0x33, 0x00, 0x02, 0x00, 0x1d]);
        body.extend_from_slice(&(ext.len() as u16).to_be_bytes());
        body.extend_from_slice(&ext);
        let hs_len = body.len() - 4;
        body[1..4].copy_from_slice(&(hs_len as u32).to_be_bytes()[1..]);
        let mut record = vec![0x16, 0x03, 0x03];
        record.extend_from_slice(&(body.len() as u16).to_be_bytes());
        record.extend_from_slice(&body);
        record
    }

    #[test]
    fn tls13_with_aes_gcm_goes_direct() {
        let mut filter = TlsFilter::default();
        filter.observe(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00]);
        assert!(filter.is_tls && !filter.is_tls12_or_above);
        filter.observe(&server_hello(0x1301, true));
        assert!(filter.enable_direct);
        assert!(!filter.active());
    }

    #[test]
    fn ccm8_and_tls12_stay_inside() {
        let mut filter = TlsFilter::default();
        filter.observe(&server_hello(0x1305, true));
        assert!(!filter.enable_direct && !filter.active());
        let mut filter = TlsFilter::default();
        filter.observe(&server_hello(0xc02f, false));
        assert!(filter.is_tls12_or_above && !filter.enable_direct && !filter.active());
    }

    #[test]
    fn plain_traffic_only_uses_up_the_budget() {
        let mut filter = TlsFilter::default();
        for _ in 0..PACKETS_TO_FILTER {
            assert!(filter.active());
            filter.observe(b"GET / HTTP/1.1\r\n");
        }
        assert!(!filter.active() && !filter.is_tls);
    }

    #[test]
    fn complete_records() {
        assert!(is_complete_app_records(&[0x17, 3, 3, 0, 2, 1, 2]));
        assert!(is_complete_app_records(&[
            0x17, 3, 3, 0, 0, 0x17, 3, 3, 0, 1, 9
        ]));
        assert!(!is_complete_app_records(&[0x17, 3, 3, 0, 2, 1]));
        assert!(!is_complete_app_records(&[
            0x17, 3, 3, 0, 0, 0x16, 3, 3, 0, 0
        ]));
        assert!(!is_complete_app_records(&[]));
    }

    proptest! {
        #[test]
        fn arbitrary_buffers_never_panic(bufs in proptest::collection::vec(
            proptest::collection::vec(any::<u8>(), 0..200), 0..12)) {
            let mut filter = TlsFilter::default();
            for b in &bufs {
                filter.observe(b);
                let _ = is_complete_app_records(b);
            }
        }
    }
}
