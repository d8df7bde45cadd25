//! Twofish (Schneier et al. 1998), the block cipher behind kcptun's `--crypt twofish`.
//!
//! Built from the paper's definitions: the q-permutations from their 4-bit tables, the MDS and
//! RS matrices over GF(2^8), and the key-dependent S-boxes folded into four 256-entry tables
//! ("full keying") so a round costs eight lookups.

const Q_T: [[[u8; 16]; 4]; 2] = [
    [
        [8, 1, 7, 13, 6, 15, 3, 2, 0, 11, 5, 9, 14, 12, 10, 4],
        [14, 12, 11, 8, 1, 2, 3, 5, 15, 4, 10, 6, 7, 0, 9, 13],
        [11, 10, 5, 14, 6, 13, 9, 0, 12, 8, 15, 3, 2, 4, 7, 1],
        [13, 7, 15, 4, 1, 2, 6, 14, 9, 11, 3, 0, 8, 5, 12, 10],
    ],
    [
        [2, 8, 11, 13, 15, 7, 6, 14, 3, 1, 9, 4, 0, 10, 12, 5],
        [1, 14, 2, 11, 4, 12, 3, 7, 6, 13, 10, 5, 15, 9, 0, 8],
        [4, 12, 7, 5, 1, 6, 9, 10, 0, 14, 13, 8, 2, 11, 3, 15],
        [11, 9, 5, 1, 12, 3, 13, 14, 6, 4, 7, 15, 2, 0, 8, 10],
    ],
];

const MDS: [[u8; 4]; 4] = [
    [0x01, 0xef, 0x5b, 0x5b],
    [0x5b, 0xef, 0xef, 0x01],
    [0xef, 0x5b, 0x01, 0xef],
    [0xef, 0x01, 0xef, 0x5b],
];

const RS: [[u8; 8]; 4] = [
    [0x01, 0xa4, 0x55, 0x87, 0x5a, 0x58, 0xdb, 0x9e],
    [0xa4, 0x56, 0x82, 0xf3, 0x1e, 0xc6, 0x68, 0xe5],
    [0x02, 0xa1, 0xfc, 0xc1, 0x47, 0xae, 0x3d, 0x19],
    [0xa4, 0x55, 0x87, 0x5a, 0x58, 0xdb, 0x9e, 0x03],
];

const fn q_table(which: usize) -> [u8; 256] {
    let t = Q_T[which];
    let mut out = [0u8; 256];
    let mut x = 0;
    while x < 256 {
        let a0 = (x >> 4) as u8;
        let b0 = (x & 15) as u8;
        let a1 = a0 ^ b0;
        // ROR4(b, 1) is ((b >> 1) | (b << 3)) & 15.
        let b1 = a0 ^ (((b0 >> 1) | (b0 << 3)) & 15) ^ ((a0 << 3) & 15);
        let a2 = t[0][a1 as usize];
        let b2 = t[1][b1 as usize];
        let a3 = a2 ^ b2;
        let b3 = a2 ^ (((b2 >> 1) | (b2 << 3)) & 15) ^ ((a2 << 3) & 15);
        let a4 = t[2][a3 as usize];
        let b4 = t[3][b3 as usize];
        out[x] = (b4 << 4) | a4;
        x += 1;
    }
    out
}

const Q0: [u8; 256] = q_table(0);
const Q1: [u8; 256] = q_table(1);

/// Multiplication in GF(2^8) modulo `poly` (0x169 for MDS, 0x14d for RS).
fn gf_mul(mut a: u8, mut b: u8, poly: u16) -> u8 {
    let mut r = 0u8;
    while b != 0 {
        if b & 1 != 0 {
            r ^= a;
        }
        let carry = a & 0x80 != 0;
        a <<= 1;
        if carry {
            a ^= (poly & 0xff) as u8;
        }
        b >>= 1;
    }
    r
}

/// Byte `j` of h's S-box stage: the q chain with the key words `l` (k = l.len() ∈ 2..=4).
fn h_byte(j: usize, x: u8, l: &[u32]) -> u8 {
    let lb = |i: usize| l[i].to_le_bytes()[j];
    let mut y = x;
    if l.len() == 4 {
        y = [Q1, Q0, Q0, Q1][j][y as usize] ^ lb(3);
    }
    if l.len() >= 3 {
        y = [Q1, Q1, Q0, Q0][j][y as usize] ^ lb(2);
    }
    let (q_a, q_b, q_c) = [(Q0, Q0, Q1), (Q1, Q0, Q0), (Q0, Q1, Q1), (Q1, Q1, Q0)][j];
    // y0 = q1[q0[q0[y] ^ l1] ^ l0] etc.: innermost first.
    q_c[(q_b[(q_a[y as usize] ^ lb(1)) as usize] ^ lb(0)) as usize]
}

