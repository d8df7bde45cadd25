//! The hand-written batched AES-CFB encryption (skiff_crypto::aes_cfb, kept for its speed)
//! against the `aes` crate's CFB on arbitrary keys, lane counts and lengths.
//! `data[0]`: key size (16/24/32) and lane count (1..=4); then 32 key bytes; the rest is cut
//! into up to four datagrams at the lengths bytes 1..5 of the rest give.
#![no_main]
use skiff_crypto::aes_cfb::{AesCfb, LANES};
use skiff_crypto::kcp::{CfbCipher, CfbKind};

const IV: [u8; 16] = [
    0xa7, 0x73, 0x4f, 0x9c, 0x12, 0xac, 0x1b, 0x01, 0xa4, 0x15, 0xf2, 0xc1, 0xfc, 0x78, 0xe6, 0x6b,
];

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let Some((key, rest)) = rest.split_at_checked(32) else {
        return;
    };
    let key = &key[..[16, 24, 32][usize::from(sel % 3)]];
    let lanes = usize::from(sel >> 2) % LANES + 1;
    let Some((lens, mut body)) = rest.split_at_checked(lanes) else {
        return;
    };
    let mut plain = Vec::new();
    for &len in lens {
        let (d, tail) = body.split_at(usize::from(len).min(body.len()));
        plain.push(d.to_vec());
        body = tail;
    }
    let Some(fast) = AesCfb::new(key, IV) else {
        return;
    };
    let oracle = CfbCipher::new(CfbKind::Aes, key).unwrap();
    let mut batch = plain.clone();
    let mut refs: Vec<&mut [u8]> = batch.iter_mut().map(|d| d.as_mut_slice()).collect();
    fast.encrypt(&mut refs);
    for (p, sealed) in plain.iter().zip(&batch) {
        let mut want = p.clone();
        oracle.encrypt(&IV, &mut want);
        assert_eq!(&want, sealed);
    }
});
