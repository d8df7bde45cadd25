//! Vision padding frames (vless.md §7.2, §7.3, §7.5), sans-IO: the writer appends frames to
//! a buffer, the [`Unpadder`] takes a framed byte stream apart one piece at a time.
//!
//! A frame is `[uuid16]? command:u8 content_len:u16 padding_len:u16 content padding`, the
//! UUID only in the first frame of each direction.

use std::ops::Range;

/// More padding frames follow.
pub const CMD_CONTINUE: u8 = 0;
/// Padding is over; later bytes still travel inside the outer TLS.
pub const CMD_END: u8 = 1;
/// Padding is over and the sender left the outer TLS for this direction.
pub const CMD_DIRECT: u8 = 2;

/// UUID (16) and frame header (5): the first frame's fixed part.
pub const FIRST_HEADER_LEN: usize = 21;
const HEADER_LEN: usize = 5;
/// Largest content per frame: Xray's 8 KiB buffer less the first frame's fixed part. Any
/// length up to 65535 is legal on the wire; staying under this keeps Xray receivers on
/// their common path.
pub const MAX_CONTENT: usize = 8192 - FIRST_HEADER_LEN;

/// Xray's default padding parameters (`testseed` 900, 500, 900, 256): long padding for content
/// shorter than 900 draws from `[900 - len, 1400 - len)`, anything else from `[0, 256)`.
const LONG_BASE: usize = 900;
const LONG_SPREAD: usize = 500;
const LONG_THRESHOLD: usize = 900;
const SHORT_SPREAD: usize = 256;

/// The padding length for a frame of `content_len` bytes; `random` is any uniformly random
/// number. Long padding hides the length of short handshake messages.
pub fn padding_len(content_len: usize, long: bool, random: u32) -> usize {
    let random = random as usize;
    let wanted = if long && content_len < LONG_THRESHOLD {
        random % LONG_SPREAD + LONG_BASE - content_len
    } else {
        random % SHORT_SPREAD
    };
    // The frame must still fit one 8 KiB buffer.
    wanted.min((8192 - FIRST_HEADER_LEN).saturating_sub(content_len))
}

/// Appends one frame. Padding bytes are zeros (they travel inside the outer TLS).
/// `content` must be at most 65535 bytes (callers split at [`MAX_CONTENT`]).
pub fn write_frame(
    out: &mut Vec<u8>,
    uuid: Option<&[u8; 16]>,
    command: u8,
    content: &[u8],
    padding: usize,
) {
    let content_len = content.len().min(usize::from(u16::MAX));
    let padding = padding.min(usize::from(u16::MAX));
    out.reserve(FIRST_HEADER_LEN + content_len + padding);
    if let Some(uuid) = uuid {
        out.extend_from_slice(uuid);
    }
    out.push(command);
    out.extend_from_slice(&(content_len as u16).to_be_bytes());
    out.extend_from_slice(&(padding as u16).to_be_bytes());
    out.extend_from_slice(&content[..content_len]);
    out.resize(out.len() + padding, 0);
}

/// How a framed direction ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finish {
    /// The peer does not pad (its first bytes are not our UUID): everything is plain data.
    NotPadded,
    /// Command 1: later bytes are plain data inside the outer TLS.
    End,
    /// Command 2: later bytes come from the bare TCP socket.
    Direct,
}

/// One step of unpadding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// Input bytes used up by this step.
    pub consumed: usize,
    /// Part of the input that is content (within `..consumed`).
    pub content: Range<usize>,
    /// Set when this step completed the last frame (or found the peer is not padding).
    pub finish: Option<Finish>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Nothing parsed yet: expecting the UUID and the first header.
    Initial,
    /// Expecting a 5-byte frame header (after a command 0 frame).
    Header,
    Content {
        command: u8,
        content: usize,
        padding: usize,
    },
    Padding {
        command: u8,
        padding: usize,
    },
    Finished,
}

/// Receiver state (vless.md §7.5). Unlike Xray, which checks for the UUID per read buffer,
/// this one waits until 21 bytes are there, so record or read boundaries do not matter.
#[derive(Clone, Debug)]
pub struct Unpadder {
    uuid: [u8; 16],
    state: State,
}

impl Unpadder {
    pub fn new(uuid: [u8; 16]) -> Unpadder {
        Unpadder {
            uuid,
            state: State::Initial,
        }
    }

