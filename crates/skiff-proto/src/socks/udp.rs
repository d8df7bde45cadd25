//! SOCKS5 UDP relay datagrams (RFC 1928 §7): every datagram between the client and the relay
//! starts with `RSV RSV FRAG ATYP DST.ADDR DST.PORT`; the rest is the payload.
//!
//! A datagram is whole or nothing, so unlike the stream parsers there is no "incomplete"
//! here: a short datagram is an error.

use skiff_core::Address;

use super::codec::{Parsed, SocksError, encode_udp_header, encoded_address_len, parse_udp_header};

/// Splits a datagram from the client into its destination and payload (borrowed, no copy).
///
/// Errors: [`SocksError::Fragmented`] when FRAG != 0 (we don't reassemble; RFC 1928 lets
/// such an implementation drop them), [`SocksError::Truncated`] when the datagram ends
/// inside the header, and the address errors of the codec.
pub fn parse_datagram(buf: &[u8]) -> Result<(Address, &[u8]), SocksError> {
    match parse_udp_header(buf)? {
        Parsed::Complete(address, len) => {
            let payload = buf.get(len..).unwrap_or_default();
            Ok((address, payload))
        }
        Parsed::Incomplete => Err(SocksError::Truncated),
    }
}

/// Appends the header for a datagram from `addr` (the remote the payload came from) to `out`;
/// append the payload after it. On error (a domain that is empty or over 255 bytes) nothing
/// is appended.
pub fn encode_datagram_header(addr: &Address, out: &mut Vec<u8>) -> Result<(), SocksError> {
    encode_udp_header(addr, out)
}

/// How many bytes [`encode_datagram_header`] writes for `addr`, to reserve head room in a
/// buffer before receiving the payload into it.
pub fn datagram_header_len(addr: &Address) -> usize {
    3 + encoded_address_len(addr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_header_and_payload() {
        let datagram = [0, 0, 0, 1, 8, 8, 4, 4, 0, 53, b'h', b'i'];
        let (addr, payload) = parse_datagram(&datagram).unwrap();
        assert_eq!(addr, Address::Ip("8.8.4.4:53".parse().unwrap()));
        assert_eq!(payload, b"hi");
    }

    #[test]
    fn empty_payload_is_fine() {
        let datagram = [0, 0, 0, 1, 8, 8, 4, 4, 0, 53];
        let (_, payload) = parse_datagram(&datagram).unwrap();
        assert!(payload.is_empty());
    }

    #[test]
    fn refuses_short_and_fragmented() {
        assert_eq!(
            parse_datagram(&[0, 0, 0, 1, 8, 8]),
            Err(SocksError::Truncated)
        );
        assert_eq!(parse_datagram(&[]), Err(SocksError::Truncated));
        assert_eq!(
            parse_datagram(&[0, 0, 1, 1, 8, 8, 4, 4, 0, 53]),
            Err(SocksError::Fragmented(1))
        );
    }

    #[test]
    fn header_len_matches_encoding() {
        for addr in [
            Address::Ip("1.2.3.4:5".parse().unwrap()),
            Address::Ip("[::1]:5".parse().unwrap()),
            Address::Domain("example.com".into(), 443),
        ] {
            let mut out = Vec::new();
            encode_datagram_header(&addr, &mut out).unwrap();
            assert_eq!(out.len(), datagram_header_len(&addr));
            out.extend_from_slice(b"payload");
            assert_eq!(parse_datagram(&out).unwrap(), (addr, &b"payload"[..]));
        }
    }
}
