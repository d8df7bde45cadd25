//! The one source of randomness: aws-lc's DRBG (seeded from the kernel, reseeded on fork),
//! the same one rustls draws its TLS randoms from.

/// Fills `buf` with cryptographically secure random bytes.
///
/// # Panics
/// Only if the operating system cannot provide randomness at all, where continuing would mean
/// predictable keys, salts and nonces.
pub fn fill(buf: &mut [u8]) {
    aws_lc_rs::rand::fill(buf).expect("system random generator");
}

#[cfg(test)]
mod tests {
    #[test]
    fn fills_differently_every_time() {
        let (mut a, mut b) = ([0u8; 32], [0u8; 32]);
        super::fill(&mut a);
        super::fill(&mut b);
        assert_ne!(a, b);
        assert_ne!(a, [0; 32]);
        super::fill(&mut []);
    }
}
