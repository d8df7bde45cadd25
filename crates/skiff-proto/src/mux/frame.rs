//! Mux.Cool frames (transports.md §5), sans-IO: `meta_len:u16 meta [data_len:u16 data]`, the
//! metadata being `session:u16 status:u8 option:u8 [network:u8 port:u16 atyp:u8 addr
//! [global_id:8]]`. Addresses are port first (`crate::address::port_first`).

use std::ops::Range;

use skiff_core::Address;
use skiff_core::wire::Reader;

use crate::address::{AddressError, port_first};

pub const STATUS_NEW: u8 = 1;
pub const STATUS_KEEP: u8 = 2;
pub const STATUS_END: u8 = 3;
pub const STATUS_KEEP_ALIVE: u8 = 4;
pub const OPTION_DATA: u8 = 1;
pub const OPTION_ERROR: u8 = 2;
pub const NETWORK_TCP: u8 = 1;
pub const NETWORK_UDP: u8 = 2;
/// Xray refuses longer metadata.
pub const MAX_META_LEN: usize = 512;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MuxError {
    MetadataTooLong(usize),
    MetadataTooShort,
    BadAddressType(u8),
    BadDomain,
    UnknownStatus(u8),
}

impl std::fmt::Display for MuxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MuxError::MetadataTooLong(n) => write!(f, "Mux frame metadata of {n} bytes (max 512)"),
            MuxError::MetadataTooShort => f.write_str("Mux frame metadata too short"),
            MuxError::BadAddressType(t) => write!(f, "Mux frame address type {t}"),
            MuxError::BadDomain => f.write_str("Mux frame with an invalid domain"),
            MuxError::UnknownStatus(s) => write!(f, "Mux frame status {s}"),
        }
    }
}

impl std::error::Error for MuxError {}

/// One decoded frame; `data` indexes into the buffer it was parsed from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub session: u16,
    pub status: u8,
    pub option: u8,
    /// `NETWORK_TCP` / `NETWORK_UDP` when the metadata carries a target (New, UDP Keep).
    pub network: Option<u8>,
    pub address: Option<Address>,
    /// XUDP's GlobalID on a UDP New frame.
    pub global_id: Option<[u8; 8]>,
    pub data: Range<usize>,
}

/// Parses the frame at the start of `buf`: `Ok(None)` when more bytes are needed, else the
/// frame and its whole length.
pub fn parse_frame(buf: &[u8]) -> Result<Option<(Frame, usize)>, MuxError> {
    let Some(head) = buf.get(..2) else {
        return Ok(None);
    };
    let meta_len = usize::from(u16::from_be_bytes([head[0], head[1]]));
    if meta_len > MAX_META_LEN {
        return Err(MuxError::MetadataTooLong(meta_len));
    }
    if meta_len < 4 {
        return Err(MuxError::MetadataTooShort);
    }
    let Some(meta) = buf.get(2..2 + meta_len) else {
        return Ok(None);
    };
    let session = u16::from_be_bytes([meta[0], meta[1]]);
    let (status, option) = (meta[2], meta[3]);
    if !(STATUS_NEW..=STATUS_KEEP_ALIVE).contains(&status) {
        return Err(MuxError::UnknownStatus(status));
    }
    let mut network = None;
    let mut address = None;
    let mut global_id = None;
    // As Xray: a Keep frame names an address only when its network byte says UDP.
    let carries_target =
        status == STATUS_NEW || (status == STATUS_KEEP && meta.get(4) == Some(&NETWORK_UDP));
    if carries_target {
        let rest = &meta[4..];
        let net = *rest.first().ok_or(MuxError::MetadataTooShort)?;
        let (addr, used) = parse_address(&rest[1..])?;
        network = Some(net);
        address = Some(addr);
        let after = &rest[1 + used..];
        if status == STATUS_NEW && net == NETWORK_UDP && after.len() >= 8 {
            let mut id = [0u8; 8];
            id.copy_from_slice(&after[..8]);
            global_id = Some(id);
        }
    }
    let mut total = 2 + meta_len;
    let mut data = total..total;
    if option & OPTION_DATA != 0 {
        let Some(len) = buf.get(total..total + 2) else {
            return Ok(None);
        };
        let len = usize::from(u16::from_be_bytes([len[0], len[1]]));
        if buf.len() < total + 2 + len {
            return Ok(None);
        }
        data = total + 2..total + 2 + len;
        total += 2 + len;
    }
    let frame = Frame {
        session,
        status,
        option,
        network,
        address,
        global_id,
        data,
    };
    Ok(Some((frame, total)))
}

/// `port atyp addr` (port first, as VLESS); returns the address and the bytes used.
fn parse_address(b: &[u8]) -> Result<(Address, usize), MuxError> {
    let mut r = Reader::new(b);
    match port_first::read(&mut r) {
        Ok(Some(address)) => Ok((address, r.pos())),
        Ok(None) => Err(MuxError::MetadataTooShort),
        Err(AddressError::BadType(t)) => Err(MuxError::BadAddressType(t)),
        Err(AddressError::BadDomain) => Err(MuxError::BadDomain),
    }
}

