//! Frame header codec (RFC 6455 §5.2).

use bytes::BufMut;

use super::{WsError, mask::apply_mask};
use crate::Parsed;

/// Longest possible header: 2 + 8 (64-bit length) + 4 (mask key).
pub const MAX_HEADER_LEN: usize = 14;
/// Longest control frame payload.
pub const MAX_CONTROL_PAYLOAD: usize = 125;

/// Frame opcode (reserved values are rejected at parse time).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Opcode {
    Continuation,
    Text,
    Binary,
    Close,
    Ping,
    Pong,
}

impl Opcode {
    /// Wire value.
    pub fn to_u8(self) -> u8 {
        match self {
            Opcode::Continuation => 0x0,
            Opcode::Text => 0x1,
            Opcode::Binary => 0x2,
            Opcode::Close => 0x8,
            Opcode::Ping => 0x9,
            Opcode::Pong => 0xA,
        }
    }

    /// From the wire value.
    pub fn from_u8(op: u8) -> Result<Self, WsError> {
        Ok(match op {
            0x0 => Opcode::Continuation,
            0x1 => Opcode::Text,
            0x2 => Opcode::Binary,
            0x8 => Opcode::Close,
            0x9 => Opcode::Ping,
            0xA => Opcode::Pong,
            other => return Err(WsError::ReservedOpcode(other)),
        })
    }

    /// Close, Ping, Pong.
    pub fn is_control(self) -> bool {
        matches!(self, Opcode::Close | Opcode::Ping | Opcode::Pong)
    }
}

/// A parsed frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    pub fin: bool,
    pub opcode: Opcode,
    pub mask: Option<[u8; 4]>,
    pub payload_len: u64,
}

impl FrameHeader {
    /// Encoded length of this header.
    pub fn header_len(&self) -> usize {
        header_len(self.payload_len, self.mask.is_some())
    }
}

fn header_len(len: u64, masked: bool) -> usize {
    let ext = match len {
        0..=125 => 0,
        126..=0xffff => 2,
        _ => 8,
    };
    2 + ext + if masked { 4 } else { 0 }
}

/// Bytes needed for the whole header, judging from its first two bytes.
pub(crate) fn needed_len(b1: u8) -> usize {
    let ext = match b1 & 0x7f {
        126 => 2,
        127 => 8,
        _ => 0,
    };
    2 + ext + if b1 & 0x80 != 0 { 4 } else { 0 }
}

/// Parses a frame header from the start of `buf`. Rejects reserved bits and opcodes,
/// fragmented or oversized (> 125) control frames, 64-bit lengths with the MSB set, and
/// payloads longer than `max_payload`. Errors are reported as soon as the offending byte is
/// present. Masking policy (which side must mask) is the decoder's business, not this one's.
/// Non-minimal length encodings are accepted (lenient, like most implementations).
pub fn parse_header(buf: &[u8], max_payload: u64) -> Result<Parsed<FrameHeader>, WsError> {
    let Some(&b0) = buf.first() else {
        return Ok(Parsed::Incomplete);
    };
    if b0 & 0x70 != 0 {
        return Err(WsError::ReservedBits);
    }
    let fin = b0 & 0x80 != 0;
    let opcode = Opcode::from_u8(b0 & 0x0f)?;
    if opcode.is_control() && !fin {
        return Err(WsError::FragmentedControl);
    }
    let Some(&b1) = buf.get(1) else {
        return Ok(Parsed::Incomplete);
    };
    let len7 = b1 & 0x7f;
    if opcode.is_control() && len7 > 125 {
        // 126/127 mean at least 126 bytes.
        return Err(WsError::ControlTooLong(u64::from(len7)));
    }
    let need = needed_len(b1);
    if buf.len() < need {
        return Ok(Parsed::Incomplete);
    }
    let (payload_len, mut pos) = match len7 {
        126 => (u64::from(u16::from_be_bytes([buf[2], buf[3]])), 4),
        127 => {
            let mut b = [0u8; 8];
            b.copy_from_slice(&buf[2..10]);
            let n = u64::from_be_bytes(b);
            if n >> 63 != 0 {
                return Err(WsError::LengthMsbSet);
            }
            (n, 10)
        }
        n => (u64::from(n), 2),
    };
    if payload_len > max_payload {
        return Err(WsError::TooLarge {
            len: payload_len,
            max: max_payload,
        });
    }
    let mask = if b1 & 0x80 != 0 {
        let k = [buf[pos], buf[pos + 1], buf[pos + 2], buf[pos + 3]];
        pos += 4;
        Some(k)
    } else {
        None
    };
    Ok(Parsed::Complete(
        FrameHeader {
            fin,
            opcode,
            mask,
            payload_len,
        },
        pos,
    ))
}

/// Writes a frame header using the minimal length encoding.
pub fn encode_header(
    fin: bool,
    opcode: Opcode,
    len: u64,
    mask: Option<[u8; 4]>,
    out: &mut impl BufMut,
) {
    out.put_u8(if fin { 0x80 } else { 0 } | opcode.to_u8());
    let m = if mask.is_some() { 0x80 } else { 0 };
    match len {
        0..=125 => out.put_u8(m | len as u8),
        126..=0xffff => {
            out.put_u8(m | 126);
            out.put_u16(len as u16);
        }
        _ => {
            out.put_u8(m | 127);
            out.put_u64(len);
        }
    }
    if let Some(k) = mask {
        out.put_slice(&k);
    }
}

