//! GF(2^8) arithmetic as UDPspeeder's Reed–Solomon code (Luigi Rizzo's `fec.c`) defines it:
//! the primitive polynomial x^8 + x^4 + x^3 + x^2 + 1 and α = 2. The field is the same one
//! kcp-go's code uses; what differs is the matrix built on it (`rs.rs`).

/// Log and exp tables, built once at compile time.
struct Tables {
    exp: [u8; 510],
    log: [u8; 256],
}

const fn build() -> Tables {
    let mut exp = [0u8; 510];
    let mut log = [0u8; 256];
    let mut x: u16 = 1;
    let mut i = 0;
    while i < 255 {
        exp[i] = x as u8;
        exp[i + 255] = x as u8;
        log[x as usize] = i as u8;
        x <<= 1;
        if x & 0x100 != 0 {
            x ^= 0x11d;
        }
        i += 1;
    }
    Tables { exp, log }
}

static TABLES: Tables = build();

/// α^`power` (any non-negative power; the field's multiplicative group has order 255).
pub fn exp(power: usize) -> u8 {
    TABLES.exp[power % 255]
}

pub fn mul(a: u8, b: u8) -> u8 {
    if a == 0 || b == 0 {
        return 0;
    }
    TABLES.exp[TABLES.log[a as usize] as usize + TABLES.log[b as usize] as usize]
}

/// The multiplicative inverse; `a` must not be zero.
pub fn inv(a: u8) -> u8 {
    debug_assert!(a != 0, "zero has no inverse");
    TABLES.exp[255 - TABLES.log[a as usize] as usize]
}

/// `dst ^= c * src` over the shorter of the two, the inner loop of encoding and decoding.
/// Where AVX2 is present, `reed-solomon-erasure`'s kernel (nibble-table shuffles, 32 bytes a
/// step; compiled for Haswell with no check of its own, hence the one here); elsewhere one
/// table lookup per byte.
pub fn mul_add(dst: &mut [u8], src: &[u8], c: u8) {
    let n = dst.len().min(src.len());
    if c == 0 || n == 0 {
        return;
    }
    let (dst, src) = (&mut dst[..n], &src[..n]);
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        reed_solomon_erasure::galois_8::mul_slice_xor(c, src, dst);
        return;
    }
    mul_add_by_table(dst, src, c);
}

/// The portable `mul_add`: one lookup per byte.
fn mul_add_by_table(dst: &mut [u8], src: &[u8], c: u8) {
    let row = &MUL_ROWS[c as usize];
    for (d, s) in dst.iter_mut().zip(src) {
        *d ^= row[*s as usize];
    }
}

/// A full 64 KiB multiplication table so the inner loop is one lookup per byte.
static MUL_ROWS: [[u8; 256]; 256] = {
    let t = build();
    let mut rows = [[0u8; 256]; 256];
    let mut a = 1;
    while a < 256 {
        let mut b = 1;
        while b < 256 {
            rows[a][b] = t.exp[t.log[a] as usize + t.log[b] as usize];
            b += 1;
        }
        a += 1;
    }
    rows
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generator_matches_the_polynomial() {
        // α^8 = x^4 + x^3 + x^2 + 1 = 0x1d under x^8 + x^4 + x^3 + x^2 + 1.
        assert_eq!(exp(8), 0x1d);
        assert_eq!(exp(255), 1);
    }

    #[test]
    fn every_nonzero_element_has_an_inverse() {
        for a in 1..=255u8 {
            assert_eq!(mul(a, inv(a)), 1, "a = {a}");
        }
    }

    proptest::proptest! {
        #[test]
        fn the_vector_kernel_agrees_with_the_table(
            src in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..1500),
            start in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..1500),
            c in proptest::prelude::any::<u8>(),
        ) {
            let mut fast = start.clone();
            mul_add(&mut fast, &src, c);
            let mut slow = start.clone();
            if c != 0 {
                mul_add_by_table(&mut slow, &src, c);
            }
            proptest::prop_assert_eq!(fast, slow);
        }
    }

    #[test]
    fn mul_add_agrees_with_mul() {
        let src: Vec<u8> = (0..=255).collect();
        let mut dst = vec![0u8; 256];
        mul_add(&mut dst, &src, 0x53);
        for (i, d) in dst.iter().enumerate() {
            assert_eq!(*d, mul(i as u8, 0x53));
        }
    }
}