/// A UDP Keep frame from the server: the datagram and the address it came from. Payloads
/// longer than 65535 bytes are cut (a UDP socket cannot hand over more anyway).
pub fn encode_udp_keep(out: &mut Vec<u8>, session: u16, source: &Address, data: &[u8]) {
    let meta_at = out.len();
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&session.to_be_bytes());
    out.extend_from_slice(&[STATUS_KEEP, OPTION_DATA, NETWORK_UDP]);
    port_first::put(source, out);
    let meta_len = (out.len() - meta_at - 2) as u16;
    out[meta_at..meta_at + 2].copy_from_slice(&meta_len.to_be_bytes());
    let data = &data[..data.len().min(usize::from(u16::MAX))];
    out.extend_from_slice(&(data.len() as u16).to_be_bytes());
    out.extend_from_slice(data);
}

/// A New frame opening `session` to `target` over `network`, with no data: the data follows
/// in Keep frames. `global_id` is XUDP's (UDP sessions only).
pub fn encode_new(
    out: &mut Vec<u8>,
    session: u16,
    network: u8,
    target: &Address,
    global_id: Option<[u8; 8]>,
) {
    let meta_at = out.len();
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&session.to_be_bytes());
    out.extend_from_slice(&[STATUS_NEW, 0, network]);
    port_first::put(target, out);
    if let Some(id) = global_id {
        out.extend_from_slice(&id);
    }
    let meta_len = (out.len() - meta_at - 2) as u16;
    out[meta_at..meta_at + 2].copy_from_slice(&meta_len.to_be_bytes());
}

/// The most data one frame carries (its length is a u16).
pub const MAX_DATA: usize = u16::MAX as usize;

/// A Keep frame carrying `data` (at most [`MAX_DATA`] bytes, the caller splits) for a TCP
/// session.
pub fn encode_keep(out: &mut Vec<u8>, session: u16, data: &[u8]) {
    debug_assert!(data.len() <= MAX_DATA);
    out.extend_from_slice(&[0, 4]);
    out.extend_from_slice(&session.to_be_bytes());
    out.extend_from_slice(&[STATUS_KEEP, OPTION_DATA]);
    out.extend_from_slice(&(data.len() as u16).to_be_bytes());
    out.extend_from_slice(data);
}

/// A KeepAlive frame (session 0, no data), which keeps an idle connection from timing out.
pub fn encode_keep_alive(out: &mut Vec<u8>) {
    out.extend_from_slice(&[0, 4, 0, 0, STATUS_KEEP_ALIVE, 0]);
}

/// An End frame, with the error option when the session failed or was refused.
pub fn encode_end(out: &mut Vec<u8>, session: u16, error: bool) {
    out.extend_from_slice(&[0, 4]);
    out.extend_from_slice(&session.to_be_bytes());
    out.push(STATUS_END);
    out.push(if error { OPTION_ERROR } else { 0 });
}

