//! Shadowsocks' own derivations (shadowsocks.md): the AEAD-2017 session subkey, the 2022
//! session and identity subkeys, the 2022 user hash, the single AES block that hides 2022 UDP
//! headers and identity headers, and the random bytes salts, padding and session ids need.

use aws_lc_rs::cipher::{
    AES_128, AES_256, DecryptingKey, DecryptionContext, EncryptingKey, UnboundCipherKey,
};

use crate::aead::InvalidKeyLength;

/// HKDF info of the AEAD-2017 session subkey (§1.2).
const AEAD_SUBKEY_INFO: &[u8] = b"ss-subkey";
/// BLAKE3 context of the 2022 session subkey (§2.1).
const SESSION_SUBKEY_CONTEXT: &str = "shadowsocks 2022 session subkey";
/// BLAKE3 context of the 2022 identity subkey (SIP023, §2.7).
const IDENTITY_SUBKEY_CONTEXT: &str = "shadowsocks 2022 identity subkey";

/// AEAD-2017 session subkey: HKDF-SHA1(master key, salt, "ss-subkey"), as long as `out`.
pub fn aead_subkey(master: &[u8], salt: &[u8], out: &mut [u8]) {
    crate::kdf::hkdf_sha1(master, salt, AEAD_SUBKEY_INFO, out);
}

/// 2022 session subkey: BLAKE3 derive_key over PSK ‖ salt (TCP) or PSK ‖ session id (UDP).
pub fn session_subkey_2022(psk: &[u8], salt: &[u8], out: &mut [u8]) {
    crate::kdf::blake3_derive_key(SESSION_SUBKEY_CONTEXT, &[psk, salt], out);
}

/// 2022 identity subkey (TCP identity headers): BLAKE3 derive_key over iPSK ‖ salt.
pub fn identity_subkey_2022(ipsk: &[u8], salt: &[u8], out: &mut [u8]) {
    crate::kdf::blake3_derive_key(IDENTITY_SUBKEY_CONTEXT, &[ipsk, salt], out);
}

/// The first 16 bytes of BLAKE3(PSK): what an identity header carries to name the next key.
pub fn psk_hash_2022(psk: &[u8]) -> [u8; 16] {
    let hash = blake3::hash(psk);
    let mut out = [0u8; 16];
    out.copy_from_slice(&hash.as_bytes()[..16]);
    out
}

/// One AES-128 or AES-256 key used on single 16-byte blocks (ECB): the 2022 UDP separate
/// header and the identity headers.
pub struct AesBlock {
    enc: EncryptingKey,
    dec: DecryptingKey,
}

impl std::fmt::Debug for AesBlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AesBlock").finish_non_exhaustive()
    }
}

impl AesBlock {
    /// `key` must be 16 (AES-128) or 32 (AES-256) bytes.
    pub fn new(key: &[u8]) -> Result<AesBlock, InvalidKeyLength> {
        let algorithm = match key.len() {
            16 => &AES_128,
            32 => &AES_256,
            _ => return Err(InvalidKeyLength),
        };
        let unbound = || UnboundCipherKey::new(algorithm, key).map_err(|_| InvalidKeyLength);
        Ok(AesBlock {
            enc: EncryptingKey::ecb(unbound()?).map_err(|_| InvalidKeyLength)?,
            dec: DecryptingKey::ecb(unbound()?).map_err(|_| InvalidKeyLength)?,
        })
    }

    pub fn encrypt(&self, block: &mut [u8; 16]) {
        self.enc
            .encrypt(block)
            .expect("AES-ECB of exactly one block");
    }

    pub fn decrypt(&self, block: &mut [u8; 16]) {
        self.dec
            .decrypt(block, DecryptionContext::None)
            .expect("AES-ECB of exactly one block");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hex;

    fn seq(from: u8, len: usize) -> Vec<u8> {
        (0..len).map(|i| from + i as u8).collect()
    }

    /// shadowsocks.md §1.1, §1.2.
    #[test]
    fn aead_2017_subkeys_match_the_spec() {
        let master16 = crate::kdf::evp_bytes_to_key(b"test", 16);
        assert_eq!(master16, hex("098f6bcd4621d373cade4e832627b4f6"));
        let mut out = [0u8; 16];
        aead_subkey(&master16, &seq(0, 16), &mut out);
        assert_eq!(out[..], hex("96b249baa3b4e00f502f84a5a90ac784"));
        let master32 = crate::kdf::evp_bytes_to_key(b"test", 32);
        assert_eq!(
            master32,
            hex("098f6bcd4621d373cade4e832627b4f60a9172716ae6428409885b8b829ccb05")
        );
        let mut out = [0u8; 32];
        aead_subkey(&master32, &seq(0, 32), &mut out);
        assert_eq!(
            out[..],
            hex("0205fa486aabee35ab86fc1fa015f3a9fc5c8ce7657db427d9ba55b49e718953")
        );
    }

    /// shadowsocks.md §2.1, §2.5, §2.7.
    #[test]
    fn subkeys_2022_match_the_spec() {
        let mut out = [0u8; 16];
        session_subkey_2022(&seq(0, 16), &seq(0x10, 16), &mut out);
        assert_eq!(out[..], hex("bc32fb8d5205f7b84f9691dfb9f04ff3"));
        let mut out = [0u8; 32];
        session_subkey_2022(&seq(0, 32), &seq(0x20, 32), &mut out);
        assert_eq!(
            out[..],
            hex("374fca03e4dae7f998fd7e59c1edfcc8e3197f4db1c19ca1671be3b66a92ddda")
        );
        let mut out = [0u8; 16];
        session_subkey_2022(&[0; 16], &[0; 16], &mut out);
        assert_eq!(out[..], hex("550d0146b248c42396e4d281af31e812"));
        let mut out = [0u8; 16];
        session_subkey_2022(&seq(0, 16), &hex("0102030405060708"), &mut out);
        assert_eq!(out[..], hex("b8473b44792f673ee36a405dfa755cc4"));
        let mut out = [0u8; 16];
        identity_subkey_2022(&seq(0, 16), &seq(0x10, 16), &mut out);
        assert_eq!(out[..], hex("c6929b0d4d713bf21148dfc4f34dd083"));
        assert_eq!(
            psk_hash_2022(&seq(0, 16))[..],
            hex("a6a492965517a830cb75fdb713465aa4")
        );
    }

    /// shadowsocks.md §2.5: the separate header of session 0102030405060708, packet 1.
    #[test]
    fn aes_block_matches_the_udp_vector_and_round_trips() {
        let aes = AesBlock::new(&seq(0, 16)).unwrap();
        let mut block: [u8; 16] = hex("01020304050607080000000000000001").try_into().unwrap();
        aes.encrypt(&mut block);
        assert_eq!(block[..], hex("cf91ad9eddf9ce645b515e2382d1c8cc"));
        aes.decrypt(&mut block);
        assert_eq!(block[..], hex("01020304050607080000000000000001"));
        let aes256 = AesBlock::new(&[7; 32]).unwrap();
        let mut block = [9u8; 16];
        aes256.encrypt(&mut block);
        assert_ne!(block, [9u8; 16]);
        aes256.decrypt(&mut block);
        assert_eq!(block, [9u8; 16]);
        assert!(AesBlock::new(&[0; 24]).is_err());
    }

    #[test]
    fn random_bytes_differ() {
        let (mut a, mut b) = ([0u8; 32], [0u8; 32]);
        crate::random::fill(&mut a);
        crate::random::fill(&mut b);
        assert_ne!(a, b);
    }
}
