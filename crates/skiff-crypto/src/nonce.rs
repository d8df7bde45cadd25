//! Nonce counters as Shadowsocks uses them: a little-endian integer over the whole nonce,
//! starting at zero and incremented after every seal or open.

/// A little-endian counter nonce of 12 or 24 bytes.
#[derive(Clone, Debug)]
pub struct NonceCounter {
    bytes: [u8; 24],
    len: usize,
}

impl NonceCounter {
    /// An all-zero nonce of `len` bytes (12 or 24).
    pub fn new(len: usize) -> NonceCounter {
        assert!(len == 12 || len == 24, "nonce length {len}");
        NonceCounter {
            bytes: [0; 24],
            len,
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    /// Adds one, carrying from the lowest byte up (wrapping at the top, which no connection
    /// reaches: 2^96 chunks).
    pub fn increment(&mut self) {
        for b in &mut self.bytes[..self.len] {
            let (next, carry) = b.overflowing_add(1);
            *b = next;
            if !carry {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn increments_little_endian_with_carry() {
        let mut n = NonceCounter::new(12);
        n.increment();
        assert_eq!(n.as_bytes()[..2], [1, 0]);
        for _ in 0..255 {
            n.increment();
        }
        assert_eq!(n.as_bytes()[..3], [0, 1, 0]);
        assert_eq!(NonceCounter::new(24).as_bytes().len(), 24);
    }
}
