//! Property tests for the .dat reader: any bytes give a result or an error (never a panic),
//! and whatever the encoder writes decodes back to the same lists.

use std::net::IpAddr;

use proptest::prelude::*;
use skiff_geodata::encode::{self, SiteDomain};
use skiff_geodata::ip::decode_ip;
use skiff_geodata::list::{codes, find_entries};
use skiff_geodata::site::decode_site;
use skiff_geodata::{Domain, DomainKind, IpSet};

fn kind() -> impl Strategy<Value = DomainKind> {
    prop_oneof![
        Just(DomainKind::Plain),
        Just(DomainKind::Regex),
        Just(DomainKind::Suffix),
        Just(DomainKind::Full),
    ]
}

fn site_domain() -> impl Strategy<Value = SiteDomain> {
    (
        kind(),
        "[a-z0-9.-]{0,20}",
        prop::collection::vec("[a-z]{1,5}", 0..3),
    )
        .prop_map(|(kind, value, attrs)| SiteDomain { kind, value, attrs })
}

fn cidr() -> impl Strategy<Value = (IpAddr, u8)> {
    prop_oneof![
        (any::<[u8; 4]>(), 0u8..=32).prop_map(|(a, p)| (IpAddr::from(a), p)),
        (any::<[u8; 16]>(), 0u8..=128).prop_map(|(a, p)| (IpAddr::from(a), p)),
    ]
}

proptest! {
    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = find_entries(&bytes, &["CN", "a"]);
        let _ = codes(&bytes);
        let _ = decode_site(&bytes, &["ads"]);
        let _ = decode_ip(&bytes);
    }

    #[test]
    fn mutated_files_never_panic(
        lists in prop::collection::vec(("[A-Z]{1,4}", prop::collection::vec(site_domain(), 0..4)), 1..4),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let refs: Vec<_> = lists.iter().map(|(c, d)| (c.as_str(), d.clone())).collect();
        let mut file = encode::site_list(&refs);
        for (i, b) in flips {
            let i = i.index(file.len());
            file[i] = b;
        }
        let file = &file[..cut.index(file.len() + 1)];
        if let Ok(entries) = find_entries(file, &[lists[0].0.as_str()]) {
            let _ = decode_site(entries[0], &[]);
        }
    }

    #[test]
    fn site_round_trip(
        lists in prop::collection::vec(("[A-Z]{1,6}", prop::collection::vec(site_domain(), 0..6)), 1..6),
        attr in "[a-z]{1,5}",
    ) {
        let refs: Vec<_> = lists.iter().map(|(c, d)| (c.as_str(), d.clone())).collect();
        let file = encode::site_list(&refs);
        let code = lists.last().unwrap().0.to_ascii_lowercase();
        let entry = find_entries(&file, &[code.as_str()]).unwrap()[0];
        // The first list with that code (case-insensitively) wins.
        let (_, want) = lists.iter().find(|(c, _)| c.eq_ignore_ascii_case(&code)).unwrap();
        let plain = |d: &SiteDomain| Domain { kind: d.kind, value: d.value.clone() };
        prop_assert_eq!(decode_site(entry, &[]).unwrap(), want.iter().map(plain).collect::<Vec<_>>());
        let with_attr: Vec<_> = want.iter().filter(|d| d.attrs.contains(&attr)).map(plain).collect();
        prop_assert_eq!(decode_site(entry, &[attr.as_str()]).unwrap(), with_attr);
    }

    #[test]
    fn ip_round_trip_and_set_agrees_with_naive(
        cidrs in prop::collection::vec(cidr(), 0..20),
        probes in prop::collection::vec(cidr(), 0..20),
    ) {
        let file = encode::ip_list(&[("X", cidrs.clone())]);
        let entry = find_entries(&file, &["x"]).unwrap()[0];
        prop_assert_eq!(decode_ip(entry).unwrap(), cidrs.clone());
        let set = IpSet::new(cidrs.iter().copied());
        // Probe the listed networks themselves and random addresses.
        for ip in cidrs.iter().chain(&probes).map(|c| c.0) {
            let naive = cidrs.iter().any(|&(net, p)| skiff_core_like_contains(net, p, ip));
            prop_assert_eq!(set.contains(ip), naive, "{}", ip);
        }
    }
}

/// Straightforward prefix comparison, the reference the range set must agree with.
fn skiff_core_like_contains(net: IpAddr, prefix: u8, ip: IpAddr) -> bool {
    let unmap = |ip: IpAddr| match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    match (unmap(net), unmap(ip)) {
        (IpAddr::V4(n), IpAddr::V4(i)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            u32::from(n) & mask == u32::from(i) & mask
        }
        (IpAddr::V6(n), IpAddr::V6(i)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            u128::from(n) & mask == u128::from(i) & mask
        }
        _ => false,
    }
}
