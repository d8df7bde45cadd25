//! udpspeeder settings: speederv2's defaults, every key, and path-precise errors.

use std::time::Duration;

use crate::{Diagnostic, InboundProtocol, OutboundProtocol, Plan, Severity, Source, load_sources};
use skiff_udpfec::FecMode;

fn load(text: &str) -> Result<(Plan, Vec<Diagnostic>), Vec<Diagnostic>> {
    load_sources(&[Source {
        name: "t.json".into(),
        text: text.into(),
    }])
    .map(|l| (l.plan, l.warnings))
}

fn inbound(settings: &str) -> String {
    format!(
        r#"{{"inbounds": [{{"port": 29900, "protocol": "udpspeeder", "settings": {settings}}}]}}"#
    )
}

fn outbound(settings: &str) -> String {
    format!(
        r#"{{"outbounds": [{{"tag": "u", "protocol": "udpspeeder", "settings": {settings}}}]}}"#
    )
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
fn inbound_defaults_are_speederv2s() {
    let (plan, _) = load(&inbound(r#"{"target": "127.0.0.1:51820"}"#)).unwrap();
    let InboundProtocol::Udpspeeder(u) = &plan.inbounds[0].protocol else {
        panic!("not udpspeeder")
    };
    assert_eq!(
        (u.target_host.as_str(), u.target_port),
        ("127.0.0.1", 51820)
    );
    let p = &u.tuning.params;
    assert_eq!(p.mode, FecMode::Blob);
    assert_eq!((p.max_data_shards(), p.redundancy_for(20)), (20, 10));
    assert_eq!(
        (p.mtu, p.queue_len, p.timeout),
        (1250, 200, Duration::from_millis(8))
    );
    assert!(!p.disable_fec);
    assert!(u.tuning.cook.key.is_empty());
    assert!(!u.tuning.cook.disable_obscure);
    assert_eq!(u.tuning.decode_buf, 2000);
}

#[test]
fn outbound_takes_every_key() {
    let (plan, _) = load(&outbound(
        r#"{"address": "s.example", "port": 4096, "fec": "1:3,2:4,10:6,20:10", "mode": 1,
            "timeout": 2, "mtu": 1200, "queueLen": 50, "key": "secret", "disableObscure": true,
            "disableChecksum": true, "disableFec": true, "decodeBuf": 500}"#,
    ))
    .unwrap();
    let OutboundProtocol::Udpspeeder(u) = &plan.outbounds[0].protocol else {
        panic!("not udpspeeder")
    };
    assert_eq!((u.address.as_str(), u.port), ("s.example", 4096));
    let p = &u.tuning.params;
    assert_eq!(p.mode, FecMode::PerPacket);
    assert_eq!(
        (
            p.redundancy_for(1),
            p.redundancy_for(10),
            p.redundancy_for(20)
        ),
        (3, 6, 10)
    );
    assert_eq!(
        (p.mtu, p.queue_len, p.timeout),
        (1200, 50, Duration::from_millis(2))
    );
    assert!(p.disable_fec);
    assert_eq!(u.tuning.cook.key, b"secret");
    assert!(u.tuning.cook.disable_obscure && u.tuning.cook.disable_checksum);
    assert_eq!(u.tuning.decode_buf, 500);
    // The key never reaches debug output.
    assert!(!format!("{:?}", u.tuning).contains("secret"));
}

#[test]
fn bad_values_name_their_path() {
    has_error(
        &inbound("{}"),
        "inbounds[0].settings.target",
        "missing `target`",
    );
    has_error(
        &inbound(r#"{"target": "nohost"}"#),
        "inbounds[0].settings.target",
        "host:port",
    );
    let with = |extra: &str| inbound(&format!(r#"{{"target": "127.0.0.1:1", {extra}}}"#));
    has_error(
        &with(r#""fec": "0:3""#),
        "inbounds[0].settings.fec",
        "x must be at least 1",
    );
    has_error(
        &with(r#""fec": "10:2,5:1""#),
        "inbounds[0].settings.fec",
        "ascend",
    );
    has_error(&with(r#""fec": "20""#), "inbounds[0].settings.fec", "x:y");
    has_error(&with(r#""mode": 2"#), "inbounds[0].settings.mode", "0–1");
    has_error(
        &with(r#""mtu": 50"#),
        "inbounds[0].settings.mtu",
        "100–2000",
    );
    has_error(
        &with(r#""timeout": 5000"#),
        "inbounds[0].settings.timeout",
        "0–1000",
    );
    has_error(
        &with(r#""queueLen": 0"#),
        "inbounds[0].settings.queueLen",
        "1–10000",
    );
    has_error(
        &with(r#""key": "two words""#),
        "inbounds[0].settings.key",
        "whitespace",
    );
    has_error(
        &outbound(r#"{"port": 1}"#),
        "outbounds[0].settings.address",
        "missing `address`",
    );
    has_error(
        &outbound(r#"{"address": "a"}"#),
        "outbounds[0].settings.port",
        "missing `port`",
    );
}

#[test]
fn stream_settings_and_chaining_are_refused() {
    has_error(
        r#"{"inbounds": [{"port": 1, "protocol": "udpspeeder", "settings": {"target": "127.0.0.1:2"},
            "streamSettings": {"network": "ws"}}]}"#,
        "inbounds[0].streamSettings",
        "streamSettings do not apply",
    );
    has_error(
        r#"{"outbounds": [{"tag": "u", "protocol": "udpspeeder", "settings": {"address": "a", "port": 1},
            "proxySettings": {"tag": "f"}}, {"tag": "f", "protocol": "freedom"}]}"#,
        "outbounds[0].proxySettings",
        "cannot be chained",
    );
}
