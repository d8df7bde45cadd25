//! Domain lookups against the five lists a typical config names (category-ads-all, cn,
//! google, private, geolocation-!cn) from the shared geosite.dat, one `DomainSet` per list as
//! five rules would hold them. Throughput is reported in lookups (names) per second.
//! Without the shared data the bench says so and measures nothing.

use std::path::PathBuf;

use divan::counter::ItemsCount;
use skiff_geodata::site::decode_site;
use skiff_geodata::{DomainSet, find_entries};

const CODES: [&str; 5] = [
    "category-ads-all",
    "cn",
    "google",
    "private",
    "geolocation-!cn",
];

/// A mix of hits in different lists, near misses and plain misses.
const NAMES: [&str; 12] = [
    "www.google.com",
    "mail.google.co.uk",
    "ads.doubleclick.net",
    "pagead2.googlesyndication.com",
    "www.baidu.com",
    "static.taobao.com",
    "localhost",
    "github.com",
    "cdn.jsdelivr.net",
    "no-such-host.example.org",
    "a.b.c.d.e.f.example.invalid",
    "x",
];

fn sets() -> Option<Vec<DomainSet>> {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/geo/geosite.dat");
    let Ok(file) = std::fs::read(&path) else {
        eprintln!("note: {} not found; nothing to measure", path.display());
        return None;
    };
    let entries = find_entries(&file, &CODES).expect("shared geosite.dat has the five codes");
    Some(
        entries
            .iter()
            .map(|e| {
                DomainSet::new(decode_site(e, &[]).expect("valid list")).expect("valid regexes")
            })
            .collect(),
    )
}

fn main() {
    divan::main();
}

#[divan::bench]
fn route_names(bencher: divan::Bencher) {
    let Some(sets) = sets() else { return };
    bencher.counter(ItemsCount::new(NAMES.len())).bench(|| {
        let mut hits = 0usize;
        for name in divan::black_box(NAMES) {
            // First matching rule wins, as the router walks them.
            hits += usize::from(sets.iter().any(|s| s.matches(name)));
        }
        hits
    });
}
