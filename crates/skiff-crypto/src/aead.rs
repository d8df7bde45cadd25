//! AEAD ciphers with in-place seal and open: the caller keeps one buffer per direction and
//! no chunk allocates.

use aws_lc_rs::aead::{self, Aad, LessSafeKey, Nonce, UnboundKey};

/// Every AEAD here has a 16-byte tag.
pub const TAG_LEN: usize = 16;

/// The AEAD algorithms the protocols use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AeadKind {
    Aes128Gcm,
    Aes256Gcm,
    ChaCha20Poly1305,
    /// ChaCha20-Poly1305 with a 24-byte nonce (subkey by HChaCha20 over its first 16 bytes).
    XChaCha20Poly1305,
}

impl AeadKind {
    pub fn key_len(self) -> usize {
        match self {
            AeadKind::Aes128Gcm => 16,
            AeadKind::Aes256Gcm | AeadKind::ChaCha20Poly1305 | AeadKind::XChaCha20Poly1305 => 32,
        }
    }

    pub fn nonce_len(self) -> usize {
        match self {
            AeadKind::XChaCha20Poly1305 => 24,
            _ => 12,
        }
    }

    fn algorithm(self) -> &'static aead::Algorithm {
        match self {
            AeadKind::Aes128Gcm => &aead::AES_128_GCM,
            AeadKind::Aes256Gcm => &aead::AES_256_GCM,
            AeadKind::ChaCha20Poly1305 | AeadKind::XChaCha20Poly1305 => &aead::CHACHA20_POLY1305,
        }
    }
}

/// HChaCha20 (draft-irtf-cfrg-xchacha §2.2) from RustCrypto's `chacha20`: the subkey that turns
/// a 24-byte XChaCha20 nonce into a ChaCha20-Poly1305 key. The AEAD itself stays aws-lc's
/// (assembly ChaCha20 and Poly1305); aws-lc-rs has no XChaCha20, and RustCrypto's whole
/// `XChaCha20Poly1305` would trade that for portable SIMD.
fn hchacha20(key: &[u8; 32], nonce16: &[u8]) -> [u8; 32] {
    let input = chacha20::cipher::array::Array::try_from(nonce16).expect("16-byte HChaCha input");
    chacha20::hchacha::<chacha20::R20>(key.into(), &input).into()
}

/// A message failed authentication (or was shorter than a tag). Deliberately says nothing
/// more: which part was wrong is no business of a prober's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenError;

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("message authentication failed")
    }
}

impl std::error::Error for OpenError {}

/// A key ready to seal and open.
pub struct AeadKey {
    kind: AeadKind,
    /// The AEAD key itself (for XChaCha20, the key HChaCha20 derives subkeys from).
    key: KeyState,
}

enum KeyState {
    Ready(LessSafeKey),
    XChaCha([u8; 32]),
}

impl std::fmt::Debug for AeadKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key bytes.
        f.debug_struct("AeadKey")
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

impl AeadKey {
    /// `key` must be `kind.key_len()` bytes.
    pub fn new(kind: AeadKind, key: &[u8]) -> Result<AeadKey, InvalidKeyLength> {
        if key.len() != kind.key_len() {
            return Err(InvalidKeyLength);
        }
        let key = match kind {
            AeadKind::XChaCha20Poly1305 => {
                let mut k = [0u8; 32];
                k.copy_from_slice(key);
                KeyState::XChaCha(k)
            }
            _ => KeyState::Ready(LessSafeKey::new(
                UnboundKey::new(kind.algorithm(), key).map_err(|_| InvalidKeyLength)?,
            )),
        };
        Ok(AeadKey { kind, key })
    }

    pub fn kind(&self) -> AeadKind {
        self.kind
    }

    /// Encrypts `in_out[..len - TAG_LEN]` in place and writes the tag into the last
    /// `TAG_LEN` bytes. `nonce` must be `kind.nonce_len()` bytes.
    ///
    /// # Panics
    /// If `in_out` is shorter than a tag or the nonce has the wrong length: both are
    /// programming errors of the caller, never a property of received data.
    pub fn seal_in_place(&self, nonce: &[u8], aad: &[u8], in_out: &mut [u8]) {
        let split = in_out
            .len()
            .checked_sub(TAG_LEN)
            .expect("seal buffer has room for the tag");
        let (plain, tag_out) = in_out.split_at_mut(split);
        let tag = self.with_key(nonce, |key, nonce| {
            key.seal_in_place_separate_tag(nonce, Aad::from(aad), plain)
                .expect("AEAD seal of a bounded buffer")
        });
        tag_out.copy_from_slice(tag.as_ref());
    }

