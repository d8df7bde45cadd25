//! Writes `GeoSiteList` / `GeoIPList` files: what tests, fuzz seeds and benches use to make
//! exact .dat files. Not used when routing.

use std::net::IpAddr;

use crate::site::DomainKind;

/// One `Domain` message's content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteDomain {
    pub kind: DomainKind,
    pub value: String,
    /// Attribute keys (written with `bool_value: true`, as v2fly's builder does).
    pub attrs: Vec<String>,
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_bytes(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    put_varint(out, u64::from(field) << 3 | 2);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn put_number(out: &mut Vec<u8>, field: u32, v: u64) {
    put_varint(out, u64::from(field) << 3);
    put_varint(out, v);
}

fn kind_number(kind: DomainKind) -> u64 {
    match kind {
        DomainKind::Plain => 0,
        DomainKind::Regex => 1,
        DomainKind::Suffix => 2,
        DomainKind::Full => 3,
    }
}

/// One `GeoSite` entry (code + domains), without the list's field key.
pub fn site_entry(code: &str, domains: &[SiteDomain]) -> Vec<u8> {
    let mut entry = Vec::new();
    put_bytes(&mut entry, 1, code.as_bytes());
    for d in domains {
        let mut msg = Vec::new();
        // proto3 leaves a zero enum out.
        if d.kind != DomainKind::Plain {
            put_number(&mut msg, 1, kind_number(d.kind));
        }
        put_bytes(&mut msg, 2, d.value.as_bytes());
        for a in &d.attrs {
            let mut attr = Vec::new();
            put_bytes(&mut attr, 1, a.as_bytes());
            put_number(&mut attr, 2, 1);
            put_bytes(&mut msg, 3, &attr);
        }
        put_bytes(&mut entry, 2, &msg);
    }
    entry
}

/// One `GeoIP` entry (code + CIDRs + reverse_match), without the list's field key.
pub fn ip_entry(code: &str, cidrs: &[(IpAddr, u8)], reverse_match: bool) -> Vec<u8> {
    let mut entry = Vec::new();
    put_bytes(&mut entry, 1, code.as_bytes());
    for (addr, prefix) in cidrs {
        let mut msg = Vec::new();
        match addr {
            IpAddr::V4(a) => put_bytes(&mut msg, 1, &a.octets()),
            IpAddr::V6(a) => put_bytes(&mut msg, 1, &a.octets()),
        }
        if *prefix != 0 {
            put_number(&mut msg, 2, u64::from(*prefix));
        }
        put_bytes(&mut entry, 2, &msg);
    }
    if reverse_match {
        put_number(&mut entry, 3, 1);
    }
    entry
}

/// A whole list file: each entry as field 1 of the list message.
pub fn list(entries: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for e in entries {
        put_bytes(&mut out, 1, e);
    }
    out
}

/// A `GeoSiteList` file.
pub fn site_list(lists: &[(&str, Vec<SiteDomain>)]) -> Vec<u8> {
    let entries: Vec<_> = lists.iter().map(|(c, d)| site_entry(c, d)).collect();
    list(&entries)
}

/// A `GeoIPList` file.
pub fn ip_list(lists: &[(&str, Vec<(IpAddr, u8)>)]) -> Vec<u8> {
    let entries: Vec<_> = lists.iter().map(|(c, d)| ip_entry(c, d, false)).collect();
    list(&entries)
}

/// `SiteDomain` shorthand: `domain(DomainKind::Suffix, "example.com", &["ads"])`.
pub fn domain(kind: DomainKind, value: &str, attrs: &[&str]) -> SiteDomain {
    SiteDomain {
        kind,
        value: value.to_owned(),
        attrs: attrs.iter().map(|a| (*a).to_owned()).collect(),
    }
}
