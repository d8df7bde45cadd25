//! The outer layer every speederv2 datagram wears ("cooking" in UDPspeeder): a CRC-32 appended
//! (big-endian), then the obscure step (4–32 random bytes appended, the payload XORed with
//! them cyclically, one byte with their count at the very end), then the whole datagram XORed
//! cyclically with the `-k` key's bytes. Each step can be turned off as speederv2's flags do.
//! None of this is cryptography: the key is a plain XOR pad, as upstream.

use crate::Error;

/// Obscure padding lengths speederv2 draws from (`iv_min`, `iv_max`, both inclusive).
const OBSCURE_MIN: usize = 4;
const OBSCURE_MAX: usize = 32;

/// Bytes cooking adds at most: checksum, padding and its length byte.
pub const COOK_OVERHEAD_MAX: usize = 4 + OBSCURE_MAX + 1;

#[derive(Clone, Default)]
pub struct CookOptions {
    /// `-k`: XOR pad; empty means no XOR, as in speederv2.
    pub key: Vec<u8>,
    /// `--disable-obscure`.
    pub disable_obscure: bool,
    /// `--disable-checksum`.
    pub disable_checksum: bool,
}

impl std::fmt::Debug for CookOptions {
    // The key stays out of logs and debug output.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CookOptions")
            .field("key", &if self.key.is_empty() { "none" } else { "set" })
            .field("disable_obscure", &self.disable_obscure)
            .field("disable_checksum", &self.disable_checksum)
            .finish()
    }
}

/// Random bytes for the obscure step, drawn from the system's generator a page at a time: one
/// call per datagram was a visible share of a small flow's CPU, and padding only has to look
/// random (the key, not the padding, is what obscures; neither is a secret of the tunnel's).
fn padding_bytes(out: &mut [u8]) {
    const POOL: usize = 4096;
    thread_local! {
        static PADDING_POOL: std::cell::RefCell<(Vec<u8>, usize)> =
            const { std::cell::RefCell::new((Vec::new(), 0)) };
    }
    PADDING_POOL.with_borrow_mut(|(pool, used)| {
        if pool.len() != POOL || *used + out.len() > POOL {
            pool.resize(POOL, 0);
            skiff_crypto::random::fill(pool);
            *used = 0;
        }
        out.copy_from_slice(&pool[*used..*used + out.len()]);
        *used += out.len();
    });
}

impl CookOptions {
    /// Wraps `packet` in place for the wire.
    pub fn cook(&self, packet: &mut Vec<u8>) {
        // One growth at most (none for the encoder's shards, made with this room).
        packet.reserve(COOK_OVERHEAD_MAX);
        if !self.disable_checksum {
            let crc = crc32fast::hash(packet);
            packet.extend_from_slice(&crc.to_be_bytes());
        }
        if !self.disable_obscure {
            let mut draw = [0u8; 1 + OBSCURE_MAX];
            padding_bytes(&mut draw);
            let pad_len = OBSCURE_MIN + draw[0] as usize % (OBSCURE_MAX - OBSCURE_MIN + 1);
            let pad = &draw[1..1 + pad_len];
            xor_repeating(packet, pad);
            packet.extend_from_slice(pad);
            packet.push(pad_len as u8);
        }
        xor_with_key(packet, &self.key);
    }

    /// Unwraps a received datagram in place and returns the inner packet's length.
    pub fn uncook(&self, packet: &mut [u8]) -> Result<usize, Error> {
        xor_with_key(packet, &self.key);
        let mut len = packet.len();
        if !self.disable_obscure {
            let Some(&pad_len) = packet.last() else {
                return Err(Error::Truncated("obscure length"));
            };
            let pad_len = pad_len as usize;
            if len < 1 + pad_len {
                return Err(Error::Truncated("obscure padding"));
            }
            len -= 1 + pad_len;
            if pad_len > 0 {
                let (body, rest) = packet.split_at_mut(len);
                xor_repeating(body, &rest[..pad_len]);
            }
        }
        if !self.disable_checksum {
            if len < 4 {
                return Err(Error::Truncated("checksum"));
            }
            len -= 4;
            let got = u32::from_be_bytes(packet[len..len + 4].try_into().expect("4 bytes"));
            if crc32fast::hash(&packet[..len]) != got {
                return Err(Error::Checksum);
            }
        }
        Ok(len)
    }
}

/// speederv2's `encrypt_0`: XOR with the key repeated; an empty key leaves the data alone.
fn xor_with_key(data: &mut [u8], key: &[u8]) {
    xor_repeating(data, key);
}

/// XORs `data` with `pattern` repeated from its first byte (nothing when `pattern` is
/// empty). Byte by byte, with the pattern's index taken modulo its length, this was a
/// division per byte and most of the tunnel's CPU per datagram; here the pattern is laid out
/// whole-times into a block of about 256 bytes, and each block-long piece of `data` is XORed
/// with it as two equal slices, which the compiler turns into vector instructions.
fn xor_repeating(data: &mut [u8], pattern: &[u8]) {
    const BLOCK: usize = 256;
    if pattern.is_empty() {
        return;
    }
    let mut laid_out = [0u8; BLOCK];
    let block: &[u8] = if pattern.len() >= BLOCK {
        pattern
    } else {
        // Doubling what is laid out: a handful of copies, not one per repetition.
        let whole = BLOCK / pattern.len() * pattern.len();
        laid_out[..pattern.len()].copy_from_slice(pattern);
        let mut filled = pattern.len();
        while filled < whole {
            let take = filled.min(whole - filled);
            laid_out.copy_within(..take, filled);
            filled += take;
        }
        &laid_out[..whole]
    };
    for piece in data.chunks_mut(block.len()) {
        for (b, k) in piece.iter_mut().zip(block) {
            *b ^= k;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_with_every_step() {
        let options = CookOptions {
            key: b"secret".to_vec(),
            ..CookOptions::default()
        };
        let mut packet = b"hello world".to_vec();
        options.cook(&mut packet);
        assert!(packet.len() > 11 + 4 + OBSCURE_MIN);
        let len = options.uncook(&mut packet).unwrap();
        assert_eq!(&packet[..len], b"hello world");
    }

    #[test]
    fn plain_checksum_is_standard_crc32_big_endian() {
        let options = CookOptions {
            disable_obscure: true,
            ..CookOptions::default()
        };
        let mut packet = b"123456789".to_vec();
        options.cook(&mut packet);
        // The CRC-32 check value of "123456789".
        assert_eq!(&packet[9..], &0xCBF4_3926u32.to_be_bytes());
    }

    proptest::proptest! {
        #[test]
        fn xor_repeating_is_the_pattern_cycled(
            data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..2000),
            pattern in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
        ) {
            let mut fast = data.clone();
            xor_repeating(&mut fast, &pattern);
            let slow: Vec<u8> = if pattern.is_empty() {
                data.clone()
            } else {
                data.iter().zip(pattern.iter().cycle()).map(|(b, k)| b ^ k).collect()
            };
            proptest::prop_assert_eq!(fast, slow);
        }
    }

    #[test]
    fn a_flipped_bit_fails_the_checksum() {
        let options = CookOptions::default();
        let mut packet = b"payload".to_vec();
        options.cook(&mut packet);
        packet[2] ^= 0x10;
        assert!(options.uncook(&mut packet).is_err());
    }
}