fn mds_column(j: usize, y: u8) -> u32 {
    u32::from_le_bytes([
        gf_mul(MDS[0][j], y, 0x169),
        gf_mul(MDS[1][j], y, 0x169),
        gf_mul(MDS[2][j], y, 0x169),
        gf_mul(MDS[3][j], y, 0x169),
    ])
}

fn h(x: u32, l: &[u32]) -> u32 {
    x.to_le_bytes()
        .iter()
        .enumerate()
        .fold(0, |acc, (j, &b)| acc ^ mds_column(j, h_byte(j, b, l)))
}

/// An expanded Twofish key.
pub(crate) struct Twofish {
    k: [u32; 40],
    /// g(X) = s[0][x0] ^ s[1][x1] ^ s[2][x2] ^ s[3][x3].
    s: Box<[[u32; 256]; 4]>,
}

impl Twofish {
    /// Key of 16, 24 or 32 bytes (kcptun passes 32); other lengths are zero-padded to the next.
    pub(crate) fn new(key: &[u8]) -> Twofish {
        let len = match key.len() {
            0..=16 => 16,
            17..=24 => 24,
            _ => 32,
        };
        let mut m = [0u8; 32];
        let n = key.len().min(32);
        m[..n].copy_from_slice(&key[..n]);
        let k = len / 8;
        let word =
            |i: usize| u32::from_le_bytes([m[4 * i], m[4 * i + 1], m[4 * i + 2], m[4 * i + 3]]);
        let me: Vec<u32> = (0..k).map(|i| word(2 * i)).collect();
        let mo: Vec<u32> = (0..k).map(|i| word(2 * i + 1)).collect();
        // S = (S_{k-1}, …, S_0) with S_i = RS · m[8i..8i+8].
        let mut s_words: Vec<u32> = (0..k)
            .map(|i| {
                let mut out = [0u8; 4];
                for (r, o) in out.iter_mut().enumerate() {
                    *o = (0..8).fold(0, |acc, c| acc ^ gf_mul(RS[r][c], m[8 * i + c], 0x14d));
                }
                u32::from_le_bytes(out)
            })
            .collect();
        s_words.reverse();

        let rho = 0x0101_0101u32;
        let mut round_keys = [0u32; 40];
        for i in 0..20u32 {
            let a = h((2 * i).wrapping_mul(rho), &me);
            let b = h((2 * i + 1).wrapping_mul(rho), &mo).rotate_left(8);
            round_keys[2 * i as usize] = a.wrapping_add(b);
            round_keys[2 * i as usize + 1] = a.wrapping_add(b.wrapping_mul(2)).rotate_left(9);
        }
        let mut s = Box::new([[0u32; 256]; 4]);
        for (j, table) in s.iter_mut().enumerate() {
            for (x, entry) in table.iter_mut().enumerate() {
                *entry = mds_column(j, h_byte(j, x as u8, &s_words));
            }
        }
        Twofish { k: round_keys, s }
    }

    fn g(&self, x: u32) -> u32 {
        let [a, b, c, d] = x.to_le_bytes();
        self.s[0][a as usize]
            ^ self.s[1][b as usize]
            ^ self.s[2][c as usize]
            ^ self.s[3][d as usize]
    }

    /// Encrypts one 16-byte block in place (little-endian words).
    pub(crate) fn encrypt_block(&self, b: &mut [u8; 16]) {
        let mut r = [0u32; 4];
        for (i, w) in r.iter_mut().enumerate() {
            *w = u32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]])
                ^ self.k[i];
        }
        for round in 0..16 {
            let t0 = self.g(r[0]);
            let t1 = self.g(r[1].rotate_left(8));
            let f0 = t0.wrapping_add(t1).wrapping_add(self.k[2 * round + 8]);
            let f1 = t0
                .wrapping_add(t1.wrapping_mul(2))
                .wrapping_add(self.k[2 * round + 9]);
            let n0 = (r[2] ^ f0).rotate_right(1);
            let n1 = r[3].rotate_left(1) ^ f1;
            r = [n0, n1, r[0], r[1]];
        }
        for i in 0..4 {
            let c = r[(i + 2) % 4] ^ self.k[i + 4];
            b[4 * i..4 * i + 4].copy_from_slice(&c.to_le_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn q_permutations_match_the_paper() {
        assert_eq!(&Q0[..4], &[0xa9, 0x67, 0xb3, 0xe8]);
        assert_eq!(&Q1[..4], &[0x75, 0xf3, 0xc6, 0xf4]);
    }

    #[test]
    fn zero_key_vectors() {
        // Twofish paper, "ecb_tbl" I=1: all-zero key and plaintext.
        for (len, ct) in [
            (16, "9f589f5cf6122c32b6bfec2f2ae8c35a"),
            (24, "efa71f788965bd4453f860178fc19101"),
            (32, "57ff739d4dc92c1bd7fc01700cc8216f"),
        ] {
            let tf = Twofish::new(&vec![0u8; len]);
            let mut b = [0u8; 16];
            tf.encrypt_block(&mut b);
            let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
            assert_eq!(hex, ct, "key length {len}");
        }
    }
}
