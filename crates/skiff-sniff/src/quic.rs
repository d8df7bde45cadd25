//! The QUIC sniffer: the SNI of the ClientHello a QUIC client sends in its Initial packets.
//! Initial packets are encrypted with keys derived from the client's Destination Connection
//! ID (RFC 9001 §5.2), so anyone on the path can read them: remove header protection, open
//! the payload, collect the CRYPTO frames by offset (Chrome splits its ClientHello over
//! several Initial packets and orders the pieces oddly), and parse the ClientHello.
//!
//! The input is one or more datagrams' bytes back to back: every long-header packet says its
//! own length, so coalesced packets and consecutive datagrams parse alike.

use skiff_core::wire::Reader;
use skiff_crypto::quic::{InitialKeys, VERSION_1, VERSION_2, VERSION_DRAFT_29};

use crate::client_hello::{Peek, parse_client_hello_message};
use crate::tls::found_sni;
use crate::{Protocol, Sniff};

/// Most ClientHello bytes reassembled from CRYPTO frames (a post-quantum ClientHello is ~2 KiB).
pub const MAX_CRYPTO_LEN: usize = 32 * 1024;
/// Header protection samples 16 bytes starting 4 bytes after the packet number's start.
const SAMPLE_OFFSET: usize = 4;
const SAMPLE_LEN: usize = 16;

/// The SNI inside the Initial packets at the start of `input`.
pub fn sniff_quic(input: &[u8]) -> Sniff {
    if input.is_empty() {
        return Sniff::NeedMore;
    }
    let mut crypto = CryptoStream::default();
    let mut rest = input;
    while !rest.is_empty() {
        let packet = match split_packet(rest) {
            Split::Packet(packet) => packet,
            Split::Incomplete => return Sniff::NeedMore,
            Split::Invalid => return Sniff::NotThis,
        };
        rest = &rest[packet.len..];
        if !packet.initial {
            continue;
        }
        let Some(plain) = open(&packet, input.len() - rest.len() - packet.len, input) else {
            return Sniff::NotThis;
        };
        if collect_frames(&plain, &mut crypto).is_err() {
            return Sniff::NotThis;
        }
        match parse_client_hello_message(crypto.contiguous()) {
            Peek::ClientHello(info) => return found_sni(Protocol::Quic, info.sni),
            Peek::Incomplete => {}
            Peek::NotTls | Peek::Malformed(_) => return Sniff::NotThis,
        }
    }
    Sniff::NeedMore
}

/// A long-header packet's layout, found without decrypting anything.
struct Packet<'a> {
    version: u32,
    initial: bool,
    dcid: &'a [u8],
    /// Where the (protected) packet number starts, from the packet's first byte.
    pn_offset: usize,
    /// The whole packet's length, header included.
    len: usize,
}

enum Split<'a> {
    Packet(Packet<'a>),
    Incomplete,
    Invalid,
}

fn split_packet(buf: &[u8]) -> Split<'_> {
    let mut r = Reader::new(buf);
    let Some(first) = r.u8() else {
        return Split::Incomplete;
    };
    // Long header form and the fixed bit: anything else is not a client's first flight.
    if first & 0xc0 != 0xc0 {
        return Split::Invalid;
    }
    let Some(version) = r.u32() else {
        return Split::Incomplete;
    };
    let packet_type = (first >> 4) & 0x03;
    let initial = match version {
        VERSION_1 | VERSION_DRAFT_29 => packet_type == 0,
        // RFC 9369 §3.2: v2 renumbered the long packet types; Initial is 0b01.
        VERSION_2 => packet_type == 1,
        _ => return Split::Invalid,
    };
    let Some(dcid) = r.vec8() else {
        return Split::Incomplete;
    };
    let Some(scid) = r.vec8() else {
        return Split::Incomplete;
    };
    if dcid.len() > 20 || scid.len() > 20 {
        return Split::Invalid;
    }
    if initial {
        let token_len = match varint(&mut r) {
            Some(n) => n,
            None => return Split::Incomplete,
        };
        let Ok(token_len) = usize::try_from(token_len) else {
            return Split::Invalid;
        };
        if r.take(token_len).is_none() {
            return Split::Incomplete;
        }
    }
    let Some(length) = varint(&mut r) else {
        return Split::Incomplete;
    };
    let pn_offset = r.pos();
    let Some(len) = usize::try_from(length)
        .ok()
        .and_then(|l| l.checked_add(pn_offset))
    else {
        return Split::Invalid;
    };
    // The packet number (≥ 1 byte) and the AEAD tag must fit in the stated length.
    if length < (SAMPLE_OFFSET + SAMPLE_LEN) as u64 {
        return Split::Invalid;
    }
    if buf.len() < len {
        return Split::Incomplete;
    }
    Split::Packet(Packet {
        version,
        initial,
        dcid,
        pn_offset,
        len,
    })
}

