//! `realitySettings`: both sides, read as Xray reads them, with path-precise errors.

use proptest::prelude::*;

use super::reality::DEFAULT_MIN_CLIENT_VER;
use super::tests_vless::{UUID, has_error, load, ok, warned};
use crate::{RealityTarget, Severity, StreamSecurity};

/// Bytes 0..32 in unpadded URL-safe base64.
const KEY: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8";
/// 31 bytes: one short.
const SHORT_KEY: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHg";
const IN: &str = "inbounds[0].streamSettings.realitySettings";
const OUT: &str = "outbounds[0].streamSettings.realitySettings";

fn key_bytes() -> [u8; 32] {
    std::array::from_fn(|i| i as u8)
}

fn inbound(reality: &str) -> String {
    format!(
        r#"{{"inbounds": [{{"port": 443, "protocol": "vless",
            "settings": {{"clients": [{{"id": "{UUID}", "flow": "xtls-rprx-vision"}}], "decryption": "none"}},
            "streamSettings": {{"network": "tcp", "security": "reality", "realitySettings": {reality}}}}}]}}"#
    )
}

fn outbound(reality: &str) -> String {
    format!(
        r#"{{"outbounds": [{{"protocol": "vless",
            "settings": {{"vnext": [{{"address": "example.com", "port": 443,
                "users": [{{"id": "{UUID}", "encryption": "none", "flow": "xtls-rprx-vision"}}]}}]}},
            "streamSettings": {{"network": "tcp", "security": "reality", "realitySettings": {reality}}}}}]}}"#
    )
}

fn server_settings(extra: &str) -> String {
    format!(
        r#"{{"target": "example.com:443", "serverNames": ["example.com"], "privateKey": "{KEY}",
            "shortIds": ["", "0123456789abcdef"]{extra}}}"#
    )
}

#[test]
fn a_full_inbound_builds_with_xrays_defaults() {
    let plan = ok(&inbound(&server_settings("")));
    let StreamSecurity::Reality(r) = &plan.inbounds[0].stream.security else {
        panic!("not reality: {:?}", plan.inbounds[0].stream.security);
    };
    assert!(r.client.is_none());
    let s = r.server.as_ref().expect("server side");
    assert_eq!(
        s.target,
        RealityTarget::Tcp {
            host: "example.com".into(),
            port: 443
        }
    );
    assert_eq!(s.private_key, key_bytes());
    assert_eq!(s.server_names, ["example.com"]);
    assert_eq!(
        s.short_ids,
        [[0; 8], [0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef]]
    );
    assert_eq!(s.min_client_ver, DEFAULT_MIN_CLIENT_VER);
    assert_eq!(s.max_client_ver, None);
    assert_eq!((s.xver, s.max_time_diff_ms), (0, 0));
    assert!(
        plan.inbounds[0].stream.is_raw_tls(),
        "Vision runs on REALITY"
    );
    // Secrets stay out of debug output.
    let debug = format!("{plan:?}");
    assert!(!debug.contains("private_key: ["), "{debug}");
}

