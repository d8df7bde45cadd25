//! The UDPspeeder (speederv2) receive path on any bytes: `data[0]` picks key, obscure and the
//! decoder's capacity; the rest is cut into datagrams (a length byte each, its top bit saying
//! "cook it first" so that half of them pass the checksum and reach the FEC decoder with
//! arbitrary headers and shards). Then the same pieces go through encoder → decoder, which must
//! give every one back.
#![no_main]
use std::time::Instant;

use skiff_udpfec::{CookOptions, FecEncoder, FecDecoder, FecParams, FecSession};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((&sel, mut rest)) = data.split_first() else {
        return;
    };
    let cook = CookOptions {
        key: if sel & 1 != 0 { b"fuzz-key".to_vec() } else { Vec::new() },
        disable_obscure: sel & 2 != 0,
        disable_checksum: false,
    };
    let capacity = 1 + usize::from(sel >> 4) * 8;
    let mut params = FecParams::default();
    params.set_mode(u32::from(sel >> 2 & 1)).unwrap();
    params.set_fec(if sel & 8 != 0 { "1:3,2:4,10:6,20:10" } else { "4:2" }).unwrap();
    let mut session = FecSession::new(params.clone(), cook.clone(), capacity);
    let mut pieces = Vec::new();
    while let Some((&len, tail)) = rest.split_first() {
        let (piece, tail) = tail.split_at(usize::from(len & 0x7f).min(tail.len()) * 4 % (tail.len() + 1));
        let mut datagram = piece.to_vec();
        if len & 0x80 != 0 {
            cook.cook(&mut datagram);
        }
        let mut out = Vec::new();
        let _ = session.receive(&mut datagram, &mut out);
        pieces.push(piece.to_vec());
        rest = tail;
    }
    let mut encoder = FecEncoder::new(params);
    let mut decoder = FecDecoder::new(false, 4000);
    let (now, mut fec, mut got) = (Instant::now(), Vec::new(), Vec::new());
    for piece in &pieces {
        encoder.push(piece, now, &mut fec).unwrap();
    }
    encoder.flush(&mut fec);
    for shard in &fec {
        decoder.input(shard, &mut got).unwrap();
    }
    let mut want = pieces;
    want.sort();
    got.sort();
    assert_eq!(got, want);
});
