//! kcptun settings: kcptun's defaults, every tuning key, and path-precise errors.

use crate::{Diagnostic, InboundProtocol, OutboundProtocol, Plan, Severity, Source, load_sources};
use skiff_kcp::Crypt;

fn load(text: &str) -> Result<(Plan, Vec<Diagnostic>), Vec<Diagnostic>> {
    load_sources(&[Source {
        name: "t.json".into(),
        text: text.into(),
    }])
    .map(|l| (l.plan, l.warnings))
}

fn inbound(settings: &str) -> String {
    format!(r#"{{"inbounds": [{{"port": 29900, "protocol": "kcptun", "settings": {settings}}}]}}"#)
}

fn outbound(settings: &str) -> String {
    format!(r#"{{"outbounds": [{{"tag": "k", "protocol": "kcptun", "settings": {settings}}}]}}"#)
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
fn inbound_defaults_are_kcptun_servers() {
    let (plan, warnings) = load(&inbound(r#"{"target": "127.0.0.1:12948"}"#)).unwrap();
    assert!(warnings.is_empty(), "{warnings:#?}");
    let InboundProtocol::Kcptun(k) = &plan.inbounds[0].protocol else {
        panic!("not kcptun")
    };
    assert_eq!(
        (k.target_host.as_str(), k.target_port),
        ("127.0.0.1", 12948)
    );
    let t = &k.tuning;
    assert_eq!(t.kcp.crypt, Crypt::Aes);
    assert_eq!(t.kcp.key, "it's a secrect");
    assert_eq!((t.kcp.snd_wnd, t.kcp.rcv_wnd), (2048, 2048));
    assert_eq!(
        (t.kcp.data_shards, t.kcp.parity_shards, t.kcp.mtu),
        (10, 3, 1350)
    );
    assert_eq!((t.kcp.interval_ms, t.kcp.nodelay), (30, false));
    assert!(t.compress);
    assert_eq!(
        (t.smux_version, t.smux_buf, t.stream_buf, t.keepalive_secs),
        (1, 4_194_304, 2_097_152, 10)
    );
    assert!(!format!("{t:?}").contains("secrect"));
}

#[test]
fn outbound_takes_every_key() {
    let (plan, warnings) = load(&outbound(
        r#"{"address": "127.0.0.1", "port": 29900, "conn": 2, "key": "k", "crypt": "salsa20",
            "mode": "manual", "nodelay": 1, "interval": 20, "resend": 2, "nc": 1, "mtu": 1200,
            "sndwnd": 256, "rcvwnd": 256, "datashard": 0, "parityshard": 0, "dscp": 46,
            "nocomp": true, "acknodelay": true, "smuxver": 2, "smuxbuf": 1048576,
            "streambuf": 524288, "keepalive": 5, "sockbuf": 0}"#,
    ))
    .unwrap();
    assert!(warnings.is_empty(), "{warnings:#?}");
    let OutboundProtocol::Kcptun(k) = &plan.outbounds[0].protocol else {
        panic!("not kcptun")
    };
    assert_eq!(
        (k.address.as_str(), k.port, k.conn),
        ("127.0.0.1", 29900, 2)
    );
    let t = &k.tuning;
    assert_eq!(t.kcp.crypt, Crypt::Salsa20);
    assert!(t.kcp.nodelay && t.kcp.no_congestion && t.kcp.ack_nodelay && !t.compress);
    assert_eq!((t.kcp.interval_ms, t.kcp.resend, t.kcp.mtu), (20, 2, 1200));
    assert_eq!(
        (t.kcp.snd_wnd, t.kcp.data_shards, t.dscp, t.smux_version),
        (256, 0, 46, 2)
    );
    assert_eq!(
        (t.smux_buf, t.stream_buf, t.keepalive_secs, t.sockbuf),
        (1_048_576, 524_288, 5, 0)
    );
}

#[test]
fn outbound_defaults_are_kcptun_clients() {
    let (plan, _) = load(&outbound(r#"{"address": "example.com", "port": 1}"#)).unwrap();
    let OutboundProtocol::Kcptun(k) = &plan.outbounds[0].protocol else {
        panic!("not kcptun")
    };
    assert_eq!(
        (k.tuning.kcp.snd_wnd, k.tuning.kcp.rcv_wnd, k.conn),
        (2048, 2048, 1)
    );
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
    has_error(
        &inbound(r#"{"target": "a:1", "crypt": "rot13"}"#),
        "inbounds[0].settings.crypt",
        "unknown crypt",
    );
    has_error(
        &inbound(r#"{"target": "a:1", "mode": "turbo"}"#),
        "inbounds[0].settings.mode",
        "turbo",
    );
    has_error(
        &inbound(r#"{"target": "a:1", "smuxver": 3}"#),
        "inbounds[0].settings.smuxver",
        "out of range",
    );
    has_error(
        &inbound(r#"{"target": "a:1", "mtu": 9000}"#),
        "inbounds[0].settings.mtu",
        "out of range",
    );
    has_error(
        &inbound(r#"{"target": "a:1", "sndwnd": "x"}"#),
        "inbounds[0].settings.sndwnd",
        "integer",
    );
    has_error(
        &outbound(r#"{"port": 1}"#),
        "outbounds[0].settings.address",
        "missing `address`",
    );
    has_error(
        &outbound(r#"{"address": "a", "port": 1, "conn": 0}"#),
        "outbounds[0].settings.conn",
        "out of range",
    );
    has_error(
        r#"{"outbounds": [{"protocol": "kcptun", "settings": {"address": "a", "port": 1}, "streamSettings": {"network": "ws"}}]}"#,
        "outbounds[0].streamSettings",
        "own transport",
    );
}

#[test]
fn unknown_keys_and_manual_only_keys_warn() {
    let (_, warnings) = load(&inbound(
        r#"{"target": "a:1", "sndwind": 5, "interval": 10}"#,
    ))
    .unwrap();
    assert!(
        warnings
            .iter()
            .any(|d| d.path == "inbounds[0].settings.sndwind"),
        "{warnings:#?}"
    );
    assert!(
        warnings
            .iter()
            .any(|d| d.path == "inbounds[0].settings.interval"),
        "{warnings:#?}"
    );
}

fn vless_over_kcptun(side: &str, settings: &str) -> String {
    let id = "b831381d-6324-4d53-ad4f-8cda48b30811";
    let stream =
        format!(r#""streamSettings": {{"network": "kcptun", "kcptunSettings": {settings}}}"#);
    match side {
        "in" => format!(
            r#"{{"inbounds": [{{"port": 29903, "protocol": "vless",
                "settings": {{"clients": [{{"id": "{id}"}}], "decryption": "none"}}, {stream}}}]}}"#
        ),
        _ => format!(
            r#"{{"outbounds": [{{"protocol": "vless", "settings": {{"vnext": [{{"address":
                "127.0.0.1", "port": 29903, "users": [{{"id": "{id}", "encryption": "none"}}]}}]}},
                {stream}}}]}}"#
        ),
    }
}

