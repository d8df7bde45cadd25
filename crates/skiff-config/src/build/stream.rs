//! `streamSettings`: only raw TCP without a security layer exists yet. Everything else Xray
//! knows is an error naming the feature, so a config is never run with weaker transport or
//! security than it asks for.

use serde_json::Value;

use super::lower;
use crate::diag::Diagnostic;
use crate::plan::StreamPlan;
use crate::raw::bounds::{RawStream, RawTcpSettings};
use crate::source::Loc;

const UNSUPPORTED_NETWORKS: &[&str] = &[
    "ws",
    "websocket",
    "kcp",
    "mkcp",
    "grpc",
    "gun",
    "httpupgrade",
    "xhttp",
    "splithttp",
    "h2",
    "http",
    "quic",
    "domainsocket",
    "hysteria",
];

const UNSUPPORTED_SECURITY: &[&str] = &["tls", "reality", "xtls"];

pub fn build_stream(raw: Option<&RawStream>, loc: &Loc, diags: &mut Vec<Diagnostic>) -> StreamPlan {
    let Some(raw) = raw else {
        return StreamPlan::default();
    };
    match lower(raw.network.as_deref()).as_deref() {
        None | Some("tcp" | "raw") => {}
        Some(n) if UNSUPPORTED_NETWORKS.contains(&n) => diags.push(loc.key("network").error(
            format!("transport `{n}` is not supported by this version of skiff yet (only raw TCP)"),
        )),
        Some(n) => diags.push(loc.key("network").error(format!("unknown transport `{n}`"))),
    }
    match lower(raw.security.as_deref()).as_deref() {
        None | Some("none") => {}
        Some(s) if UNSUPPORTED_SECURITY.contains(&s) => diags.push(loc.key("security").error(
            format!("security `{s}` is not supported by this version of skiff yet"),
        )),
        Some(s) => diags.push(loc.key("security").error(format!("unknown security `{s}`"))),
    }
    for (key, settings) in [
        ("rawSettings", &raw.raw_settings),
        ("tcpSettings", &raw.tcp_settings),
    ] {
        if let Some(settings) = settings {
            check_tcp_settings(settings, &loc.key(key), diags);
        }
    }
    if let Some(sockopt) = &raw.sockopt {
        let loc = loc.key("sockopt");
        for (key, value) in sockopt {
            check_sockopt(key, value, &loc.key(key), diags);
        }
    }
    StreamPlan::default()
}

fn check_tcp_settings(settings: &RawTcpSettings, loc: &Loc, diags: &mut Vec<Diagnostic>) {
    if let Some(header) = &settings.header {
        match lower(header.kind.as_deref()).as_deref() {
            None | Some("none") => {}
            Some("http") => diags.push(loc.key("header").key("type").error(
                "HTTP header obfuscation (`header.type: http`) is not supported by this version of skiff yet",
            )),
            Some(other) => diags.push(loc.key("header").key("type").error(format!("unknown header type `{other}`"))),
        }
    }
    if settings.accept_proxy_protocol == Some(true) {
        diags.push(
            loc.key("acceptProxyProtocol")
                .error("acceptProxyProtocol is not supported by this version of skiff yet"),
        );
    }
}

/// Socket options are not modelled yet. Those that change where or how traffic flows are
/// errors; the tuning ones are ignored with a warning (a config using them still works, just
/// with default socket settings). Options left at their "off" value are not mentioned.
fn check_sockopt(key: &str, value: &Value, loc: &Loc, diags: &mut Vec<Diagnostic>) {
    let off = match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty() || (key == "tproxy" && s.eq_ignore_ascii_case("off")),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    };
    if off {
        return;
    }
    match key {
        "dialerProxy" => diags.push(loc.error(
            "sockopt.dialerProxy is not supported by this version of skiff yet; use proxySettings.tag to chain outbounds",
        )),
        "tproxy" => diags.push(loc.error("sockopt.tproxy is not supported by this version of skiff yet")),
        _ => diags.push(loc.warning(format!(
            "sockopt.{key} is not supported by this version of skiff yet and is ignored"
        ))),
    }
}
