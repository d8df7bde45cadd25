//! udp2raw settings: udp2raw's defaults, every key, and path-precise errors.

use crate::plan_udp2raw::{AuthMode, CipherMode, RawMode};
use crate::{Diagnostic, InboundProtocol, OutboundProtocol, Plan, Severity, Source, load_sources};

fn load(text: &str) -> Result<(Plan, Vec<Diagnostic>), Vec<Diagnostic>> {
    load_sources(&[Source {
        name: "t.json".into(),
        text: text.into(),
    }])
    .map(|l| (l.plan, l.warnings))
}

fn inbound(settings: &str) -> String {
    format!(r#"{{"inbounds": [{{"port": 4096, "protocol": "udp2raw", "settings": {settings}}}]}}"#)
}

fn outbound(settings: &str) -> String {
    format!(r#"{{"outbounds": [{{"tag": "u", "protocol": "udp2raw", "settings": {settings}}}]}}"#)
}

fn has_error(text: &str, path: &str, needle: &str) {
    let diags = match load(text) {
        Ok(_) => panic!("expected errors for {text}"),
        Err(diags) => diags,
    };
    assert!(
        diags
            .iter()
            .any(|d| d.severity == Severity::Error && d.path == path && d.message.contains(needle)),
        "no error at `{path}` containing `{needle}` in {diags:#?}"
    );
}

#[test]
fn defaults_are_udp2raws() {
    let (plan, _) = load(&inbound(r#"{"target": "127.0.0.1:7000"}"#)).unwrap();
    let InboundProtocol::Udp2raw(u) = &plan.inbounds[0].protocol else {
        panic!("not udp2raw");
    };
    assert_eq!((u.target_host.as_str(), u.target_port), ("127.0.0.1", 7000));
    let t = &u.tuning;
    assert_eq!(t.key, b"secret key");
    assert_eq!(
        (
            t.raw_mode,
            t.cipher,
            t.auth,
            t.seq_mode,
            t.fix_gro,
            t.auto_rule
        ),
        (
            RawMode::FakeTcp,
            CipherMode::Aes128Cbc,
            AuthMode::Md5,
            3,
            false,
            false
        )
    );
}

#[test]
fn every_key() {
    let (plan, _) = load(&outbound(
        r#"{"address": "10.0.0.1", "port": 4096, "key": "k", "rawMode": "icmp",
            "cipherMode": "xor", "authMode": "hmac_sha1", "seqMode": 0, "fixGro": true,
            "autoRule": true}"#,
    ))
    .unwrap();
    let OutboundProtocol::Udp2raw(u) = &plan.outbounds[0].protocol else {
        panic!("not udp2raw");
    };
    assert_eq!((u.address.as_str(), u.port), ("10.0.0.1", 4096));
    let t = &u.tuning;
    assert_eq!(t.key, b"k");
    assert_eq!(
        (
            t.raw_mode,
            t.cipher,
            t.auth,
            t.seq_mode,
            t.fix_gro,
            t.auto_rule
        ),
        (
            RawMode::Icmp,
            CipherMode::Xor,
            AuthMode::HmacSha1,
            0,
            true,
            true
        )
    );
    assert!(!format!("{t:?}").contains("\"k\""), "Debug hides the key");
}

#[test]
fn ipv6_addresses_flow_through() {
    for address in ["fd00::1", "[fd00::1]"] {
        let (plan, _) = load(&outbound(&format!(
            r#"{{"address": "{address}", "port": 4096}}"#
        )))
        .unwrap();
        let OutboundProtocol::Udp2raw(u) = &plan.outbounds[0].protocol else {
            panic!("not udp2raw");
        };
        assert_eq!((u.address.as_str(), u.port), ("fd00::1", 4096), "{address}");
        let summary = plan.to_string();
        assert!(summary.contains("udp2raw to [fd00::1]:4096"), "{summary}");
    }
    let (plan, _) = load(
        r#"{"inbounds": [{"listen": "::1", "port": 4096, "protocol": "udp2raw",
            "settings": {"target": "[::1]:7000"}}]}"#,
    )
    .unwrap();
    let InboundProtocol::Udp2raw(u) = &plan.inbounds[0].protocol else {
        panic!("not udp2raw");
    };
    assert_eq!((u.target_host.as_str(), u.target_port), ("::1", 7000));
    assert_eq!(plan.inbounds[0].listen.to_string(), "::1");
    let summary = plan.to_string();
    assert!(summary.contains("to [::1]:7000"), "{summary}");
}

