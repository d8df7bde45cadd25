//! gRPC's length-prefixed messages carrying Xray's `Hunk { bytes data = 1; }` and
//! `MultiHunk { repeated bytes data = 1; }` (transport/internet/grpc/encoding/stream.proto),
//! sans-IO: HTTP/2 DATA chunks in, payload slices out; payload lengths in, frame heads out.
//!
//! The protobuf is written by hand rather than with prost: both messages have one field, and
//! the whole codec is a tag byte and a varint. Decoding slices the received `Bytes`, so data
//! is not copied between the HTTP/2 frame and the reader.

use std::fmt;

use bytes::{Buf, Bytes, BytesMut};

/// gRPC's message prefix: a compressed flag and a big-endian u32 length.
pub const MESSAGE_PREFIX_LEN: usize = 5;
/// The protobuf key of field 1 with wire type 2 (length-delimited), the only field either
/// message has.
const DATA_KEY: u8 = 0x0a;
/// The longest head [`encode_head`] writes: the prefix, the key, a varint of up to 5 bytes.
pub const MAX_HEAD_LEN: usize = MESSAGE_PREFIX_LEN + 1 + 5;

/// Why a gRPC message or its Hunk could not be read. Each costs the one stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CodecError {
    /// The compressed flag was set; no compression was negotiated (Xray never compresses).
    Compressed,
    /// The prefix's flag byte was neither 0 nor 1.
    BadFlag(u8),
    /// A message longer than the limit the decoder was built with.
    TooLong { len: usize, limit: usize },
    /// The protobuf inside the message is malformed.
    Protobuf(&'static str),
}

impl fmt::Display for CodecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CodecError::Compressed => f.write_str("gRPC message is compressed, none negotiated"),
            CodecError::BadFlag(b) => write!(f, "gRPC message flag {b:#x} is not 0 or 1"),
            CodecError::TooLong { len, limit } => {
                write!(
                    f,
                    "gRPC message of {len} bytes exceeds the limit of {limit}"
                )
            }
            CodecError::Protobuf(why) => write!(f, "malformed Hunk: {why}"),
        }
    }
}

impl std::error::Error for CodecError {}

impl From<CodecError> for std::io::Error {
    fn from(e: CodecError) -> Self {
        std::io::Error::new(std::io::ErrorKind::InvalidData, e)
    }
}

/// Splits a byte stream (HTTP/2 DATA payloads) into gRPC messages. Holds at most one
/// incomplete message, bounded by `max_message`.
#[derive(Debug)]
pub struct MessageDecoder {
    pending: BytesMut,
    /// Whole chunks not yet looked at: a chunk holding complete messages is sliced, not
    /// copied into `pending`.
    chunk: Bytes,
    max_message: usize,
}

impl MessageDecoder {
    pub fn new(max_message: usize) -> Self {
        MessageDecoder {
            pending: BytesMut::new(),
            chunk: Bytes::new(),
            max_message,
        }
    }

    /// True when no message is started and nothing is left to parse.
    pub fn is_idle(&self) -> bool {
        self.pending.is_empty() && self.chunk.is_empty()
    }

    /// Bytes held that are not yet a whole message.
    pub fn buffered(&self) -> usize {
        self.pending.len() + self.chunk.len()
    }

    /// Hands over a DATA payload. Call [`next_message`](Self::next_message) until it says
    /// `None` before pushing the next.
    pub fn push(&mut self, data: Bytes) {
        if self.chunk.is_empty() {
            self.chunk = data;
        } else {
            // Only when the caller pushed without draining: keep both, in order.
            let mut joined = BytesMut::with_capacity(self.chunk.len() + data.len());
            joined.extend_from_slice(&self.chunk);
            joined.extend_from_slice(&data);
            self.chunk = joined.freeze();
        }
    }

