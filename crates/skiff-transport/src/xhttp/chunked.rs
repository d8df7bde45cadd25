//! HTTP/1.1 chunked transfer coding (RFC 9112 §7.1), sans-IO: the streaming bodies of XHTTP
//! over HTTP/1.1 (the download, and stream-up's upload) have no length.

use bytes::{Bytes, BytesMut};

/// Longest chunk-size line (with extensions) or trailer line accepted.
const MAX_LINE: usize = 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Size,
    Data(u64),
    DataEnd,
    Trailer,
    Done,
}

/// Decodes a chunked body from bytes as they arrive.
#[derive(Debug)]
pub struct ChunkedDecoder {
    state: State,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChunkedError(pub &'static str);

impl std::fmt::Display for ChunkedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "bad chunked body: {}", self.0)
    }
}

impl Default for ChunkedDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl ChunkedDecoder {
    pub fn new() -> Self {
        ChunkedDecoder { state: State::Size }
    }

    /// The terminating chunk and trailers have been read.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Consumes from `input` and returns the next piece of body data (at most `max` bytes), or
    /// None when `input` holds no more data yet (or the body is done).
    pub fn decode(
        &mut self,
        input: &mut BytesMut,
        max: usize,
    ) -> Result<Option<Bytes>, ChunkedError> {
        loop {
            match self.state {
                State::Done => return Ok(None),
                State::Size => {
                    let Some(line) = take_line(input)? else {
                        return Ok(None);
                    };
                    let digits = line.split(|&b| b == b';').next().unwrap_or(&[]);
                    let digits = trim(digits);
                    if digits.is_empty() || digits.len() > 16 {
                        return Err(ChunkedError("chunk size"));
                    }
                    let mut size: u64 = 0;
                    for &b in digits {
                        let d = (b as char).to_digit(16).ok_or(ChunkedError("chunk size"))?;
                        size = (size << 4) | u64::from(d);
                    }
                    self.state = if size == 0 {
                        State::Trailer
                    } else {
                        State::Data(size)
                    };
                }
                State::Data(left) => {
                    if input.is_empty() {
                        return Ok(None);
                    }
                    let n = (left.min(input.len() as u64) as usize).min(max.max(1));
                    let data = input.split_to(n).freeze();
                    let left = left - n as u64;
                    self.state = if left == 0 {
                        State::DataEnd
                    } else {
                        State::Data(left)
                    };
                    return Ok(Some(data));
                }
                State::DataEnd => {
                    let Some(line) = take_line(input)? else {
                        return Ok(None);
                    };
                    if !line.is_empty() {
                        return Err(ChunkedError("data longer than its size"));
                    }
                    self.state = State::Size;
                }
                State::Trailer => {
                    let Some(line) = take_line(input)? else {
                        return Ok(None);
                    };
                    if line.is_empty() {
                        self.state = State::Done;
                    }
                }
            }
        }
    }
}

/// One line without its CRLF (a bare LF is taken too, as Go does), or None if incomplete.
fn take_line(input: &mut BytesMut) -> Result<Option<Vec<u8>>, ChunkedError> {
    match input.iter().position(|&b| b == b'\n') {
        Some(i) if i <= MAX_LINE => {
            let mut line = input.split_to(i + 1);
            line.truncate(i);
            if line.last() == Some(&b'\r') {
                line.truncate(i - 1);
            }
            Ok(Some(line.to_vec()))
        }
        Some(_) => Err(ChunkedError("line too long")),
        None if input.len() > MAX_LINE => Err(ChunkedError("line too long")),
        None => Ok(None),
    }
}

fn trim(b: &[u8]) -> &[u8] {
    let start = b
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(b.len());
    let end = b
        .iter()
        .rposition(|c| !c.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    &b[start..end.max(start)]
}

/// Writes `data` as one chunk into `out`.
pub fn encode_chunk(data: &[u8], out: &mut Vec<u8>) {
    if data.is_empty() {
        return;
    }
    out.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// The last chunk, ending the body.
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decode_all(wire: &[u8], split: usize) -> Result<(Vec<u8>, bool), ChunkedError> {
        let mut d = ChunkedDecoder::new();
        let mut input = BytesMut::new();
        let mut out = Vec::new();
        for part in [
            &wire[..split.min(wire.len())],
            &wire[split.min(wire.len())..],
        ] {
            input.extend_from_slice(part);
            while let Some(data) = d.decode(&mut input, 7)? {
                out.extend_from_slice(&data);
            }
        }
        Ok((out, d.is_done()))
    }

    #[test]
    fn decodes_go_style_body() {
        let wire = b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-T: 1\r\n\r\n";
        assert_eq!(
            decode_all(wire, 9).unwrap(),
            (b"hello world".to_vec(), true)
        );
        assert!(decode_all(b"zz\r\n", 4).is_err());
        assert!(decode_all(b"2\r\nabc\r\n", 8).is_err());
        assert!(decode_all(&[b'1'; 2000], 2000).is_err());
    }

    proptest! {
        #[test]
        fn round_trips(chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 0..8), split in 0usize..3000) {
            let mut wire = Vec::new();
            let mut want = Vec::new();
            for c in &chunks {
                encode_chunk(c, &mut wire);
                want.extend_from_slice(c);
            }
            wire.extend_from_slice(LAST_CHUNK);
            prop_assert_eq!(decode_all(&wire, split).unwrap(), (want, true));
        }

        #[test]
        fn never_panics(wire in proptest::collection::vec(any::<u8>(), 0..600), split in 0usize..600) {
            let _ = decode_all(&wire, split);
        }
    }
}
