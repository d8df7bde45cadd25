//! `network: "kcp"` / `"mkcp"` with `kcpSettings`: V2Ray's defaults, every key, and errors
//! with their JSON paths.

use crate::{Diagnostic, Plan, Severity, Source, StreamNetwork, StreamSecurity, load_sources};
use skiff_kcp::mkcp::{HeaderKind, MkcpConfig};

fn load(text: &str) -> Result<(Plan, Vec<Diagnostic>), Vec<Diagnostic>> {
    load_sources(&[Source {
        name: "t.json".into(),
        text: text.into(),
    }])
    .map(|l| (l.plan, l.warnings))
}

const UUID: &str = "b831381d-6324-4d53-ad4f-8cda48b30811";

fn inbound(stream: &str) -> String {
    format!(
        r#"{{"inbounds": [{{"port": 29901, "protocol": "vless",
            "settings": {{"clients": [{{"id": "{UUID}"}}], "decryption": "none"}},
            "streamSettings": {stream}}}]}}"#
    )
}

fn mkcp_of(plan: &Plan) -> MkcpConfig {
    match &plan.inbounds[0].stream.network {
        StreamNetwork::Mkcp(k) => k.clone(),
        other => panic!("not mKCP: {other:?}"),
    }
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
fn defaults_are_v2rays() {
    for network in ["kcp", "mkcp", "KCP"] {
        let (plan, warnings) = load(&inbound(&format!(r#"{{"network": "{network}"}}"#))).unwrap();
        assert!(warnings.is_empty(), "{warnings:#?}");
        assert_eq!(mkcp_of(&plan), MkcpConfig::default());
        assert!(plan.inbounds[0].stream.network.is_udp());
    }
}

#[test]
fn every_key() {
    let (plan, warnings) = load(&inbound(
        r#"{"network": "kcp", "security": "none", "kcpSettings": {"mtu": 1200, "tti": 20,
            "uplinkCapacity": 10, "downlinkCapacity": 40, "congestion": true,
            "readBufferSize": 4, "writeBufferSize": 0, "header": {"type": "wechat-video"},
            "seed": "s33d"}}"#,
    ))
    .unwrap();
    assert!(warnings.is_empty(), "{warnings:#?}");
    let k = mkcp_of(&plan);
    assert_eq!(
        (
            k.mtu,
            k.tti,
            k.uplink_capacity,
            k.downlink_capacity,
            k.congestion
        ),
        (1200, 20, 10, 40, true)
    );
    assert_eq!((k.read_buffer, k.write_buffer), (4 << 20, 512 * 1024));
    assert_eq!(k.header, HeaderKind::WechatVideo);
    assert_eq!(k.seed.as_deref(), Some("s33d"));
    assert!(
        !format!("{k:?}").contains("s33d"),
        "the seed is never printed"
    );
}

#[test]
fn tls_over_mkcp() {
    let config = r#"{"outbounds": [{"protocol": "vless", "settings": {"vnext": [{"address":
        "example.com", "port": 443, "users": [{"id": "ID", "encryption": "none"}]}]},
        "streamSettings": {"network": "kcp", "security": "tls",
        "kcpSettings": {"header": {"type": "dtls"}}}}]}"#
        .replace("ID", UUID);
    let (plan, _) = load(&config).unwrap();
    let stream = &plan.outbounds[0].stream;
    assert!(matches!(stream.network, StreamNetwork::Mkcp(ref k) if k.header == HeaderKind::Dtls));
    assert!(matches!(stream.security, StreamSecurity::Tls(_)));
}

#[test]
fn errors_name_the_key() {
    let path = "inbounds[0].streamSettings.kcpSettings";
    has_error(
        &inbound(r#"{"network": "kcp", "kcpSettings": {"mtu": 2000}}"#),
        &format!("{path}.mtu"),
        "576–1460",
    );
    has_error(
        &inbound(r#"{"network": "kcp", "kcpSettings": {"tti": 5}}"#),
        &format!("{path}.tti"),
        "10–100",
    );
    has_error(
        &inbound(r#"{"network": "kcp", "kcpSettings": {"header": {"type": "http"}}}"#),
        &format!("{path}.header.type"),
        "unknown mKCP header type `http`",
    );
    has_error(
        &inbound(r#"{"network": "kcp", "kcpSettings": {"seed": 5}}"#),
        &format!("{path}.seed"),
        "expected a string",
    );
}

#[test]
fn unknown_keys_warn_with_their_path() {
    let (_, warnings) = load(&inbound(
        r#"{"network": "kcp", "kcpSettings": {"mtuu": 1}}"#,
    ))
    .unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w.path == "inbounds[0].streamSettings.kcpSettings.mtuu"),
        "{warnings:#?}"
    );
}

#[test]
fn an_inbound_with_its_own_udp_cannot_use_mkcp() {
    has_error(
        r#"{"inbounds": [{"port": 29902, "protocol": "dokodemo-door",
            "settings": {"address": "1.1.1.1", "port": 53, "network": "tcp,udp"},
            "streamSettings": {"network": "kcp"}}]}"#,
        "inbounds[0].streamSettings.network",
        "UDP port",
    );
}