    /// The next complete message body, or None when more bytes are needed.
    pub fn next_message(&mut self) -> Result<Option<Bytes>, CodecError> {
        if self.pending.is_empty() {
            // Fast path: the message lies whole inside the chunk.
            if let Some(len) = self.body_len(&self.chunk)?
                && self.chunk.len() >= MESSAGE_PREFIX_LEN + len
            {
                self.chunk.advance(MESSAGE_PREFIX_LEN);
                return Ok(Some(self.chunk.split_to(len)));
            }
            // Keep the partial message; it never grows past the limit (checked once its
            // prefix is complete, and the prefix is 5 bytes).
            let rest = std::mem::take(&mut self.chunk);
            self.pending.extend_from_slice(&rest);
            return Ok(None);
        }
        // Top the pending message up from the chunk, no further than its end.
        let need = match self.body_len(&self.pending)? {
            Some(len) => MESSAGE_PREFIX_LEN + len,
            None => MESSAGE_PREFIX_LEN,
        };
        let take = need
            .saturating_sub(self.pending.len())
            .min(self.chunk.len());
        self.pending.extend_from_slice(&self.chunk[..take]);
        self.chunk.advance(take);
        match self.body_len(&self.pending)? {
            Some(len) if self.pending.len() == MESSAGE_PREFIX_LEN + len => {
                let mut message = std::mem::take(&mut self.pending).freeze();
                message.advance(MESSAGE_PREFIX_LEN);
                Ok(Some(message))
            }
            // The prefix just completed: go on with its body.
            Some(_) if !self.chunk.is_empty() => self.next_message(),
            _ => Ok(None),
        }
    }

    /// The body length the prefix at the start of `buf` announces, once the prefix is there.
    fn body_len(&self, buf: &[u8]) -> Result<Option<usize>, CodecError> {
        if buf.len() < MESSAGE_PREFIX_LEN {
            return Ok(None);
        }
        match buf[0] {
            0 => {}
            1 => return Err(CodecError::Compressed),
            b => return Err(CodecError::BadFlag(b)),
        }
        let len = u32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize;
        if len > self.max_message {
            return Err(CodecError::TooLong {
                len,
                limit: self.max_message,
            });
        }
        Ok(Some(len))
    }
}

/// The data of a `Hunk` or `MultiHunk` message body, in order, each a slice of `body`.
/// `multi`: every occurrence of field 1 is an item (MultiHunk's repeated field); otherwise
/// the last occurrence wins, as proto3 reads a singular field. Unknown fields are skipped,
/// as protobuf requires; empty items are dropped (they carry nothing).
pub fn decode_hunks(mut body: Bytes, multi: bool, out: &mut Vec<Bytes>) -> Result<(), CodecError> {
    let start = out.len();
    while !body.is_empty() {
        let key = read_varint(&mut body)?;
        let field = key >> 3;
        match (key & 7, field) {
            (2, 1) => {
                let len = read_len(&mut body)?;
                let data = body.split_to(len);
                if !multi {
                    out.truncate(start);
                }
                if !data.is_empty() {
                    out.push(data);
                }
            }
            (_, 0) => return Err(CodecError::Protobuf("field number 0")),
            (0, _) => {
                read_varint(&mut body)?;
            }
            (1, _) => skip(&mut body, 8)?,
            (2, _) => {
                let len = read_len(&mut body)?;
                body.advance(len);
            }
            (5, _) => skip(&mut body, 4)?,
            _ => return Err(CodecError::Protobuf("unsupported wire type")),
        }
    }
    Ok(())
}

/// The head of a message carrying `len` bytes of data as one Hunk (or a MultiHunk of one
/// item: the two encode alike), to send before the data itself. Returns the bytes used.
pub fn encode_head(len: usize, head: &mut [u8; MAX_HEAD_LEN]) -> usize {
    debug_assert!(len > 0 && len <= u32::MAX as usize - 6);
    let mut varint = [0u8; 5];
    let mut v = len as u32;
    let mut n = 0;
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            varint[n] = byte;
            n += 1;
            break;
        }
        varint[n] = byte | 0x80;
        n += 1;
    }
    let body = 1 + n + len;
    head[0] = 0;
    head[1..5].copy_from_slice(&(body as u32).to_be_bytes());
    head[5] = DATA_KEY;
    head[6..6 + n].copy_from_slice(&varint[..n]);
    6 + n
}

/// One whole message carrying `data` as a Hunk, head and data in one buffer.
pub fn encode_message(data: &[u8]) -> Bytes {
    let mut head = [0u8; MAX_HEAD_LEN];
    let n = encode_head(data.len(), &mut head);
    let mut out = BytesMut::with_capacity(n + data.len());
    out.extend_from_slice(&head[..n]);
    out.extend_from_slice(data);
    out.freeze()
}

