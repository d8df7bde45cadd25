//! QUIC Initial packet protection (RFC 9001 §5.2, RFC 9369 §3.3): keys every observer can
//! derive from the client's Destination Connection ID. A sniffer uses them to read the
//! ClientHello inside a client's first packets; nothing here is secret.

use aws_lc_rs::aead::quic::{AES_128, HeaderProtectionKey};
use aws_lc_rs::hkdf::{HKDF_SHA256, KeyType, Prk, Salt};

use crate::aead::{AeadKey, AeadKind, OpenError};

/// QUIC version 1 (RFC 9000).
pub const VERSION_1: u32 = 0x0000_0001;
/// QUIC version 2 (RFC 9369).
pub const VERSION_2: u32 = 0x6b33_43cf;

/// QUIC draft 29, still sent by some clients: v1's labels with its own salt.
pub const VERSION_DRAFT_29: u32 = 0xff00_001d;

const SALT_DRAFT_29: [u8; 20] = [
    0xaf, 0xbf, 0xec, 0x28, 0x99, 0x93, 0xd2, 0x4c, 0x9e, 0x97, 0x86, 0xf1, 0x9c, 0x61, 0x11, 0xe0,
    0x43, 0x90, 0xa8, 0x99,
];
const SALT_V1: [u8; 20] = [
    0x38, 0x76, 0x2c, 0xf7, 0xf5, 0x59, 0x34, 0xb3, 0x4d, 0x17, 0x9a, 0xe6, 0xa4, 0xc8, 0x0c, 0xad,
    0xcc, 0xbb, 0x7f, 0x0a,
];
const SALT_V2: [u8; 20] = [
    0x0d, 0xed, 0xe3, 0xde, 0xf7, 0x00, 0xa6, 0xdb, 0x81, 0x93, 0x81, 0xbe, 0x6e, 0x26, 0x9d, 0xcb,
    0xf9, 0xbd, 0x2e, 0xd9,
];

/// The client's Initial keys: payload AEAD (AES-128-GCM), its IV, and header protection.
pub struct InitialKeys {
    aead: AeadKey,
    iv: [u8; 12],
    hp: HeaderProtectionKey,
}

/// A length `HKDF-Expand` should produce, as aws-lc-rs wants it said.
struct Len(usize);

impl KeyType for Len {
    fn len(&self) -> usize {
        self.0
    }
}

/// HKDF-Expand-Label of TLS 1.3 (RFC 8446 §7.1) with an empty context.
fn expand_label(prk: &Prk, label: &[u8], out: &mut [u8]) {
    let full_len = 6 + label.len();
    let mut info = Vec::with_capacity(4 + full_len);
    info.extend_from_slice(&(out.len() as u16).to_be_bytes());
    info.push(full_len as u8);
    info.extend_from_slice(b"tls13 ");
    info.extend_from_slice(label);
    info.push(0);
    // Lengths here are at most 32 bytes, far below HKDF's 255 × 32 limit.
    prk.expand(&[&info], Len(out.len()))
        .and_then(|okm| okm.fill(out))
        .expect("HKDF-Expand within its bound");
}

/// HKDF-Expand-Label over SHA-256 from a pseudo-random key (exposed for tests and vectors).
pub fn hkdf_sha256_expand_label(prk: &[u8], label: &[u8], out: &mut [u8]) {
    expand_label(&Prk::new_less_safe(HKDF_SHA256, prk), label, out);
}

/// HKDF-Expand-Label over SHA-384 (TLS 1.3's TLS_AES_256_GCM_SHA384 key schedule).
pub fn hkdf_sha384_expand_label(prk: &[u8], label: &[u8], out: &mut [u8]) {
    expand_label(
        &Prk::new_less_safe(aws_lc_rs::hkdf::HKDF_SHA384, prk),
        label,
        out,
    );
}

