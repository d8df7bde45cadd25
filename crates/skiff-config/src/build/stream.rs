//! `streamSettings`: raw TCP or WebSocket, with or without TLS. Everything else Xray knows is
//! an error naming the feature, so a config is never run with weaker transport or security
//! than it asks for.

use serde_json::{Map, Value};

use super::{error_count, lower, tls};
use crate::decode::decode;
use crate::diag::Diagnostic;
use crate::plan::{StreamNetwork, StreamPlan, StreamSecurity, WsPlan};
use crate::raw::bounds::{RawStream, RawTcpSettings, RawTlsSettings, RawWsSettings};
use crate::source::Loc;

const UNSUPPORTED_NETWORKS: &[&str] = &[
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

const UNSUPPORTED_SECURITY: &[&str] = &["reality", "xtls"];

/// Which side of the proxy a stream belongs to: a TLS inbound needs certificates, an
/// outbound must not have any (client certificates are not supported yet).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Inbound,
    Outbound,
}

pub fn build_stream(
    raw: Option<&RawStream>,
    loc: &Loc,
    side: Side,
    diags: &mut Vec<Diagnostic>,
) -> StreamPlan {
    let Some(raw) = raw else {
        return StreamPlan::default();
    };
    let network = match lower(raw.network.as_deref()).as_deref() {
        None | Some("tcp" | "raw") => StreamNetwork::Tcp,
        Some("ws" | "websocket") => {
            let wloc = loc.key("wsSettings");
            let empty = Value::Object(Map::new());
            let value = raw
                .ws_settings
                .as_ref()
                .filter(|v| !v.is_null())
                .unwrap_or(&empty);
            decode::<RawWsSettings>(value, &wloc, diags)
                .and_then(|ws| ws_plan(ws, &wloc, side, diags))
                .map_or(StreamNetwork::Tcp, StreamNetwork::Ws)
        }
        Some(n) if UNSUPPORTED_NETWORKS.contains(&n) => {
            diags.push(loc.key("network").error(format!(
                "transport `{n}` is not supported by this version of skiff yet (only raw TCP and WebSocket)"
            )));
            StreamNetwork::Tcp
        }
        Some(n) => {
            diags.push(loc.key("network").error(format!("unknown transport `{n}`")));
            StreamNetwork::Tcp
        }
    };
    let tls_given = raw
        .tls_settings
        .as_ref()
        .is_some_and(|v| !v.is_null() && v.as_object().is_none_or(|o| !o.is_empty()));
    let security = match lower(raw.security.as_deref()).as_deref() {
        None | Some("none") => {
            if tls_given {
                diags.push(loc.key("tlsSettings").warning(
                    "tlsSettings is ignored because `security` is not \"tls\" (as in Xray)",
                ));
            }
            StreamSecurity::None
        }
        Some("tls") => {
            let tloc = loc.key("tlsSettings");
            let empty = Value::Object(Map::new());
            let value = raw
                .tls_settings
                .as_ref()
                .filter(|v| !v.is_null())
                .unwrap_or(&empty);
            decode::<RawTlsSettings>(value, &tloc, diags)
                .and_then(|tls| tls::tls_plan(tls, &tloc, side, diags))
                .map_or(StreamSecurity::None, StreamSecurity::Tls)
        }
        Some(s) if UNSUPPORTED_SECURITY.contains(&s) => {
            diags.push(loc.key("security").error(format!(
                "security `{s}` is not supported by this version of skiff yet (only none and tls)"
            )));
            StreamSecurity::None
        }
        Some(s) => {
            diags.push(loc.key("security").error(format!("unknown security `{s}`")));
            StreamSecurity::None
        }
    };
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
    StreamPlan {
        network,
        security,
        _reserved: (),
    }
}

fn ws_plan(
    ws: RawWsSettings,
    loc: &Loc,
    side: Side,
    diags: &mut Vec<Diagnostic>,
) -> Option<WsPlan> {
    let before = error_count(diags);
    let path = match ws.path.as_deref() {
        None | Some("") => "/".to_owned(),
        Some(p) if p.starts_with('/') => p.to_owned(),
        Some(p) => {
            diags.push(
                loc.key("path")
                    .error(format!("WebSocket path `{p}` must start with \"/\"")),
            );
            String::new()
        }
    };
    let mut host = ws
        .host
        .filter(|h| !h.trim().is_empty())
        .map(|h| h.trim().to_owned());
    let mut headers = Vec::new();
    for (name, value) in ws.headers.iter().flatten() {
        let Some(value) = value.as_str() else {
            diags.push(loc.key("headers").key(name).error(format!(
                "invalid type: {}, expected a string",
                crate::raw::kind(value)
            )));
            continue;
        };
        if name.eq_ignore_ascii_case("host") {
            // Xray: `host` wins over a Host header.
            if host.is_none() && !value.trim().is_empty() {
                host = Some(value.trim().to_owned());
            }
            continue;
        }
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic() && b != b':') {
            diags.push(
                loc.key("headers")
                    .key(name)
                    .error(format!("`{name}` is not a valid HTTP header name")),
            );
            continue;
        }
        headers.push((name.clone(), value.to_owned()));
    }
    let accept_proxy_protocol = ws.accept_proxy_protocol.unwrap_or(false);
    if accept_proxy_protocol && side == Side::Outbound {
        diags.push(
            loc.key("acceptProxyProtocol")
                .warning("acceptProxyProtocol only applies to inbounds and is ignored here"),
        );
    }
    if ws.heartbeat_period.is_some_and(|p| p != 0) {
        diags.push(loc.key("heartbeatPeriod").warning(
            "heartbeatPeriod is not supported by this version of skiff yet and is ignored",
        ));
    }
    (error_count(diags) == before).then_some(WsPlan {
        path,
        host,
        headers,
        accept_proxy_protocol,
    })
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
