//! The TLS 1.3 key schedule (RFC 8446 §7.1, §7.3, §4.4.4) for one cipher suite: handshake and
//! application traffic secrets from the shared secret and transcript hashes, the record keys
//! of a secret, and Finished's verify_data. Sans-IO; checked against RFC 8448's trace.

use skiff_crypto::AeadKind;
use skiff_crypto::tls13::HashKind;

/// A TLS 1.3 cipher suite: its hash and record AEAD.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Suite {
    pub id: u16,
    pub hash: HashKind,
    pub aead: AeadKind,
}

impl Suite {
    /// The suites every fingerprint offers; `None` for anything else (a server choosing a
    /// suite we did not offer breaks the protocol).
    pub fn from_id(id: u16) -> Option<Suite> {
        let (hash, aead) = match id {
            0x1301 => (HashKind::Sha256, AeadKind::Aes128Gcm),
            0x1302 => (HashKind::Sha384, AeadKind::Aes256Gcm),
            0x1303 => (HashKind::Sha256, AeadKind::ChaCha20Poly1305),
            _ => return None,
        };
        Some(Suite { id, hash, aead })
    }

    fn derive_secret(self, secret: &[u8], label: &[u8], transcript_hash: &[u8]) -> Vec<u8> {
        self.hash
            .expand_label(secret, label, transcript_hash, self.hash.output_len())
    }

    /// The record key and static IV of one traffic secret (RFC 8446 §7.3).
    pub fn traffic_key(self, secret: &[u8]) -> TrafficKey {
        let key = self
            .hash
            .expand_label(secret, b"key", &[], self.aead.key_len());
        let mut iv = [0u8; 12];
        iv.copy_from_slice(&self.hash.expand_label(secret, b"iv", &[], 12));
        TrafficKey {
            kind: self.aead,
            key,
            iv,
        }
    }

    /// Finished's verify_data over `transcript_hash` with `base_secret` (RFC 8446 §4.4.4).
    pub fn verify_data(self, base_secret: &[u8], transcript_hash: &[u8]) -> Vec<u8> {
        let finished_key =
            self.hash
                .expand_label(base_secret, b"finished", &[], self.hash.output_len());
        self.hash.hmac(&finished_key, transcript_hash)
    }
}

/// One direction's record protection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrafficKey {
    pub kind: AeadKind,
    pub key: Vec<u8>,
    pub iv: [u8; 12],
}

/// The secrets after ServerHello: both handshake traffic secrets, and what the application
/// secrets grow from.
pub struct HandshakeSecrets {
    pub suite: Suite,
    pub client: Vec<u8>,
    pub server: Vec<u8>,
    handshake_secret: Vec<u8>,
}

impl HandshakeSecrets {
    /// From the (EC)DHE shared secret and the hash of ClientHello..ServerHello (no PSK).
    pub fn new(suite: Suite, shared_secret: &[u8], hello_hash: &[u8]) -> HandshakeSecrets {
        let h = suite.hash;
        let zeros = vec![0u8; h.output_len()];
        let early = h.extract(&[], &zeros);
        let derived = suite.derive_secret(&early, b"derived", &h.hash(&[]));
        let handshake_secret = h.extract(&derived, shared_secret);
        HandshakeSecrets {
            suite,
            client: suite.derive_secret(&handshake_secret, b"c hs traffic", hello_hash),
            server: suite.derive_secret(&handshake_secret, b"s hs traffic", hello_hash),
            handshake_secret,
        }
    }

    /// The (client, server) application traffic secrets from the hash of
    /// ClientHello..server Finished.
    pub fn application(&self, transcript_hash: &[u8]) -> (Vec<u8>, Vec<u8>) {
        let suite = self.suite;
        let h = suite.hash;
        let derived = suite.derive_secret(&self.handshake_secret, b"derived", &h.hash(&[]));
        let master = h.extract(&derived, &vec![0u8; h.output_len()]);
        (
            suite.derive_secret(&master, b"c ap traffic", transcript_hash),
            suite.derive_secret(&master, b"s ap traffic", transcript_hash),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// RFC 8448 §3, "Simple 1-RTT Handshake", TLS_AES_128_GCM_SHA256 with X25519.
    #[test]
    fn rfc8448_simple_1rtt() {
        let suite = Suite::from_id(0x1301).unwrap();
        let shared = hex("8bd4054fb55b9d63fdfbacf9f04b9f0d35e6d63f537563efd46272900f89492d");
        let hello_hash = hex("860c06edc07858ee8e78f0e7428c58edd6b43f2ca3e6e95f02ed063cf0e1cad8");
        let hs = HandshakeSecrets::new(suite, &shared, &hello_hash);
        assert_eq!(
            hs.client,
            hex("b3eddb126e067f35a780b3abf45e2d8f3b1a950738f52e9600746a0e27a55a21")
        );
        assert_eq!(
            hs.server,
            hex("b67b7d690cc16c4e75e54213cb2d37b4e9c912bcded9105d42befd59d391ad38")
        );
        let server_key = suite.traffic_key(&hs.server);
        assert_eq!(server_key.key, hex("3fce516009c21727d0f2e4e86ee403bc"));
        assert_eq!(server_key.iv.to_vec(), hex("5d313eb2671276ee13000b30"));
        let server_finished_hash =
            hex("9608102a0f1ccc6db6250b7b7e417b1a000eaada3daae4777a7686c9ff83df13");
        let (client_app, server_app) = hs.application(&server_finished_hash);
        assert_eq!(
            client_app,
            hex("9e40646ce79a7f9dc05af8889bce6552875afa0b06df0087f792ebb7c17504a5")
        );
        assert_eq!(
            server_app,
            hex("a11af9f05531f856ad47116b45a950328204b4f44bfb6b3a4b4f1f3fcb631643")
        );
        let client_app_key = suite.traffic_key(&client_app);
        assert_eq!(client_app_key.key, hex("17422dda596ed5d9acd890e3c63f5051"));
        assert_eq!(client_app_key.iv.to_vec(), hex("5b78923dee08579033e523d9"));
    }

    #[test]
    fn unknown_suites_are_refused() {
        assert!(Suite::from_id(0xc02f).is_none());
        assert_eq!(
            Suite::from_id(0x1302).map(|s| s.hash),
            Some(HashKind::Sha384)
        );
    }
}
