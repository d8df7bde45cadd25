//! SM4 (GB/T 32907-2016), the block cipher behind kcptun's `--crypt sm4`.
//!
//! The S-box is computed, not pasted: it is affine-equivalent to inversion in GF(2^8) modulo
//! x^8+x^7+x^6+x^5+x^4+x^2+1 (S(x) = A·(A·x ⊕ 0xd3)⁻¹ ⊕ 0xd3, A the circulant matrix whose
//! first row is 0xd3); the tests check it against the standard's table ends and test vector.

const fn gf_mul(mut a: u8, mut b: u8) -> u8 {
    let mut r = 0u8;
    while b != 0 {
        if b & 1 != 0 {
            r ^= a;
        }
        let carry = a & 0x80 != 0;
        a <<= 1;
        if carry {
            a ^= 0xf5; // x^8 = x^7+x^6+x^5+x^4+x^2+1
        }
        b >>= 1;
    }
    r
}

/// a^254 = a⁻¹ (0 for 0).
const fn gf_inv(a: u8) -> u8 {
    let mut result = 1u8;
    let mut base = a;
    let mut e = 254u32;
    while e > 0 {
        if e & 1 != 0 {
            result = gf_mul(result, base);
        }
        base = gf_mul(base, base);
        e >>= 1;
    }
    result
}

/// Output bit 7−i is the parity of (row i ∧ x), row i = 0xd3 rotated right by i.
const fn affine(x: u8) -> u8 {
    let mut y = 0u8;
    let mut i = 0;
    while i < 8 {
        let row = 0xd3u8.rotate_right(i);
        y |= (((row & x).count_ones() & 1) as u8) << (7 - i);
        i += 1;
    }
    y
}

const fn build_sbox() -> [u8; 256] {
    let mut s = [0u8; 256];
    let mut x = 0;
    while x < 256 {
        s[x] = affine(gf_inv(affine(x as u8) ^ 0xd3)) ^ 0xd3;
        x += 1;
    }
    s
}

const SBOX: [u8; 256] = build_sbox();
const FK: [u32; 4] = [0xa3b1_bac6, 0x56aa_3350, 0x677d_9197, 0xb270_22dc];

fn tau(x: u32) -> u32 {
    let b = x.to_be_bytes();
    u32::from_be_bytes([
        SBOX[b[0] as usize],
        SBOX[b[1] as usize],
        SBOX[b[2] as usize],
        SBOX[b[3] as usize],
    ])
}

fn t(x: u32) -> u32 {
    let b = tau(x);
    b ^ b.rotate_left(2) ^ b.rotate_left(10) ^ b.rotate_left(18) ^ b.rotate_left(24)
}

fn t_key(x: u32) -> u32 {
    let b = tau(x);
    b ^ b.rotate_left(13) ^ b.rotate_left(23)
}

/// An expanded SM4 key.
pub(crate) struct Sm4 {
    rk: [u32; 32],
}

impl Sm4 {
    pub(crate) fn new(key: &[u8; 16]) -> Sm4 {
        let mut k = [0u32; 36];
        for i in 0..4 {
            k[i] = u32::from_be_bytes([key[4 * i], key[4 * i + 1], key[4 * i + 2], key[4 * i + 3]])
                ^ FK[i];
        }
        let mut rk = [0u32; 32];
        for i in 0..32 {
            // CK: byte j of word i is (4i + j)·7 mod 256.
            let ck = u32::from_be_bytes([0, 1, 2, 3].map(|j| ((4 * i + j) as u32 * 7 % 256) as u8));
            k[i + 4] = k[i] ^ t_key(k[i + 1] ^ k[i + 2] ^ k[i + 3] ^ ck);
            rk[i] = k[i + 4];
        }
        Sm4 { rk }
    }

    /// Encrypts one 16-byte block in place (big-endian words).
    pub(crate) fn encrypt_block(&self, b: &mut [u8; 16]) {
        let mut x = [0u32; 36];
        for i in 0..4 {
            x[i] = u32::from_be_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]]);
        }
        for i in 0..32 {
            x[i + 4] = x[i] ^ t(x[i + 1] ^ x[i + 2] ^ x[i + 3] ^ self.rk[i]);
        }
        for i in 0..4 {
            b[4 * i..4 * i + 4].copy_from_slice(&x[35 - i].to_be_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sbox_matches_the_standard_table() {
        assert_eq!(
            &SBOX[..8],
            &[0xd6, 0x90, 0xe9, 0xfe, 0xcc, 0xe1, 0x3d, 0xb7]
        );
        assert_eq!(
            &SBOX[248..],
            &[0x79, 0xee, 0x5f, 0x3e, 0xd7, 0xcb, 0x39, 0x48]
        );
    }

    #[test]
    fn standard_example_1() {
        // GB/T 32907 example: key = plaintext = 0123456789abcdeffedcba9876543210.
        let key = [
            0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54,
            0x32, 0x10,
        ];
        let mut b = key;
        Sm4::new(&key).encrypt_block(&mut b);
        assert_eq!(
            b,
            [
                0x68, 0x1e, 0xdf, 0x34, 0xd2, 0x06, 0x96, 0x5e, 0x86, 0xb3, 0xe9, 0x4f, 0x53, 0x6e,
                0x42, 0x46
            ]
        );
    }
}