#[test]
fn errors_name_their_path() {
    has_error(
        &inbound("{}"),
        "inbounds[0].settings.target",
        "missing `target`",
    );
    has_error(
        &inbound(r#"{"target": "nope"}"#),
        "inbounds[0].settings.target",
        "host:port",
    );
    has_error(
        &inbound(r#"{"target": "127.0.0.1:1", "rawMode": "tcp"}"#),
        "inbounds[0].settings.rawMode",
        "faketcp",
    );
    has_error(
        &inbound(r#"{"target": "127.0.0.1:1", "cipherMode": "aes256"}"#),
        "inbounds[0].settings.cipherMode",
        "aes128cbc",
    );
    has_error(
        &inbound(r#"{"target": "127.0.0.1:1", "authMode": "sha256"}"#),
        "inbounds[0].settings.authMode",
        "hmac_sha1",
    );
    has_error(
        &inbound(r#"{"target": "127.0.0.1:1", "seqMode": 5}"#),
        "inbounds[0].settings.seqMode",
        "0–4",
    );
    has_error(
        &inbound(r#"{"target": "127.0.0.1:1", "key": "two words"}"#),
        "inbounds[0].settings.key",
        "whitespace",
    );
    has_error(
        &outbound(r#"{"address": "example.com", "port": 1}"#),
        "outbounds[0].settings.address",
        "IPv4 or IPv6",
    );
    has_error(
        &outbound(r#"{"address": "10.0.0.1"}"#),
        "outbounds[0].settings.port",
        "port",
    );
}

/// `streamSettings.udp2rawSettings`: the udp2raw layer under a UDP transport.
mod layer {
    use super::*;

    fn vless_out(stream: &str) -> String {
        format!(
            r#"{{"outbounds": [{{"protocol": "vless", "settings": {{"address": "10.0.0.1", "port": 1,
                "id": "27848739-7e62-4138-9fd3-098a63964b6b", "encryption": "none"}}, "streamSettings": {stream}}}]}}"#
        )
    }

    fn vless_in(stream: &str) -> String {
        format!(
            r#"{{"inbounds": [{{"port": 4096, "protocol": "vless", "settings": {{"clients":
                [{{"id": "27848739-7e62-4138-9fd3-098a63964b6b"}}], "decryption": "none"}},
                "streamSettings": {stream}}}]}}"#
        )
    }

    #[test]
    fn same_keys_and_defaults_as_the_protocol() {
        for network in ["kcp", "mkcp", "kcptun"] {
            let (plan, _) = load(&vless_out(&format!(
                r#"{{"network": "{network}", "udp2rawSettings": {{}}}}"#
            )))
            .unwrap();
            let t = plan.outbounds[0].stream.udp2raw.as_ref().expect(network);
            assert_eq!(t.key, b"secret key");
            assert_eq!(
                (
                    t.raw_mode,
                    t.cipher,
                    t.auth,
                    t.seq_mode,
                    t.fix_gro,
                    t.auto_rule
                ),
                (
                    RawMode::FakeTcp,
                    CipherMode::Aes128Cbc,
                    AuthMode::Md5,
                    3,
                    false,
                    false
                )
            );
        }
        let (plan, _) = load(&vless_in(
            r#"{"network": "kcptun", "udp2rawSettings": {"key": "k1", "rawMode": "icmp",
                "cipherMode": "xor", "authMode": "crc32", "seqMode": 1, "fixGro": true,
                "autoRule": true}}"#,
        ))
        .unwrap();
        let t = plan.inbounds[0].stream.udp2raw.as_ref().unwrap();
        assert_eq!(t.key, b"k1");
        assert_eq!(
            (
                t.raw_mode,
                t.cipher,
                t.auth,
                t.seq_mode,
                t.fix_gro,
                t.auto_rule
            ),
            (
                RawMode::Icmp,
                CipherMode::Xor,
                AuthMode::Crc32,
                1,
                true,
                true
            )
        );
        let (plan, _) = load(&vless_out(r#"{"network": "kcp"}"#)).unwrap();
        assert!(plan.outbounds[0].stream.udp2raw.is_none());
    }

    #[test]
    fn udpspeeder_takes_it_alone() {
        let (plan, _) = load(
            r#"{"inbounds": [{"port": 1, "protocol": "udpspeeder", "settings": {"target": "127.0.0.1:2"},
                "streamSettings": {"udp2rawSettings": {"rawMode": "udp"}}}],
                "outbounds": [{"tag": "u", "protocol": "udpspeeder", "settings": {"address": "a", "port": 1},
                "streamSettings": {"udp2rawSettings": {"key": "x"}}}]}"#,
        )
        .unwrap();
        assert_eq!(
            plan.inbounds[0].stream.udp2raw.as_ref().unwrap().raw_mode,
            RawMode::Udp
        );
        assert_eq!(plan.outbounds[0].stream.udp2raw.as_ref().unwrap().key, b"x");
        has_error(
            r#"{"outbounds": [{"tag": "u", "protocol": "udpspeeder", "settings": {"address": "a", "port": 1},
                "streamSettings": {"network": "kcp", "udp2rawSettings": {}}}]}"#,
            "outbounds[0].streamSettings",
            "except udp2rawSettings",
        );
    }

    #[test]
    fn kcptun_protocol_takes_it_alone() {
        let (plan, _) = load(
            r#"{"inbounds": [{"port": 1, "protocol": "kcptun", "settings": {"target": "127.0.0.1:2"},
                "streamSettings": {"udp2rawSettings": {"rawMode": "icmp"}}}],
                "outbounds": [{"tag": "k", "protocol": "kcptun", "settings": {"address": "10.0.0.1", "port": 1},
                "streamSettings": {"udp2rawSettings": {"key": "y"}}}]}"#,
        )
        .unwrap();
        assert_eq!(
            plan.inbounds[0].stream.udp2raw.as_ref().unwrap().raw_mode,
            RawMode::Icmp
        );
        assert_eq!(plan.outbounds[0].stream.udp2raw.as_ref().unwrap().key, b"y");
        has_error(
            r#"{"inbounds": [{"port": 1, "protocol": "kcptun", "settings": {"target": "127.0.0.1:2"},
                "streamSettings": {"network": "kcp", "udp2rawSettings": {}}}]}"#,
            "inbounds[0].streamSettings",
            "except udp2rawSettings",
        );
    }

    #[test]
    fn bad_uses_name_their_path() {
        has_error(
            &vless_out(r#"{"network": "ws", "udp2rawSettings": {}}"#),
            "outbounds[0].streamSettings.udp2rawSettings",
            "not network `ws`",
        );
        has_error(
            &vless_in(r#"{"network": "tcp", "udp2rawSettings": {}}"#),
            "inbounds[0].streamSettings.udp2rawSettings",
            "not network `tcp`",
        );
        // Said once, not again as a missing `network`.
        let diags = load(&vless_in(r#"{"network": "tcp", "udp2rawSettings": {}}"#)).unwrap_err();
        assert_eq!(diags.len(), 1, "{diags:#?}");
        has_error(
            &vless_out(r#"{"udp2rawSettings": {}}"#),
            "outbounds[0].streamSettings.udp2rawSettings",
            "set `network`",
        );
        has_error(
            &vless_out(r#"{"network": "kcp", "udp2rawSettings": {"rawMode": "tcp"}}"#),
            "outbounds[0].streamSettings.udp2rawSettings.rawMode",
            "faketcp",
        );
        has_error(
            &vless_out(r#"{"network": "kcptun", "udp2rawSettings": {"seqMode": 9}}"#),
            "outbounds[0].streamSettings.udp2rawSettings.seqMode",
            "0–4",
        );
        has_error(
            &vless_in(r#"{"network": "kcp", "udp2rawSettings": {"target": "127.0.0.1:1"}}"#),
            "inbounds[0].streamSettings.udp2rawSettings.target",
            "outbound's server",
        );
        has_error(
            &vless_out(r#"{"network": "kcp", "udp2rawSettings": {"port": 1}}"#),
            "outbounds[0].streamSettings.udp2rawSettings.port",
            "outbound's server",
        );
        has_error(
            &vless_out(r#"{"network": "kcp", "udp2rawSettings": "faketcp"}"#),
            "outbounds[0].streamSettings.udp2rawSettings",
            "expected",
        );
        has_error(
            &outbound(r#"{"address": "10.0.0.1", "port": 1}"#).replace(
                r#""protocol": "udp2raw","#,
                r#""protocol": "udp2raw", "streamSettings": {"network": "kcp", "udp2rawSettings": {}},"#,
            ),
            "outbounds[0].streamSettings",
            "do not apply",
        );
        has_error(
            r#"{"outbounds": [{"tag": "a", "protocol": "vless", "settings": {"address": "10.0.0.1", "port": 1,
                "id": "27848739-7e62-4138-9fd3-098a63964b6b"}, "proxySettings": {"tag": "b"},
                "streamSettings": {"network": "kcp", "udp2rawSettings": {}}},
                {"tag": "b", "protocol": "freedom"}]}"#,
            "outbounds[0].proxySettings",
            "raw packets",
        );
    }
}
