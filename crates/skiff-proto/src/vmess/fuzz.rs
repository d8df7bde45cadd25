//! The fuzz entry point (`fuzz/fuzz_targets/vmess_header.rs`): every VMess parser on
//! arbitrary bytes. Besides "never panics" it checks that a parsed instruction re-encodes to
//! the same value, that a chunk stream opens to the same payloads whether fed at once or
//! byte by byte, and that what the sealer writes the opener reads back.

use super::chunk::{BodyCipher, BodyFormat, ChunkOpener, ChunkSealer, Opened};
use super::instruction::{encode_instruction, parse_instruction};
use super::request::RequestOpener;
use super::response::open_response;
use skiff_core::wire::Parsed;

const KEY: [u8; 16] = [0x10; 16];
const IV: [u8; 16] = [0x20; 16];

/// The formats worth trying on unauthenticated bytes: `none` gets past the AEAD, so the
/// length, mask and padding logic sees arbitrary input; one AEAD format for the tag path.
fn formats() -> [BodyFormat; 4] {
    let base = BodyFormat {
        cipher: BodyCipher::None,
        chunked: true,
        masking: false,
        padding: false,
        auth_length: false,
        packet: false,
    };
    [
        base,
        BodyFormat {
            masking: true,
            padding: true,
            packet: true,
            ..base
        },
        BodyFormat {
            masking: true,
            ..base
        },
        BodyFormat {
            cipher: BodyCipher::Aes128Gcm,
            masking: true,
            padding: true,
            ..base
        },
    ]
}

/// Opens chunks from `data`, fed in pieces of `step` bytes (0: all at once). Returns the
/// payloads and whether the stream ended cleanly.
fn open_all(format: BodyFormat, data: &[u8], step: usize) -> (Vec<Vec<u8>>, Option<bool>) {
    let mut opener = ChunkOpener::new(format, &KEY, &IV, &KEY, &IV);
    let mut buf: Vec<u8> = Vec::new();
    let mut fed = 0;
    let mut payloads = Vec::new();
    loop {
        match opener.open(&mut buf) {
            Ok(Opened::Payload {
                start,
                end,
                consumed,
            }) => {
                assert!(start <= end && end <= consumed && consumed <= buf.len());
                payloads.push(buf[start..end].to_vec());
                buf.drain(..consumed);
            }
            Ok(Opened::End { consumed }) => {
                assert!(consumed <= buf.len());
                return (payloads, Some(true));
            }
            Ok(Opened::NeedMore(n)) => {
                assert!(n > buf.len());
                if fed == data.len() {
                    return (payloads, None);
                }
                let take = if step == 0 {
                    data.len() - fed
                } else {
                    step.min(data.len() - fed)
                };
                buf.extend_from_slice(&data[fed..fed + take]);
                fed += take;
            }
            Err(_) => return (payloads, Some(false)),
        }
    }
}

pub fn fuzz_parse_all(data: &[u8]) {
    if let Ok((ins, len)) = parse_instruction(data) {
        assert!(len <= data.len());
        let mut encoded = Vec::new();
        encode_instruction(&ins, &[], &mut encoded).expect("a parsed instruction re-encodes");
        let (again, again_len) = parse_instruction(&encoded).expect("re-encoded parses");
        assert_eq!(again, ins);
        assert_eq!(again_len, encoded.len());
    }
    let mut copy = data.to_vec();
    let _ = RequestOpener::new(KEY).open(&mut copy);
    let mut copy = data.to_vec();
    if let Ok(Parsed::Complete(len)) = open_response(&KEY, &IV, 0, &mut copy) {
        assert!(len <= data.len());
    }
    for format in formats() {
        let whole = open_all(format, data, 0);
        let split = open_all(format, data, 1);
        assert_eq!(whole, split);
        // What a sealer writes, an opener reads back.
        let mut sealer = ChunkSealer::new(format, &KEY, &IV, &KEY, &IV);
        let mut wire = Vec::new();
        let pieces: Vec<&[u8]> = data.chunks(97).collect();
        for piece in &pieces {
            sealer.seal(piece, &mut wire).expect("small chunks seal");
        }
        sealer.seal_end(&mut wire);
        let (payloads, end) = open_all(format, &wire, 0);
        assert_eq!(end, Some(true));
        assert_eq!(payloads, pieces);
    }
}
