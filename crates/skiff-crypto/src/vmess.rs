//! The primitives only VMess uses (vmess.md §1.1, §2.1): its nested-HMAC key derivation, the
//! single AES-128 block that hides the auth ID, and the random bytes its headers and chunk
//! padding need.

use aws_lc_rs::cipher::{AES_128, DecryptingKey, EncryptingKey, UnboundCipherKey};

/// The root HMAC key of every VMess KDF.
const KDF_ROOT: &[u8] = b"VMess AEAD KDF";
/// SHA-256's block size, the HMAC block size at every level.
const BLOCK: usize = 64;

/// `KDF(key, path…)` (vmess.md §1.1): HMAC nested once per path element, each level using
/// the level below as its hash function, with SHA-256 at the bottom and "VMess AEAD KDF" as
/// the innermost key; `key` is the message of the outermost HMAC.
pub fn kdf(key: &[u8], path: &[&[u8]]) -> [u8; 32] {
    let mut keys: Vec<&[u8]> = Vec::with_capacity(path.len() + 1);
    keys.push(KDF_ROOT);
    keys.extend_from_slice(path);
    nested(&keys, &[key])
}

/// The first 16 bytes of [`kdf`]: VMess's 128-bit keys.
pub fn kdf16(key: &[u8], path: &[&[u8]]) -> [u8; 16] {
    let full = kdf(key, path);
    let mut out = [0u8; 16];
    out.copy_from_slice(&full[..16]);
    out
}

/// `H_n(message)` where `keys[n-1]` is the HMAC key of level n and `H_0` is SHA-256.
/// Each level hashes twice with the level below, so the cost is 2^n SHA-256 runs: fine for
/// the four-level derivations of a handshake.
fn nested(keys: &[&[u8]], message: &[&[u8]]) -> [u8; 32] {
    let Some((key, below)) = keys.split_last() else {
        return crate::hash::sha256(message);
    };
    let mut k0 = [0u8; BLOCK];
    if key.len() > BLOCK {
        // HMAC hashes over-long keys with its own hash function (never the case in VMess).
        k0[..32].copy_from_slice(&nested(below, &[key]));
    } else {
        k0[..key.len()].copy_from_slice(key);
    }
    let mut ipad = [0x36u8; BLOCK];
    let mut opad = [0x5cu8; BLOCK];
    for ((i, o), k) in ipad.iter_mut().zip(opad.iter_mut()).zip(k0) {
        *i ^= k;
        *o ^= k;
    }
    let mut inner_message: Vec<&[u8]> = Vec::with_capacity(message.len() + 1);
    inner_message.push(&ipad);
    inner_message.extend_from_slice(message);
    let inner = nested(below, &inner_message);
    nested(below, &[&opad, &inner])
}

/// The auth ID's AES-128 key for a user's command key (`MD5(UUID || magic)`).
fn auth_id_key(cmd_key: &[u8; 16]) -> UnboundCipherKey {
    let key = kdf16(cmd_key, &[b"AES Auth ID Encryption"]);
    UnboundCipherKey::new(&AES_128, &key).expect("16-byte AES-128 key")
}

/// Seals auth IDs: AES-128 on one 16-byte block (ECB, no padding) under
/// `KDF16(CmdKey, "AES Auth ID Encryption")`. A client keeps one per user.
pub struct AuthIdSealer(EncryptingKey);

/// Opens auth IDs (the inverse of [`AuthIdSealer`]). A server keeps one per user, with only
/// the decryption key schedule, and pays one block decryption per try.
pub struct AuthIdOpener(DecryptingKey);

impl std::fmt::Debug for AuthIdSealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AuthIdSealer(..)")
    }
}

impl std::fmt::Debug for AuthIdOpener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AuthIdOpener(..)")
    }
}

impl AuthIdSealer {
    pub fn for_cmd_key(cmd_key: &[u8; 16]) -> AuthIdSealer {
        AuthIdSealer(EncryptingKey::ecb(auth_id_key(cmd_key)).expect("AES-128 supports ECB"))
    }

