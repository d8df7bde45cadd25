//! Key derivations shared by protocols. Protocol-specific ones (VMess's nested HMAC KDF,
//! Shadowsocks' subkeys) live next to these in their own functions.

/// OpenSSL's EVP_BytesToKey with MD5 and no salt, one iteration: how Shadowsocks turns a
/// password into a key of `len` bytes.
pub fn evp_bytes_to_key(password: &[u8], len: usize) -> Vec<u8> {
    let mut key = Vec::with_capacity(len + 16);
    let mut prev: Option<[u8; 16]> = None;
    while key.len() < len {
        let block = match &prev {
            Some(p) => crate::hash::md5(&[p, password]),
            None => crate::hash::md5(&[password]),
        };
        key.extend_from_slice(&block);
        prev = Some(block);
    }
    key.truncate(len);
    key
}

/// HKDF-SHA1 (RFC 5869) expanding `len` bytes: Shadowsocks AEAD's per-session subkey.
pub fn hkdf_sha1(ikm: &[u8], salt: &[u8], info: &[u8], out: &mut [u8]) {
    use aws_lc_rs::hkdf::{HKDF_SHA1_FOR_LEGACY_USE_ONLY, KeyType, Salt};
    struct Len(usize);
    impl KeyType for Len {
        fn len(&self) -> usize {
            self.0
        }
    }
    let prk = Salt::new(HKDF_SHA1_FOR_LEGACY_USE_ONLY, salt).extract(ikm);
    let info = [info];
    let okm = prk
        .expand(&info, Len(out.len()))
        .expect("HKDF-SHA1 output of at most 255 blocks");
    okm.fill(out).expect("HKDF-SHA1 fill of the asked length");
}

/// HKDF-SHA256 (RFC 5869), extract then expand, filling `out` (at most 255 × 32 bytes):
/// REALITY's session key.
pub fn hkdf_sha256(ikm: &[u8], salt: &[u8], info: &[u8], out: &mut [u8]) {
    use aws_lc_rs::hkdf::{HKDF_SHA256, KeyType, Salt};
    struct Len(usize);
    impl KeyType for Len {
        fn len(&self) -> usize {
            self.0
        }
    }
    let prk = Salt::new(HKDF_SHA256, salt).extract(ikm);
    let info = [info];
    let okm = prk
        .expand(&info, Len(out.len()))
        .expect("HKDF-SHA256 output of at most 255 blocks");
    okm.fill(out).expect("HKDF-SHA256 fill of the asked length");
}

/// HMAC-SHA512 over the concatenation of `parts`: what REALITY puts in its temporary
/// certificate's signature field.
pub fn hmac_sha512(key: &[u8], parts: &[&[u8]]) -> [u8; 64] {
    use aws_lc_rs::hmac;
    let key = hmac::Key::new(hmac::HMAC_SHA512, key);
    let mut ctx = hmac::Context::with_key(&key);
    for p in parts {
        ctx.update(p);
    }
    let mut out = [0u8; 64];
    out.copy_from_slice(ctx.sign().as_ref());
    out
}

/// PBKDF2-HMAC-SHA1 (RFC 8018) filling `out`: kcptun's key schedule and kcp-go's XOR table.
/// `iterations` of 0 counts as 1.
pub fn pbkdf2_hmac_sha1(secret: &[u8], salt: &[u8], iterations: u32, out: &mut [u8]) {
    let iterations = std::num::NonZeroU32::new(iterations).unwrap_or(std::num::NonZeroU32::MIN);
    aws_lc_rs::pbkdf2::derive(
        aws_lc_rs::pbkdf2::PBKDF2_HMAC_SHA1,
        iterations,
        salt,
        secret,
        out,
    );
}

/// BLAKE3 in key-derivation mode: Shadowsocks 2022's session subkey.
pub fn blake3_derive_key(context: &str, material: &[&[u8]], out: &mut [u8]) {
    let mut h = blake3::Hasher::new_derive_key(context);
    for m in material {
        h.update(m);
    }
    h.finalize_xof().fill(out);
}

/// HMAC-SHA256.
pub fn hmac_sha256(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    use aws_lc_rs::hmac;
    let key = hmac::Key::new(hmac::HMAC_SHA256, key);
    let mut ctx = hmac::Context::with_key(&key);
    for p in parts {
        ctx.update(p);
    }
    let mut out = [0u8; 32];
    out.copy_from_slice(ctx.sign().as_ref());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Shadowsocks' key for password "foobar" with a 32-byte cipher, as ss-libev derives it.
    #[test]
    fn evp_bytes_to_key_extends_md5_blocks() {
        let k = evp_bytes_to_key(b"foobar", 32);
        assert_eq!(&k[..16], &crate::hash::md5(&[b"foobar"]));
        assert_eq!(&k[16..], &crate::hash::md5(&[&k[..16], b"foobar"]));
        assert_eq!(evp_bytes_to_key(b"foobar", 16), k[..16]);
    }

    /// RFC 5869 test case 4 (SHA-1).
    #[test]
    fn hkdf_sha1_rfc5869_case_4() {
        let ikm = [0x0b; 11];
        let salt: Vec<u8> = (0..=0x0c).collect();
        let info: Vec<u8> = (0xf0..=0xf9).collect();
        let mut okm = [0u8; 42];
        hkdf_sha1(&ikm, &salt, &info, &mut okm);
        assert_eq!(okm[..8], [0x08, 0x5a, 0x01, 0xea, 0x1b, 0x10, 0xf3, 0x69]);
    }

    #[test]
    fn hkdf_sha256_rfc5869_case_1() {
        let ikm = [0x0b; 22];
        let salt: Vec<u8> = (0..=0x0c).collect();
        let info: Vec<u8> = (0xf0..=0xf9).collect();
        let mut okm = [0u8; 42];
        hkdf_sha256(&ikm, &salt, &info, &mut okm);
        assert_eq!(okm[..8], [0x3c, 0xb2, 0x5f, 0x25, 0xfa, 0xac, 0xd5, 0x7a]);
    }

    #[test]
    fn hmac_sha512_rfc4231_case_2() {
        let mac = hmac_sha512(b"Jefe", &[b"what do ya want ", b"for nothing?"]);
        assert_eq!(mac[..4], [0x16, 0x4b, 0x7a, 0x7b]);
    }

    #[test]
    fn hmac_sha256_rfc4231_case_2() {
        let mac = hmac_sha256(b"Jefe", &[b"what do ya want ", b"for nothing?"]);
        assert_eq!(mac[..4], [0x5b, 0xdc, 0xc1, 0x46]);
    }
}
