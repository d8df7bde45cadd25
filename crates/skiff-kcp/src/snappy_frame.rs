//! The snappy *framing* format (Google's `framing_format.txt`) as kcptun wraps its KCP byte
//! stream with it, one independent stream per direction (spec/kcp.md §7.1). Sans-IO: bytes in,
//! bytes out.
//!
//! ```text
//! stream:  ff 06 00 00 "sNaPpY"   then chunks
//! chunk:   type(1) | length(3, LE, includes the CRC) | masked CRC-32C(uncompressed)(4, LE) | data
//!          type 0x00 = snappy block, 0x01 = stored; 0x80..=0xfe skippable; 0x02..=0x7f fatal
//! ```
//! The block compression itself is the `snap` crate's raw encoder/decoder.

use std::fmt;

/// The stream identifier chunk every framed stream starts with.
pub const STREAM_IDENTIFIER: [u8; 10] =
    [0xff, 0x06, 0x00, 0x00, b's', b'N', b'a', b'P', b'p', b'Y'];
/// Most uncompressed bytes one chunk may carry (the format's limit).
pub const MAX_BLOCK: usize = 65_536;
/// Largest snappy block `MAX_BLOCK` bytes can compress to (32 + n + n/6).
const MAX_COMPRESSED_BLOCK: usize = 32 + MAX_BLOCK + MAX_BLOCK / 6;
const CHUNK_HEADER: usize = 4;
const CRC_LEN: usize = 4;

const TYPE_COMPRESSED: u8 = 0x00;
const TYPE_UNCOMPRESSED: u8 = 0x01;
const TYPE_STREAM_ID: u8 = 0xff;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SnappyError {
    /// The first chunk was not the stream identifier.
    MissingStreamIdentifier,
    /// A stream identifier chunk with other content.
    BadStreamIdentifier,
    /// Chunk type 0x02..=0x7f: reserved and not skippable.
    ReservedChunk(u8),
    /// A chunk longer than the format allows for its type.
    ChunkTooLong(usize),
    /// A compressed or stored chunk shorter than its CRC.
    ChunkTooShort,
    BadBlock,
    ChecksumMismatch,
}

impl fmt::Display for SnappyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SnappyError::MissingStreamIdentifier => write!(f, "snappy stream without identifier"),
            SnappyError::BadStreamIdentifier => write!(f, "bad snappy stream identifier"),
            SnappyError::ReservedChunk(t) => write!(f, "reserved snappy chunk type {t:#04x}"),
            SnappyError::ChunkTooLong(n) => write!(f, "snappy chunk of {n} bytes is too long"),
            SnappyError::ChunkTooShort => write!(f, "snappy chunk shorter than its checksum"),
            SnappyError::BadBlock => write!(f, "corrupt snappy block"),
            SnappyError::ChecksumMismatch => write!(f, "snappy chunk checksum mismatch"),
        }
    }
}

impl std::error::Error for SnappyError {}

/// The framing format's masked CRC-32C (Castagnoli) of the uncompressed bytes.
pub fn masked_crc(data: &[u8]) -> u32 {
    let crc = crc32c(data);
    (crc.rotate_right(15)).wrapping_add(0xa282_ead8)
}

/// CRC-32C, reflected polynomial 0x82f63b78: every snappy chunk carries one of its payload.
/// The `crc32c` crate's, on the SSE4.2 / ARMv8 CRC instructions where the CPU has them.
pub fn crc32c(data: &[u8]) -> u32 {
    ::crc32c::crc32c(data)
}

/// One direction's writer: the stream identifier first, then one chunk per ≤ 64 KiB of input
/// (kcptun's writer flushes after every write, so chunk boundaries carry no meaning).
pub struct SnappyEncoder {
    started: bool,
    encoder: snap::raw::Encoder,
    /// Scratch for the compressed block, reused.
    block: Vec<u8>,
}

impl Default for SnappyEncoder {
    fn default() -> Self {
        SnappyEncoder::new()
    }
}

impl SnappyEncoder {
    pub fn new() -> SnappyEncoder {
        SnappyEncoder {
            started: false,
            encoder: snap::raw::Encoder::new(),
            block: Vec::new(),
        }
    }

