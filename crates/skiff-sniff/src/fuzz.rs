//! Fuzz entry points. Each must return normally for every input; a panic is a bug.

use crate::quic::sniff_quic;
use crate::quic::test_support::initial_packet;

/// The QUIC Initial sniffer, three ways: the raw bytes (header walk); the bytes as the
/// decrypted payload of one genuine Initial packet (frame walk and CRYPTO reassembly, which
/// random bytes would never reach through the AEAD); and split in two packets at a
/// data-chosen point, so reassembly across packets is exercised too.
pub fn fuzz_quic_initial(data: &[u8]) {
    let _ = sniff_quic(data);
    let Some((&cut, frames)) = data.split_first() else {
        return;
    };
    let dcid = [0x5a; 8];
    let one = initial_packet(1, &dcid, 0, frames);
    let _ = sniff_quic(&one);
    let at = usize::from(cut).min(frames.len());
    let (a, b) = frames.split_at(at);
    let two = [
        initial_packet(1, &dcid, 0, a),
        initial_packet(0x6b33_43cf, &dcid, 1, b),
    ]
    .concat();
    let _ = sniff_quic(&two);
}
