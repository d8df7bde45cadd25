//! `--auth-mode`: a tag appended after the data it covers.
//!
//! | mode | tag | covers |
//! |---|---|---|
//! | `none` | nothing | — |
//! | `md5` (default) | MD5 of the data, 16 bytes (no key) | plaintext, then encrypted with it |
//! | `crc32` | CRC-32 (IEEE) of the data, big-endian, 4 bytes | plaintext, then encrypted |
//! | `simple` | djb2-xor then sdbm hash, each 32-bit big-endian, 8 bytes | plaintext, then encrypted |
//! | `hmac_sha1` | HMAC-SHA1 with the first 20 bytes of the direction's HMAC key, 20 bytes | the ciphertext |
//!
//! Only `hmac_sha1` is keyed: the other tags are checksums that the cipher hides.

use hmac::{Hmac, KeyInit, Mac};
use md5::Digest as _;
use sha1::Sha1;

use crate::Error;

/// One of udp2raw's `--auth-mode` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AuthMode {
    None,
    Md5,
    Crc32,
    Simple,
    HmacSha1,
}

/// How many bytes of the HMAC key udp2raw feeds to HMAC-SHA1.
pub const HMAC_KEY_LEN: usize = 20;

impl AuthMode {
    /// Every mode, in udp2raw's order.
    pub const ALL: [AuthMode; 5] = [
        AuthMode::None,
        AuthMode::Md5,
        AuthMode::Crc32,
        AuthMode::Simple,
        AuthMode::HmacSha1,
    ];

    /// The name `--auth-mode` takes.
    pub fn name(self) -> &'static str {
        match self {
            AuthMode::None => "none",
            AuthMode::Md5 => "md5",
            AuthMode::Crc32 => "crc32",
            AuthMode::Simple => "simple",
            AuthMode::HmacSha1 => "hmac_sha1",
        }
    }

    /// The mode `--auth-mode NAME` selects.
    pub fn from_name(name: &str) -> Option<AuthMode> {
        AuthMode::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Bytes the tag adds.
    pub fn tag_len(self) -> usize {
        match self {
            AuthMode::None => 0,
            AuthMode::Md5 => 16,
            AuthMode::Crc32 => 4,
            AuthMode::Simple => 8,
            AuthMode::HmacSha1 => 20,
        }
    }

    /// udp2raw turns its anti-replay window off under `--auth-mode none`.
    pub fn anti_replay(self) -> bool {
        self != AuthMode::None
    }

    /// Appends the tag of `buf` to `buf`; `hmac_key` is only read by `hmac_sha1`.
    pub fn append_tag(self, buf: &mut Vec<u8>, hmac_key: &[u8]) {
        let mut tag = [0u8; 20];
        let n = self.tag_len();
        self.compute(buf, hmac_key, &mut tag);
        buf.extend_from_slice(&tag[..n]);
    }

    /// Checks the tag at the end of `data` and returns the data before it.
    pub fn verify<'a>(self, data: &'a [u8], hmac_key: &[u8]) -> Result<&'a [u8], Error> {
        let n = self.tag_len();
        if data.len() < n {
            return Err(crate::truncated("authenticated packet", data.len(), n));
        }
        let (body, tag) = data.split_at(data.len() - n);
        let mut want = [0u8; 20];
        self.compute(body, hmac_key, &mut want);
        // Not secret-dependent timing for the keyless checksums; for HMAC compare in constant
        // time anyway.
        let diff = tag
            .iter()
            .zip(&want[..n])
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        if diff != 0 {
            return Err(Error::AuthFailed(self));
        }
        Ok(body)
    }

    fn compute(self, data: &[u8], hmac_key: &[u8], out: &mut [u8; 20]) {
        match self {
            AuthMode::None => {}
            AuthMode::Md5 => out[..16].copy_from_slice(&md5::Md5::digest(data)),
            AuthMode::Crc32 => out[..4].copy_from_slice(&crc32fast::hash(data).to_be_bytes()),
            AuthMode::Simple => out[..8].copy_from_slice(&simple_hash(data)),
            AuthMode::HmacSha1 => {
                let key = &hmac_key[..hmac_key.len().min(HMAC_KEY_LEN)];
                let mut mac = Hmac::<Sha1>::new_from_slice(key).expect("HMAC takes any key length");
                mac.update(data);
                out.copy_from_slice(&mac.finalize().into_bytes());
            }
        }
    }
}

/// udp2raw's "simple" hash: a djb2 variant (h = h·33 ⊕ c, from 5381) and sdbm
/// (h = c + (h << 6) + (h << 16) − h, from 0), both wrapping 32-bit, each big-endian.
pub fn simple_hash(data: &[u8]) -> [u8; 8] {
    let (mut a, mut b) = (5381u32, 0u32);
    for &c in data {
        let c = u32::from(c);
        a = a.wrapping_shl(5).wrapping_add(a) ^ c;
        b = c.wrapping_add(b << 6).wrapping_add(b << 16).wrapping_sub(b);
    }
    let mut out = [0u8; 8];
    out[..4].copy_from_slice(&a.to_be_bytes());
    out[4..].copy_from_slice(&b.to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for m in AuthMode::ALL {
            assert_eq!(AuthMode::from_name(m.name()), Some(m));
        }
        assert_eq!(AuthMode::from_name("sha1"), None);
    }

    #[test]
    fn simple_hash_of_empty_is_the_seeds() {
        assert_eq!(simple_hash(b""), [0, 0, 0x15, 0x05, 0, 0, 0, 0]);
        // One byte: a = 5381*33 ^ 'a', b = 'a'.
        let h = simple_hash(b"a");
        assert_eq!(
            u32::from_be_bytes(h[..4].try_into().unwrap()),
            (5381 * 33) ^ 0x61
        );
        assert_eq!(u32::from_be_bytes(h[4..].try_into().unwrap()), 0x61);
    }

    #[test]
    fn crc32_is_ieee_big_endian() {
        let mut v = b"123456789".to_vec();
        AuthMode::Crc32.append_tag(&mut v, &[]);
        assert_eq!(&v[9..], &0xCBF4_3926u32.to_be_bytes());
    }

    #[test]
    fn every_tag_verifies_and_detects_a_flip() {
        let key = [7u8; 64];
        for m in AuthMode::ALL {
            let mut v = b"some data".to_vec();
            m.append_tag(&mut v, &key);
            assert_eq!(m.verify(&v, &key).unwrap(), b"some data");
            if m != AuthMode::None {
                v[0] ^= 1;
                assert_eq!(m.verify(&v, &key), Err(Error::AuthFailed(m)));
            }
        }
    }
}
