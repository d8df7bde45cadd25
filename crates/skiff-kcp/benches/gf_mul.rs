//! The Reed-Solomon inner loop, `dst ^= c·src` over GF(2^8) (polynomial 0x11d), on one
//! kcptun-sized shard: what Skiff's FEC calls against `reed-solomon-erasure`'s kernel called
//! directly. Skiff's own AVX2 shuffle lost to the crate here (figures in `gf::mul_add`'s
//! comment) and now calls it, so the two rows measure the wrapper's overhead; the benchmark
//! stays for whoever proposes a faster kernel.
//!
//! `cargo bench -p skiff-kcp --bench gf_mul -- --sample-size 256 --sample-count 200`.

use divan::{Bencher, black_box};
use reed_solomon_erasure::galois_8;
use skiff_kcp::fuzz::GfMulAdd;

/// kcptun's default MTU less its headers is about this; FEC shards are as long as the longest
/// datagram of their group.
const SHARD: usize = 1350;
const COEFFICIENT: u8 = 0x8e;

fn main() {
    divan::main();
}

fn shards() -> (Vec<u8>, Vec<u8>) {
    let src = (0..SHARD).map(|i| (i * 31 + 7) as u8).collect();
    let dst = (0..SHARD).map(|i| (i * 13) as u8).collect();
    (src, dst)
}

#[divan::bench(bytes_count = SHARD)]
fn skiff_fec_mul_add(b: Bencher) {
    let (src, mut dst) = shards();
    let t = GfMulAdd::new(COEFFICIENT);
    b.bench_local(|| t.mul_add(black_box(&mut dst), black_box(&src)));
}

#[divan::bench(bytes_count = SHARD)]
fn reed_solomon_erasure(b: Bencher) {
    let (src, mut dst) = shards();
    b.bench_local(|| {
        galois_8::mul_slice_xor(black_box(COEFFICIENT), black_box(&src), black_box(&mut dst))
    });
}
