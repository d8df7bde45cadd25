//! Every cryptographic primitive Skiff uses, in one place: AEAD ciphers sealing and opening in
//! place (aws-lc-rs; XChaCha20-Poly1305 through RustCrypto's HChaCha20), kcptun's packet
//! ciphers (RustCrypto block ciphers in CFB, Salsa20), nonce counters, the hashes and key
//! derivations the protocols specify, X25519 (REALITY), randomness, and constant-time comparison.
//!
//! Protocol codecs call these and never a crypto crate directly, so a faster backend or a
//! hardware quirk is handled here once.

pub mod aead;
#[cfg(target_arch = "x86_64")]
pub mod aes_cfb;
pub mod ed25519;
pub mod hash;
pub mod kcp;
pub mod kdf;
pub mod nonce;
pub mod quic;
pub mod random;
pub mod shadowsocks;
pub mod tls13;
pub mod vmess;
pub mod x25519;

pub use aead::{AeadKey, AeadKind, OpenError, TAG_LEN};
pub use nonce::NonceCounter;

/// Compares two secrets in time that depends only on their lengths.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    // black_box keeps the optimiser from turning the fold into an early exit.
    std::hint::black_box(diff) == 0
}

/// Test vectors as hex strings (whitespace ignored).
#[cfg(test)]
pub(crate) fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_time_eq_compares_content_and_length() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
        assert!(constant_time_eq(b"", b""));
    }
}
