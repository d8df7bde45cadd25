//! Sans-IO message-body framing (RFC 9112 §6 and §7.1).
//!
//! The proxy relays bodies byte for byte, so all it needs to know is where a body ends: a
//! [`BodyFramer`] is fed slices and answers how many leading bytes still belong to the
//! current message. Chunked bodies are walked through every chunk-size line, extension and
//! trailer field, so the end is exact and pipelined bytes after it are left alone.

use std::fmt;
use std::io;

use super::headers::{self, Header};

/// How a message's body is delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyKind {
    /// No body at all (request without length; HEAD responses, 1xx, 204, 304).
    None,
    /// Exactly this many bytes.
    Length(u64),
    /// Transfer-Encoding with chunked as the final coding.
    Chunked,
    /// Everything until the sender closes (responses without a length).
    UntilClose,
}

/// A body that cannot be delimited, or a chunked stream that breaks the grammar.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BodyError {
    /// Content-Length is not a number, or several disagree.
    BadContentLength,
    /// Both Content-Length and Transfer-Encoding on a request (a smuggling vector).
    LengthAndEncoding,
    /// A request whose Transfer-Encoding does not end in chunked, or any Transfer-Encoding
    /// on HTTP/1.0: the length is unknowable (RFC 9112 §6.3).
    BadTransferEncoding,
    /// A byte that the chunked grammar does not allow here.
    BadChunk(&'static str),
    /// The chunk size does not fit in 64 bits.
    ChunkTooLarge,
    /// A chunk extension or the trailer section is longer than we are willing to walk.
    TooLong,
    /// The connection closed before the body ended.
    Truncated,
}

impl fmt::Display for BodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BodyError::BadContentLength => f.write_str("invalid Content-Length"),
            BodyError::LengthAndEncoding => {
                f.write_str("both Content-Length and Transfer-Encoding")
            }
            BodyError::BadTransferEncoding => f.write_str("unsupported Transfer-Encoding"),
            BodyError::BadChunk(why) => write!(f, "malformed chunked body: {why}"),
            BodyError::ChunkTooLarge => f.write_str("chunk size overflows"),
            BodyError::TooLong => f.write_str("chunk extension or trailers too long"),
            BodyError::Truncated => f.write_str("connection closed inside a message body"),
        }
    }
}

impl std::error::Error for BodyError {}

impl From<BodyError> for io::Error {
    fn from(err: BodyError) -> io::Error {
        let kind = match err {
            BodyError::Truncated => io::ErrorKind::UnexpectedEof,
            _ => io::ErrorKind::InvalidData,
        };
        io::Error::new(kind, err)
    }
}

/// What the framing fields of a head say, before request/response rules are applied.
struct Framing {
    /// `Some(true)` if Transfer-Encoding is present and its final coding is chunked.
    chunked_last: Option<bool>,
    content_length: Option<u64>,
}

fn read_framing(headers: &[Header]) -> Result<Framing, BodyError> {
    // A Transfer-Encoding field that is present but empty still counts as present (and
    // not chunked): another parser may well see it that way, so we must not ignore it.
    let present = headers::values(headers, "transfer-encoding")
        .next()
        .is_some();
    let last = headers::values(headers, "transfer-encoding")
        .flat_map(headers::list_items)
        .last();
    let chunked_last = present.then(|| last.is_some_and(|c| c.eq_ignore_ascii_case(b"chunked")));
    let mut content_length = None;
    for value in headers::values(headers, "content-length") {
        // RFC 9110 §8.6 lets a recipient accept a list of identical values ("5, 5").
        for item in value.split(|&b| b == b',') {
            let n = parse_decimal(headers::trim_ows(item)).ok_or(BodyError::BadContentLength)?;
            match content_length {
                Some(prev) if prev != n => return Err(BodyError::BadContentLength),
                _ => content_length = Some(n),
            }
        }
    }
    Ok(Framing {
        chunked_last,
        content_length,
    })
}

/// `1*DIGIT` as u64; no sign, no whitespace, no overflow.
fn parse_decimal(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &d| {
        if d.is_ascii_digit() {
            n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
        } else {
            None
        }
    })
}