    /// Encrypts one block in place.
    pub fn encrypt_block(&self, block: &mut [u8; 16]) {
        // ECB on exactly one block cannot fail: the length is a multiple of the block size
        // and ECB takes no IV.
        self.0
            .encrypt(block)
            .expect("AES-128-ECB on one whole block");
    }
}

impl AuthIdOpener {
    pub fn for_cmd_key(cmd_key: &[u8; 16]) -> AuthIdOpener {
        AuthIdOpener(DecryptingKey::ecb(auth_id_key(cmd_key)).expect("AES-128 supports ECB"))
    }

    /// Decrypts one block in place.
    pub fn decrypt_block(&self, block: &mut [u8; 16]) {
        self.0
            .decrypt(block, aws_lc_rs::cipher::DecryptionContext::None)
            .expect("AES-128-ECB on one whole block");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hex;

    /// v2fly's known-answer test (vmess.md §1.1).
    #[test]
    fn kdf_matches_v2fly_known_answer() {
        let out = kdf(
            b"Demo Key for KDF Value Test",
            &[
                b"Demo Path for KDF Value Test",
                b"Demo Path for KDF Value Test2",
                b"Demo Path for KDF Value Test3",
            ],
        );
        assert_eq!(
            out.to_vec(),
            hex("53e9d7e1bd7bd25022b71ead07d8a596efc8a845c7888652fd684b4903dc8892")
        );
    }

    /// With no path the KDF is plain HMAC-SHA256 keyed with "VMess AEAD KDF".
    #[test]
    fn kdf_without_path_is_hmac_sha256() {
        assert_eq!(
            kdf(b"some key", &[]),
            crate::kdf::hmac_sha256(KDF_ROOT, &[b"some key"])
        );
        // One path element: HMAC whose hash is that HMAC; an over-long element is hashed
        // first rather than refused.
        let long = [7u8; 100];
        assert_ne!(kdf(b"k", &[&long]), kdf(b"k", &[&long[..64]]));
    }

    /// vmess.md §2.4: CmdKey, auth-ID key, and the sealed auth ID.
    #[test]
    fn auth_id_vector() {
        let cmd_key: [u8; 16] = hex("b50d916ac0cec067981af8e5f38a758f").try_into().unwrap();
        assert_eq!(
            kdf16(&cmd_key, &[b"AES Auth ID Encryption"]).to_vec(),
            hex("1415ba74ca8b3d041a8f583fb4116315")
        );
        let plain: [u8; 16] = hex("000000006553f10001020304b85575f7").try_into().unwrap();
        let mut block = plain;
        AuthIdSealer::for_cmd_key(&cmd_key).encrypt_block(&mut block);
        assert_eq!(block.to_vec(), hex("4774fe5cc901ea4f81f2159909767a36"));
        AuthIdOpener::for_cmd_key(&cmd_key).decrypt_block(&mut block);
        assert_eq!(block, plain);
    }

    /// vmess.md §2.4: the four header derivations for AuthID A and nonce N.
    #[test]
    fn header_key_vectors() {
        let cmd_key = hex("b50d916ac0cec067981af8e5f38a758f");
        let a = hex("4774fe5cc901ea4f81f2159909767a36");
        let n = hex("a1a2a3a4a5a6a7a8");
        let cases = [
            (
                &b"VMess Header AEAD Key_Length"[..],
                "d08592538d1c58fd8c3734f9a63da730",
            ),
            (
                b"VMess Header AEAD Nonce_Length",
                "43fe9e03198988fa18214ac3",
            ),
            (b"VMess Header AEAD Key", "267524516fff957a83eac58e9c2c9701"),
            (b"VMess Header AEAD Nonce", "1ec314448de192433f298be2"),
        ];
        for (salt, want) in cases {
            let want = hex(want);
            assert_eq!(&kdf(&cmd_key, &[salt, &a, &n])[..want.len()], &want[..]);
        }
    }

    #[test]
    fn random_fills() {
        let mut a = [0u8; 32];
        let mut b = [0u8; 32];
        crate::random::fill(&mut a);
        crate::random::fill(&mut b);
        assert_ne!(a, b);
    }
}
