//! mKCP segments (V2Ray's own KCP variant, not kcp-go's): all integers big-endian, a 4-byte
//! prefix `conv u16 | cmd u8 | opt u8`, then per command:
//!
//! | cmd | name | rest |
//! |---|---|---|
//! | 1 | data | ts u32, sn u32, sendingNext u32, len u16, `len` bytes |
//! | 0 | ack | receivingWindow u32, receivingNext u32, ts u32, count u8, `count` × sn u32 |
//! | 2 | terminate | sendingNext u32, receivingNext u32, peerRTO u32 |
//! | 3 | ping | as terminate |
//!
//! V2Ray reads any other command byte as a ping-shaped segment and then ignores it; so do we
//! ([`Cmd::Other`]). Several segments may follow each other in one packet.

/// `opt` bit: the sender has closed the connection (V2Ray `SegmentOptionClose`).
pub const OPT_CLOSE: u8 = 0x01;
/// Bytes of a data segment before its payload.
pub const DATA_OVERHEAD: usize = 18;
/// Most sequence numbers one ack segment carries (its count is one byte; V2Ray stops at 128).
pub const ACK_LIMIT: usize = 128;

const PREFIX: usize = 4;
const ACK_FIXED: usize = 13;
const CMD_FIXED: usize = 12;

/// The command-only segments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmd {
    Terminate,
    Ping,
    /// A command byte V2Ray does not define (parsed like a ping, then ignored).
    Other(u8),
}

impl Cmd {
    fn byte(self) -> u8 {
        match self {
            Cmd::Terminate => 2,
            Cmd::Ping => 3,
            Cmd::Other(b) => b,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Segment<'a> {
    Data {
        conv: u16,
        opt: u8,
        ts: u32,
        sn: u32,
        /// The sender's first unacknowledged number: acks below it need not be sent again.
        sending_next: u32,
        payload: &'a [u8],
    },
    Ack {
        conv: u16,
        opt: u8,
        /// The first number the receiver will not take (its next + its window).
        receiving_window: u32,
        /// Every number below this has arrived.
        receiving_next: u32,
        /// The newest timestamp of the acknowledged segments (for the RTT).
        ts: u32,
        /// Big-endian u32 numbers, `4 × count` bytes (see [`Segment::ack_numbers`]).
        numbers: &'a [u8],
    },
    Cmd {
        conv: u16,
        cmd: Cmd,
        opt: u8,
        sending_next: u32,
        receiving_next: u32,
        peer_rto: u32,
    },
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    let bytes = b.get(at..at + 4)?;
    Some(u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    let bytes = b.get(at..at + 2)?;
    Some(u16::from_be_bytes([bytes[0], bytes[1]]))
}

impl<'a> Segment<'a> {
    /// Reads one segment from the front of `b`: the segment and what follows it, or None when
    /// `b` does not start with a whole segment (V2Ray then drops the rest of the packet).
    pub fn parse(b: &'a [u8]) -> Option<(Segment<'a>, &'a [u8])> {
        let conv = be16(b, 0)?;
        let cmd = *b.get(2)?;
        let opt = *b.get(3)?;
        let body = b.get(PREFIX..)?;
        match cmd {
            1 => {
                let ts = be32(body, 0)?;
                let sn = be32(body, 4)?;
                let sending_next = be32(body, 8)?;
                let len = usize::from(be16(body, 12)?);
                let payload = body.get(14..14 + len)?;
                let rest = body.get(14 + len..)?;
                let seg = Segment::Data {
                    conv,
                    opt,
                    ts,
                    sn,
                    sending_next,
                    payload,
                };
                Some((seg, rest))
            }
            0 => {
                let receiving_window = be32(body, 0)?;
                let receiving_next = be32(body, 4)?;
                let ts = be32(body, 8)?;
                let count = usize::from(*body.get(12)?);
                let numbers = body.get(ACK_FIXED..ACK_FIXED + 4 * count)?;
                let rest = body.get(ACK_FIXED + 4 * count..)?;
                let seg = Segment::Ack {
                    conv,
                    opt,
                    receiving_window,
                    receiving_next,
                    ts,
                    numbers,
                };
                Some((seg, rest))
            }
            other => {
                let seg = Segment::Cmd {
                    conv,
                    cmd: match other {
                        2 => Cmd::Terminate,
                        3 => Cmd::Ping,
                        b => Cmd::Other(b),
                    },
                    opt,
                    sending_next: be32(body, 0)?,
                    receiving_next: be32(body, 4)?,
                    peer_rto: be32(body, 8)?,
                };
                Some((seg, body.get(CMD_FIXED..)?))
            }
        }
    }

    pub fn conv(&self) -> u16 {
        match self {
            Segment::Data { conv, .. } | Segment::Ack { conv, .. } | Segment::Cmd { conv, .. } => {
                *conv
            }
        }
    }

    pub fn opt(&self) -> u8 {
        match self {
            Segment::Data { opt, .. } | Segment::Ack { opt, .. } | Segment::Cmd { opt, .. } => *opt,
        }
    }

    /// The numbers of an ack segment (empty for the others).
    pub fn ack_numbers(&self) -> impl Iterator<Item = u32> + 'a {
        let numbers: &'a [u8] = match self {
            Segment::Ack { numbers, .. } => numbers,
            _ => &[],
        };
        numbers
            .chunks_exact(4)
            .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
    }

    /// Bytes this segment takes on the wire.
    pub fn encoded_len(&self) -> usize {
        match self {
            Segment::Data { payload, .. } => DATA_OVERHEAD + payload.len(),
            Segment::Ack { numbers, .. } => PREFIX + ACK_FIXED + numbers.len() / 4 * 4,
            Segment::Cmd { .. } => PREFIX + CMD_FIXED,
        }
    }

    /// Appends the segment to `out`. A data payload longer than 65535 bytes or an ack with
    /// more than 255 numbers cannot be encoded: they are cut (callers never build them).
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Segment::Data {
                conv,
                opt,
                ts,
                sn,
                sending_next,
                payload,
            } => {
                let payload = &payload[..payload.len().min(usize::from(u16::MAX))];
                out.extend_from_slice(&conv.to_be_bytes());
                out.extend_from_slice(&[1, *opt]);
                out.extend_from_slice(&ts.to_be_bytes());
                out.extend_from_slice(&sn.to_be_bytes());
                out.extend_from_slice(&sending_next.to_be_bytes());
                out.extend_from_slice(&(payload.len() as u16).to_be_bytes());
                out.extend_from_slice(payload);
            }
            Segment::Ack {
                conv,
                opt,
                receiving_window,
                receiving_next,
                ts,
                numbers,
            } => {
                let count = (numbers.len() / 4).min(255);
                out.extend_from_slice(&conv.to_be_bytes());
                out.extend_from_slice(&[0, *opt]);
                out.extend_from_slice(&receiving_window.to_be_bytes());
                out.extend_from_slice(&receiving_next.to_be_bytes());
                out.extend_from_slice(&ts.to_be_bytes());
                out.push(count as u8);
                out.extend_from_slice(&numbers[..count * 4]);
            }
            Segment::Cmd {
                conv,
                cmd,
                opt,
                sending_next,
                receiving_next,
                peer_rto,
            } => {
                out.extend_from_slice(&conv.to_be_bytes());
                out.extend_from_slice(&[cmd.byte(), *opt]);
                out.extend_from_slice(&sending_next.to_be_bytes());
                out.extend_from_slice(&receiving_next.to_be_bytes());
                out.extend_from_slice(&peer_rto.to_be_bytes());
            }
        }
    }
}