/// Body framing of a request (RFC 9112 §6.3 rules 3–6, server side). Strict on purpose:
/// anything a downstream parser might read differently is rejected with 400 rather than
/// forwarded.
pub fn request_body(headers: &[Header], minor_version: u8) -> Result<BodyKind, BodyError> {
    let framing = read_framing(headers)?;
    match (framing.chunked_last, framing.content_length) {
        (Some(_), Some(_)) => Err(BodyError::LengthAndEncoding),
        (Some(_), None) if minor_version == 0 => Err(BodyError::BadTransferEncoding),
        (Some(true), None) => Ok(BodyKind::Chunked),
        (Some(false), None) => Err(BodyError::BadTransferEncoding),
        (None, Some(0)) | (None, None) => Ok(BodyKind::None),
        (None, Some(n)) => Ok(BodyKind::Length(n)),
    }
}

/// Body framing of a response (RFC 9112 §6.3 rules 1–7, client side), plus whether the
/// framing is dubious enough that the connection must not be reused afterwards.
///
/// `request_was_head` matters because a HEAD response carries the GET's length fields but
/// no body.
pub fn response_body(
    status: u16,
    request_was_head: bool,
    headers: &[Header],
    minor_version: u8,
) -> Result<(BodyKind, bool), BodyError> {
    if request_was_head || (100..200).contains(&status) || status == 204 || status == 304 {
        return Ok((BodyKind::None, false));
    }
    let framing = read_framing(headers)?;
    Ok(match (framing.chunked_last, framing.content_length) {
        // HTTP/1.0 with Transfer-Encoding: framing is faulty (RFC 9112 §6.1); read to close.
        (Some(_), _) if minor_version == 0 => (BodyKind::UntilClose, true),
        // Transfer-Encoding overrides Content-Length; the pair smells, so do not reuse.
        (Some(true), cl) => (BodyKind::Chunked, cl.is_some()),
        (Some(false), _) => (BodyKind::UntilClose, true),
        (None, Some(0)) => (BodyKind::None, false),
        (None, Some(n)) => (BodyKind::Length(n), false),
        (None, None) => (BodyKind::UntilClose, true),
    })
}

/// Longest chunk-extension we walk on one chunk-size line.
const MAX_CHUNK_EXT: usize = 4096;
/// Longest trailer section we walk.
const MAX_TRAILERS: usize = 16 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Counting down a Content-Length body.
    Length(u64),
    /// Reading the hex digits of a chunk size (`digits` so far).
    Size {
        size: u64,
        digits: u8,
    },
    /// After the size: BWS and `;ext=val` up to CR.
    Ext {
        size: u64,
        len: usize,
    },
    /// Expecting the LF of a chunk-size line.
    SizeLf {
        size: u64,
    },
    /// Inside chunk data.
    Data(u64),
    /// Expecting the CR, then the LF, after chunk data.
    DataCr,
    DataLf,
    /// At the start of a trailer line (or of the final empty line).
    TrailerStart {
        total: usize,
    },
    /// Inside a trailer field line.
    Trailer {
        total: usize,
    },
    /// Expecting the LF of a trailer line.
    TrailerLf {
        total: usize,
    },
    /// Expecting the LF of the final empty line.
    FinalLf,
    UntilClose,
    Done,
    /// A grammar error was seen; the stream position is lost for good.
    Broken,
}

/// Finds the end of one message body in a byte stream.
#[derive(Clone, Debug)]
pub struct BodyFramer {
    kind: BodyKind,
    state: State,
}

impl BodyFramer {
    pub fn new(kind: BodyKind) -> BodyFramer {
        let state = match kind {
            BodyKind::None | BodyKind::Length(0) => State::Done,
            BodyKind::Length(n) => State::Length(n),
            BodyKind::Chunked => State::Size { size: 0, digits: 0 },
            BodyKind::UntilClose => State::UntilClose,
        };
        BodyFramer { kind, state }
    }

    pub fn kind(&self) -> BodyKind {
        self.kind
    }

    /// Whether the body has ended; further input belongs to the next message.
    pub fn is_complete(&self) -> bool {
        self.state == State::Done
    }

    /// Consumes a prefix of `input` that belongs to this body and returns its length.
    /// A result shorter than `input` means the body ended there. After an error the framer
    /// stays broken: the connection has to be dropped.
    pub fn feed(&mut self, input: &[u8]) -> Result<usize, BodyError> {
        let mut used = 0;
        while used < input.len() {
            match self.state {
                State::Done => break,
                State::Broken => return Err(BodyError::BadChunk("framer already failed")),
                State::UntilClose => return Ok(input.len()),
                State::Length(left) | State::Data(left) => {
                    let take = left.min((input.len() - used) as u64);
                    used += take as usize;
                    let left = left - take;
                    self.state = match (self.state, left) {
                        (State::Length(_), 0) => State::Done,
                        (State::Length(_), n) => State::Length(n),
                        (_, 0) => State::DataCr,
                        (_, n) => State::Data(n),
                    };
                }
                _ => {
                    let byte = input[used];
                    self.state = match self.step(byte) {
                        Ok(next) => next,
                        Err(err) => {
                            self.state = State::Broken;
                            return Err(err);
                        }
                    };
                    used += 1;
                }
            }
        }
        Ok(used)
    }