fn read_varint(buf: &mut Bytes) -> Result<u64, CodecError> {
    let mut value = 0u64;
    for i in 0..10 {
        let Some(&byte) = buf.first() else {
            return Err(CodecError::Protobuf("truncated varint"));
        };
        buf.advance(1);
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(CodecError::Protobuf("varint longer than 10 bytes"))
}

fn read_len(buf: &mut Bytes) -> Result<usize, CodecError> {
    let len = read_varint(buf)?;
    match usize::try_from(len) {
        Ok(len) if len <= buf.len() => Ok(len),
        _ => Err(CodecError::Protobuf("length beyond the message")),
    }
}

fn skip(buf: &mut Bytes, n: usize) -> Result<(), CodecError> {
    if buf.len() < n {
        return Err(CodecError::Protobuf("truncated fixed-width field"));
    }
    buf.advance(n);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decode_all(stream: &[u8], cuts: &[usize], multi: bool) -> Result<Vec<u8>, CodecError> {
        let mut decoder = MessageDecoder::new(1 << 20);
        let mut out = Vec::new();
        let mut items = Vec::new();
        let mut at = 0;
        let mut bounds: Vec<usize> = cuts.iter().map(|c| c % (stream.len() + 1)).collect();
        bounds.sort_unstable();
        bounds.push(stream.len());
        for end in bounds {
            decoder.push(Bytes::copy_from_slice(&stream[at..end]));
            at = end;
            while let Some(message) = decoder.next_message()? {
                items.clear();
                decode_hunks(message, multi, &mut items)?;
                for item in &items {
                    out.extend_from_slice(item);
                }
            }
        }
        Ok(out)
    }

    #[test]
    fn known_bytes() {
        // Hunk{data:"hi"}: 0a 02 'h' 'i' in a 4-byte message.
        assert_eq!(&encode_message(b"hi")[..], b"\0\0\0\0\x04\x0a\x02hi");
        let mut out = Vec::new();
        decode_hunks(Bytes::from_static(b"\x0a\x01a\x0a\x01b"), true, &mut out).unwrap();
        assert_eq!(
            out,
            vec![Bytes::from_static(b"a"), Bytes::from_static(b"b")]
        );
        out.clear();
        decode_hunks(Bytes::from_static(b"\x0a\x01a\x0a\x01b"), false, &mut out).unwrap();
        assert_eq!(out, vec![Bytes::from_static(b"b")]);
    }

    #[test]
    fn refuses_what_it_must() {
        let mut d = MessageDecoder::new(10);
        d.push(Bytes::from_static(b"\0\0\0\0\x0b"));
        assert!(matches!(d.next_message(), Err(CodecError::TooLong { .. })));
        let mut d = MessageDecoder::new(10);
        d.push(Bytes::from_static(b"\x01\0\0\0\x01x"));
        assert_eq!(d.next_message(), Err(CodecError::Compressed));
        let mut out = Vec::new();
        for bad in [
            &b"\x0a\x05ab"[..],
            b"\x0a",
            b"\x03",
            b"\x00\x01",
            b"\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff",
        ] {
            assert!(
                decode_hunks(Bytes::copy_from_slice(bad), true, &mut out).is_err(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn skips_unknown_fields() {
        let body = b"\x10\x96\x01\x19ABCDEFGH\x22\x01z\x2dWXYZ\x0a\x02ok";
        let mut out = Vec::new();
        decode_hunks(Bytes::from_static(body), false, &mut out).unwrap();
        assert_eq!(out, vec![Bytes::from_static(b"ok")]);
    }

    proptest! {
        #[test]
        fn round_trip_any_split(
            chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 1..3000), 0..8),
            cuts in proptest::collection::vec(any::<usize>(), 0..6),
            multi in any::<bool>(),
        ) {
            let mut stream = Vec::new();
            let mut expected = Vec::new();
            for c in &chunks {
                stream.extend_from_slice(&encode_message(c));
                expected.extend_from_slice(c);
            }
            prop_assert_eq!(decode_all(&stream, &cuts, multi).unwrap(), expected);
        }

        #[test]
        fn any_bytes_never_panic(
            data in proptest::collection::vec(any::<u8>(), 0..600),
            cuts in proptest::collection::vec(any::<usize>(), 0..4),
            multi in any::<bool>(),
        ) {
            let _ = decode_all(&data, &cuts, multi);
        }

        #[test]
        fn head_matches_length(len in 1usize..(1 << 24)) {
            let mut head = [0u8; MAX_HEAD_LEN];
            let n = encode_head(len, &mut head);
            let body = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
            prop_assert_eq!(body, n - MESSAGE_PREFIX_LEN + len);
            let mut varint = Bytes::copy_from_slice(&head[6..n]);
            prop_assert_eq!(read_varint(&mut varint).unwrap(), len as u64);
        }
    }
}
