//! Blowfish (Schneier 1993), the block cipher behind kcptun's `--crypt blowfish`.
//!
//! Its initial P-array and S-boxes are the hexadecimal digits of π's fraction; instead of
//! carrying 1042 constants we compute them once (Machin's formula in fixed point) and check
//! them against the published first and last words in the tests.

use std::sync::OnceLock;

const P_WORDS: usize = 18;
const S_WORDS: usize = 4 * 256;
const PI_WORDS: usize = P_WORDS + S_WORDS;

/// The first `PI_WORDS` 32-bit words of π's fractional part.
fn pi_words() -> &'static [u32; PI_WORDS] {
    static PI: OnceLock<Box<[u32; PI_WORDS]>> = OnceLock::new();
    PI.get_or_init(|| {
        // Fixed point, big-endian words: word 0 is the integer part; guard words absorb the
        // truncation error of the series.
        const GUARD: usize = 4;
        const N: usize = 1 + PI_WORDS + GUARD;
        let a = arctan_inv(5, N);
        let b = arctan_inv(239, N);
        // π = 16·atan(1/5) − 4·atan(1/239)
        let mut pi = mul_small(&a, 16);
        sub_assign(&mut pi, &mul_small(&b, 4));
        let mut out = Box::new([0u32; PI_WORDS]);
        out.copy_from_slice(&pi[1..=PI_WORDS]);
        out
    })
}

/// atan(1/x) = Σ (−1)^k / ((2k+1)·x^(2k+1)) in `n`-word fixed point.
fn arctan_inv(x: u32, n: usize) -> Vec<u32> {
    let mut term = vec![0u32; n];
    term[0] = 1;
    div_assign(&mut term, x);
    let mut sum = term.clone();
    let x2 = x * x;
    let mut k: u32 = 1;
    let mut part = vec![0u32; n];
    while term.iter().any(|&w| w != 0) {
        div_assign(&mut term, x2);
        part.copy_from_slice(&term);
        div_assign(&mut part, 2 * k + 1);
        if k % 2 == 1 {
            sub_assign(&mut sum, &part);
        } else {
            add_assign(&mut sum, &part);
        }
        k += 1;
    }
    sum
}

fn div_assign(v: &mut [u32], d: u32) {
    let mut rem: u64 = 0;
    for w in v.iter_mut() {
        let cur = (rem << 32) | u64::from(*w);
        *w = (cur / u64::from(d)) as u32;
        rem = cur % u64::from(d);
    }
}

fn add_assign(a: &mut [u32], b: &[u32]) {
    let mut carry = 0u64;
    for (x, y) in a.iter_mut().zip(b).rev() {
        let s = u64::from(*x) + u64::from(*y) + carry;
        *x = s as u32;
        carry = s >> 32;
    }
}

fn sub_assign(a: &mut [u32], b: &[u32]) {
    let mut borrow = 0i64;
    for (x, y) in a.iter_mut().zip(b).rev() {
        let mut d = i64::from(*x) - i64::from(*y) - borrow;
        borrow = 0;
        if d < 0 {
            d += 1 << 32;
            borrow = 1;
        }
        *x = d as u32;
    }
}

fn mul_small(a: &[u32], m: u32) -> Vec<u32> {
    let mut out = vec![0u32; a.len()];
    let mut carry = 0u64;
    for (o, x) in out.iter_mut().zip(a).rev() {
        let p = u64::from(*x) * u64::from(m) + carry;
        *o = p as u32;
        carry = p >> 32;
    }
    out
}

/// An expanded Blowfish key.
pub(crate) struct Blowfish {
    p: [u32; P_WORDS],
    s: Box<[[u32; 256]; 4]>,
}

impl Blowfish {
    /// Key of 1..=56 bytes (kcptun passes 32); an empty key is treated as one zero byte.
    pub(crate) fn new(key: &[u8]) -> Blowfish {
        let pi = pi_words();
        let mut p = [0u32; P_WORDS];
        p.copy_from_slice(&pi[..P_WORDS]);
        let mut s = Box::new([[0u32; 256]; 4]);
        for (i, sbox) in s.iter_mut().enumerate() {
            let start = P_WORDS + 256 * i;
            sbox.copy_from_slice(&pi[start..start + 256]);
        }
        let key: &[u8] = if key.is_empty() { &[0] } else { key };
        let mut bytes = key.iter().cycle();
        for w in p.iter_mut() {
            let mut k = 0u32;
            for _ in 0..4 {
                k = (k << 8) | u32::from(bytes.next().copied().unwrap_or(0));
            }
            *w ^= k;
        }
        let mut bf = Blowfish { p, s };
        let (mut l, mut r) = (0u32, 0u32);
        for i in (0..P_WORDS).step_by(2) {
            (l, r) = bf.encrypt_words(l, r);
            bf.p[i] = l;
            bf.p[i + 1] = r;
        }
        for i in 0..4 {
            for j in (0..256).step_by(2) {
                (l, r) = bf.encrypt_words(l, r);
                bf.s[i][j] = l;
                bf.s[i][j + 1] = r;
            }
        }
        bf
    }

    fn f(&self, x: u32) -> u32 {
        let [a, b, c, d] = x.to_be_bytes();
        (self.s[0][a as usize].wrapping_add(self.s[1][b as usize]) ^ self.s[2][c as usize])
            .wrapping_add(self.s[3][d as usize])
    }

    fn encrypt_words(&self, mut l: u32, mut r: u32) -> (u32, u32) {
        for i in 0..16 {
            l ^= self.p[i];
            r ^= self.f(l);
            std::mem::swap(&mut l, &mut r);
        }
        std::mem::swap(&mut l, &mut r);
        r ^= self.p[16];
        l ^= self.p[17];
        (l, r)
    }

    /// Encrypts one 8-byte block in place (big-endian halves).
    pub(crate) fn encrypt_block(&self, b: &mut [u8; 8]) {
        let l = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        let r = u32::from_be_bytes([b[4], b[5], b[6], b[7]]);
        let (l, r) = self.encrypt_words(l, r);
        b[..4].copy_from_slice(&l.to_be_bytes());
        b[4..].copy_from_slice(&r.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pi_tables_match_published_words() {
        let pi = pi_words();
        assert_eq!(
            &pi[..4],
            &[0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344]
        );
        // S-box 1 starts, S-box 4 ends, with these words in Schneier's tables.
        assert_eq!(pi[P_WORDS], 0xd131_0ba6);
        assert_eq!(pi[PI_WORDS - 1], 0x3ac3_72e6);
    }

    #[test]
    fn eric_young_vectors() {
        for (key, pt, ct) in [
            (
                [0u8; 8],
                [0u8; 8],
                [0x4e, 0xf9, 0x97, 0x45, 0x61, 0x98, 0xdd, 0x78],
            ),
            (
                [0xff; 8],
                [0xff; 8],
                [0x51, 0x86, 0x6f, 0xd5, 0xb8, 0x5e, 0xcb, 0x8a],
            ),
        ] {
            let bf = Blowfish::new(&key);
            let mut b = pt;
            bf.encrypt_block(&mut b);
            assert_eq!(b, ct);
        }
    }
}
