//! The hashes the protocols name, behind one door.

use md5::Digest as _;
use shake::{ExtendableOutput, Update, XofReader};

pub fn md5(parts: &[&[u8]]) -> [u8; 16] {
    let mut h = md5::Md5::new();
    for p in parts {
        md5::Digest::update(&mut h, p);
    }
    h.finalize().into()
}

pub fn sha1(parts: &[&[u8]]) -> [u8; 20] {
    let mut h = sha1::Sha1::new();
    for p in parts {
        sha1::Digest::update(&mut h, p);
    }
    h.finalize().into()
}

pub fn sha256(parts: &[&[u8]]) -> [u8; 32] {
    let mut h = sha2::Sha256::new();
    for p in parts {
        sha2::Digest::update(&mut h, p);
    }
    h.finalize().into()
}

pub fn sha224(parts: &[&[u8]]) -> [u8; 28] {
    let mut h = sha2::Sha224::new();
    for p in parts {
        sha2::Digest::update(&mut h, p);
    }
    h.finalize().into()
}

/// BLAKE3 with 32 bytes of output (`xray x25519` prints it of the public key as "Hash32").
pub fn blake3(parts: &[&[u8]]) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().into()
}

/// CRC-32 (IEEE), as VMess's auth ID carries it.
pub fn crc32(data: &[u8]) -> u32 {
    crc32fast::hash(data)
}

/// FNV-1a 32-bit, VMess's header checksum.
pub fn fnv1a32(data: &[u8]) -> u32 {
    data.iter().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    })
}

/// A SHAKE128 stream (VMess chunk-length masking): squeeze as many bytes as needed.
pub struct Shake128Stream(shake::Shake128Reader);

impl Shake128Stream {
    pub fn new(seed: &[u8]) -> Shake128Stream {
        let mut h = shake::Shake128::default();
        h.update(seed);
        Shake128Stream(h.finalize_xof())
    }

    pub fn next_u16(&mut self) -> u16 {
        let mut b = [0u8; 2];
        self.0.read(&mut b);
        u16::from_be_bytes(b)
    }

    pub fn fill(&mut self, out: &mut [u8]) {
        self.0.read(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_digests() {
        assert_eq!(
            md5(&[b"abc"]),
            [
                0x90, 0x01, 0x50, 0x98, 0x3c, 0xd2, 0x4f, 0xb0, 0xd6, 0x96, 0x3f, 0x7d, 0x28, 0xe1,
                0x7f, 0x72
            ]
        );
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
        assert_eq!(fnv1a32(b""), 0x811c_9dc5);
        assert_eq!(fnv1a32(b"a"), 0xe40c_292c);
        assert_eq!(sha256(&[b"a", b"bc"]), sha256(&[b"abc"]));
    }
}
