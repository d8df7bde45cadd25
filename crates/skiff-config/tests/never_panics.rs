//! Property tests: no input makes the loader panic, and comment stripping keeps every byte
//! offset (length and newlines) intact.

use proptest::prelude::*;
use skiff_config::{Source, load_sources, strip_comments};

fn load(text: String) {
    let _ = load_sources(&[Source {
        name: "p.json".into(),
        text,
    }]);
}

/// JSON-ish fragments, so generated texts get deep into the loader instead of stopping at the
/// first syntax error.
const TOKENS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"",
    "//",
    "/*",
    "*/",
    "#",
    "\n",
    " ",
    "\\",
    "0",
    "-1",
    "1080",
    "70000",
    "1.5",
    "true",
    "null",
    "\"inbounds\"",
    "\"outbounds\"",
    "\"routing\"",
    "\"rules\"",
    "\"policy\"",
    "\"levels\"",
    "\"0\"",
    "\"port\"",
    "\"protocol\"",
    "\"socks\"",
    "\"http\"",
    "\"dokodemo-door\"",
    "\"freedom\"",
    "\"blackhole\"",
    "\"settings\"",
    "\"tag\"",
    "\"a\"",
    "\"proxySettings\"",
    "\"outboundTag\"",
    "\"ip\"",
    "\"domain\"",
    "\"regexp:(\"",
    "\"10.0.0.0/8\"",
    "\"1-2,3\"",
    "\"streamSettings\"",
    "\"network\"",
    "\"ws\"",
    "\"auth\"",
    "\"password\"",
    "\"accounts\"",
    "\"address\"",
    "\"é\"",
    "\"\\u0041\"",
];

fn jsonish() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(TOKENS), 0..80).prop_map(|parts| parts.concat())
}

/// Well-formed configs with random values in the places the loader interprets.
fn structured() -> impl Strategy<Value = String> {
    let value = prop::sample::select(
        &[
            "0",
            "1",
            "-1",
            "65536",
            "\"1-2\"",
            "\"x\"",
            "true",
            "null",
            "[]",
            "{}",
            "[\"a\"]",
            "\"tcp,udp\"",
            "\"a\"",
        ][..],
    );
    (value.clone(), value.clone(), value.clone(), value.clone(), value).prop_map(|(a, b, c, d, e)| {
        format!(
            r#"{{"inbounds": [{{"tag": {a}, "port": {b}, "protocol": "dokodemo-door", "settings": {{"address": {c}, "port": {d}, "network": {e}}}}}],
                "outbounds": [{{"tag": {a}, "protocol": "freedom", "proxySettings": {{"tag": {c}}}}}],
                "routing": {{"rules": [{{"ip": {c}, "port": {b}, "outboundTag": {a}, "domain": {e}}}]}},
                "policy": {{"levels": {{"0": {{"connIdle": {d}}}}}}}}}"#
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        load(String::from_utf8_lossy(&bytes).into_owned());
    }

    #[test]
    fn arbitrary_strings_never_panic(text in any::<String>()) {
        load(text);
    }

    #[test]
    fn jsonish_text_never_panics(text in jsonish()) {
        load(text);
    }

    #[test]
    fn structured_configs_never_panic(text in structured()) {
        load(text);
    }

    #[test]
    fn strip_comments_preserves_length_and_newlines(text in prop_oneof![any::<String>(), jsonish()]) {
        let out = strip_comments(&text);
        prop_assert_eq!(out.len(), text.len());
        let newlines = |s: &str| s.bytes().enumerate().filter(|(_, b)| *b == b'\n' || *b == b'\r').map(|(i, _)| i).collect::<Vec<_>>();
        prop_assert_eq!(newlines(&out), newlines(&text));
    }
}

#[test]
fn deep_nesting_does_not_overflow() {
    load("[".repeat(100_000));
    load(format!("{{\"inbounds\": {}", "[".repeat(50_000)));
    load("{\"a\":".repeat(20_000));
}
