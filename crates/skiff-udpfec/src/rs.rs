//! UDPspeeder's Reed–Solomon erasure code (Rizzo's `fec.c` as its `lib/rs.cpp` calls it).
//!
//! The encoding matrix is a Vandermonde matrix over the points 0, α^0, α^1, α^2, … made
//! systematic by multiplying with the inverse of its top k×k block. kcp-go (and the
//! `reed-solomon-erasure` crate skiff-kcp uses) evaluates at the integers 0, 1, 2, 3, … instead,
//! so its parity bytes differ from the third point on; this module is therefore separate
//! from skiff-kcp's FEC. `tests/rizzo_vectors.rs` pins parity bytes captured from speederv2.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::gf256;

/// Largest total shard count a group may have (`max_fec_packet_num` in UDPspeeder).
pub const MAX_SHARDS: usize = 255;

/// One (k, n) code: `n` rows of `k` coefficients, the first `k` rows the identity.
#[derive(Debug)]
pub struct RsCode {
    k: usize,
    n: usize,
    matrix: Vec<u8>,
    /// Decode matrices by the present shards they were inverted for: a lossy link repeats
    /// the same few loss patterns, and inverting a k×k matrix is O(k³) per recovered group.
    decodes: Mutex<HashMap<Vec<u8>, Arc<Vec<u8>>>>,
}

/// Most decode matrices one code keeps.
const DECODE_MEMO: usize = 64;

impl RsCode {
    /// `k` data shards, `n` shards in all; `1 <= k <= n <= 255`.
    pub fn new(k: usize, n: usize) -> Self {
        assert!(k >= 1 && k <= n && n <= MAX_SHARDS, "invalid code {k}/{n}");
        let mut vandermonde = vec![0u8; n * k];
        vandermonde[0] = 1;
        for row in 0..n - 1 {
            for col in 0..k {
                vandermonde[(row + 1) * k + col] = gf256::exp(row * col);
            }
        }
        let top_inverse =
            invert(&vandermonde[..k * k], k).expect("a Vandermonde block is invertible");
        let mut matrix = vec![0u8; n * k];
        for i in 0..k {
            matrix[i * k + i] = 1;
        }
        for row in k..n {
            for col in 0..k {
                let mut acc = 0u8;
                for i in 0..k {
                    acc ^= gf256::mul(vandermonde[row * k + i], top_inverse[i * k + col]);
                }
                matrix[row * k + col] = acc;
            }
        }
        RsCode {
            k,
            n,
            matrix,
            decodes: Mutex::default(),
        }
    }

    pub fn data_shards(&self) -> usize {
        self.k
    }

    pub fn total_shards(&self) -> usize {
        self.n
    }

    /// Computes parity shard `index` (k ≤ index < n) from the `k` data shards, all `out.len()` long.
    pub fn encode_parity(&self, data: &[&[u8]], index: usize, out: &mut [u8]) {
        debug_assert_eq!(data.len(), self.k);
        out.fill(0);
        let row = &self.matrix[index * self.k..(index + 1) * self.k];
        for (shard, coefficient) in data.iter().zip(row) {
            gf256::mul_add(out, shard, *coefficient);
        }
    }

    /// Rebuilds the missing data shards from any `k` present shards, all `len` bytes long.
    /// Returns false when fewer than `k` shards are present.
    pub fn reconstruct(&self, shards: &mut [Option<Vec<u8>>], len: usize) -> bool {
        debug_assert_eq!(shards.len(), self.n);
        if shards[..self.k].iter().all(Option::is_some) {
            return true;
        }
        // The lowest k present indices, as UDPspeeder's rs_decode picks them.
        let present: Vec<usize> = (0..self.n)
            .filter(|i| shards[*i].is_some())
            .take(self.k)
            .collect();
        if present.len() < self.k {
            return false;
        }
        let Some(decode) = self.decode_matrix(&present) else {
            return false;
        };
        let mut rebuilt = Vec::new();
        for missing in (0..self.k).filter(|i| shards[*i].is_none()) {
            let mut out = vec![0u8; len];
            for (j, &source) in present.iter().enumerate() {
                let shard = shards[source].as_deref().expect("present");
                gf256::mul_add(&mut out, &shard[..len], decode[missing * self.k + j]);
            }
            rebuilt.push((missing, out));
        }
        for (missing, out) in rebuilt {
            shards[missing] = Some(out);
        }
        true
    }
}