/// Fuzz entry point: frames parsed from any bytes stay inside them; UDP Keep frames round-trip.
pub fn fuzz_parse_all(data: &[u8]) {
    let mut at = 0;
    while let Ok(Some((frame, len))) = parse_frame(&data[at..]) {
        assert!(len > 0 && at + len <= data.len());
        assert!(frame.data.end <= len);
        if let (Some(NETWORK_UDP), Some(address)) = (frame.network, &frame.address) {
            let mut out = Vec::new();
            let payload = &data[at..at + len][frame.data.clone()];
            encode_udp_keep(&mut out, frame.session, address, payload);
            let (again, again_len) = parse_frame(&out)
                .ok()
                .flatten()
                .expect("a Keep frame parses");
            assert_eq!(again_len, out.len());
            assert_eq!(again.address.as_ref(), Some(address));
            assert_eq!(&out[again.data.clone()], payload);
        }
        if let (Some(network), Some(address)) = (frame.network, &frame.address)
            && frame.status == STATUS_NEW
        {
            let mut out = Vec::new();
            encode_new(&mut out, frame.session, network, address, frame.global_id);
            let (again, again_len) = parse_frame(&out)
                .ok()
                .flatten()
                .expect("a New frame parses");
            assert_eq!(again_len, out.len());
            assert_eq!(again.address.as_ref(), Some(address));
            assert_eq!(again.session, frame.session);
        }
        at += len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::net::{IpAddr, Ipv4Addr, SocketAddr};

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn the_spec_live_vectors() {
        let tcp_new = hex("000c 0001 01 01 01 4ee8 01 7f000001 000d 6d75782d7463702d68656c6c6f");
        let (frame, len) = parse_frame(&tcp_new).unwrap().unwrap();
        assert_eq!(len, tcp_new.len());
        assert_eq!(
            (frame.session, frame.status, frame.network),
            (1, STATUS_NEW, Some(NETWORK_TCP))
        );
        assert_eq!(
            frame.address,
            Some(Address::Ip("127.0.0.1:20200".parse().unwrap()))
        );
        assert_eq!(&tcp_new[frame.data], b"mux-tcp-hello");

        let udp_new = hex(
            "0014 0002 01 01 02 4ee9 01 7f000001 0000000000000000 000d 6d75782d7564702d68656c6c6f",
        );
        let (frame, _) = parse_frame(&udp_new).unwrap().unwrap();
        assert_eq!((frame.session, frame.network), (2, Some(NETWORK_UDP)));
        assert_eq!(frame.global_id, Some([0; 8]));
        assert_eq!(&udp_new[frame.data], b"mux-udp-hello");

        // The server's UDP answer, byte for byte.
        let mut out = Vec::new();
        let source = Address::Ip("127.0.0.1:20201".parse().unwrap());
        encode_udp_keep(&mut out, 2, &source, b"mux-udp-hello");
        assert_eq!(
            out,
            hex("000c 0002 02 01 02 4ee9 01 7f000001 000d 6d75782d7564702d68656c6c6f")
        );
        let mut end = Vec::new();
        encode_end(&mut end, 1, true);
        assert_eq!(end, hex("0004 0001 03 02"));
    }

    #[test]
    fn short_input_needs_more_and_bad_input_is_an_error() {
        let udp_new = hex("0014 0002 01 01 02 4ee9 01 7f000001 0000000000000000 000d 6d75");
        for cut in 0..udp_new.len() {
            assert_eq!(parse_frame(&udp_new[..cut]), Ok(None), "cut at {cut}");
        }
        assert_eq!(
            parse_frame(&hex("0201")),
            Err(MuxError::MetadataTooLong(0x201))
        );
        assert_eq!(
            parse_frame(&hex("0004 0001 09 00")),
            Err(MuxError::UnknownStatus(9))
        );
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            fuzz_parse_all(&bytes);
        }

        #[test]
        fn new_frames_round_trip(session in any::<u16>(), udp in any::<bool>(), port in any::<u16>(),
                                 name in "[a-z0-9]{1,20}(\\.[a-z0-9]{1,20}){0,3}",
                                 global_id in proptest::option::of(any::<[u8; 8]>())) {
            let network = if udp { NETWORK_UDP } else { NETWORK_TCP };
            let global_id = if udp { global_id } else { None };
            let target = Address::Domain(name, port);
            let mut out = Vec::new();
            encode_new(&mut out, session, network, &target, global_id);
            let (frame, len) = parse_frame(&out).unwrap().unwrap();
            prop_assert_eq!(len, out.len());
            prop_assert_eq!((frame.session, frame.status), (session, STATUS_NEW));
            prop_assert_eq!(frame.network, Some(network));
            prop_assert_eq!(frame.address, Some(target));
            prop_assert_eq!(frame.global_id, global_id);
            prop_assert!(frame.data.is_empty());
        }

        /// A run of frames parses the same whole or fed in any two pieces (the reader sees
        /// them as they come off the socket).
        #[test]
        fn frames_parse_the_same_however_they_arrive(
            payloads in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 1..8),
            cut in any::<proptest::sample::Index>()) {
            let mut wire = Vec::new();
            for (i, p) in payloads.iter().enumerate() {
                encode_keep(&mut wire, i as u16, p);
            }
            encode_keep_alive(&mut wire);
            encode_end(&mut wire, 1, false);
            let cut = cut.index(wire.len() + 1);
            let mut seen = Vec::new();
            let mut buf = wire[..cut].to_vec();
            let mut fed = cut;
            loop {
                match parse_frame(&buf).unwrap() {
                    Some((frame, len)) => {
                        seen.push((frame.session, frame.status, buf[frame.data].to_vec()));
                        buf.drain(..len);
                    }
                    None if fed < wire.len() => {
                        buf.extend_from_slice(&wire[fed..]);
                        fed = wire.len();
                    }
                    None => break,
                }
            }
            prop_assert!(buf.is_empty());
            prop_assert_eq!(seen.len(), payloads.len() + 2);
            for (i, p) in payloads.iter().enumerate() {
                prop_assert_eq!(&seen[i], &(i as u16, STATUS_KEEP, p.clone()));
            }
            prop_assert_eq!(seen[payloads.len()].1, STATUS_KEEP_ALIVE);
            prop_assert_eq!(seen[payloads.len() + 1].1, STATUS_END);
        }

        #[test]
        fn keep_frames_round_trip(session in any::<u16>(), port in any::<u16>(), ip in any::<[u8; 4]>(),
                                  data in proptest::collection::vec(any::<u8>(), 0..2000)) {
            let source = Address::Ip(SocketAddr::new(IpAddr::V4(Ipv4Addr::from(ip)), port));
            let mut out = Vec::new();
            encode_udp_keep(&mut out, session, &source, &data);
            let (frame, len) = parse_frame(&out).unwrap().unwrap();
            prop_assert_eq!(len, out.len());
            prop_assert_eq!(frame.session, session);
            prop_assert_eq!(frame.address, Some(source));
            prop_assert_eq!(&out[frame.data], &data[..]);
        }
    }
}