/// Every whole segment at the front of a packet's plaintext, as V2Ray reads them: parsing
/// stops at the first incomplete one.
pub fn segments(mut b: &[u8]) -> impl Iterator<Item = Segment<'_>> {
    std::iter::from_fn(move || {
        let (seg, rest) = Segment::parse(b)?;
        b = rest;
        Some(seg)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_round_trip() {
        let seg = Segment::Data {
            conv: 0x434d,
            opt: 0,
            ts: 1,
            sn: 0,
            sending_next: 0,
            payload: b"hello",
        };
        let mut out = Vec::new();
        seg.encode(&mut out);
        assert_eq!(out.len(), seg.encoded_len());
        assert_eq!(
            out,
            [
                0x43, 0x4d, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, b'h', b'e', b'l', b'l',
                b'o'
            ]
        );
        assert_eq!(Segment::parse(&out), Some((seg, &[][..])));
    }

    #[test]
    fn ack_numbers_and_rest() {
        let numbers: Vec<u8> = [7u32, 9].iter().flat_map(|n| n.to_be_bytes()).collect();
        let seg = Segment::Ack {
            conv: 1,
            opt: OPT_CLOSE,
            receiving_window: 800,
            receiving_next: 7,
            ts: 99,
            numbers: &numbers,
        };
        let mut out = Vec::new();
        seg.encode(&mut out);
        out.extend_from_slice(&[1, 2, 3]);
        let (back, rest) = Segment::parse(&out).unwrap();
        assert_eq!(back.ack_numbers().collect::<Vec<_>>(), [7, 9]);
        assert_eq!(back, seg);
        assert_eq!(rest, [1, 2, 3]);
    }

    #[test]
    fn truncated_segments_are_refused() {
        let mut out = Vec::new();
        Segment::Data {
            conv: 1,
            opt: 0,
            ts: 0,
            sn: 0,
            sending_next: 0,
            payload: b"abc",
        }
        .encode(&mut out);
        for cut in 0..out.len() {
            assert_eq!(Segment::parse(&out[..cut]), None, "cut at {cut}");
        }
        let count_too_big = [
            0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 1,
        ];
        assert_eq!(Segment::parse(&count_too_big), None);
    }

    #[test]
    fn unknown_command_reads_like_a_ping() {
        let b = [0, 5, 9, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3];
        let (seg, rest) = Segment::parse(&b).unwrap();
        assert!(rest.is_empty());
        assert_eq!(
            seg,
            Segment::Cmd {
                conv: 5,
                cmd: Cmd::Other(9),
                opt: 0,
                sending_next: 1,
                receiving_next: 2,
                peer_rto: 3
            }
        );
    }
}