#[test]
fn kcptun_transport_network_takes_the_same_keys() {
    let (plan, warnings) = load(&vless_over_kcptun(
        "out",
        r#"{"key": "k", "crypt": "salsa20", "smuxver": 2, "nocomp": true, "conn": 3}"#,
    ))
    .unwrap();
    assert!(warnings.is_empty(), "{warnings:#?}");
    let crate::StreamNetwork::Kcptun(k) = &plan.outbounds[0].stream.network else {
        panic!("not the kcptun network")
    };
    assert_eq!(k.conn, 3);
    assert_eq!(k.tuning.kcp.crypt, Crypt::Salsa20);
    assert_eq!(k.tuning.kcp.key, "k");
    assert_eq!((k.tuning.smux_version, k.tuning.compress), (2, false));
    // Skiff's default windows (2048 both ways) on either side.
    assert_eq!((k.tuning.kcp.snd_wnd, k.tuning.kcp.rcv_wnd), (2048, 2048));
    let (plan, warnings) = load(&vless_over_kcptun("in", r#"{"conn": 2}"#)).unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w.path == "inbounds[0].streamSettings.kcptunSettings.conn"),
        "{warnings:#?}"
    );
    let crate::StreamNetwork::Kcptun(k) = &plan.inbounds[0].stream.network else {
        panic!("not the kcptun network")
    };
    assert_eq!((k.tuning.kcp.snd_wnd, k.tuning.kcp.rcv_wnd), (2048, 2048));
    assert!(plan.inbounds[0].stream.network.is_udp());
}

#[test]
fn kcptun_transport_network_errors_name_the_key() {
    has_error(
        &vless_over_kcptun("out", r#"{"crypt": "rot13"}"#),
        "outbounds[0].streamSettings.kcptunSettings.crypt",
        "unknown crypt",
    );
    has_error(
        &vless_over_kcptun("out", r#"{"conn": 0}"#),
        "outbounds[0].streamSettings.kcptunSettings.conn",
        "out of range",
    );
}
