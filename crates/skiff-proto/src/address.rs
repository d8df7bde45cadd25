//! The address blocks Xray's protocols carry, one codec per layout, so that no protocol
//! borrows another's:
//!
//! - [`port_first`]: port, then type 1 (IPv4), 2 (domain), 3 (IPv6) and the address: VLESS,
//!   VMess and Mux.Cool (Xray's "port then address" layout);
//! - [`type_first`]: type 1 (IPv4), 3 (domain), 4 (IPv6), the address, then the port: SOCKS5's
//!   layout as Trojan carries it.
//!
//! Both follow Xray's domain rule ([`domain_address`]). SOCKS and Shadowsocks keep codecs of
//! their own: they take any UTF-8 name, as Xray's SOCKS and Shadowsocks servers do, and
//! Shadowsocks reads only the low four bits of the type.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use skiff_core::Address;
use skiff_core::wire::Reader;

/// The longest domain name written or accepted (its length is one byte).
pub const MAX_DOMAIN_LEN: usize = 255;

/// Why an address block was refused (or could not be encoded).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddressError {
    /// An address type byte the layout does not know.
    BadType(u8),
    /// A domain that is empty, too long or has characters outside `[0-9A-Za-z-._]`.
    BadDomain,
}

/// Xray's domain rule (vless.md §2): a name starting with a digit or `[` that parses as an IP
/// (brackets stripped) is that IP; otherwise only `[0-9A-Za-z-._]` is allowed.
pub fn domain_address(name: &[u8], port: u16) -> Option<Address> {
    let first = *name.first()?;
    if (first.is_ascii_digit() || first == b'[')
        && let Ok(text) = std::str::from_utf8(name)
    {
        let bare = text
            .strip_prefix('[')
            .and_then(|t| t.strip_suffix(']'))
            .unwrap_or(text);
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return Some(Address::Ip(SocketAddr::new(ip, port)));
        }
    }
    if !valid_domain(name) {
        return None;
    }
    // Valid domains are ASCII, hence UTF-8.
    let text = std::str::from_utf8(name).ok()?;
    Some(Address::Domain(text.to_owned(), port))
}

/// A name Xray's rule accepts as a domain (not empty, at most 255 bytes, `[0-9A-Za-z-._]`).
pub fn valid_domain(name: &[u8]) -> bool {
    !name.is_empty()
        && name.len() <= MAX_DOMAIN_LEN
        && name
            .iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_'))
}

/// Appends the type byte (`kinds`: the layout's numbers for IPv4, domain, IPv6) and the
/// host: 4 or 16 bytes, or a length byte and the name (cut at what that byte can say).
fn put_host(address: &Address, [ipv4, domain, ipv6]: [u8; 3], out: &mut Vec<u8>) {
    match address {
        Address::Ip(SocketAddr::V4(sa)) => {
            out.push(ipv4);
            out.extend_from_slice(&sa.ip().octets());
        }
        Address::Ip(SocketAddr::V6(sa)) => {
            out.push(ipv6);
            out.extend_from_slice(&sa.ip().octets());
        }
        Address::Domain(name, _) => {
            let name = &name.as_bytes()[..name.len().min(MAX_DOMAIN_LEN)];
            out.push(domain);
            out.push(name.len() as u8);
            out.extend_from_slice(name);
        }
    }
}

/// Port, type (1 IPv4, 2 domain, 3 IPv6), address.
pub mod port_first {
    use super::*;

    const IPV4: u8 = 0x01;
    const DOMAIN: u8 = 0x02;
    const IPV6: u8 = 0x03;

    /// Reads one block; `Ok(None)` when the input ends first (the reader may have moved then:
    /// a parser answers "incomplete" and drops it).
    pub fn read(r: &mut Reader<'_>) -> Result<Option<Address>, AddressError> {
        let (Some(port), Some(kind)) = (r.u16(), r.u8()) else {
            return Ok(None);
        };
        let address = match kind {
            IPV4 => match r.array::<4>() {
                Some(ip) => Address::Ip(SocketAddr::new(IpAddr::V4(Ipv4Addr::from(ip)), port)),
                None => return Ok(None),
            },
            IPV6 => match r.array::<16>() {
                Some(ip) => Address::Ip(SocketAddr::new(IpAddr::V6(Ipv6Addr::from(ip)), port)),
                None => return Ok(None),
            },
            DOMAIN => match r.vec8() {
                Some(name) => domain_address(name, port).ok_or(AddressError::BadDomain)?,
                None => return Ok(None),
            },
            other => return Err(AddressError::BadType(other)),
        };
        Ok(Some(address))
    }

    /// Appends the block; a domain must pass Xray's rule (what a Skiff or Xray server
    /// accepts). On error nothing is appended.
    pub fn write(address: &Address, out: &mut Vec<u8>) -> Result<(), AddressError> {
        if let Address::Domain(name, _) = address
            && !valid_domain(name.as_bytes())
        {
            return Err(AddressError::BadDomain);
        }
        put(address, out);
        Ok(())
    }