    pub fn is_finished(&self) -> bool {
        self.state == State::Finished
    }

    /// Whether the input ended at a place where a framed stream may end: before any frame,
    /// or after the last one. Anything else is a truncated frame.
    pub fn may_end(&self, held: usize) -> bool {
        match self.state {
            State::Initial => held < FIRST_HEADER_LEN,
            State::Header => held == 0,
            State::Finished => true,
            State::Content { .. } | State::Padding { .. } => false,
        }
    }

    /// Takes the next piece of `input`, handing out at most `max_content` content bytes.
    /// `consumed == 0` with no finish means more input is needed. `at_end` says no more input
    /// will come, so a short start is plain data.
    pub fn step(&mut self, input: &[u8], max_content: usize, at_end: bool) -> Step {
        let none = |consumed| Step {
            consumed,
            content: 0..0,
            finish: None,
        };
        match self.state {
            State::Finished => Step {
                consumed: 0,
                content: 0..0,
                finish: Some(Finish::End),
            },
            State::Initial => {
                let probe = input.len().min(16);
                if input[..probe] != self.uuid[..probe]
                    || (at_end && input.len() < FIRST_HEADER_LEN)
                {
                    self.state = State::Finished;
                    return Step {
                        consumed: 0,
                        content: 0..0,
                        finish: Some(Finish::NotPadded),
                    };
                }
                if input.len() < FIRST_HEADER_LEN {
                    return none(0);
                }
                self.state = State::Header;
                none(16)
            }
            State::Header => {
                let Some(header) = input.get(..HEADER_LEN) else {
                    return none(0);
                };
                let content = usize::from(u16::from_be_bytes([header[1], header[2]]));
                let padding = usize::from(u16::from_be_bytes([header[3], header[4]]));
                self.state = State::Content {
                    command: header[0],
                    content,
                    padding,
                };
                self.after_piece(HEADER_LEN, 0..0)
            }
            State::Content {
                command,
                content,
                padding,
            } => {
                let n = content.min(input.len()).min(max_content);
                self.state = State::Content {
                    command,
                    content: content - n,
                    padding,
                };
                self.after_piece(n, 0..n)
            }
            State::Padding { command, padding } => {
                let n = padding.min(input.len());
                self.state = State::Padding {
                    command,
                    padding: padding - n,
                };
                self.after_piece(n, 0..0)
            }
        }
    }