impl RsCode {
    /// The inverse of the rows of `present` (k indices), remembered.
    fn decode_matrix(&self, present: &[usize]) -> Option<Arc<Vec<u8>>> {
        let key: Vec<u8> = present.iter().map(|&i| i as u8).collect();
        if let Some(d) = self.decodes.lock().ok()?.get(&key) {
            return Some(d.clone());
        }
        let mut rows = Vec::with_capacity(self.k * self.k);
        for &i in present {
            rows.extend_from_slice(&self.matrix[i * self.k..(i + 1) * self.k]);
        }
        let decode = Arc::new(invert(&rows, self.k)?);
        let mut memo = self.decodes.lock().ok()?;
        if memo.len() >= DECODE_MEMO {
            memo.clear();
        }
        memo.insert(key, decode.clone());
        Some(decode)
    }
}

/// Gauss–Jordan inversion of a k×k matrix over GF(2^8); None when singular.
fn invert(matrix: &[u8], k: usize) -> Option<Vec<u8>> {
    let mut work = matrix.to_vec();
    let mut inverse = vec![0u8; k * k];
    for i in 0..k {
        inverse[i * k + i] = 1;
    }
    for col in 0..k {
        let pivot = (col..k).find(|r| work[r * k + col] != 0)?;
        if pivot != col {
            for c in 0..k {
                work.swap(pivot * k + c, col * k + c);
                inverse.swap(pivot * k + c, col * k + c);
            }
        }
        let scale = gf256::inv(work[col * k + col]);
        for c in 0..k {
            work[col * k + c] = gf256::mul(work[col * k + c], scale);
            inverse[col * k + c] = gf256::mul(inverse[col * k + c], scale);
        }
        for r in 0..k {
            let factor = work[r * k + col];
            if r == col || factor == 0 {
                continue;
            }
            for c in 0..k {
                work[r * k + c] ^= gf256::mul(factor, work[col * k + c]);
                inverse[r * k + c] ^= gf256::mul(factor, inverse[col * k + c]);
            }
        }
    }
    Some(inverse)
}

/// Most codes one cache keeps; a peer choosing many (x, y) pairs only costs rebuilding.
const CACHE_LIMIT: usize = 64;

/// Built codes by (k, n): a group's matrix is built once, not per group.
#[derive(Default)]
pub struct CodeCache {
    codes: HashMap<(u8, u8), Arc<RsCode>>,
}

impl CodeCache {
    pub fn get(&mut self, k: usize, n: usize) -> Arc<RsCode> {
        let key = (k as u8, n as u8);
        if let Some(code) = self.codes.get(&key) {
            return code.clone();
        }
        if self.codes.len() >= CACHE_LIMIT {
            self.codes.clear();
        }
        let code = Arc::new(RsCode::new(k, n));
        self.codes.insert(key, code.clone());
        code
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_parity_of_one_shard_is_a_copy() {
        // x = 1: every parity row of a systematic code over one shard is the shard itself,
        // which is how `-f 1:N` duplicates packets.
        let code = RsCode::new(1, 4);
        let mut out = [0u8; 3];
        for index in 1..4 {
            code.encode_parity(&[b"abc"], index, &mut out);
            assert_eq!(&out, b"abc");
        }
    }

    #[test]
    fn recovers_any_k_of_n() {
        let code = RsCode::new(3, 5);
        let data: Vec<Vec<u8>> = vec![b"one!".to_vec(), b"two!".to_vec(), b"thr!".to_vec()];
        let refs: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
        let mut all: Vec<Vec<u8>> = data.clone();
        for index in 3..5 {
            let mut p = vec![0u8; 4];
            code.encode_parity(&refs, index, &mut p);
            all.push(p);
        }
        // Twice: the second round takes every decode matrix from the memo.
        for (lost_a, lost_b) in
            (0..2).flat_map(|_| (0..5).flat_map(|a| (a + 1..5).map(move |b| (a, b))))
        {
            let mut shards: Vec<Option<Vec<u8>>> = all.iter().cloned().map(Some).collect();
            shards[lost_a] = None;
            shards[lost_b] = None;
            assert!(code.reconstruct(&mut shards, 4));
            for i in 0..3 {
                assert_eq!(shards[i].as_deref(), Some(data[i].as_slice()));
            }
        }
    }
}