    /// The peer closed the connection: fine for an until-close body (which ends here) or a
    /// finished one, an error otherwise.
    pub fn finish_eof(&mut self) -> Result<(), BodyError> {
        match self.state {
            State::Done => Ok(()),
            State::UntilClose => {
                self.state = State::Done;
                Ok(())
            }
            _ => Err(BodyError::Truncated),
        }
    }

    /// One byte of the chunked grammar (RFC 9112 §7.1). Line endings must be CRLF: a bare
    /// LF is tolerated by some parsers and not others, and relaying a body whose end two
    /// parsers disagree on is how request smuggling works.
    fn step(&self, b: u8) -> Result<State, BodyError> {
        Ok(match self.state {
            State::Size { size, digits } => match hex(b) {
                Some(d) => {
                    // Leading zeros are allowed but must not grow without bound.
                    if size >> 60 != 0 {
                        return Err(BodyError::ChunkTooLarge);
                    }
                    if digits >= 32 {
                        return Err(BodyError::BadChunk("chunk size too long"));
                    }
                    State::Size {
                        size: size << 4 | u64::from(d),
                        digits: digits + 1,
                    }
                }
                None if digits == 0 => return Err(BodyError::BadChunk("missing chunk size")),
                None => match b {
                    b'\r' => State::SizeLf { size },
                    b';' | b' ' | b'\t' => State::Ext { size, len: 1 },
                    _ => return Err(BodyError::BadChunk("invalid byte after chunk size")),
                },
            },
            State::Ext { size, len } => match b {
                b'\r' => State::SizeLf { size },
                _ if !is_field_byte(b) => {
                    return Err(BodyError::BadChunk("invalid byte in chunk extension"));
                }
                _ if len >= MAX_CHUNK_EXT => return Err(BodyError::TooLong),
                _ => State::Ext { size, len: len + 1 },
            },
            State::SizeLf { size } => match b {
                b'\n' if size == 0 => State::TrailerStart { total: 0 },
                b'\n' => State::Data(size),
                _ => return Err(BodyError::BadChunk("expected LF after chunk size")),
            },
            State::DataCr => match b {
                b'\r' => State::DataLf,
                _ => return Err(BodyError::BadChunk("expected CRLF after chunk data")),
            },
            State::DataLf => match b {
                b'\n' => State::Size { size: 0, digits: 0 },
                _ => return Err(BodyError::BadChunk("expected CRLF after chunk data")),
            },
            State::TrailerStart { total } => match b {
                b'\r' => State::FinalLf,
                // A trailer line may not start with whitespace (obs-fold).
                b' ' | b'\t' => return Err(BodyError::BadChunk("folded trailer line")),
                _ if !is_field_byte(b) => {
                    return Err(BodyError::BadChunk("invalid byte in trailer"));
                }
                _ => State::Trailer { total: total + 1 },
            },
            State::Trailer { total } => match b {
                b'\r' => State::TrailerLf { total: total + 1 },
                _ if !is_field_byte(b) => {
                    return Err(BodyError::BadChunk("invalid byte in trailer"));
                }
                _ if total >= MAX_TRAILERS => return Err(BodyError::TooLong),
                _ => State::Trailer { total: total + 1 },
            },
            State::TrailerLf { total } => match b {
                b'\n' => State::TrailerStart { total: total + 1 },
                _ => return Err(BodyError::BadChunk("expected LF after trailer")),
            },
            State::FinalLf => match b {
                b'\n' => State::Done,
                _ => return Err(BodyError::BadChunk("expected LF at end of trailers")),
            },
            // The byte-counting and terminal states never reach here.
            State::Length(_) | State::Data(_) | State::UntilClose | State::Done | State::Broken => {
                return Err(BodyError::BadChunk("internal state"));
            }
        })
    }
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Visible characters, SP, HTAB and obs-text: what a field line or chunk extension may hold.
fn is_field_byte(b: u8) -> bool {
    b == b'\t' || (b >= 0x20 && b != 0x7f)
}

/// Encodes `body` as chunked with the given chunk sizes (the last chunk takes the rest) and
/// optional trailer lines. Used by tests and the fuzz harness to produce valid input.
pub fn encode_chunked(body: &[u8], sizes: &[usize], trailers: &[(&str, &str)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 64);
    let mut rest = body;
    let mut sizes = sizes.iter().copied();
    while !rest.is_empty() {
        let n = sizes.next().unwrap_or(rest.len()).clamp(1, rest.len());
        out.extend_from_slice(format!("{n:x}\r\n").as_bytes());
        out.extend_from_slice(&rest[..n]);
        out.extend_from_slice(b"\r\n");
        rest = &rest[n..];
    }
    out.extend_from_slice(b"0\r\n");
    for (name, value) in trailers {
        out.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hs(pairs: &[(&str, &str)]) -> Vec<Header> {
        pairs.iter().map(|(n, v)| Header::new(*n, *v)).collect()
    }

    /// Feeds `input` split at `at`, returning the body length found.
    fn frame_split(kind: BodyKind, input: &[u8], at: usize) -> Result<Option<usize>, BodyError> {
        let mut f = BodyFramer::new(kind);
        let a = f.feed(&input[..at])?;
        if f.is_complete() {
            return Ok(Some(a));
        }
        assert_eq!(a, at, "an incomplete body consumes all it is given");
        let b = f.feed(&input[at..])?;
        Ok(f.is_complete().then_some(a + b))
    }

    #[test]
    fn request_framing_rules() {
        assert_eq!(request_body(&hs(&[]), 1), Ok(BodyKind::None));
        assert_eq!(
            request_body(&hs(&[("Content-Length", "12")]), 1),
            Ok(BodyKind::Length(12))
        );
        assert_eq!(
            request_body(&hs(&[("Content-Length", "0")]), 1),
            Ok(BodyKind::None)
        );
        assert_eq!(
            request_body(
                &hs(&[("Content-Length", "5, 5"), ("content-length", "5")]),
                1
            ),
            Ok(BodyKind::Length(5))
        );
        assert_eq!(
            request_body(&hs(&[("Content-Length", "5"), ("content-length", "6")]), 1),
            Err(BodyError::BadContentLength)
        );
        for bad in ["", "-1", "+1", "1 2", "0x10", "99999999999999999999"] {
            assert_eq!(
                request_body(&hs(&[("Content-Length", bad)]), 1),
                Err(BodyError::BadContentLength),
                "{bad:?}"
            );
        }
        assert_eq!(
            request_body(&hs(&[("Transfer-Encoding", "gzip, Chunked")]), 1),
            Ok(BodyKind::Chunked)
        );
        assert_eq!(
            request_body(
                &hs(&[
                    ("Transfer-Encoding", "chunked"),
                    ("Transfer-Encoding", "gzip")
                ]),
                1
            ),
            Err(BodyError::BadTransferEncoding)
        );
        assert_eq!(
            request_body(&hs(&[("Transfer-Encoding", "")]), 1),
            Err(BodyError::BadTransferEncoding)
        );
        assert_eq!(
            request_body(&hs(&[("Transfer-Encoding", "chunked")]), 0),
            Err(BodyError::BadTransferEncoding)
        );
        assert_eq!(
            request_body(
                &hs(&[("Transfer-Encoding", "chunked"), ("Content-Length", "3")]),
                1
            ),
            Err(BodyError::LengthAndEncoding)
        );
    }

    #[test]
    fn response_framing_rules() {
        let cl = hs(&[("Content-Length", "10")]);
        assert_eq!(
            response_body(200, true, &cl, 1),
            Ok((BodyKind::None, false))
        );
        for status in [100, 101, 103, 204, 304] {
            assert_eq!(
                response_body(status, false, &cl, 1),
                Ok((BodyKind::None, false))
            );
        }
        assert_eq!(
            response_body(200, false, &cl, 1),
            Ok((BodyKind::Length(10), false))
        );
        assert_eq!(
            response_body(200, false, &[], 1),
            Ok((BodyKind::UntilClose, true))
        );
        let both = hs(&[("Transfer-Encoding", "chunked"), ("Content-Length", "3")]);
        assert_eq!(
            response_body(200, false, &both, 1),
            Ok((BodyKind::Chunked, true))
        );
        assert_eq!(
            response_body(200, false, &both, 0),
            Ok((BodyKind::UntilClose, true))
        );
        let gzip = hs(&[("Transfer-Encoding", "gzip")]);
        assert_eq!(
            response_body(200, false, &gzip, 1),
            Ok((BodyKind::UntilClose, true))
        );
        assert_eq!(
            response_body(200, false, &hs(&[("Content-Length", "x")]), 1),
            Err(BodyError::BadContentLength)
        );
    }

    #[test]
    fn content_length_stops_at_the_end() {
        let mut f = BodyFramer::new(BodyKind::Length(5));
        assert_eq!(f.feed(b"abc"), Ok(3));
        assert!(!f.is_complete());
        assert_eq!(f.feed(b"deGET /"), Ok(2));
        assert!(f.is_complete());
        assert_eq!(f.feed(b"more"), Ok(0));
        assert_eq!(f.finish_eof(), Ok(()));

        let mut short = BodyFramer::new(BodyKind::Length(5));
        short.feed(b"ab").unwrap();
        assert_eq!(short.finish_eof(), Err(BodyError::Truncated));
    }

    #[test]
    fn none_and_until_close() {
        let mut none = BodyFramer::new(BodyKind::None);
        assert!(none.is_complete());
        assert_eq!(none.feed(b"GET"), Ok(0));

        let mut close = BodyFramer::new(BodyKind::UntilClose);
        assert_eq!(close.feed(b"anything\r\n0\r\n\r\n"), Ok(15));
        assert!(!close.is_complete());
        assert_eq!(close.finish_eof(), Ok(()));
        assert!(close.is_complete());
    }

    #[test]
    fn chunked_split_at_every_byte() {
        let mut msg =
            b"4;name=\"v\" ; x\r\nWiki\r\n05\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n".to_vec();
        msg.extend_from_slice(b"0 ; last\r\nExpires: never\r\nX-Sum: 1\r\n\r\n");
        let end = msg.len();
        msg.extend_from_slice(b"GET /next HTTP/1.1\r\n\r\n");
        for at in 0..=msg.len() {
            assert_eq!(
                frame_split(BodyKind::Chunked, &msg, at),
                Ok(Some(end)),
                "split at {at}"
            );
        }
        // Byte by byte too.
        let mut f = BodyFramer::new(BodyKind::Chunked);
        let mut used = 0;
        for b in &msg {
            used += f.feed(std::slice::from_ref(b)).unwrap();
        }
        assert_eq!(used, end);
        assert!(f.is_complete());
    }

    #[test]
    fn chunked_without_trailers_and_encoder() {
        let enc = encode_chunked(b"hello world", &[3, 100], &[]);
        assert_eq!(enc, b"3\r\nhel\r\n8\r\nlo world\r\n0\r\n\r\n");
        let mut f = BodyFramer::new(BodyKind::Chunked);
        assert_eq!(f.feed(&enc), Ok(enc.len()));
        assert!(f.is_complete());
        assert_eq!(
            encode_chunked(b"", &[], &[("A", "b")]),
            b"0\r\nA: b\r\n\r\n"
        );
    }

    #[test]
    fn chunked_rejects_bad_grammar() {
        let bad: &[&[u8]] = &[
            b"\r\n",
            b"g\r\n",
            b"3\nabc\r\n",
            b"3\r\nabcX",
            b"3\r\nabc\n",
            b"0\r\n\n",
            b"0\r\n X: y\r\n\r\n",
            b"0\r\nX: \x01\r\n\r\n",
            b"1;\x00\r\n",
            b"10000000000000000\r\n",
            b"-1\r\n",
        ];
        for input in bad {
            let mut f = BodyFramer::new(BodyKind::Chunked);
            assert!(
                f.feed(input).is_err(),
                "{:?}",
                String::from_utf8_lossy(input)
            );
            // Broken for good, and never panics afterwards.
            assert!(f.feed(b"0\r\n\r\n").is_err());
            assert!(!f.is_complete());
        }
        let mut long_ext = b"1;".to_vec();
        long_ext.extend(std::iter::repeat_n(b'a', MAX_CHUNK_EXT + 1));
        assert_eq!(
            BodyFramer::new(BodyKind::Chunked).feed(&long_ext),
            Err(BodyError::TooLong)
        );
        // Many leading zeros are fine as long as the value fits.
        let zeros = b"000000000000000000001\r\nx\r\n0\r\n\r\n";
        let mut f = BodyFramer::new(BodyKind::Chunked);
        assert_eq!(f.feed(zeros), Ok(zeros.len()));
    }

    #[test]
    fn chunked_truncated_at_eof() {
        let mut f = BodyFramer::new(BodyKind::Chunked);
        f.feed(b"5\r\nab").unwrap();
        assert_eq!(f.finish_eof(), Err(BodyError::Truncated));
    }
}