    /// Moves past finished parts of the current frame; a finished frame with command 0 waits
    /// for the next header, any other command ends the framing.
    fn after_piece(&mut self, consumed: usize, content: Range<usize>) -> Step {
        if let State::Content {
            command,
            content: 0,
            padding,
        } = self.state
        {
            self.state = State::Padding { command, padding };
        }
        let mut finish = None;
        if let State::Padding {
            command,
            padding: 0,
        } = self.state
        {
            if command == CMD_CONTINUE {
                self.state = State::Header;
            } else {
                self.state = State::Finished;
                // Xray treats every non-zero command other than 2 like 1.
                finish = Some(if command == CMD_DIRECT {
                    Finish::Direct
                } else {
                    Finish::End
                });
            }
        }
        Step {
            consumed,
            content,
            finish,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const UUID: [u8; 16] = *b"0123456789abcdef";

    /// Runs the unpadder over `input` fed in pieces of `chunk` bytes; returns the content and
    /// how it finished, and the bytes left after the finish.
    fn unpad(input: &[u8], chunk: usize, max_content: usize) -> (Vec<u8>, Option<Finish>, Vec<u8>) {
        let mut unpadder = Unpadder::new(UUID);
        let mut held: Vec<u8> = Vec::new();
        let mut fed = 0;
        let mut content = Vec::new();
        for _ in 0..1_000_000 {
            let at_end = fed == input.len();
            let step = unpadder.step(&held, max_content, at_end);
            content.extend_from_slice(&held[step.content.clone()]);
            held.drain(..step.consumed);
            if let Some(finish) = step.finish {
                let mut rest = held;
                rest.extend_from_slice(&input[fed..]);
                return (content, Some(finish), rest);
            }
            if step.consumed == 0 {
                if at_end {
                    return (content, None, held);
                }
                let n = chunk.min(input.len() - fed);
                held.extend_from_slice(&input[fed..fed + n]);
                fed += n;
            }
        }
        panic!("unpadding did not end");
    }

    #[test]
    fn the_spec_example_frame() {
        let mut out = Vec::new();
        write_frame(&mut out, Some(&UUID), CMD_CONTINUE, b"abc", 17);
        let mut expected = UUID.to_vec();
        expected.extend_from_slice(&[0, 0, 3, 0, 0x11]);
        expected.extend_from_slice(b"abc");
        expected.extend_from_slice(&[0; 17]);
        assert_eq!(out, expected);
    }

    #[test]
    fn frames_then_direct_then_raw_bytes() {
        let mut wire = Vec::new();
        write_frame(&mut wire, Some(&UUID), CMD_CONTINUE, b"hello ", 30);
        write_frame(&mut wire, None, CMD_CONTINUE, b"", 5);
        write_frame(&mut wire, None, CMD_DIRECT, b"world", 900);
        wire.extend_from_slice(b"RAW");
        for chunk in [1, 2, 7, 21, 4096] {
            let (content, finish, rest) = unpad(&wire, chunk, 3);
            assert_eq!(content, b"hello world");
            assert_eq!(finish, Some(Finish::Direct));
            assert_eq!(rest, b"RAW");
        }
    }

    #[test]
    fn a_peer_that_does_not_pad_is_passed_through() {
        let (content, finish, rest) = unpad(b"GET / HTTP/1.1\r\n\r\n", 4, 100);
        assert!(content.is_empty());
        assert_eq!(finish, Some(Finish::NotPadded));
        assert_eq!(rest, b"GET / HTTP/1.1\r\n\r\n");
        // Shorter than a first header and then the end: plain data too.
        let (_, finish, rest) = unpad(&UUID[..10], 4, 100);
        assert_eq!(finish, Some(Finish::NotPadded));
        assert_eq!(rest, &UUID[..10]);
    }

    #[test]
    fn a_truncated_frame_cannot_end() {
        let mut wire = Vec::new();
        write_frame(&mut wire, Some(&UUID), CMD_END, b"abcdef", 10);
        wire.truncate(wire.len() - 3);
        let mut unpadder = Unpadder::new(UUID);
        let mut at = 0;
        for _ in 0..100 {
            let step = unpadder.step(&wire[at..], 100, true);
            at += step.consumed;
            if step.consumed == 0 {
                break;
            }
        }
        assert!(!unpadder.may_end(wire.len() - at));
    }

    #[test]
    fn padding_lengths_follow_the_defaults() {
        assert_eq!(padding_len(100, true, 0), 800);
        assert_eq!(padding_len(100, true, 499), 1299);
        assert_eq!(padding_len(100, false, 300), 44);
        assert_eq!(padding_len(1000, true, 7), 7);
        assert_eq!(padding_len(8000, true, 255), 171);
        assert_eq!(padding_len(MAX_CONTENT, false, 255), 0);
    }

    proptest! {
        #[test]
        fn frames_round_trip(
            pieces in proptest::collection::vec(
                (proptest::collection::vec(any::<u8>(), 0..300), 0usize..400), 1..6),
            last in 1u8..3,
            chunk in 1usize..64,
            max_content in 1usize..512,
        ) {
            let mut wire = Vec::new();
            let mut expected = Vec::new();
            for (i, (content, padding)) in pieces.iter().enumerate() {
                let command = if i + 1 == pieces.len() { last } else { CMD_CONTINUE };
                let uuid = (i == 0).then_some(&UUID);
                write_frame(&mut wire, uuid, command, content, *padding);
                expected.extend_from_slice(content);
            }
            let (content, finish, rest) = unpad(&wire, chunk, max_content);
            prop_assert_eq!(content, expected);
            let want = if last == CMD_DIRECT { Finish::Direct } else { Finish::End };
            prop_assert_eq!(finish, Some(want));
            prop_assert!(rest.is_empty());
        }

        #[test]
        fn arbitrary_bytes_never_panic(
            bytes in proptest::collection::vec(any::<u8>(), 0..2000),
            uuid_first in any::<bool>(),
        ) {
            let mut input = if uuid_first { UUID.to_vec() } else { Vec::new() };
            input.extend_from_slice(&bytes);
            let _ = unpad(&input, 13, 100);
        }
    }
}