/// QUIC's variable-length integer (RFC 9000 §16).
fn varint(r: &mut Reader<'_>) -> Option<u64> {
    let first = r.u8()?;
    let extra = (1usize << (first >> 6)) - 1;
    let mut value = u64::from(first & 0x3f);
    for _ in 0..extra {
        value = (value << 8) | u64::from(r.u8()?);
    }
    Some(value)
}

/// Removes header protection and opens the payload of the packet at `start` in `input`;
/// None if it does not authenticate (not QUIC, or not a client's Initial).
fn open(packet: &Packet<'_>, start: usize, input: &[u8]) -> Option<Vec<u8>> {
    let keys = InitialKeys::client(packet.version, packet.dcid)?;
    let mut bytes = input[start..start + packet.len].to_vec();
    let sample_at = packet.pn_offset + SAMPLE_OFFSET;
    let sample: [u8; SAMPLE_LEN] = bytes
        .get(sample_at..sample_at + SAMPLE_LEN)?
        .try_into()
        .ok()?;
    let mask = keys.header_mask(&sample);
    bytes[0] ^= mask[0] & 0x0f;
    let pn_len = usize::from(bytes[0] & 0x03) + 1;
    let mut packet_number = 0u64;
    for i in 0..pn_len {
        bytes[packet.pn_offset + i] ^= mask[1 + i];
        packet_number = (packet_number << 8) | u64::from(bytes[packet.pn_offset + i]);
    }
    // A client's first packets have small numbers, so the truncated number is the full one.
    let (header, payload) = bytes.split_at_mut(packet.pn_offset + pn_len);
    let len = keys.open(packet_number, header, payload).ok()?.len();
    let header_len = header.len();
    bytes.truncate(header_len + len);
    bytes.drain(..header_len);
    Some(bytes)
}

/// The CRYPTO stream as reassembled so far: bytes by offset plus which ranges arrived.
#[derive(Default)]
struct CryptoStream {
    data: Vec<u8>,
    ranges: Vec<(usize, usize)>,
}

impl CryptoStream {
    fn insert(&mut self, offset: usize, bytes: &[u8]) -> Result<(), ()> {
        let end = offset.checked_add(bytes.len()).ok_or(())?;
        if end > MAX_CRYPTO_LEN {
            return Err(());
        }
        if self.data.len() < end {
            self.data.resize(end, 0);
        }
        self.data[offset..end].copy_from_slice(bytes);
        self.ranges.push((offset, end));
        Ok(())
    }

    /// The bytes from offset 0 up to the first gap.
    fn contiguous(&mut self) -> &[u8] {
        self.ranges.sort_unstable();
        let mut end = 0;
        for &(start, stop) in &self.ranges {
            if start > end {
                break;
            }
            end = end.max(stop);
        }
        &self.data[..end]
    }
}

/// Walks an Initial packet's frames, keeping CRYPTO data; only the frame types RFC 9000
/// §17.2.2 allows in an Initial packet are accepted.
fn collect_frames(plain: &[u8], crypto: &mut CryptoStream) -> Result<(), ()> {
    let mut r = Reader::new(plain);
    while !r.rest().is_empty() {
        match varint(&mut r).ok_or(())? {
            0x00 | 0x01 => {} // PADDING, PING
            ty @ (0x02 | 0x03) => {
                // ACK: largest, delay, range count, first range, then the ranges.
                varint(&mut r).ok_or(())?;
                varint(&mut r).ok_or(())?;
                let count = varint(&mut r).ok_or(())?;
                varint(&mut r).ok_or(())?;
                if count > plain.len() as u64 {
                    return Err(());
                }
                for _ in 0..count * 2 {
                    varint(&mut r).ok_or(())?;
                }
                if ty == 0x03 {
                    for _ in 0..3 {
                        varint(&mut r).ok_or(())?;
                    }
                }
            }
            0x06 => {
                let offset = usize::try_from(varint(&mut r).ok_or(())?).map_err(|_| ())?;
                let len = usize::try_from(varint(&mut r).ok_or(())?).map_err(|_| ())?;
                crypto.insert(offset, r.take(len).ok_or(())?)?;
            }
            0x1c => {
                varint(&mut r).ok_or(())?;
                varint(&mut r).ok_or(())?;
                let len = usize::try_from(varint(&mut r).ok_or(())?).map_err(|_| ())?;
                r.take(len).ok_or(())?;
            }
            _ => return Err(()),
        }
    }
    Ok(())
}

/// Builds client Initial packets, for tests, property tests and fuzz seeds.
#[doc(hidden)]
pub mod test_support {
    use skiff_crypto::quic::InitialKeys;