    /// Decrypts `in_out` (ciphertext followed by the tag) in place; returns the plaintext,
    /// the first `in_out.len() - TAG_LEN` bytes.
    pub fn open_in_place<'a>(
        &self,
        nonce: &[u8],
        aad: &[u8],
        in_out: &'a mut [u8],
    ) -> Result<&'a mut [u8], OpenError> {
        if in_out.len() < TAG_LEN {
            return Err(OpenError);
        }
        let len = self.with_key(nonce, |key, nonce| {
            key.open_in_place(nonce, Aad::from(aad), in_out)
                .map(|plain| plain.len())
                .map_err(|_| OpenError)
        })?;
        Ok(&mut in_out[..len])
    }

    fn with_key<T>(&self, nonce: &[u8], f: impl FnOnce(&LessSafeKey, Nonce) -> T) -> T {
        assert_eq!(nonce.len(), self.kind.nonce_len(), "nonce length");
        match &self.key {
            KeyState::Ready(key) => {
                let nonce = Nonce::try_assume_unique_for_key(nonce).expect("12-byte nonce");
                f(key, nonce)
            }
            KeyState::XChaCha(key) => {
                let (head, tail) = nonce.split_at(16);
                let subkey = hchacha20(key, head);
                let sub = LessSafeKey::new(
                    UnboundKey::new(&aead::CHACHA20_POLY1305, &subkey).expect("32-byte subkey"),
                );
                let mut n = [0u8; 12];
                n[4..].copy_from_slice(tail);
                f(&sub, Nonce::assume_unique_for_key(n))
            }
        }
    }
}

/// The key had the wrong length for its algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidKeyLength;

impl std::fmt::Display for InvalidKeyLength {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("key has the wrong length for its algorithm")
    }
}

impl std::error::Error for InvalidKeyLength {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hex;
    use proptest::prelude::*;

    /// draft-irtf-cfrg-xchacha-03 §2.2.1.
    #[test]
    fn hchacha20_matches_the_draft_vector() {
        let key: [u8; 32] = core::array::from_fn(|i| i as u8);
        let nonce: [u8; 16] = [
            0x00, 0x00, 0x00, 0x09, 0x00, 0x00, 0x00, 0x4a, 0x00, 0x00, 0x00, 0x00, 0x31, 0x41,
            0x59, 0x27,
        ];
        let want = [
            0x82, 0x41, 0x3b, 0x42, 0x27, 0xb2, 0x7b, 0xfe, 0xd3, 0x0e, 0x42, 0x50, 0x8a, 0x87,
            0x7d, 0x73, 0xa0, 0xf9, 0xe4, 0xd5, 0x8a, 0x74, 0xa8, 0x53, 0xc1, 0x2e, 0xc4, 0x13,
            0x26, 0xd3, 0xec, 0xdc,
        ];
        assert_eq!(hchacha20(&key, &nonce), want);
    }

    /// draft-irtf-cfrg-xchacha-03 §A.3.1 (AEAD_XChaCha20_Poly1305 test vector).
    #[test]
    fn xchacha20_poly1305_matches_the_draft_vector() {
        let plaintext = b"Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.";
        let aad = hex("50515253c0c1c2c3c4c5c6c7");
        let key = hex("808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f");
        let nonce = hex("404142434445464748494a4b4c4d4e4f5051525354555657");
        let want = hex(concat!(
            "bd6d179d3e83d43b9576579493c0e939572a1700252bfaccbed2902c21396cbb",
            "731c7f1b0b4aa6440bf3a82f4eda7e39ae64c6708c54c216cb96b72e1213b452",
            "2f8c9ba40db5d945b11b69b982c1bb9e3f3fac2bc369488f76b2383565d3fff9",
            "21f9664c97637da9768812f615c68b13b52e",
            "c0875924c1c7987947deafd8780acf49"
        ));
        let k = AeadKey::new(AeadKind::XChaCha20Poly1305, &key).unwrap();
        let mut buf = plaintext.to_vec();
        buf.extend_from_slice(&[0; TAG_LEN]);
        k.seal_in_place(&nonce, &aad, &mut buf);
        assert_eq!(buf, want);
        let opened = k.open_in_place(&nonce, &aad, &mut buf).unwrap();
        assert_eq!(opened, plaintext);
    }

    proptest! {
        #[test]
        fn open_undoes_seal_and_any_flipped_bit_fails(
            kind in prop_oneof![
                Just(AeadKind::Aes128Gcm),
                Just(AeadKind::Aes256Gcm),
                Just(AeadKind::ChaCha20Poly1305),
                Just(AeadKind::XChaCha20Poly1305),
            ],
            plain in proptest::collection::vec(any::<u8>(), 0..200),
            aad in proptest::collection::vec(any::<u8>(), 0..20),
            flip in any::<proptest::sample::Index>(),
            seed in any::<u8>(),
        ) {
            let key: Vec<u8> = (0..kind.key_len()).map(|i| seed.wrapping_add(i as u8)).collect();
            let nonce: Vec<u8> = (0..kind.nonce_len()).map(|i| (i as u8) ^ seed).collect();
            let k = AeadKey::new(kind, &key).unwrap();
            let mut buf = plain.clone();
            buf.extend_from_slice(&[0; TAG_LEN]);
            k.seal_in_place(&nonce, &aad, &mut buf);
            let mut tampered = buf.clone();
            let at = flip.index(tampered.len());
            tampered[at] ^= 1;
            prop_assert!(k.open_in_place(&nonce, &aad, &mut tampered).is_err());
            let opened = k.open_in_place(&nonce, &aad, &mut buf).unwrap();
            prop_assert_eq!(&opened[..], &plain[..]);
        }
    }

    #[test]
    fn short_input_and_wrong_key_length_are_errors() {
        assert!(AeadKey::new(AeadKind::Aes128Gcm, &[0; 32]).is_err());
        let k = AeadKey::new(AeadKind::Aes128Gcm, &[0; 16]).unwrap();
        assert_eq!(k.open_in_place(&[0; 12], b"", &mut [0; 15]), Err(OpenError));
    }
}
