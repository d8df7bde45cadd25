//! Decoding one `GeoIP` entry into CIDR blocks.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::wire::{self, Fields, WireError};

/// The CIDRs of one `GeoIP` entry body. The entry's own `reverse_match` flag is not applied:
/// Xray ignores it too (only the rule's `!` negates).
pub fn decode_ip(entry: &[u8]) -> Result<Vec<(IpAddr, u8)>, WireError> {
    let mut out = Vec::new();
    for field in Fields::new(entry) {
        if let (2, value) = field? {
            out.push(decode_cidr(wire::bytes(value, "cidr")?)?);
        }
    }
    Ok(out)
}

fn decode_cidr(msg: &[u8]) -> Result<(IpAddr, u8), WireError> {
    let mut ip: &[u8] = b"";
    let mut prefix = 0u64;
    for field in Fields::new(msg) {
        match field? {
            (1, v) => ip = wire::bytes(v, "cidr ip")?,
            (2, v) => prefix = wire::number(v, "cidr prefix")?,
            _ => {}
        }
    }
    let addr = if let Ok(b) = <[u8; 4]>::try_from(ip) {
        IpAddr::V4(Ipv4Addr::from(b))
    } else if let Ok(b) = <[u8; 16]>::try_from(ip) {
        IpAddr::V6(Ipv6Addr::from(b))
    } else {
        return Err(WireError::BadValue("cidr ip (not 4 or 16 bytes)"));
    };
    let max = if addr.is_ipv4() { 32 } else { 128 };
    match u8::try_from(prefix) {
        Ok(p) if p <= max => Ok((addr, p)),
        _ => Err(WireError::BadValue("cidr prefix")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode;

    #[test]
    fn cidrs_round_trip_and_bad_ones_fail() {
        let cidrs = vec![
            ("10.0.0.0".parse().unwrap(), 8),
            ("fc00::".parse().unwrap(), 7),
            ("0.0.0.0".parse().unwrap(), 0),
        ];
        let entry = encode::ip_entry("PRIVATE", &cidrs, true);
        assert_eq!(decode_ip(&entry).unwrap(), cidrs);
        // 5-byte address
        assert!(decode_ip(&[0x12, 7, 0x0a, 5, 1, 2, 3, 4, 5]).is_err());
        // prefix 33 on IPv4
        assert!(decode_ip(&[0x12, 8, 0x0a, 4, 1, 2, 3, 4, 0x10, 33]).is_err());
    }
}
