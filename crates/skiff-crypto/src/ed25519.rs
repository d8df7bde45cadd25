//! Ed25519 key generation, for REALITY's temporary certificate (the TLS library signs with
//! the PKCS#8 document; the raw public key goes into the certificate).

use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair};

/// A fresh Ed25519 key: its PKCS#8 (v2) document and its raw public key.
pub struct Ed25519Key {
    pub pkcs8: Vec<u8>,
    pub public: [u8; 32],
}

/// Never prints the private key.
impl std::fmt::Debug for Ed25519Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ed25519Key")
            .field("public", &self.public)
            .finish_non_exhaustive()
    }
}

pub fn generate() -> Ed25519Key {
    let document = Ed25519KeyPair::generate_pkcs8(&aws_lc_rs::rand::SystemRandom::new())
        .expect("Ed25519 key generation does not fail");
    let pair = Ed25519KeyPair::from_pkcs8(document.as_ref())
        .expect("a freshly generated PKCS#8 document parses");
    let mut public = [0u8; 32];
    public.copy_from_slice(pair.public_key().as_ref());
    Ed25519Key {
        pkcs8: document.as_ref().to_vec(),
        public,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_fresh_and_consistent() {
        let (a, b) = (generate(), generate());
        assert_ne!(a.public, b.public);
        let pair = Ed25519KeyPair::from_pkcs8(&a.pkcs8).unwrap();
        assert_eq!(pair.public_key().as_ref(), a.public);
    }
}