#[test]
fn inbound_keys_as_xray_reads_them() {
    let plan = ok(&inbound(&format!(
        r#"{{"dest": 8443, "xver": 2, "serverNames": ["a", "b"], "privateKey": "{KEY}",
            "shortIds": ["ab"], "minClientVer": "1.8", "maxClientVer": "26.7.28",
            "maxTimeDiff": 60000, "show": true}}"#
    )));
    let StreamSecurity::Reality(r) = &plan.inbounds[0].stream.security else {
        panic!()
    };
    assert!(r.show);
    let s = r.server.as_ref().unwrap();
    assert_eq!(
        s.target,
        RealityTarget::Tcp {
            host: "localhost".into(),
            port: 8443
        }
    );
    assert_eq!(s.xver, 2);
    assert_eq!(s.short_ids, [[0xab, 0, 0, 0, 0, 0, 0, 0]]);
    assert_eq!(s.min_client_ver, [1, 8, 0]);
    assert_eq!(s.max_client_ver, Some([26, 7, 28]));
    assert_eq!(s.max_time_diff_ms, 60000);

    for (target, expected) in [
        (
            r#""8443""#,
            RealityTarget::Tcp {
                host: "localhost".into(),
                port: 8443,
            },
        ),
        (
            r#""[::1]:443""#,
            RealityTarget::Tcp {
                host: "::1".into(),
                port: 443,
            },
        ),
        (
            r#""/run/nginx.sock""#,
            RealityTarget::Unix("/run/nginx.sock".into()),
        ),
        (r#""@abstract""#, RealityTarget::Unix("@abstract".into())),
    ] {
        let plan = ok(&inbound(&format!(
            r#"{{"target": {target}, "serverNames": ["a"], "privateKey": "{KEY}", "shortIds": [""]}}"#
        )));
        let StreamSecurity::Reality(r) = &plan.inbounds[0].stream.security else {
            panic!()
        };
        assert_eq!(r.server.as_ref().unwrap().target, expected, "{target}");
    }
    // `target` wins over `dest`.
    let plan = ok(&inbound(&server_settings(r#", "dest": "other:1""#)));
    let StreamSecurity::Reality(r) = &plan.inbounds[0].stream.security else {
        panic!()
    };
    assert!(
        matches!(&r.server.as_ref().unwrap().target, RealityTarget::Tcp { host, .. } if host == "example.com")
    );
}

#[test]
fn inbound_errors_name_the_key() {
    has_error(
        &inbound(&format!(
            r#"{{"serverNames": ["a"], "privateKey": "{KEY}", "shortIds": [""]}}"#
        )),
        &format!("{IN}.target"),
        "needs `target`",
    );
    has_error(
        &inbound(&format!(
            r#"{{"target": 443, "privateKey": "{KEY}", "shortIds": [""]}}"#
        )),
        &format!("{IN}.serverNames"),
        "needs `serverNames`",
    );
    has_error(
        &inbound(r#"{"target": 443, "serverNames": ["a"], "shortIds": [""]}"#),
        &format!("{IN}.privateKey"),
        "needs `privateKey`",
    );
    has_error(
        &inbound(&format!(
            r#"{{"target": 443, "serverNames": ["a"], "privateKey": "{KEY}"}}"#
        )),
        &format!("{IN}.shortIds"),
        "needs `shortIds`",
    );
    has_error(
        &inbound(&server_settings("").replace(KEY, SHORT_KEY)),
        &format!("{IN}.privateKey"),
        "must be 32 bytes",
    );
    has_error(
        &inbound(&server_settings("").replace(KEY, &format!("{KEY}="))),
        &format!("{IN}.privateKey"),
        "not unpadded URL-safe base64",
    );
    has_error(
        &inbound(&server_settings("").replace(KEY, &KEY.replace('A', "+"))),
        &format!("{IN}.privateKey"),
        "not unpadded URL-safe base64",
    );
    for (bad, needle) in [
        ("abc", "in pairs"),
        ("zz", "in pairs"),
        ("0123456789abcdef01", "too long"),
    ] {
        has_error(
            &inbound(&server_settings("").replace("0123456789abcdef", bad)),
            &format!("{IN}.shortIds[1]"),
            needle,
        );
    }
    has_error(
        &inbound(&server_settings(r#", "xver": 3"#)),
        &format!("{IN}.xver"),
        "0, 1 or 2",
    );
    has_error(
        &inbound(&server_settings(r#", "minClientVer": "1.2.3.4""#)),
        &format!("{IN}.minClientVer"),
        "at most three parts",
    );
    has_error(
        &inbound(&server_settings(r#", "maxClientVer": "1.256""#)),
        &format!("{IN}.maxClientVer"),
        "0–255",
    );
    has_error(
        &inbound(&server_settings("").replace(r#""example.com:443""#, r#""example.com""#)),
        &format!("{IN}.target"),
        "not a valid target",
    );
    has_error(
        &inbound(&server_settings("").replace(r#""example.com:443""#, "70000")),
        &format!("{IN}.target"),
        "out of range",
    );
    has_error(
        &inbound(&server_settings(r#", "type": "udp""#)),
        &format!("{IN}.target"),
        "unknown target `type`",
    );
    has_error(
        &inbound(&server_settings(r#", "publicKey": "x", "shortId": "ab""#)),
        &format!("{IN}.publicKey"),
        "uses `privateKey`",
    );
    has_error(
        &inbound(&server_settings(r#", "shortId": "ab""#)),
        &format!("{IN}.shortId"),
        "uses `shortIds`",
    );
    has_error(
        &inbound(&server_settings(&format!(
            r#", "mldsa65Seed": "{}""#,
            KEY.replace('A', "B")
        ))),
        &format!("{IN}.mldsa65Seed"),
        "not supported",
    );
    has_error(
        &inbound(&server_settings(&format!(r#", "mldsa65Seed": "{KEY}""#))),
        &format!("{IN}.mldsa65Seed"),
        "must not be the same",
    );
    has_error(
        &inbound(&server_settings(
            r#", "limitFallbackUpload": {"afterBytes": 1024, "bytesPerSec": 10}"#,
        )),
        &format!("{IN}.limitFallbackUpload.bytesPerSec"),
        "not supported",
    );
}

#[test]
fn inbound_warnings() {
    // A zero limit is no limit: accepted. masterKeyLog is ignored with a warning.
    warned(
        &inbound(&server_settings(
            r#", "limitFallbackDownload": {"afterBytes": 0}, "masterKeyLog": "/tmp/k""#,
        )),
        &format!("{IN}.masterKeyLog"),
        "ignored",
    );
    warned(
        &inbound(&server_settings("").replace(r#"["example.com"]"#, r#"["www.apple.com"]"#)),
        &format!("{IN}.serverNames"),
        "blocked",
    );
    warned(
        &inbound(&server_settings(r#", "unheard": 1"#)),
        &format!("{IN}.unheard"),
        "unknown key",
    );
}

#[test]
fn a_full_outbound_builds() {
    let plan = ok(&outbound(&format!(
        r#"{{"serverName": "example.com", "publicKey": "{KEY}", "shortId": "0123",
            "fingerprint": "Firefox", "spiderX": "/x?p=10-20&c=2&q=1"}}"#
    )));
    let StreamSecurity::Reality(r) = &plan.outbounds[0].stream.security else {
        panic!("not reality");
    };
    assert!(r.server.is_none());
    let c = r.client.as_ref().unwrap();
    assert_eq!(c.server_name.as_deref(), Some("example.com"));
    assert_eq!(c.public_key, key_bytes());
    assert_eq!(c.short_id, [0x01, 0x23, 0, 0, 0, 0, 0, 0]);
    assert_eq!(c.fingerprint, "firefox");
    assert_eq!(c.spider_x, "/x?q=1");
    assert_eq!(c.spider_y, [10, 20, 2, 2, 0, 0, 0, 0, 0, 0]);
    assert!(c.mldsa65_verify.is_none());

    // Defaults: chrome, "/", the empty short id; `password` is `publicKey`'s alias.
    let plan = ok(&outbound(&format!(r#"{{"password": "{KEY}"}}"#)));
    let StreamSecurity::Reality(r) = &plan.outbounds[0].stream.security else {
        panic!()
    };
    let c = r.client.as_ref().unwrap();
    assert_eq!(
        (c.fingerprint.as_str(), c.spider_x.as_str()),
        ("chrome", "/")
    );
    assert_eq!((c.short_id, c.server_name.clone()), ([0; 8], None));
}

#[test]
fn outbound_errors_name_the_key() {
    has_error(
        &outbound(r#"{"serverName": "a"}"#),
        &format!("{OUT}.publicKey"),
        "needs `publicKey`",
    );
    has_error(
        &outbound(&format!(r#"{{"password": "{SHORT_KEY}"}}"#)),
        &format!("{OUT}.password"),
        "must be 32 bytes",
    );
    has_error(
        &outbound(&format!(r#"{{"publicKey": "{KEY}", "shortId": "abc"}}"#)),
        &format!("{OUT}.shortId"),
        "in pairs",
    );
    has_error(
        &outbound(&format!(
            r#"{{"publicKey": "{KEY}", "fingerprint": "unsafe"}}"#
        )),
        &format!("{OUT}.fingerprint"),
        "refused",
    );
    has_error(
        &outbound(&format!(
            r#"{{"publicKey": "{KEY}", "fingerprint": "netscape"}}"#
        )),
        &format!("{OUT}.fingerprint"),
        "unknown fingerprint",
    );
    has_error(
        &outbound(&format!(r#"{{"publicKey": "{KEY}", "spiderX": "x"}}"#)),
        &format!("{OUT}.spiderX"),
        "must start with",
    );
    has_error(
        &outbound(&format!(
            r#"{{"publicKey": "{KEY}", "serverNames": ["a"]}}"#
        )),
        &format!("{OUT}.serverNames"),
        "uses `serverName`",
    );
    has_error(
        &outbound(&format!(r#"{{"publicKey": "{KEY}", "target": "a:1"}}"#)),
        &format!("{OUT}.target"),
        "no meaning on an outbound",
    );
    has_error(
        &outbound(&format!(
            r#"{{"publicKey": "{KEY}", "mldsa65Verify": "AAAA"}}"#
        )),
        &format!("{OUT}.mldsa65Verify"),
        "1952 bytes",
    );
}

#[test]
fn errors_carry_file_and_line() {
    let text = inbound(&server_settings("").replace(KEY, SHORT_KEY));
    let diags = load(&text).expect_err("a short key is an error");
    let d = diags
        .iter()
        .find(|d| d.severity == Severity::Error && d.path.ends_with("privateKey"))
        .expect("privateKey error");
    assert_eq!(d.file, "t.json");
    let line = text
        .lines()
        .position(|l| l.contains(SHORT_KEY))
        .expect("key line")
        + 1;
    assert_eq!(d.line, line, "{d:?}");
}

proptest! {
    /// Any string as a short id either decodes to what its hex says (zero-padded) or is an
    /// error at its exact path; never a panic.
    #[test]
    fn short_ids_decode_or_fail_at_their_path(id in "[0-9a-fA-Fxz]{0,18}") {
        let text = inbound(&server_settings("").replace("0123456789abcdef", &id));
        let valid = id.len() <= 16 && id.len() % 2 == 0 && id.bytes().all(|b| b.is_ascii_hexdigit());
        match load(&text) {
            Ok((plan, _)) => {
                prop_assert!(valid, "{id} accepted");
                let StreamSecurity::Reality(r) = &plan.inbounds[0].stream.security else {
                    panic!()
                };
                let got = r.server.as_ref().unwrap().short_ids[1];
                let mut expected = [0u8; 8];
                for (i, b) in expected.iter_mut().enumerate().take(id.len() / 2) {
                    *b = u8::from_str_radix(&id[2 * i..2 * i + 2], 16).unwrap();
                }
                prop_assert_eq!(got, expected);
            }
            Err(diags) => {
                prop_assert!(!valid, "{id} refused: {diags:?}");
                let path = format!("{IN}.shortIds[1]");
                prop_assert!(diags.iter().any(|d| d.path == path), "{diags:?}");
            }
        }
    }

    /// Any string as a key is accepted only when it is 32 bytes of unpadded URL-safe base64.
    #[test]
    fn keys_are_32_bytes_of_raw_url_base64(key in "[A-Za-z0-9_+/=-]{0,46}") {
        let text = outbound(&format!(r#"{{"publicKey": "{key}"}}"#));
        let accepted = load(&text).is_ok();
        let expected = key.len() == 43 && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        prop_assert_eq!(accepted, expected, "{}", key);
    }
}