    /// Appends the block without judging the domain (cut at 255 bytes, the most its length
    /// byte can say): for addresses we pass on rather than ask for, such as the source of a
    /// datagram coming back, which the peer's reader judges.
    pub fn put(address: &Address, out: &mut Vec<u8>) {
        out.extend_from_slice(&address.port().to_be_bytes());
        put_host(address, [IPV4, DOMAIN, IPV6], out);
    }
}

/// Type (1 IPv4, 3 domain, 4 IPv6), address, port.
pub mod type_first {
    use super::*;

    const IPV4: u8 = 0x01;
    const DOMAIN: u8 = 0x03;
    const IPV6: u8 = 0x04;

    /// The longest block: type, length, 255-byte name, port.
    pub const MAX_LEN: usize = 1 + 1 + MAX_DOMAIN_LEN + 2;

    /// Reads one block; `Ok(None)` when the input ends first (as for [`port_first::read`]). A
    /// bad domain is refused as soon as its name has arrived, before the port: it is bad
    /// whatever follows.
    pub fn read(r: &mut Reader<'_>) -> Result<Option<Address>, AddressError> {
        let Some(kind) = r.u8() else { return Ok(None) };
        let address = match kind {
            IPV4 => {
                let (Some(ip), Some(port)) = (r.array::<4>(), r.u16()) else {
                    return Ok(None);
                };
                Address::Ip(SocketAddr::new(IpAddr::V4(Ipv4Addr::from(ip)), port))
            }
            IPV6 => {
                let (Some(ip), Some(port)) = (r.array::<16>(), r.u16()) else {
                    return Ok(None);
                };
                Address::Ip(SocketAddr::new(IpAddr::V6(Ipv6Addr::from(ip)), port))
            }
            DOMAIN => {
                let Some(len) = r.u8() else { return Ok(None) };
                if len == 0 {
                    return Err(AddressError::BadDomain);
                }
                let Some(name) = r.take(usize::from(len)) else {
                    return Ok(None);
                };
                let address = domain_address(name, 0).ok_or(AddressError::BadDomain)?;
                let Some(port) = r.u16() else { return Ok(None) };
                address.with_port(port)
            }
            other => return Err(AddressError::BadType(other)),
        };
        Ok(Some(address))
    }

    /// Appends the block; a domain must pass Xray's rule. On error nothing is appended.
    pub fn write(address: &Address, out: &mut Vec<u8>) -> Result<(), AddressError> {
        if let Address::Domain(name, _) = address
            && !valid_domain(name.as_bytes())
        {
            return Err(AddressError::BadDomain);
        }
        put_host(address, [IPV4, DOMAIN, IPV6], out);
        out.extend_from_slice(&address.port().to_be_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples() -> Vec<Address> {
        vec![
            Address::Ip("1.2.3.4:80".parse().unwrap()),
            Address::Ip("[2001:db8::1]:443".parse().unwrap()),
            Address::from_host("example.com", 8080),
        ]
    }

    #[test]
    fn both_layouts_round_trip_and_need_every_byte() {
        type Write = fn(&Address, &mut Vec<u8>) -> Result<(), AddressError>;
        type Read = fn(&mut Reader<'_>) -> Result<Option<Address>, AddressError>;
        let layouts: [(Write, Read); 2] = [
            (port_first::write, port_first::read),
            (type_first::write, type_first::read),
        ];
        for (write, read) in layouts {
            for address in samples() {
                let mut out = Vec::new();
                write(&address, &mut out).unwrap();
                let mut r = Reader::new(&out);
                assert_eq!(read(&mut r), Ok(Some(address.clone())));
                assert_eq!(r.pos(), out.len());
                for cut in 0..out.len() {
                    assert_eq!(read(&mut Reader::new(&out[..cut])), Ok(None), "{cut}");
                }
            }
        }
    }

    #[test]
    fn xray_domain_rule() {
        assert_eq!(
            domain_address(b"[::1]", 53),
            Some(Address::Ip("[::1]:53".parse().unwrap()))
        );
        assert_eq!(domain_address(b"a b", 53), None);
        let bad = Address::Domain("a b".into(), 1);
        let mut out = Vec::new();
        assert_eq!(
            port_first::write(&bad, &mut out),
            Err(AddressError::BadDomain)
        );
        assert_eq!(
            type_first::write(&bad, &mut out),
            Err(AddressError::BadDomain)
        );
        assert!(out.is_empty());
        assert_eq!(
            type_first::read(&mut Reader::new(&[3, 0])),
            Err(AddressError::BadDomain)
        );
        assert_eq!(
            port_first::read(&mut Reader::new(&[0, 80, 9])),
            Err(AddressError::BadType(9))
        );
    }
}
