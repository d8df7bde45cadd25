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

/// Multiplication by one constant as the products of each nibble: 32 bytes per coefficient
/// (a 10/3 code keeps 30 of them per session) where a full table would take 256.
pub(crate) struct MulTable {
    /// `c·x` for x = 0..16.
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
        MulTable { low, high }
    }
}

/// `dst[i] ^= c·src[i]` over the shorter of the two slices.
///
/// Multiplication distributes over XOR, so `c·x = c·(x & 15) ^ c·(x & 240)`: two 16-entry
/// tables looked up by a byte shuffle do 32 (AVX2) or 16 (NEON) bytes per step. FEC parity
/// for every group of data shards runs through here; byte-wise table lookups cost more than
/// the rest of the KCP send path.
pub(crate) fn mul_add(t: &MulTable, dst: &mut [u8], src: &[u8]) {
    let n = dst.len().min(src.len());
    let (dst, src) = (&mut dst[..n], &src[..n]);
    let done = mul_add_vector(t, dst, src);
    for (d, &s) in dst[done..].iter_mut().zip(&src[done..]) {
        *d ^= t.low[(s & 15) as usize] ^ t.high[(s >> 4) as usize];
    }
}

/// The vector part of [`mul_add`]; returns how many leading bytes it did.
#[cfg(target_arch = "x86_64")]
fn mul_add_vector(t: &MulTable, dst: &mut [u8], src: &[u8]) -> usize {
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, checked just above.
        unsafe { mul_add_avx2(t, dst, src) }
    } else {
        0
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn mul_add_avx2(t: &MulTable, dst: &mut [u8], src: &[u8]) -> usize {
    use std::arch::x86_64::*;
    // SAFETY: both tables are 16 bytes; unaligned loads.
    let (low, high) = unsafe {
        (
            _mm256_broadcastsi128_si256(_mm_loadu_si128(t.low.as_ptr().cast())),
            _mm256_broadcastsi128_si256(_mm_loadu_si128(t.high.as_ptr().cast())),
        )
    };
    let nibble = _mm256_set1_epi8(0x0f);
    let mut done = 0;
    for (d, s) in dst.chunks_exact_mut(32).zip(src.chunks_exact(32)) {
        // SAFETY: `d` and `s` are exactly 32 bytes; unaligned loads and stores.
        unsafe {
            let x = _mm256_loadu_si256(s.as_ptr().cast());
            let lo = _mm256_and_si256(x, nibble);
            let hi = _mm256_and_si256(_mm256_srli_epi16(x, 4), nibble);
            let product =
                _mm256_xor_si256(_mm256_shuffle_epi8(low, lo), _mm256_shuffle_epi8(high, hi));
            let acc = _mm256_loadu_si256(d.as_ptr().cast());
            _mm256_storeu_si256(d.as_mut_ptr().cast(), _mm256_xor_si256(acc, product));
        }
        done += 32;
    }
    done
}

#[cfg(target_arch = "aarch64")]
fn mul_add_vector(t: &MulTable, dst: &mut [u8], src: &[u8]) -> usize {
    use std::arch::aarch64::*;
    let mut done = 0;
    // SAFETY: NEON is part of the aarch64 baseline; every load and store is 16 in-bounds bytes.
    unsafe {
        let low = vld1q_u8(t.low.as_ptr());
        let high = vld1q_u8(t.high.as_ptr());
        let nibble = vdupq_n_u8(0x0f);
        for (d, s) in dst.chunks_exact_mut(16).zip(src.chunks_exact(16)) {
            let x = vld1q_u8(s.as_ptr());
            let product = veorq_u8(
                vqtbl1q_u8(low, vandq_u8(x, nibble)),
                vqtbl1q_u8(high, vshrq_n_u8(x, 4)),
            );
            vst1q_u8(d.as_mut_ptr(), veorq_u8(vld1q_u8(d.as_ptr()), product));
            done += 16;
        }
    }
    done
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn mul_add_vector(_: &MulTable, _: &mut [u8], _: &[u8]) -> usize {
    0
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
        /// The vector path agrees with byte-wise multiplication for every constant and length.
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
