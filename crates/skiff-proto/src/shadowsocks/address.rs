//! SOCKS5 addresses as Shadowsocks carries them: `ATYP addr port`, ATYP 1 = IPv4, 3 = domain
//! (length byte + name), 4 = IPv6. Like Xray, the parser looks at the low four bits of ATYP
//! only (old clients set flags in the high ones).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use skiff_core::Address;

use super::SsError;

const ATYP_IPV4: u8 = 0x01;
const ATYP_DOMAIN: u8 = 0x03;
const ATYP_IPV6: u8 = 0x04;

/// The longest encoded address: type, length, 255-byte name, port.
pub const MAX_LEN: usize = 1 + 1 + 255 + 2;

/// A parse of a prefix of the input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parsed {
    /// The address and how many bytes it took.
    Complete(Address, usize),
    /// A valid beginning; more bytes are needed.
    Incomplete,
}

/// Parses an address at the start of `buf`.
pub fn parse(buf: &[u8]) -> Result<Parsed, SsError> {
    let Some(&atyp) = buf.first() else {
        return Ok(Parsed::Incomplete);
    };
    let (host_len, skip) = match atyp & 0x0F {
        ATYP_IPV4 => (4, 1),
        ATYP_IPV6 => (16, 1),
        ATYP_DOMAIN => match buf.get(1) {
            None => return Ok(Parsed::Incomplete),
            Some(0) => return Err(SsError::BadDomain),
            Some(&n) => (usize::from(n), 2),
        },
        _ => return Err(SsError::BadAddressType(atyp)),
    };
    let total = skip + host_len + 2;
    let Some(bytes) = buf.get(..total) else {
        return Ok(Parsed::Incomplete);
    };
    let host = &bytes[skip..skip + host_len];
    let port = u16::from_be_bytes([bytes[total - 2], bytes[total - 1]]);
    let address = match atyp & 0x0F {
        ATYP_IPV4 => {
            let ip: [u8; 4] = host.try_into().map_err(|_| SsError::Truncated)?;
            Address::Ip(SocketAddr::new(IpAddr::V4(Ipv4Addr::from(ip)), port))
        }
        ATYP_IPV6 => {
            let ip: [u8; 16] = host.try_into().map_err(|_| SsError::Truncated)?;
            Address::Ip(SocketAddr::new(IpAddr::V6(Ipv6Addr::from(ip)), port))
        }
        _ => {
            let name = std::str::from_utf8(host).map_err(|_| SsError::BadDomain)?;
            // A name that is an IP literal is that IP (clients put both in the domain form).
            Address::from_host(name, port)
        }
    };
    Ok(Parsed::Complete(address, total))
}

/// Encoded length of `addr`, or TooLong for a domain over 255 bytes.
pub fn encoded_len(addr: &Address) -> Result<usize, SsError> {
    Ok(match addr {
        Address::Ip(SocketAddr::V4(_)) => 1 + 4 + 2,
        Address::Ip(SocketAddr::V6(_)) => 1 + 16 + 2,
        Address::Domain(name, _) => {
            if name.is_empty() {
                return Err(SsError::BadDomain);
            }
            if name.len() > 255 {
                return Err(SsError::TooLong);
            }
            1 + 1 + name.len() + 2
        }
    })
}

/// Writes `addr` at the start of `out`; returns its length. Errors (nothing written) when the
/// address cannot be encoded or `out` is too short.
pub fn write(addr: &Address, out: &mut [u8]) -> Result<usize, SsError> {
    let len = encoded_len(addr)?;
    let out = out.get_mut(..len).ok_or(SsError::TooLong)?;
    match addr {
        Address::Ip(SocketAddr::V4(sa)) => {
            out[0] = ATYP_IPV4;
            out[1..5].copy_from_slice(&sa.ip().octets());
        }
        Address::Ip(SocketAddr::V6(sa)) => {
            out[0] = ATYP_IPV6;
            out[1..17].copy_from_slice(&sa.ip().octets());
        }
        Address::Domain(name, _) => {
            out[0] = ATYP_DOMAIN;
            out[1] = name.len() as u8;
            out[2..2 + name.len()].copy_from_slice(name.as_bytes());
        }
    }
    out[len - 2..].copy_from_slice(&addr.port().to_be_bytes());
    Ok(len)
}

/// `addr` appended to a vector.
pub fn to_vec(addr: &Address) -> Result<Vec<u8>, SsError> {
    let mut out = vec![0u8; encoded_len(addr)?];
    write(addr, &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_prefixes() {
        for addr in [
            Address::Ip("1.2.3.4:53".parse().unwrap()),
            Address::Ip("[2001:db8::1]:443".parse().unwrap()),
            Address::Domain("example.com".into(), 80),
        ] {
            let bytes = to_vec(&addr).unwrap();
            assert_eq!(
                parse(&bytes),
                Ok(Parsed::Complete(addr.clone(), bytes.len()))
            );
            for cut in 0..bytes.len() {
                assert_eq!(parse(&bytes[..cut]), Ok(Parsed::Incomplete), "{addr} {cut}");
            }
        }
        assert_eq!(
            to_vec(&Address::Domain("example.com".into(), 80)).unwrap()[..2],
            [3, 11]
        );
    }

    #[test]
    fn refusals_and_xray_leniency() {
        assert_eq!(parse(&[0x05, 0, 0]), Err(SsError::BadAddressType(5)));
        assert_eq!(parse(&[0x03, 0, 0, 0]), Err(SsError::BadDomain));
        assert_eq!(parse(&[0x03, 1, 0xff, 0, 80]), Err(SsError::BadDomain));
        // High bits of ATYP are ignored, as Xray does.
        assert_eq!(
            parse(&[0x11, 1, 2, 3, 4, 0, 53]),
            Ok(Parsed::Complete(
                Address::Ip("1.2.3.4:53".parse().unwrap()),
                7
            ))
        );
        // A domain that is an IP literal becomes the IP.
        assert_eq!(
            parse(&[0x03, 7, b'1', b'.', b'2', b'.', b'3', b'.', b'4', 0, 53]),
            Ok(Parsed::Complete(
                Address::Ip("1.2.3.4:53".parse().unwrap()),
                11
            ))
        );
        assert_eq!(
            encoded_len(&Address::Domain("x".repeat(256), 1)),
            Err(SsError::TooLong)
        );
        assert_eq!(
            write(&Address::Ip("1.2.3.4:5".parse().unwrap()), &mut [0; 6]),
            Err(SsError::TooLong)
        );
    }
}