    fn put_varint(out: &mut Vec<u8>, v: u64) {
        if v < 64 {
            out.push(v as u8);
        } else if v < 16384 {
            out.extend_from_slice(&(0x4000 | v as u16).to_be_bytes());
        } else {
            out.extend_from_slice(&(0x8000_0000 | v as u32).to_be_bytes());
        }
    }

    /// A CRYPTO frame carrying `data` at `offset`.
    pub fn crypto_frame(offset: u64, data: &[u8]) -> Vec<u8> {
        let mut f = vec![0x06];
        put_varint(&mut f, offset);
        put_varint(&mut f, data.len() as u64);
        f.extend_from_slice(data);
        f
    }

    /// One protected client Initial packet of `version` carrying `frames` (padded to at
    /// least 1200 bytes as clients do), packet number `pn` in 2 bytes.
    pub fn initial_packet(version: u32, dcid: &[u8], pn: u16, frames: &[u8]) -> Vec<u8> {
        let keys = InitialKeys::client(version, dcid).expect("known version");
        let mut payload = frames.to_vec();
        payload.resize(payload.len().max(1200), 0);
        let type_bits = if version == skiff_crypto::quic::VERSION_2 {
            1
        } else {
            0
        };
        let mut header = vec![0xc0 | (type_bits << 4) | 0x01]; // 2-byte packet number
        header.extend_from_slice(&version.to_be_bytes());
        header.push(dcid.len() as u8);
        header.extend_from_slice(dcid);
        header.push(0); // no source connection ID
        header.push(0); // no token
        let length = 2 + payload.len() + skiff_crypto::TAG_LEN;
        header.extend_from_slice(&(0x4000 | length as u16).to_be_bytes());
        let pn_offset = header.len();
        header.extend_from_slice(&pn.to_be_bytes());
        let sealed = keys.seal(u64::from(pn), &header, &payload);
        let mut packet = header;
        packet.extend_from_slice(&sealed);
        let sample: [u8; 16] = packet[pn_offset + 4..pn_offset + 20].try_into().unwrap();
        let mask = keys.header_mask(&sample);
        packet[0] ^= mask[0] & 0x0f;
        packet[pn_offset] ^= mask[1];
        packet[pn_offset + 1] ^= mask[2];
        packet
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::*;
    use super::*;
    use crate::tls::test_support::client_hello_message;

    const DCID: &[u8] = &[0x83, 0x94, 0xc8, 0xf0, 0x3e, 0x51, 0x57, 0x08];

    fn domain(s: Sniff) -> Option<String> {
        match s {
            Sniff::Found(f) => {
                assert_eq!(f.protocol, Protocol::Quic);
                Some(f.domain)
            }
            _ => None,
        }
    }

    #[test]
    fn one_initial_packet_each_version() {
        let hello = client_hello_message(Some("Q.Example"));
        for version in [VERSION_1, VERSION_2, VERSION_DRAFT_29] {
            let packet = initial_packet(version, DCID, 0, &crypto_frame(0, &hello));
            assert_eq!(domain(sniff_quic(&packet)), Some("q.example".into()));
            assert_eq!(sniff_quic(&packet[..packet.len() - 1]), Sniff::NeedMore);
        }
    }

    /// Chrome's habit: the ClientHello in pieces, out of order, over two Initial packets.
    #[test]
    fn crypto_frames_reassemble_across_packets() {
        let hello = client_hello_message(Some("split.example"));
        let (a, b) = hello.split_at(20);
        let (b, c) = b.split_at(15);
        let mut first = crypto_frame(20, b);
        first.extend_from_slice(&[1, 0, 0]); // PING, PADDING
        first.extend_from_slice(&crypto_frame(0, a));
        let p1 = initial_packet(VERSION_1, DCID, 0, &first);
        let p2 = initial_packet(VERSION_1, DCID, 1, &crypto_frame(35, c));
        assert_eq!(sniff_quic(&p1), Sniff::NeedMore);
        let both = [p1, p2].concat();
        assert_eq!(domain(sniff_quic(&both)), Some("split.example".into()));
    }

    #[test]
    fn other_bytes_are_not_quic() {
        assert_eq!(sniff_quic(b"GET / HTTP/1.1\r\n"), Sniff::NotThis);
        let mut packet = initial_packet(
            VERSION_1,
            DCID,
            0,
            &crypto_frame(0, &client_hello_message(Some("x.example"))),
        );
        let last = packet.len() - 1;
        packet[last] ^= 1; // the tag no longer authenticates
        assert_eq!(sniff_quic(&packet), Sniff::NotThis);
        // A short-header packet.
        assert_eq!(sniff_quic(&[0x40, 1, 2, 3]), Sniff::NotThis);
    }
}