/// Writes a whole frame: header, then `payload` (masked with `mask` if given).
pub fn encode_frame(
    fin: bool,
    opcode: Opcode,
    payload: &[u8],
    mask: Option<[u8; 4]>,
    out: &mut Vec<u8>,
) {
    encode_header(fin, opcode, payload.len() as u64, mask, out);
    let start = out.len();
    out.extend_from_slice(payload);
    if let Some(k) = mask {
        apply_mask(&mut out[start..], k, 0);
    }
}

/// Close frame payload: status code then UTF-8 reason (reason truncated to fit 125 bytes
/// at a character boundary).
pub fn close_payload(code: u16, reason: &str) -> Vec<u8> {
    let mut end = reason.len().min(MAX_CONTROL_PAYLOAD - 2);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    let mut p = Vec::with_capacity(2 + end);
    p.extend_from_slice(&code.to_be_bytes());
    p.extend_from_slice(&reason.as_bytes()[..end]);
    p
}

/// Close codes that may appear in a Close frame (RFC 6455 §7.4).
pub fn is_valid_close_code(code: u16) -> bool {
    matches!(code, 1000..=1003 | 1007..=1011 | 3000..=4999)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(buf: &[u8]) -> (FrameHeader, usize) {
        parse_header(buf, u64::MAX >> 1)
            .unwrap()
            .complete()
            .unwrap()
    }

    #[test]
    fn rfc6455_5_7_headers() {
        // Single-frame unmasked text "Hello".
        let (h, n) = parse(&[0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f]);
        assert_eq!(
            (h.fin, h.opcode, h.mask, h.payload_len, n),
            (true, Opcode::Text, None, 5, 2)
        );
        // Masked "Hello".
        let (h, n) = parse(&[
            0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58,
        ]);
        assert_eq!(h.mask, Some([0x37, 0xfa, 0x21, 0x3d]));
        assert_eq!((h.payload_len, n), (5, 6));
        // 256 bytes binary, unmasked.
        let (h, n) = parse(&[0x82, 0x7E, 0x01, 0x00]);
        assert_eq!((h.opcode, h.payload_len, n), (Opcode::Binary, 256, 4));
        // 64 KiB binary, unmasked.
        let (h, n) = parse(&[0x82, 0x7F, 0, 0, 0, 0, 0, 0x01, 0x00, 0x00]);
        assert_eq!((h.payload_len, n), (65536, 10));
        // Ping "Hello".
        let (h, _) = parse(&[0x89, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f]);
        assert_eq!(h.opcode, Opcode::Ping);
    }

    #[test]
    fn encode_matches_rfc_bytes() {
        let mut out = Vec::new();
        encode_frame(
            true,
            Opcode::Text,
            b"Hello",
            Some([0x37, 0xfa, 0x21, 0x3d]),
            &mut out,
        );
        assert_eq!(
            out,
            [
                0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58
            ]
        );
        out.clear();
        encode_header(true, Opcode::Binary, 256, None, &mut out);
        assert_eq!(out, [0x82, 0x7E, 0x01, 0x00]);
        out.clear();
        encode_header(true, Opcode::Binary, 65536, None, &mut out);
        assert_eq!(out, [0x82, 0x7F, 0, 0, 0, 0, 0, 0x01, 0x00, 0x00]);
        // First fragment of an unmasked text message "Hel".
        out.clear();
        encode_frame(false, Opcode::Text, b"Hel", None, &mut out);
        assert_eq!(out, [0x01, 0x03, 0x48, 0x65, 0x6c]);
    }

    #[test]
    fn rejects() {
        let p = |b: &[u8]| parse_header(b, 1000);
        assert_eq!(p(&[0xC2, 0x00]), Err(WsError::ReservedBits));
        assert_eq!(p(&[0x83, 0x00]), Err(WsError::ReservedOpcode(3)));
        assert_eq!(p(&[0x8B]), Err(WsError::ReservedOpcode(0xB)));
        assert_eq!(p(&[0x09]), Err(WsError::FragmentedControl));
        assert_eq!(p(&[0x89, 0x7E]), Err(WsError::ControlTooLong(126)));
        assert_eq!(
            p(&[0x82, 0x7F, 0x80, 0, 0, 0, 0, 0, 0, 0]),
            Err(WsError::LengthMsbSet)
        );
        assert_eq!(
            p(&[0x82, 0x7E, 0x03, 0xE9]),
            Err(WsError::TooLarge {
                len: 1001,
                max: 1000
            })
        );
        assert_eq!(p(&[0x82, 0xFE, 0x00]), Ok(Parsed::Incomplete));
        assert_eq!(p(&[]), Ok(Parsed::Incomplete));
    }

    #[test]
    fn close_payload_truncates_on_char_boundary() {
        let reason = "é".repeat(100);
        let p = close_payload(1000, &reason);
        assert!(p.len() <= MAX_CONTROL_PAYLOAD);
        assert!(std::str::from_utf8(&p[2..]).is_ok());
        assert_eq!(&p[..2], &[0x03, 0xE8]);
    }
}
