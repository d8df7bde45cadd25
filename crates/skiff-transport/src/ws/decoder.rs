//! Streaming frame decoder: fed arbitrary slices of the byte stream, yields events.
//!
//! Header bytes and control payloads (≤ 125 bytes) are buffered internally; data payloads
//! are unmasked in place in the caller's buffer and handed out as soon as they arrive (a
//! 1 GiB frame never needs 1 GiB of memory). Every call with non-empty input consumes at
//! least one byte, so the caller loop is simply "until the input is used up".

use super::frame::{
    FrameHeader, MAX_CONTROL_PAYLOAD, MAX_HEADER_LEN, Opcode, is_valid_close_code, needed_len,
    parse_header,
};
use super::{WsError, mask::apply_mask};
use crate::Parsed;

/// Which end of the connection the decoder sits on; determines the masking rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Receives client frames: every frame must be masked.
    Server,
    /// Receives server frames: no frame may be masked.
    Client,
}

/// One decoded item.
#[derive(Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// Part (or all) of a text/binary/continuation frame's payload, already unmasked.
    /// `text` tells the message type (Xray ignores it: the stream is the concatenation of
    /// all data payloads). `fin` is true on the slice that ends the message. Empty frames
    /// produce one empty `Data`.
    Data {
        payload: &'a [u8],
        text: bool,
        fin: bool,
    },
    /// Ping; answer with a Pong carrying the same payload.
    Ping(&'a [u8]),
    /// Pong (unsolicited or answering our ping).
    Pong(&'a [u8]),
    /// Close; nothing may follow. `code` is `None` for an empty close payload.
    Close { code: Option<u16>, reason: &'a str },
}

/// Output of one [`FrameDecoder::decode`] call.
#[derive(Debug, PartialEq, Eq)]
pub struct Decoded<'a> {
    /// Input bytes used; the caller continues at `input[consumed..]`.
    pub consumed: usize,
    pub event: Option<Event<'a>>,
}

#[derive(Debug, Clone, Copy)]
struct Current {
    header: FrameHeader,
    remaining: u64,
    /// Payload bytes already seen (the mask phase).
    offset: usize,
}

/// See the module documentation.
#[derive(Debug, Clone)]
pub struct FrameDecoder {
    role: Role,
    max_payload: u64,
    hdr: [u8; MAX_HEADER_LEN],
    hdr_len: usize,
    current: Option<Current>,
    ctrl: [u8; MAX_CONTROL_PAYLOAD],
    ctrl_len: usize,
    /// `Some(is_text)` while a fragmented message is open.
    message: Option<bool>,
    closed: bool,
    /// Payload length of the latest data frame header.
    last_data_len: u64,
}

impl FrameDecoder {
    /// `max_payload` caps a single frame's payload length.
    pub fn new(role: Role, max_payload: u64) -> Self {
        FrameDecoder {
            role,
            max_payload,
            hdr: [0; MAX_HEADER_LEN],
            hdr_len: 0,
            current: None,
            ctrl: [0; MAX_CONTROL_PAYLOAD],
            ctrl_len: 0,
            message: None,
            closed: false,
            last_data_len: 0,
        }
    }

    /// Payload length announced by the latest data frame: tells a reader whether frames are
    /// big enough to be worth reading payloads apart from headers.
    pub fn last_data_len(&self) -> u64 {
        self.last_data_len
    }

    /// A Close frame has been decoded.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Part of a frame (header or payload) has been consumed but the frame is not finished:
    /// an end of stream now would truncate it.
    pub fn is_mid_frame(&self) -> bool {
        self.hdr_len > 0 || self.current.is_some()
    }

    /// Payload bytes still due in the current data frame, when its header is done: that many
    /// bytes of input decode to payload only, so a caller may read them straight into their
    /// final place and pass that slice to [`decode`](Self::decode) to unmask it.
    pub fn data_remaining(&self) -> u64 {
        match &self.current {
            Some(cur) if !cur.header.opcode.is_control() && !self.closed => cur.remaining,
            _ => 0,
        }
    }

    /// Decodes from `input`, which may be any slice of the stream (even one byte). Data
    /// payloads are unmasked in place inside `input`.
    pub fn decode<'a>(&'a mut self, input: &'a mut [u8]) -> Result<Decoded<'a>, WsError> {
        if self.closed {
            if input.is_empty() {
                return Ok(Decoded {
                    consumed: 0,
                    event: None,
                });
            }
            return Err(WsError::AfterClose);
        }
        let mut pos = 0;
        loop {
            let Some(mut cur) = self.current else {
                if pos == input.len() {
                    return Ok(Decoded {
                        consumed: pos,
                        event: None,
                    });
                }
                pos += self.read_header(&input[pos..])?;
                continue;
            };
            let avail = input.len() - pos;
            if cur.header.opcode.is_control() {
                let take = (cur.remaining as usize).min(avail);
                let dst = &mut self.ctrl[self.ctrl_len..self.ctrl_len + take];
                dst.copy_from_slice(&input[pos..pos + take]);
                if let Some(k) = cur.header.mask {
                    apply_mask(dst, k, self.ctrl_len);
                }
                self.ctrl_len += take;
                pos += take;
                cur.remaining -= take as u64;
                if cur.remaining > 0 {
                    self.current = Some(cur);
                    return Ok(Decoded {
                        consumed: pos,
                        event: None,
                    });
                }
                self.current = None;
                let len = self.ctrl_len;
                self.ctrl_len = 0;
                let event = self.control_event(cur.header.opcode, len)?;
                return Ok(Decoded {
                    consumed: pos,
                    event: Some(event),
                });
            }
            if avail == 0 && cur.remaining > 0 {
                return Ok(Decoded {
                    consumed: pos,
                    event: None,
                });
            }
            let take = (cur.remaining.min(avail as u64)) as usize;
            let payload = &mut input[pos..pos + take];
            if let Some(k) = cur.header.mask {
                apply_mask(payload, k, cur.offset);
            }
            cur.offset = cur.offset.wrapping_add(take);
            cur.remaining -= take as u64;
            let text = self.message.unwrap_or(false);
            let fin = cur.remaining == 0 && cur.header.fin;
            if cur.remaining == 0 {
                self.current = None;
                if cur.header.fin {
                    self.message = None;
                }
            } else {
                self.current = Some(cur);
            }
            return Ok(Decoded {
                consumed: pos + take,
                event: Some(Event::Data { payload, text, fin }),
            });
        }
    }

    /// Buffers header bytes; on a complete header validates it and starts the frame.
    fn read_header(&mut self, input: &[u8]) -> Result<usize, WsError> {
        let need = if self.hdr_len < 2 {
            2
        } else {
            needed_len(self.hdr[1])
        };
        let take = (need - self.hdr_len).min(input.len());
        self.hdr[self.hdr_len..self.hdr_len + take].copy_from_slice(&input[..take]);
        self.hdr_len += take;
        let Parsed::Complete(header, _) =
            parse_header(&self.hdr[..self.hdr_len], self.max_payload)?
        else {
            return Ok(take);
        };
        self.hdr_len = 0;
        match (self.role, header.mask.is_some()) {
            (Role::Server, false) => return Err(WsError::Unmasked),
            (Role::Client, true) => return Err(WsError::Masked),
            _ => {}
        }
        match header.opcode {
            Opcode::Continuation if self.message.is_none() => {
                return Err(WsError::UnexpectedContinuation);
            }
            Opcode::Text | Opcode::Binary if self.message.is_some() => {
                return Err(WsError::ExpectedContinuation);
            }
            Opcode::Text | Opcode::Binary => self.message = Some(header.opcode == Opcode::Text),
            _ => {}
        }
        if !header.opcode.is_control() {
            self.last_data_len = header.payload_len;
        }
        self.current = Some(Current {
            header,
            remaining: header.payload_len,
            offset: 0,
        });
        Ok(take)
    }

    fn control_event(&mut self, opcode: Opcode, len: usize) -> Result<Event<'_>, WsError> {
        let payload = &self.ctrl[..len];
        Ok(match opcode {
            Opcode::Ping => Event::Ping(payload),
            Opcode::Pong => Event::Pong(payload),
            _ => {
                self.closed = true;
                let payload = &self.ctrl[..len];
                match payload {
                    [] => Event::Close {
                        code: None,
                        reason: "",
                    },
                    [_] => return Err(WsError::InvalidCloseCode),
                    [a, b, rest @ ..] => {
                        let code = u16::from_be_bytes([*a, *b]);
                        if !is_valid_close_code(code) {
                            return Err(WsError::InvalidCloseCode);
                        }
                        let reason =
                            std::str::from_utf8(rest).map_err(|_| WsError::InvalidCloseReason)?;
                        Event::Close {
                            code: Some(code),
                            reason,
                        }
                    }
                }
            }
        })
    }
}