    /// Appends the framed form of `data` to `out`.
    pub fn encode(&mut self, data: &[u8], out: &mut Vec<u8>) {
        if !self.started {
            out.extend_from_slice(&STREAM_IDENTIFIER);
            self.started = true;
        }
        for piece in data.chunks(MAX_BLOCK) {
            let crc = masked_crc(piece);
            self.block
                .resize(snap::raw::max_compress_len(piece.len()), 0);
            // Store instead when compression saves less than 1/8, as the reference writer does.
            let compressed = match self.encoder.compress(piece, &mut self.block) {
                Ok(n) if n < piece.len() - piece.len() / 8 => Some(n),
                _ => None,
            };
            let (kind, body) = match compressed {
                Some(n) => (TYPE_COMPRESSED, &self.block[..n]),
                None => (TYPE_UNCOMPRESSED, piece),
            };
            let len = (body.len() + CRC_LEN) as u32;
            out.push(kind);
            out.extend_from_slice(&len.to_le_bytes()[..3]);
            out.extend_from_slice(&crc.to_le_bytes());
            out.extend_from_slice(body);
        }
        if self.block.capacity() > MAX_COMPRESSED_BLOCK {
            self.block = Vec::new();
        }
    }
}

/// One direction's reader. Feed it the bytes as they arrive in any split; it buffers at most
/// one partial chunk (bounded by the format's chunk limits).
pub struct SnappyDecoder {
    seen_identifier: bool,
    decoder: snap::raw::Decoder,
    /// Bytes of an incomplete chunk.
    pending: Vec<u8>,
    /// Bytes of a skippable chunk still to be dropped.
    skip: usize,
    /// Scratch for one decompressed block, reused.
    block: Vec<u8>,
}

impl Default for SnappyDecoder {
    fn default() -> Self {
        SnappyDecoder::new()
    }
}

impl SnappyDecoder {
    pub fn new() -> SnappyDecoder {
        SnappyDecoder {
            seen_identifier: false,
            decoder: snap::raw::Decoder::new(),
            pending: Vec::new(),
            skip: 0,
            block: Vec::new(),
        }
    }

    /// Decodes every complete chunk of `pending ++ input`, appending the data to `out`; keeps
    /// the tail. After an error the stream is unusable.
    pub fn decode(&mut self, mut input: &[u8], out: &mut Vec<u8>) -> Result<(), SnappyError> {
        if self.skip > 0 {
            let n = self.skip.min(input.len());
            self.skip -= n;
            input = &input[n..];
        }
        if self.pending.is_empty() {
            let used = self.decode_chunks(input, out)?;
            self.pending.extend_from_slice(&input[used..]);
        } else {
            self.pending.extend_from_slice(input);
            let mut pending = std::mem::take(&mut self.pending);
            let used = self.decode_chunks(&pending, out)?;
            pending.drain(..used);
            self.pending = pending;
        }
        if self.pending.is_empty() && self.pending.capacity() > 4 * MAX_BLOCK {
            self.pending = Vec::new();
        }
        Ok(())
    }

