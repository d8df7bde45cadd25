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

/// Draws once, so that the generator's one-time setup happens now rather than inside the
/// first connection or datagram that needs a random byte. That setup (aws-lc seeding its
/// generator) took 30 ms on a 2-core VM, during which a 5 000 datagram/s UDP flow overflowed
/// the socket buffers in front of a UDPspeeder tunnel's two ends.
pub fn warm_up() {
    fill(&mut [0u8; 1]);
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
