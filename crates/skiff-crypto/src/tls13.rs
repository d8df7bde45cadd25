//! The primitives a TLS 1.3 client handshake of our own needs (RFC 8446 §7): the transcript
//! hashes, HKDF-Extract / HKDF-Expand-Label over SHA-256 and SHA-384, HMAC for Finished, the
//! ephemeral key exchanges a browser offers (X25519, P-256, and the ML-KEM-768 half of
//! X25519MLKEM768), and the Ed25519 check of a REALITY server's CertificateVerify.

use aws_lc_rs::agreement::{self, ECDH_P256, EphemeralPrivateKey, UnparsedPublicKey};
use aws_lc_rs::digest;
use aws_lc_rs::hkdf::{self, KeyType, Prk};
use aws_lc_rs::hmac;
use aws_lc_rs::kem::{Ciphertext, DecapsulationKey, ML_KEM_768};
use aws_lc_rs::rand::SystemRandom;

/// The hash a cipher suite runs its key schedule and transcript over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HashKind {
    Sha256,
    Sha384,
}

/// The longest hash output here (SHA-384).
pub const MAX_HASH_LEN: usize = 48;

impl HashKind {
    pub fn output_len(self) -> usize {
        match self {
            HashKind::Sha256 => 32,
            HashKind::Sha384 => 48,
        }
    }

    fn digest_alg(self) -> &'static digest::Algorithm {
        match self {
            HashKind::Sha256 => &digest::SHA256,
            HashKind::Sha384 => &digest::SHA384,
        }
    }

    fn hmac_alg(self) -> hmac::Algorithm {
        match self {
            HashKind::Sha256 => hmac::HMAC_SHA256,
            HashKind::Sha384 => hmac::HMAC_SHA384,
        }
    }

    fn hkdf_alg(self) -> hkdf::Algorithm {
        match self {
            HashKind::Sha256 => hkdf::HKDF_SHA256,
            HashKind::Sha384 => hkdf::HKDF_SHA384,
        }
    }

    /// The hash of `data`.
    pub fn hash(self, data: &[u8]) -> Vec<u8> {
        digest::digest(self.digest_alg(), data).as_ref().to_vec()
    }

    /// HMAC with this hash.
    pub fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        hmac::sign(&hmac::Key::new(self.hmac_alg(), key), data)
            .as_ref()
            .to_vec()
    }

    /// HKDF-Extract (RFC 5869 §2.2): HMAC(salt, ikm). An empty salt means a zero string.
    pub fn extract(self, salt: &[u8], ikm: &[u8]) -> Vec<u8> {
        let zeros = [0u8; MAX_HASH_LEN];
        let salt = if salt.is_empty() {
            &zeros[..self.output_len()]
        } else {
            salt
        };
        self.hmac(salt, ikm)
    }

    /// HKDF-Expand-Label (RFC 8446 §7.1) of `len` bytes.
    pub fn expand_label(self, secret: &[u8], label: &[u8], context: &[u8], len: usize) -> Vec<u8> {
        let full_label = 6 + label.len();
        let mut info = Vec::with_capacity(4 + full_label + context.len());
        info.extend_from_slice(&(len as u16).to_be_bytes());
        info.push(full_label as u8);
        info.extend_from_slice(b"tls13 ");
        info.extend_from_slice(label);
        info.push(context.len() as u8);
        info.extend_from_slice(context);
        let mut out = vec![0u8; len];
        Prk::new_less_safe(self.hkdf_alg(), secret)
            .expand(&[&info], Len(len))
            .and_then(|okm| okm.fill(&mut out))
            .expect("TLS 1.3 labels stay far below HKDF's output bound");
        out
    }
}

/// A running transcript hash: feed handshake messages, read the hash so far.
#[derive(Clone)]
pub struct Transcript(digest::Context);

impl Transcript {
    pub fn new(kind: HashKind) -> Transcript {
        Transcript(digest::Context::new(kind.digest_alg()))
    }

    pub fn update(&mut self, data: &[u8]) {
        self.0.update(data);
    }

    /// The hash of everything fed so far (the transcript goes on).
    pub fn current(&self) -> Vec<u8> {
        self.0.clone().finish().as_ref().to_vec()
    }
}

/// A length `HKDF-Expand` should produce, as aws-lc-rs wants it said.
struct Len(usize);

impl KeyType for Len {
    fn len(&self) -> usize {
        self.0
    }
}

/// Ed25519 signature verification (RFC 8032): a REALITY server signs CertificateVerify with
/// its temporary certificate's Ed25519 key.
pub fn ed25519_verify(public_key: &[u8], message: &[u8], signature: &[u8]) -> bool {
    aws_lc_rs::signature::UnparsedPublicKey::new(&aws_lc_rs::signature::ED25519, public_key)
        .verify(message, signature)
        .is_ok()
}

