//! The layer between an mKCP packet's header and its segments (V2Ray `kcpSettings.seed`):
//!
//! * no seed, V2Ray's "simple authenticator": `fnv || len || segments` with `fnv` the FNV-1a
//!   32 (big-endian) of `len || segments` and `len` a big-endian u16 of the segments' length;
//!   then, over the buffer zero-padded to a multiple of 4, `x[i] ^= x[i-4]` for i = 4..end
//!   (the padding is dropped again). The receiver undoes the xor from the end backwards and
//!   checks both fields. An integrity check against noise, not a secret.
//! * seed: AES-128-GCM with key `SHA-256(seed)[..16]`, a 12-byte random nonce in front and
//!   the 16-byte tag behind; no associated data.

use skiff_crypto::hash::fnv1a32;
use skiff_crypto::{AeadKey, AeadKind, TAG_LEN};

const NONCE_LEN: usize = 12;
const SIMPLE_OVERHEAD: usize = 6;

pub enum Seal {
    Simple,
    Aes(Box<AeadKey>),
}

impl std::fmt::Debug for Seal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Seal::Simple => "Seal::Simple",
            Seal::Aes(_) => "Seal::Aes",
        })
    }
}

impl Seal {
    /// The simple authenticator without a seed, AES-128-GCM with one.
    pub fn new(seed: Option<&str>) -> Seal {
        match seed {
            None => Seal::Simple,
            Some(seed) => {
                let hash = skiff_crypto::hash::sha256(&[seed.as_bytes()]);
                // A 16-byte key is always valid for AES-128-GCM.
                match AeadKey::new(AeadKind::Aes128Gcm, &hash[..16]) {
                    Ok(key) => Seal::Aes(Box::new(key)),
                    Err(_) => Seal::Simple,
                }
            }
        }
    }

    /// Bytes a sealed packet has beyond its segments.
    pub fn overhead(&self) -> usize {
        match self {
            Seal::Simple => SIMPLE_OVERHEAD,
            Seal::Aes(_) => NONCE_LEN + TAG_LEN,
        }
    }

    /// Appends `plain` sealed to `out`. `nonce` is used by AES-GCM only (12 random bytes).
    /// `plain` is at most 65535 bytes (a packet never is more than its MTU).
    pub fn seal(&self, plain: &[u8], nonce: [u8; NONCE_LEN], out: &mut Vec<u8>) {
        match self {
            Seal::Simple => {
                let start = out.len();
                let len = plain.len().min(usize::from(u16::MAX));
                out.extend_from_slice(&[0; 4]);
                out.extend_from_slice(&(len as u16).to_be_bytes());
                out.extend_from_slice(&plain[..len]);
                let hash = fnv1a32(&out[start + 4..]);
                out[start..start + 4].copy_from_slice(&hash.to_be_bytes());
                xor_forward(&mut out[start..]);
            }
            Seal::Aes(key) => {
                out.extend_from_slice(&nonce);
                let start = out.len();
                out.extend_from_slice(plain);
                out.extend_from_slice(&[0; TAG_LEN]);
                key.seal_in_place(&nonce, &[], &mut out[start..]);
            }
        }
    }

    /// Opens `packet` in place: the segments' bytes, or None when the packet is not ours.
    pub fn open<'a>(&self, packet: &'a mut [u8]) -> Option<&'a [u8]> {
        match self {
            Seal::Simple => {
                if packet.len() <= SIMPLE_OVERHEAD {
                    return None;
                }
                xor_backward(packet);
                let hash = u32::from_be_bytes([packet[0], packet[1], packet[2], packet[3]]);
                let len = usize::from(u16::from_be_bytes([packet[4], packet[5]]));
                if hash != fnv1a32(&packet[4..]) || len != packet.len() - SIMPLE_OVERHEAD {
                    return None;
                }
                Some(&packet[SIMPLE_OVERHEAD..])
            }
            Seal::Aes(key) => {
                if packet.len() <= NONCE_LEN + TAG_LEN {
                    return None;
                }
                let (nonce, body) = packet.split_at_mut(NONCE_LEN);
                let plain = key.open_in_place(nonce, &[], body).ok()?;
                Some(plain)
            }
        }
    }
}

/// `x[i] ^= x[i-4]` from the front, as if `x` were zero-padded to a multiple of 4 (the
/// padding does not influence the bytes before it, so it need not exist).
fn xor_forward(x: &mut [u8]) {
    for i in 4..x.len() {
        x[i] ^= x[i - 4];
    }
}

/// The inverse of [`xor_forward`]: `x[i] ^= x[i-4]` from the end down to 4.
fn xor_backward(x: &mut [u8]) {
    for i in (4..x.len()).rev() {
        x[i] ^= x[i - 4];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// A ping v2ray 4.34 sent (no seed, no header): conv 0x434d, rto 100.
    const V2RAY_PING: &str = "5e341fd35e245c9e5c245c9e5c245c9e5c245c9e5c40";

    #[test]
    fn simple_opens_v2ray_and_seals_the_same_bytes() {
        let mut packet = hex(V2RAY_PING);
        let plain = Seal::Simple.open(&mut packet).unwrap().to_vec();
        assert_eq!(plain, hex("434d0200000000000000000000000064"));
        let mut again = Vec::new();
        Seal::Simple.seal(&plain, [0; 12], &mut again);
        assert_eq!(again, hex(V2RAY_PING));
    }

    #[test]
    fn simple_refuses_damage() {
        let packet = hex(V2RAY_PING);
        for i in 0..packet.len() {
            let mut bad = packet.clone();
            bad[i] ^= 0x20;
            assert!(Seal::Simple.open(&mut bad).is_none(), "flip at {i}");
        }
        assert!(Seal::Simple.open(&mut []).is_none());
        assert!(Seal::Simple.open(&mut [0; 6]).is_none());
    }

    #[test]
    fn aes_opens_v2ray_packets() {
        // A data packet v2ray 4.34 sent with seed "s33d": nonce || ciphertext || tag.
        let mut packet = hex(
            "c2b6098c2384a0706a02a2e54ab6ca4753777dcedf1ea87f9b5ca22cff24634749d025c576132dfd8058a3fb7ec8abdf74e231fa0543d63536a464f49697994918a2043fc708d424fc2aa3b81ff8995730f1",
        );
        let seal = Seal::new(Some("s33d"));
        let plain = seal.open(&mut packet).unwrap();
        // conv 0xb056, data, ts 0, sn 0, una 0, 36 bytes: a VLESS request carrying "hello mkcp".
        assert_eq!(plain[..18], hex("b05601000000000000000000000000000024"));
        assert_eq!(
            &plain[18..],
            hex("00b831381d63244d53ad4f8cda48b3081100010009017f00000168656c6c6f206d6b6370")
        );
        assert!(Seal::new(Some("other")).open(&mut hex("00")).is_none());
    }

    #[test]
    fn aes_round_trip() {
        let seal = Seal::new(Some("seed"));
        let mut out = Vec::new();
        seal.seal(b"segments", [7; 12], &mut out);
        assert_eq!(out.len(), 8 + seal.overhead());
        assert_eq!(seal.open(&mut out).unwrap(), b"segments");
    }
}
