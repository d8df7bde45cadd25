//! VLESS UDP (command 0x02) packet framing, sans-IO (vless.md §4.2): every datagram, in both
//! directions, is a 2-byte big-endian length followed by that many payload bytes. Frames may
//! be coalesced or split arbitrarily by the stream below.

use std::fmt;

use bytes::{Buf, Bytes, BytesMut};

/// The largest payload the 2-byte length prefix can describe; Xray's reader accepts all of it.
pub const MAX_PACKET_LEN: usize = u16::MAX as usize;
/// Xray's writer drops datagrams whose frame (payload + 2) exceeds 8192 bytes; senders that
/// want to mirror it can check against this.
pub const XRAY_MAX_WRITE_LEN: usize = 8192 - 2;

/// Why a UDP frame was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UdpError {
    /// A frame announces (decoding) or a payload has (encoding) more bytes than allowed.
    TooLong { len: usize, max: usize },
}

impl fmt::Display for UdpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UdpError::TooLong { len, max } => {
                write!(
                    f,
                    "VLESS UDP packet of {len} bytes exceeds the limit of {max}"
                )
            }
        }
    }
}

impl std::error::Error for UdpError {}

/// Appends one frame. Empty payloads are encoded as `00 00` (Xray's writer would drop them;
/// callers decide).
pub fn encode_packet(payload: &[u8], out: &mut Vec<u8>) -> Result<(), UdpError> {
    let len = u16::try_from(payload.len()).map_err(|_| UdpError::TooLong {
        len: payload.len(),
        max: MAX_PACKET_LEN,
    })?;
    out.reserve(payload.len() + 2);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(payload);
    Ok(())
}

/// Stateless variant: the first frame of `buf` as (payload, frame length), or `None` when
/// `buf` does not yet hold a whole frame.
pub fn decode_packet(buf: &[u8]) -> Option<(&[u8], usize)> {
    let prefix = buf.get(..2)?;
    let len = usize::from(u16::from_be_bytes([prefix[0], prefix[1]]));
    let payload = buf.get(2..2 + len)?;
    Some((payload, 2 + len))
}

/// Incremental decoder: [`feed`](Self::feed) it received bytes, then call
/// [`next_packet`](Self::next_packet) until it returns `Ok(None)`. It holds at most the bytes
/// fed but not yet returned as packets; call `next_packet` after each `feed` to keep that at
/// one frame (≤ `max_len + 2` plus one read).
#[derive(Debug)]
pub struct PacketDecoder {
    buf: BytesMut,
    max_len: usize,
    failed: Option<UdpError>,
}

impl Default for PacketDecoder {
    fn default() -> Self {
        PacketDecoder::new()
    }
}

impl PacketDecoder {
    /// A decoder accepting every length the prefix can say (as Xray's reader does).
    pub fn new() -> Self {
        PacketDecoder::with_max_len(MAX_PACKET_LEN)
    }

    /// A decoder that refuses frames announcing more than `max_len` payload bytes.
    pub fn with_max_len(max_len: usize) -> Self {
        PacketDecoder {
            buf: BytesMut::new(),
            max_len: max_len.min(MAX_PACKET_LEN),
            failed: None,
        }
    }

    /// Adds received bytes.
    pub fn feed(&mut self, data: &[u8]) {
        if self.failed.is_none() {
            self.buf.extend_from_slice(data);
        }
    }

