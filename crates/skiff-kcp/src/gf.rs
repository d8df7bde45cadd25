//! GF(2^8) with the reducing polynomial x^8+x^4+x^3+x^2+1 (0x11d) and generator 2, and the
//! small matrix algebra Reed-Solomon needs (spec/kcp.md §4).

const fn build_tables() -> ([u8; 512], [u8; 256]) {
    let mut exp = [0u8; 512];
    let mut log = [0u8; 256];
    let mut x: u16 = 1;
    let mut i = 0;
    while i < 255 {
        exp[i] = x as u8;
        log[x as usize] = i as u8;
        x <<= 1;
        if x & 0x100 != 0 {
            x ^= 0x11d;
        }
        i += 1;
    }
    while i < 512 {
        exp[i] = exp[i - 255];
        i += 1;
    }
    (exp, log)
}

const TABLES: ([u8; 512], [u8; 256]) = build_tables();
const EXP: [u8; 512] = TABLES.0;
const LOG: [u8; 256] = TABLES.1;

pub(crate) fn mul(a: u8, b: u8) -> u8 {
    if a == 0 || b == 0 {
        0
    } else {
        EXP[LOG[a as usize] as usize + LOG[b as usize] as usize]
    }
}

/// Multiplicative inverse; `a` must not be 0 (returns 0 for 0).
pub(crate) fn inv(a: u8) -> u8 {
    if a == 0 {
        0
    } else {
        EXP[255 - LOG[a as usize] as usize]
    }
}

/// `a^n`, with 0^0 = 1.
pub(crate) fn pow(a: u8, n: usize) -> u8 {
    if n == 0 {
        1
    } else if a == 0 {
        0
    } else {
        EXP[(LOG[a as usize] as usize * n) % 255]
    }
}

/// Multiplication by one constant, for [`mul_add`].
pub(crate) struct MulTable {
    c: u8,
    /// `c·x` for x = 0..16: with `high`, the portable path's two lookups per byte.
    low: [u8; 16],
    /// `c·(x << 4)` for x = 0..16.
    high: [u8; 16],
}

impl MulTable {
    pub(crate) fn new(c: u8) -> MulTable {
        let mut low = [0u8; 16];
        let mut high = [0u8; 16];
        for x in 0..16u8 {
            low[x as usize] = mul(c, x);
            high[x as usize] = mul(c, x << 4);
        }
        MulTable { c, low, high }
    }
}

/// `dst[i] ^= c·src[i]` over the shorter of the two slices: the inner loop of FEC parity.
///
/// `reed-solomon-erasure`'s kernel (the Rust port of the coder kcp-go uses; with its
/// `simd-accel` C code: AVX2 nibble-table shuffles, 32 bytes a step). Skiff had its own AVX2
/// and NEON shuffles here; `cargo bench -p skiff-kcp --bench gf_mul -- --sample-size 256
/// --sample-count 200` on the 2-core AMD EPYC dev machine put them at 0.95x the crate (one
/// 1350-byte shard: 32.4-33.2 ns against 30.9-31.0 ns, fastest sample of 3 runs), far from
/// the 1.3x that would justify keeping hand-written SIMD, so they went.
///
/// The C kernels are what make the crate fast: built without `simd-accel` it took 373 ns for
/// the same shard (its portable 64 KiB-table Rust loop). They are compiled for Haswell on
/// x86-64 with no run-time check, so the crate is only called where AVX2 is present;
/// elsewhere on x86-64 two 16-entry table lookups per byte do the same. On aarch64 its C uses
/// NEON.
pub(crate) fn mul_add(t: &MulTable, dst: &mut [u8], src: &[u8]) {
    let n = dst.len().min(src.len());
    if n == 0 {
        return;
    }
    let (dst, src) = (&mut dst[..n], &src[..n]);
    #[cfg(target_arch = "x86_64")]
    if !std::arch::is_x86_feature_detected!("avx2") {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d ^= t.low[(s & 15) as usize] ^ t.high[(s >> 4) as usize];
        }
        return;
    }
    reed_solomon_erasure::galois_8::mul_slice_xor(t.c, src, dst);
}

