//! X25519 (RFC 7748) as REALITY and `skiff x25519` use it: raw 32-byte keys, the private key
//! clamped before it is shown so that what a user copies is exactly the scalar in use.

use aws_lc_rs::agreement::{self, PrivateKey, UnparsedPublicKey, X25519};

/// A key length, for the private key, the public key and the shared secret alike.
pub const KEY_LEN: usize = 32;

/// Clears and sets the bits RFC 7748 §5 fixes. X25519 does this internally anyway; doing it
/// on the stored key makes the printed private key the effective one (Xray prints it so too).
pub fn clamp(mut key: [u8; KEY_LEN]) -> [u8; KEY_LEN] {
    key[0] &= 248;
    key[31] &= 127;
    key[31] |= 64;
    key
}

/// A fresh clamped private key.
pub fn generate_private() -> [u8; KEY_LEN] {
    let mut key = [0u8; KEY_LEN];
    crate::random::fill(&mut key);
    clamp(key)
}

/// The public key of `private`.
pub fn public_key(private: &[u8; KEY_LEN]) -> [u8; KEY_LEN] {
    let key = PrivateKey::from_private_key(&X25519, private)
        .expect("any 32 bytes are an X25519 private key");
    let public = key
        .compute_public_key()
        .expect("X25519 public key computation cannot fail");
    let mut out = [0u8; KEY_LEN];
    out.copy_from_slice(public.as_ref());
    out
}

/// The shared secret of `private` and a peer's public key; `None` when the peer's key is
/// not 32 bytes or gives the all-zero secret (a low-order point, RFC 7748 §6.1).
pub fn shared_secret(private: &[u8; KEY_LEN], peer_public: &[u8]) -> Option<[u8; KEY_LEN]> {
    let key = PrivateKey::from_private_key(&X25519, private).ok()?;
    let secret = agreement::agree(
        &key,
        UnparsedPublicKey::new(&X25519, peer_public),
        (),
        |secret| {
            let mut out = [0u8; KEY_LEN];
            out.copy_from_slice(secret);
            Ok(out)
        },
    )
    .ok()?;
    (secret != [0u8; KEY_LEN]).then_some(secret)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hex;

    fn key(s: &str) -> [u8; KEY_LEN] {
        hex(s).try_into().unwrap()
    }

    #[test]
    fn rfc7748_section_6_1() {
        let alice = key("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a");
        let bob = key("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb");
        let alice_pub = public_key(&alice);
        let bob_pub = public_key(&bob);
        assert_eq!(
            alice_pub,
            key("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")
        );
        assert_eq!(
            bob_pub,
            key("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f")
        );
        let shared = key("4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742");
        assert_eq!(shared_secret(&alice, &bob_pub), Some(shared));
        assert_eq!(shared_secret(&bob, &alice_pub), Some(shared));
    }

    #[test]
    fn clamping_keeps_the_public_key() {
        let raw = [0xffu8; KEY_LEN];
        assert_eq!(public_key(&raw), public_key(&clamp(raw)));
        let k = generate_private();
        assert_eq!(k, clamp(k));
    }

    #[test]
    fn bad_peer_keys_give_none() {
        let k = generate_private();
        assert_eq!(shared_secret(&k, &[1u8; 31]), None);
        // The all-zero point has order 1: the secret would be zero.
        assert_eq!(shared_secret(&k, &[0u8; KEY_LEN]), None);
    }
}
