//! The shared real geosite.dat / geoip.dat (`../shared/data/geo` next to the repository):
//! the five lists a typical config names load and match what they are known to hold.
//! Skipped with a note when the data is absent, except under `CI=true`.

use std::path::PathBuf;

use skiff_geodata::ip::decode_ip;
use skiff_geodata::site::decode_site;
use skiff_geodata::{DomainSet, GeoError, IpSet, find_entries};

fn read(name: &str) -> Option<Vec<u8>> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/geo")
        .join(name);
    match std::fs::read(&path) {
        Ok(b) => Some(b),
        Err(e) if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("{}: {e} (required under CI=true)", path.display())
        }
        Err(e) => {
            eprintln!("note: skipping, {}: {e}", path.display());
            None
        }
    }
}

#[test]
fn five_codes_from_the_real_geosite() {
    let Some(file) = read("geosite.dat") else {
        return;
    };
    let codes = [
        "category-ads-all",
        "cn",
        "google",
        "private",
        "geolocation-!cn",
    ];
    let entries = find_entries(&file, &codes).unwrap();
    let set = |i: usize| DomainSet::new(decode_site(entries[i], &[]).unwrap()).unwrap();
    let (ads, cn, google, private) = (set(0), set(1), set(2), set(3));
    assert!(ads.matches("doubleclick.net"));
    assert!(ads.matches("ad.doubleclick.net"));
    assert!(!ads.matches("example.org"));
    assert!(google.matches("www.google.com"));
    assert!(!google.matches("baidu.com"));
    assert!(cn.matches("www.baidu.com"));
    assert!(private.matches("localhost"));
    let not_cn = set(4);
    assert!(not_cn.matches("github.com"));
    assert!(!not_cn.matches("baidu.com"));
    assert_eq!(
        find_entries(&file, &["nonexistent"]),
        Err(GeoError::NoCode("nonexistent".into()))
    );
    // A truncated copy is an error, not a panic, when the code lies beyond the cut.
    assert!(find_entries(&file[..file.len() / 2], &["nonexistent"]).is_err());
}

#[test]
fn private_and_cn_from_the_real_geoip() {
    let Some(file) = read("geoip.dat") else {
        return;
    };
    let entries = find_entries(&file, &["private", "CN"]).unwrap();
    let private = IpSet::new(decode_ip(entries[0]).unwrap());
    for ip in ["10.1.2.3", "127.0.0.1", "192.168.0.1", "fc00::1"] {
        assert!(private.contains(ip.parse().unwrap()), "{ip}");
    }
    assert!(!private.contains("8.8.8.8".parse().unwrap()));
    let cn = IpSet::new(decode_ip(entries[1]).unwrap());
    assert!(cn.contains("114.114.114.114".parse().unwrap()));
    assert!(!cn.contains("8.8.8.8".parse().unwrap()));
}
