//! geoip/geosite rules through `load_sources`: the lists are found through
//! `SKIFF_LOCATION_ASSET`, loaded into each rule's matcher, and a missing file or code is an
//! error naming the file, the code and the rule entry's JSON path and line.
//!
//! One test function: it sets the environment variable before anything else runs in this
//! process (a test binary of its own), so no other thread reads the environment meanwhile.

use std::net::IpAddr;

use skiff_config::{Source, load_sources};
use skiff_geodata::DomainKind::{Full, Plain, Regex, Suffix};
use skiff_geodata::encode::{self, domain};

fn config(rules: &str) -> Vec<Source> {
    let text = format!(
        r#"{{
  "outbounds": [{{"tag": "direct", "protocol": "freedom"}}, {{"tag": "block", "protocol": "blackhole"}}],
  "routing": {{"rules": [
{rules}
  ]}}
}}"#
    );
    vec![Source {
        name: "geo.json".into(),
        text,
    }]
}

#[test]
fn geo_rules_load_match_and_report() {
    let dir = std::env::temp_dir().join(format!("skiff-geo-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // SAFETY: the only test in this binary, run before any other thread reads the environment.
    unsafe { std::env::set_var("SKIFF_LOCATION_ASSET", &dir) };
    let site = encode::site_list(&[
        ("OTHER", vec![domain(Full, "other.example", &[])]),
        (
            "ADS",
            vec![
                domain(Suffix, "Ads.Example", &["cn"]),
                domain(Full, "exact.example", &[]),
                domain(Plain, "tracker", &["cn", "x"]),
                domain(Regex, r"^ad\d+\.", &[]),
            ],
        ),
    ]);
    std::fs::write(dir.join("geosite.dat"), &site).unwrap();
    std::fs::write(dir.join("mine.dat"), &site).unwrap();
    let ip = |a: &str| -> IpAddr { a.parse().unwrap() };
    let geoip = encode::ip_list(&[
        ("PRIVATE", vec![(ip("10.0.0.0"), 8), (ip("fc00::"), 7)]),
        ("CN", vec![(ip("1.0.1.0"), 24)]),
    ]);
    std::fs::write(dir.join("geoip.dat"), &geoip).unwrap();

    let loaded = load_sources(&config(
        r#"    {"domain": ["geosite:ads", "full:mine.example"], "outboundTag": "block"},
    {"domain": ["geosite:ADS@cn"], "outboundTag": "block"},
    {"domain": ["ext:mine.dat:other", "ext-domain:mine.dat:ads@cn@x"], "outboundTag": "block"},
    {"ip": ["geoip:private", "192.0.2.1"], "outboundTag": "block"},
    {"ip": ["geoip:!cn"], "outboundTag": "direct"},
    {"ip": ["!ext-ip:geoip.dat:cn"], "outboundTag": "direct"}"#,
    ))
    .unwrap_or_else(|e| panic!("{e:#?}"));
    let rules = &loaded.plan.routing.rules;
    let dom = |i: usize, name: &str| rules[i].domain_set.as_ref().unwrap().matches(name);
    // Whole list plus the rule's own entry, in one matcher.
    for name in [
        "ads.example",
        "x.ads.example",
        "exact.example",
        "my-tracker.net",
        "ad7.x",
        "mine.example",
    ] {
        assert!(dom(0, name), "{name}");
    }
    for name in ["other.example", "bads.example", "sub.exact.example", "ad.x"] {
        assert!(!dom(0, name), "{name}");
    }
    // @cn keeps only entries with that attribute.
    assert!(dom(1, "x.ads.example") && dom(1, "tracker.io"));
    assert!(!dom(1, "exact.example") && !dom(1, "ad7.x"));
    // ext: files, and every attribute required.
    assert!(dom(2, "other.example") && dom(2, "tracker.io"));
    assert!(!dom(2, "ads.example"));
    let ipm = |i: usize, a: &str| rules[i].ip_set.as_ref().unwrap().matches(ip(a));
    assert!(ipm(3, "10.2.3.4") && ipm(3, "fd00::1") && ipm(3, "192.0.2.1"));
    assert!(!ipm(3, "192.0.2.2"));
    // geoip:!cn: outside the list matches, inside does not; the list has no IPv6 ranges, so
    // IPv6 never matches (as Xray).
    assert!(ipm(4, "8.8.8.8") && !ipm(4, "1.0.1.9") && !ipm(4, "2001:db8::1"));
    assert!(ipm(5, "8.8.8.8") && !ipm(5, "1.0.1.9"));
    let summary = loaded.plan.to_string();
    assert!(summary.contains("geosite:ads"), "{summary}");
    assert!(summary.contains("geoip:!cn"), "{summary}");

    // Errors: unknown code, missing file, corrupt file; each at its entry, naming file and code.
    std::fs::write(dir.join("broken.dat"), &site[..site.len() - 3]).unwrap();
    let errs = load_sources(&config(
        r#"    {"domain": ["full:ok.example", "geosite:nonexistent"], "outboundTag": "block"},
    {"ip": ["geoip:private", "ext:nothere.dat:cn"], "outboundTag": "block"},
    {"domain": ["ext:broken.dat:ads"], "outboundTag": "block"}"#,
    ))
    .unwrap_err();
    let find = |path: &str| {
        errs.iter()
            .find(|d| d.path == path)
            .unwrap_or_else(|| panic!("no error at {path}: {errs:#?}"))
    };
    let d = find("routing.rules[0].domain[1]");
    assert!(
        d.message.contains("`geosite.dat`") && d.message.contains("`nonexistent`"),
        "{d}"
    );
    assert_eq!((d.file.as_str(), d.line), ("geo.json", 4));
    let d = find("routing.rules[1].ip[1]");
    assert!(d.message.contains("cannot find `nothere.dat`"), "{d}");
    let d = find("routing.rules[2].domain[0]");
    assert!(
        d.message.contains("broken.dat") && d.message.contains("truncated"),
        "{d}"
    );
    assert_eq!(errs.iter().filter(|d| d.is_error()).count(), 3, "{errs:#?}");
    std::fs::remove_dir_all(&dir).unwrap();
}
