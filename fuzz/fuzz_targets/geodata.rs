//! The .dat reader on any bytes: find entries, decode them as sites and as IP lists, build
//! the matchers and use them. Errors are fine; panics are not.
#![no_main]
use skiff_geodata::ip::decode_ip;
use skiff_geodata::site::decode_site;
use skiff_geodata::{DomainSet, IpSet, find_entries, list};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = list::codes(data);
    if let Ok(entries) = find_entries(data, &["A", "cn"]) {
        for e in entries {
            if let Ok(domains) = decode_site(e, &["ads"]) {
                if let Ok(set) = DomainSet::new(domains) {
                    let _ = set.matches("www.example.com");
                }
            }
            if let Ok(cidrs) = decode_ip(e) {
                let _ = IpSet::new(cidrs).contains("10.0.0.1".parse().unwrap());
            }
        }
    }
});