    /// Decodes whole chunks from the front of `buf`; returns the bytes consumed.
    fn decode_chunks(&mut self, buf: &[u8], out: &mut Vec<u8>) -> Result<usize, SnappyError> {
        let mut at = 0;
        while let Some(header) = buf.get(at..at + CHUNK_HEADER) {
            let kind = header[0];
            let len =
                usize::from(header[1]) | usize::from(header[2]) << 8 | usize::from(header[3]) << 16;
            if !self.seen_identifier && kind != TYPE_STREAM_ID {
                return Err(SnappyError::MissingStreamIdentifier);
            }
            let limit = match kind {
                TYPE_STREAM_ID => 6,
                TYPE_COMPRESSED => CRC_LEN + MAX_COMPRESSED_BLOCK,
                TYPE_UNCOMPRESSED => CRC_LEN + MAX_BLOCK,
                0x02..=0x7f => return Err(SnappyError::ReservedChunk(kind)),
                // Skippable (0x80..=0xfd) and padding (0xfe): any length, dropped as it comes.
                _ => usize::MAX,
            };
            if len > limit {
                return Err(SnappyError::ChunkTooLong(len));
            }
            if limit == usize::MAX {
                let available = buf.len() - at - CHUNK_HEADER;
                at += CHUNK_HEADER;
                if available < len {
                    self.skip = len - available;
                    return Ok(buf.len());
                }
                at += len;
                continue;
            }
            let Some(body) = buf.get(at + CHUNK_HEADER..at + CHUNK_HEADER + len) else {
                break;
            };
            at += CHUNK_HEADER + len;
            match kind {
                TYPE_STREAM_ID => {
                    if body != &STREAM_IDENTIFIER[CHUNK_HEADER..] {
                        return Err(SnappyError::BadStreamIdentifier);
                    }
                    self.seen_identifier = true;
                }
                TYPE_COMPRESSED | TYPE_UNCOMPRESSED => {
                    let (crc, data) = body
                        .split_at_checked(CRC_LEN)
                        .ok_or(SnappyError::ChunkTooShort)?;
                    let want = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
                    let plain: &[u8] = if kind == TYPE_COMPRESSED {
                        let n =
                            snap::raw::decompress_len(data).map_err(|_| SnappyError::BadBlock)?;
                        if n > MAX_BLOCK {
                            return Err(SnappyError::BadBlock);
                        }
                        self.block.resize(n, 0);
                        let got = self
                            .decoder
                            .decompress(data, &mut self.block)
                            .map_err(|_| SnappyError::BadBlock)?;
                        &self.block[..got]
                    } else {
                        data
                    };
                    if masked_crc(plain) != want {
                        return Err(SnappyError::ChecksumMismatch);
                    }
                    out.extend_from_slice(plain);
                }
                _ => {}
            }
        }
        Ok(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn crc32c_check_value() {
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
        assert_eq!(crc32c(b""), 0);
    }

    /// spec/kcp.md §7.1: the live first payloads of a kcptun client with compression on.
    #[test]
    fn live_kcptun_syn_chunk() {
        let syn = hex("0100000003000000");
        let mut enc = SnappyEncoder::new();
        let mut out = Vec::new();
        enc.encode(&syn, &mut out);
        let mut want = hex("ff060000734e61507059 01 0c0000 4439ac2f");
        want.extend_from_slice(&syn);
        assert_eq!(out, want);
        let mut dec = SnappyDecoder::new();
        let mut plain = Vec::new();
        dec.decode(&want, &mut plain).unwrap();
        assert_eq!(plain, syn);
    }

    #[test]
    fn compresses_repetitive_data_and_round_trips_byte_by_byte() {
        let data: Vec<u8> = (0..200_000u32).map(|i| (i / 1000) as u8).collect();
        let mut enc = SnappyEncoder::new();
        let mut wire = Vec::new();
        enc.encode(&data, &mut wire);
        assert!(wire.len() < data.len() / 4);
        assert_eq!(wire[10], TYPE_COMPRESSED);
        let mut dec = SnappyDecoder::new();
        let mut plain = Vec::new();
        for b in &wire {
            dec.decode(std::slice::from_ref(b), &mut plain).unwrap();
        }
        assert_eq!(plain, data);
    }

    #[test]
    fn rejects_bad_checksum_missing_identifier_and_reserved_chunks() {
        let mut wire = Vec::new();
        SnappyEncoder::new().encode(b"hello", &mut wire);
        let mut bad = wire.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert_eq!(
            SnappyDecoder::new().decode(&bad, &mut Vec::new()),
            Err(SnappyError::ChecksumMismatch)
        );
        assert_eq!(
            SnappyDecoder::new().decode(&wire[10..], &mut Vec::new()),
            Err(SnappyError::MissingStreamIdentifier)
        );
        let mut reserved = STREAM_IDENTIFIER.to_vec();
        reserved.extend_from_slice(&[0x02, 0, 0, 0]);
        assert_eq!(
            SnappyDecoder::new().decode(&reserved, &mut Vec::new()),
            Err(SnappyError::ReservedChunk(2))
        );
    }

    #[test]
    fn skips_padding_and_skippable_chunks_across_feeds() {
        let mut wire = STREAM_IDENTIFIER.to_vec();
        wire.extend_from_slice(&[0xfe, 5, 0, 0, 1, 2, 3, 4, 5]);
        wire.extend_from_slice(&[0x80, 2, 0, 0, 9, 9]);
        SnappyEncoder {
            started: true,
            ..SnappyEncoder::new()
        }
        .encode(b"abc", &mut wire);
        let mut dec = SnappyDecoder::new();
        let mut plain = Vec::new();
        let (a, b) = wire.split_at(16);
        dec.decode(a, &mut plain).unwrap();
        dec.decode(b, &mut plain).unwrap();
        assert_eq!(plain, b"abc");
    }

    mod prop {
        use super::super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn encode_then_decode_is_identity(
                writes in proptest::collection::vec(proptest::collection::vec(0u8..4, 0..3000), 0..6),
                split in 1usize..500,
            ) {
                let mut enc = SnappyEncoder::new();
                let mut wire = Vec::new();
                let mut all = Vec::new();
                for w in &writes {
                    enc.encode(w, &mut wire);
                    all.extend_from_slice(w);
                }
                let mut dec = SnappyDecoder::new();
                let mut plain = Vec::new();
                for piece in wire.chunks(split) {
                    dec.decode(piece, &mut plain).unwrap();
                }
                prop_assert_eq!(plain, all);
            }

            #[test]
            fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2000)) {
                let mut dec = SnappyDecoder::new();
                let mut out = Vec::new();
                let mut framed = STREAM_IDENTIFIER.to_vec();
                framed.extend_from_slice(&bytes);
                let _ = dec.decode(&framed, &mut out);
                let _ = SnappyDecoder::new().decode(&bytes, &mut out);
            }
        }
    }
}