impl InitialKeys {
    /// The client's keys for `version` (v1 or v2) and Destination Connection ID `dcid`;
    /// None for a version without published Initial salts.
    pub fn client(version: u32, dcid: &[u8]) -> Option<InitialKeys> {
        let (salt, key_label, iv_label, hp_label): (&[u8], &[u8], &[u8], &[u8]) = match version {
            VERSION_1 => (&SALT_V1, b"quic key", b"quic iv", b"quic hp"),
            VERSION_DRAFT_29 => (&SALT_DRAFT_29, b"quic key", b"quic iv", b"quic hp"),
            VERSION_2 => (&SALT_V2, b"quicv2 key", b"quicv2 iv", b"quicv2 hp"),
            _ => return None,
        };
        let initial = Salt::new(HKDF_SHA256, salt).extract(dcid);
        let mut client_secret = [0u8; 32];
        expand_label(&initial, b"client in", &mut client_secret);
        let secret = Prk::new_less_safe(HKDF_SHA256, &client_secret);
        let mut key = [0u8; 16];
        let mut iv = [0u8; 12];
        let mut hp = [0u8; 16];
        expand_label(&secret, key_label, &mut key);
        expand_label(&secret, iv_label, &mut iv);
        expand_label(&secret, hp_label, &mut hp);
        Some(InitialKeys {
            aead: AeadKey::new(AeadKind::Aes128Gcm, &key).expect("16-byte key"),
            iv,
            hp: HeaderProtectionKey::new(&AES_128, &hp).expect("16-byte key"),
        })
    }

    /// The 5-byte header protection mask for a 16-byte ciphertext `sample` (AES-ECB of it).
    pub fn header_mask(&self, sample: &[u8; 16]) -> [u8; 5] {
        self.hp.new_mask(sample).expect("16-byte sample")
    }

    /// Seals `payload` as the client would (for building test packets): ciphertext and tag.
    pub fn seal(&self, packet_number: u64, header: &[u8], payload: &[u8]) -> Vec<u8> {
        let mut out = payload.to_vec();
        out.resize(payload.len() + crate::TAG_LEN, 0);
        self.aead
            .seal_in_place(&self.nonce(packet_number), header, &mut out);
        out
    }

    fn nonce(&self, packet_number: u64) -> [u8; 12] {
        let mut nonce = self.iv;
        for (n, p) in nonce[4..].iter_mut().zip(packet_number.to_be_bytes()) {
            *n ^= p;
        }
        nonce
    }

    /// Opens a packet's payload in place: `header` is the unprotected header (the AAD),
    /// `packet_number` the full packet number.
    pub fn open<'a>(
        &self,
        packet_number: u64,
        header: &[u8],
        payload: &'a mut [u8],
    ) -> Result<&'a mut [u8], OpenError> {
        self.aead
            .open_in_place(&self.nonce(packet_number), header, payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hex;

    /// RFC 9001 Appendix A.1: the client's keys for DCID 8394c8f03e515708.
    #[test]
    fn rfc9001_client_initial_keys() {
        let dcid = hex("8394c8f03e515708");
        let initial = Salt::new(HKDF_SHA256, &SALT_V1).extract(&dcid);
        let mut secret = [0u8; 32];
        expand_label(&initial, b"client in", &mut secret);
        assert_eq!(
            secret.to_vec(),
            hex("c00cf151ca5be075ed0ebfb5c80323c42d6b7db67881289af4008f1f6c357aea")
        );
        let mut key = [0u8; 16];
        hkdf_sha256_expand_label(&secret, b"quic key", &mut key);
        assert_eq!(key.to_vec(), hex("1f369613dd76d5467730efcbe3b1a22d"));
        let mut hp = [0u8; 16];
        hkdf_sha256_expand_label(&secret, b"quic hp", &mut hp);
        assert_eq!(hp.to_vec(), hex("9f50449e04a0e810283a1e9933adedd2"));
        let keys = InitialKeys::client(VERSION_1, &dcid).unwrap();
        // A.2: sample d1b1c98dd7689fb8ec11d242b123dc9b → mask 437b9aec36.
        let sample: [u8; 16] = hex("d1b1c98dd7689fb8ec11d242b123dc9b").try_into().unwrap();
        assert_eq!(keys.header_mask(&sample).to_vec(), hex("437b9aec36"));
    }

    /// RFC 9369 Appendix A.1: v2 header protection key for the same DCID.
    #[test]
    fn rfc9369_v2_mask() {
        let keys = InitialKeys::client(VERSION_2, &hex("8394c8f03e515708")).unwrap();
        // A.2 of RFC 9369: sample ffe67b6abcdb4298b485dd04de806071 → mask 94a0c95e80.
        let sample: [u8; 16] = hex("ffe67b6abcdb4298b485dd04de806071").try_into().unwrap();
        assert_eq!(keys.header_mask(&sample).to_vec(), hex("94a0c95e80"));
        assert!(InitialKeys::client(0xff00_0020, b"x").is_none());
    }
}
