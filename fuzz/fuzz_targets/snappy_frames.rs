//! Snappy framing decoder on any bytes (with and without a valid stream identifier), and
//! encode∘decode = identity for any input.
#![no_main]
use skiff_kcp::snappy_frame::{STREAM_IDENTIFIER, SnappyDecoder, SnappyEncoder};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let mut out = Vec::new();
    let _ = SnappyDecoder::new().decode(data, &mut out);
    let mut framed = STREAM_IDENTIFIER.to_vec();
    framed.extend_from_slice(data);
    let mut decoder = SnappyDecoder::new();
    for piece in framed.chunks(7) {
        if decoder.decode(piece, &mut out).is_err() {
            break;
        }
    }
    let mut wire = Vec::new();
    SnappyEncoder::new().encode(data, &mut wire);
    let mut plain = Vec::new();
    assert!(SnappyDecoder::new().decode(&wire, &mut plain).is_ok());
    assert_eq!(plain, data);
});