/// An ML-KEM-768 key pair for the X25519MLKEM768 key share (draft-ietf-tls-ecdhe-mlkem).
pub struct MlKem768 {
    key: DecapsulationKey<aws_lc_rs::kem::AlgorithmId>,
    encapsulation_key: Vec<u8>,
}

/// ML-KEM-768's encapsulation key length (what the client sends).
pub const MLKEM768_KEY_LEN: usize = 1184;
/// ML-KEM-768's ciphertext length (what the server answers).
pub const MLKEM768_CIPHERTEXT_LEN: usize = 1088;

impl MlKem768 {
    pub fn generate() -> Option<MlKem768> {
        let key = DecapsulationKey::generate(&ML_KEM_768).ok()?;
        let encapsulation_key = key
            .encapsulation_key()
            .ok()?
            .key_bytes()
            .ok()?
            .as_ref()
            .to_vec();
        Some(MlKem768 {
            key,
            encapsulation_key,
        })
    }

    pub fn encapsulation_key(&self) -> &[u8] {
        &self.encapsulation_key
    }

    /// The shared secret of the server's ciphertext; `None` for a malformed one.
    pub fn decapsulate(&self, ciphertext: &[u8]) -> Option<[u8; 32]> {
        if ciphertext.len() != MLKEM768_CIPHERTEXT_LEN {
            return None;
        }
        let secret = self.key.decapsulate(Ciphertext::from(ciphertext)).ok()?;
        secret.as_ref().try_into().ok()
    }
}

/// An ephemeral P-256 ECDH key (Firefox and Safari offer a P-256 share).
pub struct P256Ephemeral {
    key: EphemeralPrivateKey,
    public: Vec<u8>,
}

impl P256Ephemeral {
    pub fn generate() -> Option<P256Ephemeral> {
        let key = EphemeralPrivateKey::generate(&ECDH_P256, &SystemRandom::new()).ok()?;
        let public = key.compute_public_key().ok()?.as_ref().to_vec();
        Some(P256Ephemeral { key, public })
    }

    /// The uncompressed point (65 bytes), as TLS sends it.
    pub fn public_key(&self) -> &[u8] {
        &self.public
    }

    /// The shared secret (the x coordinate); `None` for an invalid peer point.
    pub fn agree(self, peer: &[u8]) -> Option<Vec<u8>> {
        agreement::agree_ephemeral(
            self.key,
            UnparsedPublicKey::new(&ECDH_P256, peer),
            (),
            |secret| Ok(secret.to_vec()),
        )
        .ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hex;

    /// RFC 8448 §3: the early secret, "derived", and the handshake secret of the simple
    /// 1-RTT handshake.
    #[test]
    fn rfc8448_handshake_secret() {
        let h = HashKind::Sha256;
        let early = h.extract(&[], &[0u8; 32]);
        assert_eq!(
            early,
            hex("33ad0a1c607ec03b09e6cd9893680ce210adf300aa1f2660e1b22e10f170f92a")
        );
        let derived = h.expand_label(&early, b"derived", &h.hash(&[]), 32);
        assert_eq!(
            derived,
            hex("6f2615a108c702c5678f54fc9dbab69716c076189c48250cebeac3576c3611ba")
        );
        let ecdhe = hex("8bd4054fb55b9d63fdfbacf9f04b9f0d35e6d63f537563efd46272900f89492d");
        let hs = h.extract(&derived, &ecdhe);
        assert_eq!(
            hs,
            hex("1dc826e93606aa6fdc0aadc12f741b01046aa6b99f691ed221a9f0ca043fbeac")
        );
    }

    #[test]
    fn mlkem_round_trip_through_aws_lc() {
        let kem = MlKem768::generate().unwrap();
        assert_eq!(kem.encapsulation_key().len(), MLKEM768_KEY_LEN);
        let ek =
            aws_lc_rs::kem::EncapsulationKey::new(&ML_KEM_768, kem.encapsulation_key()).unwrap();
        let (ct, secret) = ek.encapsulate().unwrap();
        assert_eq!(kem.decapsulate(ct.as_ref()).unwrap(), secret.as_ref());
        assert_eq!(kem.decapsulate(&[0u8; 10]), None);
    }

    #[test]
    fn p256_agrees_with_itself() {
        let a = P256Ephemeral::generate().unwrap();
        let b = P256Ephemeral::generate().unwrap();
        let (pa, pb) = (a.public_key().to_vec(), b.public_key().to_vec());
        assert_eq!(a.agree(&pb), b.agree(&pa));
        let c = P256Ephemeral::generate().unwrap();
        assert_eq!(c.agree(&[4u8; 65]), None);
    }
}
