//! Payload masking (RFC 6455 §5.3): `data[i] ^= key[(offset + i) % 4]`.
//!
//! Word at a time: a byte-wise head up to 8-byte alignment, then aligned `u64` XORs with the
//! key rotated to match the position, then a byte-wise tail.

/// XORs `data` with `key`, where `data[0]` is byte number `offset` of the frame payload
/// (so a payload can be unmasked in pieces as it arrives). Involutive.
pub fn apply_mask(data: &mut [u8], key: [u8; 4], offset: usize) {
    // Key bytes as seen from data[0].
    let k = rotate(key, offset);
    let head = data.as_ptr().align_offset(8).min(data.len());
    let (head_bytes, rest) = data.split_at_mut(head);
    mask_bytes(head_bytes, k);

    // After the head, data position `head` corresponds to key index `head % 4`.
    let k = rotate(k, head);
    let word = u64::from_ne_bytes([k[0], k[1], k[2], k[3], k[0], k[1], k[2], k[3]]);
    let mut chunks = rest.chunks_exact_mut(8);
    for chunk in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(chunk);
        chunk.copy_from_slice(&(u64::from_ne_bytes(w) ^ word).to_ne_bytes());
    }
    // Chunks are 8 bytes (a multiple of 4), so the tail starts at key index 0 again.
    mask_bytes(chunks.into_remainder(), k);
}

/// Appends `src` masked with `key` (payload offset 0) to `dst` in one pass: the client's
/// write path, where copying into the frame buffer and masking would otherwise be two.
pub fn extend_masked(dst: &mut Vec<u8>, src: &[u8], key: [u8; 4]) {
    let start = dst.len();
    dst.reserve(src.len());
    let spare = &mut dst.spare_capacity_mut()[..src.len()];
    let word = u64::from_ne_bytes([
        key[0], key[1], key[2], key[3], key[0], key[1], key[2], key[3],
    ]);
    let mut out = spare.chunks_exact_mut(8);
    let mut inp = src.chunks_exact(8);
    for (o, i) in (&mut out).zip(&mut inp) {
        let mut w = [0u8; 8];
        w.copy_from_slice(i);
        let masked = (u64::from_ne_bytes(w) ^ word).to_ne_bytes();
        for (slot, byte) in o.iter_mut().zip(masked) {
            slot.write(byte);
        }
    }
    // Whole chunks are a multiple of 4 bytes, so the tail starts at key index 0.
    for (n, (slot, byte)) in out
        .into_remainder()
        .iter_mut()
        .zip(inp.remainder())
        .enumerate()
    {
        slot.write(byte ^ key[n % 4]);
    }
    // SAFETY: every one of the `src.len()` spare bytes was written above.
    unsafe { dst.set_len(start + src.len()) };
}

fn rotate(key: [u8; 4], by: usize) -> [u8; 4] {
    let r = by % 4;
    [key[r], key[(r + 1) % 4], key[(r + 2) % 4], key[(r + 3) % 4]]
}

fn mask_bytes(data: &mut [u8], k: [u8; 4]) {
    for (i, b) in data.iter_mut().enumerate() {
        *b ^= k[i % 4];
    }
}

/// Byte-at-a-time reference, for tests.
#[doc(hidden)]
pub fn apply_mask_reference(data: &mut [u8], key: [u8; 4], offset: usize) {
    for (i, b) in data.iter_mut().enumerate() {
        *b ^= key[(offset + i) % 4];
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn extend_masked_equals_copy_then_reference_mask(
            prefix in proptest::collection::vec(any::<u8>(), 0..20),
            src in proptest::collection::vec(any::<u8>(), 0..300),
            key in any::<[u8; 4]>(),
        ) {
            let mut got = prefix.clone();
            extend_masked(&mut got, &src, key);
            let mut want = prefix.clone();
            let mut masked = src.clone();
            apply_mask_reference(&mut masked, key, 0);
            want.extend_from_slice(&masked);
            prop_assert_eq!(got, want);
        }
    }
    use super::*;

    #[test]
    fn matches_bytewise_for_every_offset_length_and_alignment() {
        let key = [0x37, 0xfa, 0x21, 0x3d];
        let src: Vec<u8> = (0..80u8)
            .map(|i| i.wrapping_mul(151).wrapping_add(7))
            .collect();
        for start in 0..8 {
            for len in 0..=64 {
                for offset in 0..9 {
                    let mut fast = src.clone();
                    let mut slow = src.clone();
                    apply_mask(&mut fast[start..start + len], key, offset);
                    apply_mask_reference(&mut slow[start..start + len], key, offset);
                    assert_eq!(fast, slow, "start {start} len {len} offset {offset}");
                }
            }
        }
    }

    #[test]
    fn piecewise_equals_whole() {
        let key = [1, 2, 3, 4];
        let mut whole: Vec<u8> = (0..200u8).collect();
        let mut pieces = whole.clone();
        apply_mask(&mut whole, key, 0);
        let (a, b) = pieces.split_at_mut(13);
        apply_mask(a, key, 0);
        apply_mask(b, key, 13);
        assert_eq!(whole, pieces);
    }

    /// Not a benchmark harness; a sanity check that the word path is not slower than bytes.
    #[test]
    fn micro_check_large_buffer() {
        let key = [0xde, 0xad, 0xbe, 0xef];
        let mut a = vec![0x55u8; 1 << 20];
        let mut b = a.clone();
        let t = std::time::Instant::now();
        apply_mask(&mut a[3..], key, 1);
        let fast = t.elapsed();
        let t = std::time::Instant::now();
        apply_mask_reference(&mut b[3..], key, 1);
        let slow = t.elapsed();
        assert_eq!(a, b);
        eprintln!("apply_mask 1 MiB: word {fast:?}, bytewise {slow:?}");
    }
}