/// Row-major square matrix inversion by Gauss-Jordan; `None` if singular.
pub(crate) fn invert(m: &[u8], n: usize) -> Option<Vec<u8>> {
    if m.len() != n * n {
        return None;
    }
    let mut a = m.to_vec();
    let mut r = vec![0u8; n * n];
    for i in 0..n {
        r[i * n + i] = 1;
    }
    for col in 0..n {
        let pivot = (col..n).find(|&row| a[row * n + col] != 0)?;
        if pivot != col {
            for k in 0..n {
                a.swap(pivot * n + k, col * n + k);
                r.swap(pivot * n + k, col * n + k);
            }
        }
        let scale = inv(a[col * n + col]);
        for k in 0..n {
            a[col * n + k] = mul(a[col * n + k], scale);
            r[col * n + k] = mul(r[col * n + k], scale);
        }
        for row in 0..n {
            let f = a[row * n + col];
            if row != col && f != 0 {
                for k in 0..n {
                    a[row * n + k] ^= mul(f, a[col * n + k]);
                    r[row * n + k] ^= mul(f, r[col * n + k]);
                }
            }
        }
    }
    Some(r)
}

/// The systematic encoding matrix, `(ds+ps) × ds` row-major: `V · inverse(V[0..ds])` with
/// `V[r][c] = r^c`. Its top `ds` rows are the identity.
pub(crate) fn encoding_matrix(ds: usize, ps: usize) -> Option<Vec<u8>> {
    let rows = ds + ps;
    if ds == 0 || rows > 256 {
        return None;
    }
    let v: Vec<u8> = (0..rows)
        .flat_map(|r| (0..ds).map(move |c| pow(r as u8, c)))
        .collect();
    let top_inv = invert(&v[..ds * ds], ds)?;
    let mut m = vec![0u8; rows * ds];
    for r in 0..rows {
        for c in 0..ds {
            let mut acc = 0u8;
            for k in 0..ds {
                acc ^= mul(v[r * ds + k], top_inv[k * ds + c]);
            }
            m[r * ds + c] = acc;
        }
    }
    Some(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The crate's kernel agrees with byte-wise multiplication for every constant and
        /// length (and so uses the same field as kcp-go's coder).
        #[test]
        fn mul_add_matches_scalar(c in proptest::num::u8::ANY,
                                  src in proptest::collection::vec(proptest::num::u8::ANY, 0..200),
                                  seed in proptest::num::u8::ANY) {
            let t = MulTable::new(c);
            let mut dst: Vec<u8> = (0..src.len()).map(|i| (i as u8).wrapping_mul(seed)).collect();
            let want: Vec<u8> = dst.iter().zip(&src).map(|(&d, &s)| d ^ mul(c, s)).collect();
            mul_add(&t, &mut dst, &src);
            proptest::prop_assert_eq!(dst, want);
        }
    }

    #[test]
    fn parity_rows_match_spec_for_10_3() {
        let m = encoding_matrix(10, 3).unwrap();
        assert_eq!(
            &m[100..110],
            &[129, 150, 175, 184, 210, 196, 254, 232, 3, 2]
        );
        assert_eq!(
            &m[110..120],
            &[150, 129, 184, 175, 196, 210, 232, 254, 2, 3]
        );
        assert_eq!(&m[120..130], &[191, 214, 98, 10, 6, 111, 223, 183, 5, 4]);
        for r in 0..10 {
            for c in 0..10 {
                assert_eq!(m[r * 10 + c], u8::from(r == c));
            }
        }
    }

    #[test]
    fn field_inverse_and_tables_agree() {
        for a in 1..=255u8 {
            assert_eq!(mul(a, inv(a)), 1);
            let t = MulTable::new(a);
            assert_eq!(t.low[7] ^ t.high[0x3], mul(a, 0x37));
        }
        assert_eq!(mul(0x80, 2), 0x1d);
    }
}