    /// Bytes fed but not yet returned.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// The next complete datagram (possibly empty), `Ok(None)` when more bytes are needed.
    /// After an error the stream is unusable and every later call returns that error.
    pub fn next_packet(&mut self) -> Result<Option<Bytes>, UdpError> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        let Some(prefix) = self.buf.get(..2) else {
            return Ok(None);
        };
        let len = usize::from(u16::from_be_bytes([prefix[0], prefix[1]]));
        if len > self.max_len {
            let error = UdpError::TooLong {
                len,
                max: self.max_len,
            };
            self.failed = Some(error.clone());
            self.buf = BytesMut::new();
            return Err(error);
        }
        if self.buf.len() < 2 + len {
            self.buf.reserve(2 + len - self.buf.len());
            return Ok(None);
        }
        self.buf.advance(2);
        Ok(Some(self.buf.split_to(len).freeze()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// vless.md §4.2 live vector: two datagrams `udp-one`, `udp-two-xx`.
    const LIVE: &str = "00077564702d6f6e65000a7564702d74776f2d7878";

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn drain(decoder: &mut PacketDecoder, out: &mut Vec<Bytes>) {
        while let Some(p) = decoder.next_packet().unwrap() {
            out.push(p);
        }
    }

    #[test]
    fn encodes_live_vector() {
        let mut out = Vec::new();
        encode_packet(b"udp-one", &mut out).unwrap();
        encode_packet(b"udp-two-xx", &mut out).unwrap();
        assert_eq!(out, hex(LIVE));
    }

    #[test]
    fn decodes_live_vector_split_at_every_boundary() {
        let wire = hex(LIVE);
        for split in 0..=wire.len() {
            let mut decoder = PacketDecoder::new();
            let mut packets = Vec::new();
            decoder.feed(&wire[..split]);
            drain(&mut decoder, &mut packets);
            decoder.feed(&wire[split..]);
            drain(&mut decoder, &mut packets);
            assert_eq!(
                packets,
                vec![&b"udp-one"[..], &b"udp-two-xx"[..]],
                "split {split}"
            );
            assert_eq!(decoder.buffered(), 0);
        }
        // Two splits, and one byte at a time.
        for a in 0..=wire.len() {
            for b in a..=wire.len() {
                let mut decoder = PacketDecoder::new();
                let mut packets = Vec::new();
                for part in [&wire[..a], &wire[a..b], &wire[b..]] {
                    decoder.feed(part);
                    drain(&mut decoder, &mut packets);
                }
                assert_eq!(packets.len(), 2);
            }
        }
        assert_eq!(decode_packet(&wire), Some((&b"udp-one"[..], 9)));
        assert_eq!(decode_packet(&wire[..8]), None);
        assert_eq!(decode_packet(&wire[..1]), None);
    }

    #[test]
    fn empty_and_maximal_packets() {
        let mut out = Vec::new();
        encode_packet(b"", &mut out).unwrap();
        assert_eq!(out, [0, 0]);
        let big = vec![7u8; MAX_PACKET_LEN];
        encode_packet(&big, &mut out).unwrap();
        assert_eq!(&out[2..4], [0xff, 0xff]);
        let mut decoder = PacketDecoder::new();
        decoder.feed(&out);
        assert_eq!(decoder.next_packet().unwrap().unwrap().len(), 0);
        assert_eq!(decoder.next_packet().unwrap().unwrap(), big);
        assert_eq!(decoder.next_packet().unwrap(), None);
    }

    #[test]
    fn refuses_oversized() {
        let mut out = Vec::new();
        let err = encode_packet(&vec![0; MAX_PACKET_LEN + 1], &mut out).unwrap_err();
        assert_eq!(
            err,
            UdpError::TooLong {
                len: MAX_PACKET_LEN + 1,
                max: MAX_PACKET_LEN
            }
        );
        assert!(out.is_empty());

        let mut decoder = PacketDecoder::with_max_len(XRAY_MAX_WRITE_LEN);
        decoder.feed(&[0x20, 0x00]); // 8192 > 8190
        let err = decoder.next_packet().unwrap_err();
        assert_eq!(
            err,
            UdpError::TooLong {
                len: 8192,
                max: XRAY_MAX_WRITE_LEN
            }
        );
        decoder.feed(&[0, 0]);
        assert_eq!(decoder.next_packet().unwrap_err(), err);
        assert_eq!(decoder.buffered(), 0);

        let mut decoder = PacketDecoder::with_max_len(XRAY_MAX_WRITE_LEN);
        decoder.feed(&[0x1f, 0xfe]);
        assert_eq!(decoder.next_packet().unwrap(), None);
    }
}
