//! `streamSettings`: raw TCP, WebSocket or mKCP, with or without TLS. Everything else Xray
//! knows is an error naming the feature, so a config is never run with weaker transport or
//! security than it asks for.

use serde_json::{Map, Value};

use super::{error_count, lower, reality, tls};
use crate::decode::decode;
use crate::diag::Diagnostic;
use crate::plan::{
    HttpHeaderPlan, HttpRequestPlan, HttpResponsePlan, HttpUpgradePlan, StreamNetwork, StreamPlan,
    StreamSecurity, StreamWritten, WsPlan,
};
use crate::raw::bounds::{
    RawHeader, RawHttpRequest, RawHttpResponse, RawHttpUpgradeSettings, RawKcpSettings, RawStream,
    RawTcpSettings, RawTlsSettings, RawWsSettings,
};
use crate::raw::settings::KcptunStreamSettings;
use crate::raw::values::StringList;
use crate::raw::values::{Int, out_of_range};
use crate::source::Loc;
use skiff_kcp::mkcp::{HeaderKind, MkcpConfig};

const UNSUPPORTED_NETWORKS: &[&str] = &["h2", "http", "quic", "domainsocket", "hysteria"];

const UNSUPPORTED_SECURITY: &[&str] = &["xtls"];

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
    // Both are checked (Xray builds whichever is given); rawSettings wins, as in Xray.
    let mut http_header = None;
    for (key, settings) in [
        ("tcpSettings", &raw.tcp_settings),
        ("rawSettings", &raw.raw_settings),
    ] {
        if let Some(settings) = settings {
            http_header = check_tcp_settings(settings, &loc.key(key), diags);
        }
    }
    let network = match lower(raw.network.as_deref()).as_deref() {
        None | Some("tcp" | "raw") => {
            http_header.map_or(StreamNetwork::Tcp, StreamNetwork::HttpHeader)
        }
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
        Some("httpupgrade") => {
            let hloc = loc.key("httpupgradeSettings");
            let empty = Value::Object(Map::new());
            let value = raw
                .httpupgrade_settings
                .as_ref()
                .filter(|v| !v.is_null())
                .unwrap_or(&empty);
            decode::<RawHttpUpgradeSettings>(value, &hloc, diags)
                .and_then(|h| httpupgrade_plan(h, &hloc, side, diags))
                .map_or(StreamNetwork::Tcp, StreamNetwork::HttpUpgrade)
        }
        Some("grpc" | "gun") => {
            let gloc = loc.key("grpcSettings");
            let empty = Value::Object(Map::new());
            let value = raw
                .grpc_settings
                .as_ref()
                .filter(|v| !v.is_null())
                .unwrap_or(&empty);
            decode::<super::grpc::RawGrpcSettings>(value, &gloc, diags)
                .and_then(|g| super::grpc::grpc_plan(g, &gloc, diags))
                .map_or(StreamNetwork::Tcp, StreamNetwork::Grpc)
        }
        Some("xhttp" | "splithttp") => {
            // Xray reads `xhttpSettings`, or `splithttpSettings` when that is the one given.
            let (key, value) = match (&raw.xhttp_settings, &raw.splithttp_settings) {
                (None, Some(v)) => ("splithttpSettings", Some(v)),
                (v, _) => ("xhttpSettings", v.as_ref()),
            };
            let empty = Value::Object(Map::new());
            super::xhttp::xhttp_plan(value.unwrap_or(&empty), &loc.key(key), diags)
                .map_or(StreamNetwork::Tcp, StreamNetwork::Xhttp)
        }
        Some("kcp" | "mkcp") => {
            let kloc = loc.key("kcpSettings");
            let empty = Value::Object(Map::new());
            let value = raw
                .kcp_settings
                .as_ref()
                .filter(|v| !v.is_null())
                .unwrap_or(&empty);
            decode::<RawKcpSettings>(value, &kloc, diags)
                .and_then(|k| mkcp_plan(k, &kloc, diags))
                .map_or(StreamNetwork::Tcp, StreamNetwork::Mkcp)
        }
        Some("kcptun") => {
            let kloc = loc.key("kcptunSettings");
            let empty = Value::Object(Map::new());
            let value = raw
                .kcptun_settings
                .as_ref()
                .filter(|v| !v.is_null())
                .unwrap_or(&empty);
            decode::<KcptunStreamSettings>(value, &kloc, diags)
                .and_then(|k| {
                    super::protocols::kcptun::stream(k, side == Side::Outbound, &kloc, diags)
                })
                .map_or(StreamNetwork::Tcp, StreamNetwork::Kcptun)
        }
        Some(n) if UNSUPPORTED_NETWORKS.contains(&n) => {
            diags.push(loc.key("network").error(format!(
                "transport `{n}` is not supported by this version of skiff yet (only raw TCP, WebSocket, HTTPUpgrade, gRPC, XHTTP, mKCP and kcptun)"
            )));
            StreamNetwork::Tcp
        }
        Some(n) => {
            diags.push(loc.key("network").error(format!("unknown transport `{n}`")));
            StreamNetwork::Tcp
        }
    };
    let udp2raw = raw
        .udp2raw_settings
        .as_ref()
        .filter(|v| !v.is_null())
        .and_then(|value| {
            let uloc = loc.key("udp2rawSettings");
            let tuning = super::protocols::udp2raw::layer(value, &uloc, diags);
            match (&network, raw.network.as_deref()) {
                (StreamNetwork::Mkcp(_) | StreamNetwork::Kcptun(_), _) => tuning,
                // No `network`: the protocol decides (udpspeeder and kcptun take it; see
                // inbound/outbound).
                (StreamNetwork::Tcp, None) => tuning,
                (_, n) => {
                    diags.push(uloc.error(format!(
                        "udp2rawSettings goes under the \"kcp\" and \"kcptun\" networks (or a udpspeeder or kcptun inbound/outbound), not network `{}`",
                        n.unwrap_or("tcp")
                    )));
                    // Said once: the protocol's check below does not see it.
                    None
                }
            }
        });
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
        Some("reality") => {
            let rloc = loc.key("realitySettings");
            let empty = Value::Object(Map::new());
            let value = raw
                .reality_settings
                .as_ref()
                .filter(|v| !v.is_null())
                .unwrap_or(&empty);
            decode::<reality::RawRealitySettings>(value, &rloc, diags)
                .and_then(|r| reality::reality_plan(r, &rloc, side, diags))
                .map_or(StreamSecurity::None, |r| {
                    StreamSecurity::Reality(Box::new(r))
                })
        }
        Some(s) if UNSUPPORTED_SECURITY.contains(&s) => {
            diags.push(loc.key("security").error(format!(
                "security `{s}` is not supported by this version of skiff yet (only none, tls and reality)"
            )));
            StreamSecurity::None
        }
        Some(s) => {
            diags.push(loc.key("security").error(format!("unknown security `{s}`")));
            StreamSecurity::None
        }
    };
    let mut tcp_congestion = None;
    if let Some(sockopt) = &raw.sockopt {
        let loc = loc.key("sockopt");
        for (key, value) in sockopt {
            // Xray reads its config with Go's JSON, which matches keys regardless of case.
            if key.eq_ignore_ascii_case("tcpCongestion") {
                tcp_congestion = congestion_control(value, &loc.key(key), diags);
            } else {
                check_sockopt(key, value, &loc.key(key), diags);
            }
        }
    }
    let given = |v: &Option<Value>| v.as_ref().is_some_and(|v| !v.is_null());
    let raw_settings = raw.raw_settings.as_ref().or(raw.tcp_settings.as_ref());
    let transport_settings = match &network {
        StreamNetwork::Tcp | StreamNetwork::HttpHeader(_) => raw_settings.is_some(),
        StreamNetwork::Ws(_) => given(&raw.ws_settings),
        StreamNetwork::HttpUpgrade(_) => given(&raw.httpupgrade_settings),
        StreamNetwork::Grpc(_) => given(&raw.grpc_settings),
        StreamNetwork::Xhttp(_) => given(&raw.xhttp_settings) || given(&raw.splithttp_settings),
        StreamNetwork::Mkcp(_) => given(&raw.kcp_settings),
        StreamNetwork::Kcptun(_) => given(&raw.kcptun_settings),
    };
    StreamPlan {
        network,
        security,
        tcp_congestion,
        udp2raw,
        written: StreamWritten {
            stream_settings: true,
            transport_settings,
            raw_header: raw_settings.is_some_and(|s| s.header.is_some()),
        },
    }
}

/// `udp2rawSettings` where no `network` was named: only a udpspeeder or kcptun
/// inbound/outbound (each its own UDP transport) takes it there. The kcp/kcptun networks
/// were accepted, and the others refused, when the stream was parsed.
pub(super) fn check_udp2raw_layer(
    stream: &StreamPlan,
    own_udp_transport: bool,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) {
    if stream.network == StreamNetwork::Tcp && !own_udp_transport {
        diags.push(loc.key("udp2rawSettings").error(
            "udp2rawSettings goes under the \"kcp\" and \"kcptun\" networks (or a udpspeeder or kcptun inbound/outbound): set `network`",
        ));
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
    let headers = header_list(ws.headers.as_ref(), loc, diags, |value, _, _| {
        // Xray: `host` wins over a Host header.
        if host.is_none() && !value.trim().is_empty() {
            host = Some(value.trim().to_owned());
        }
    });
    let accept_proxy_protocol = ws.accept_proxy_protocol.unwrap_or(false);
    if accept_proxy_protocol && side == Side::Outbound {
        diags.push(
            loc.key("acceptProxyProtocol")
                .warning("acceptProxyProtocol only applies to inbounds and is ignored here"),
        );
    }
    if ws.heartbeat_period.is_some_and(|p| !p.is_zero()) {
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

/// The `headers` object of WebSocket or HTTPUpgrade settings: string values under valid
/// HTTP header names, without CR, LF or NUL (they would end the header early). A `Host`
/// entry goes to `on_host` with its value and location, each transport having its own rule.
pub(super) fn header_list(
    headers: Option<&Map<String, Value>>,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
    mut on_host: impl FnMut(&str, Loc, &mut Vec<Diagnostic>),
) -> Vec<(String, String)> {
    let mut list = Vec::new();
    for (name, value) in headers.into_iter().flatten() {
        let name_loc = loc.key("headers").key(name);
        let Some(value) = value.as_str() else {
            diags.push(name_loc.error(format!(
                "invalid type: {}, expected a string",
                crate::raw::kind(value)
            )));
            continue;
        };
        if name.eq_ignore_ascii_case("host") {
            on_host(value, name_loc, diags);
            continue;
        }
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic() && b != b':') {
            diags.push(name_loc.error(format!("`{name}` is not a valid HTTP header name")));
            continue;
        }
        if value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
            diags.push(name_loc.error("a header value must not contain CR, LF or NUL"));
            continue;
        }
        list.push((name.clone(), value.to_owned()));
    }
    list
}

/// `httpupgradeSettings`, as Xray reads them (infra/conf `HttpUpgradeConfig`): the path is
/// normalised rather than refused, and a `host` header is an error (`host` is its own key).
fn httpupgrade_plan(
    h: RawHttpUpgradeSettings,
    loc: &Loc,
    side: Side,
    diags: &mut Vec<Diagnostic>,
) -> Option<HttpUpgradePlan> {
    let before = error_count(diags);
    let path = match h.path.as_deref() {
        None | Some("") => "/".to_owned(),
        Some(p) if p.starts_with('/') => p.to_owned(),
        Some(p) => format!("/{p}"),
    };
    if path
        .bytes()
        .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
    {
        diags.push(loc.key("path").error(format!(
            "HTTPUpgrade path `{path}` must not contain spaces or control characters"
        )));
    }
    let host = h
        .host
        .filter(|h| !h.trim().is_empty())
        .map(|h| h.trim().to_owned());
    let headers = header_list(h.headers.as_ref(), loc, diags, |_, name_loc, diags| {
        diags.push(
            name_loc.error("\"headers\" can't contain \"host\" (use the `host` key, as in Xray)"),
        );
    });
    if h.accept_proxy_protocol == Some(true) {
        match side {
            Side::Outbound => diags.push(
                loc.key("acceptProxyProtocol")
                    .warning("acceptProxyProtocol only applies to inbounds and is ignored here"),
            ),
            Side::Inbound => diags.push(
                loc.key("acceptProxyProtocol")
                    .error("acceptProxyProtocol is not supported by this version of skiff yet"),
            ),
        }
    }
    (error_count(diags) == before).then_some(HttpUpgradePlan {
        path,
        host,
        headers,
    })
}

/// `kcpSettings`, checked as V2Ray 4.34 checks them (mtu 576–1460, tti 10–100; buffer sizes
/// in MB, 0 meaning 512 KiB). Capacities and buffers are bounded here so a typo cannot ask
/// for gigabytes per connection.
fn mkcp_plan(k: RawKcpSettings, loc: &Loc, diags: &mut Vec<Diagnostic>) -> Option<MkcpConfig> {
    let before = error_count(diags);
    let mut c = MkcpConfig::default();
    let mut int = |key: &str, value: Option<Int>, min: u32, max: u32, out: &mut u32| {
        let Some(v) = value else { return };
        match v.get::<u32>().filter(|v| (min..=max).contains(v)) {
            Some(v) => *out = v,
            None => diags.push(
                loc.key(key)
                    .error(out_of_range(v, &format!("an integer {min}–{max}"))),
            ),
        }
    };
    int("mtu", k.mtu, 576, 1460, &mut c.mtu);
    int("tti", k.tti, 10, 100, &mut c.tti);
    int(
        "uplinkCapacity",
        k.uplink_capacity,
        0,
        10_000,
        &mut c.uplink_capacity,
    );
    int(
        "downlinkCapacity",
        k.downlink_capacity,
        0,
        10_000,
        &mut c.downlink_capacity,
    );
    let mut read_mb = u32::MAX;
    let mut write_mb = u32::MAX;
    int("readBufferSize", k.read_buffer_size, 0, 1024, &mut read_mb);
    int(
        "writeBufferSize",
        k.write_buffer_size,
        0,
        1024,
        &mut write_mb,
    );
    let bytes = |mb: u32, default: u32| match mb {
        u32::MAX => default,
        0 => 512 * 1024,
        mb => mb * 1024 * 1024,
    };
    c.read_buffer = bytes(read_mb, c.read_buffer);
    c.write_buffer = bytes(write_mb, c.write_buffer);
    if let Some(congestion) = k.congestion {
        c.congestion = congestion;
    }
    if let Some(header) = &k.header {
        let name = lower(header.kind.as_deref()).unwrap_or_default();
        match HeaderKind::parse(&name) {
            Some(kind) => c.header = kind,
            None => diags.push(loc.key("header").key("type").error(format!(
                "unknown mKCP header type `{name}` (one of {})",
                HeaderKind::NAMES.join(", ")
            ))),
        }
    }
    c.seed = k.seed;
    (error_count(diags) == before).then_some(c)
}

/// `rawSettings`/`tcpSettings`: the header (`none` or Xray's `http`) and
/// `acceptProxyProtocol`. Some(plan) for a valid HTTP header.
fn check_tcp_settings(
    settings: &RawTcpSettings,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<HttpHeaderPlan> {
    let mut plan = None;
    if let Some(header) = &settings.header {
        let hloc = loc.key("header");
        match lower(header.kind.as_deref()).as_deref() {
            None => diags.push(hloc.error(
                "a header needs a `type`, \"none\" or \"http\" (Xray refuses one without it)",
            )),
            Some("none") => {}
            Some("http") => plan = http_header_plan(header, &hloc, diags),
            Some(other) => diags.push(hloc.key("type").error(format!(
                "unknown header type `{other}` (one of \"none\", \"http\")"
            ))),
        }
    }
    if settings.accept_proxy_protocol == Some(true) {
        diags.push(
            loc.key("acceptProxyProtocol")
                .error("acceptProxyProtocol is not supported by this version of skiff yet"),
        );
    }
    plan
}

/// `header` with `type: "http"`, read as Xray's `Authenticator` reads it: every key has a
/// default, configured `headers` replace the default list entirely (sorted by name, as Go
/// sorts map keys), a string list given as one string is split at commas, and a `null`
/// header value is an error. What would break the head's lines is refused here.
fn http_header_plan(
    header: &RawHeader,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<HttpHeaderPlan> {
    let before = error_count(diags);
    let empty = Value::Object(Map::new());
    let object = |v: &Option<Value>| v.clone().filter(|v| !v.is_null()).unwrap_or(empty.clone());
    let rloc = loc.key("request");
    let request = decode::<RawHttpRequest>(&object(&header.request), &rloc, diags)?;
    let sloc = loc.key("response");
    let response = decode::<RawHttpResponse>(&object(&header.response), &sloc, diags)?;

    let word = |value: Option<String>,
                default: &str,
                key: &str,
                l: &Loc,
                diags: &mut Vec<Diagnostic>,
                ok: fn(u8) -> bool| {
        let value = value
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| default.to_owned());
        if !value.bytes().all(ok) {
            diags.push(l.key(key).error(format!(
                "`{value}` would break the HTTP head's first line (no spaces or control characters)"
            )));
        }
        value
    };
    let method = word(request.method, "GET", "method", &rloc, diags, |b| {
        b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
    });
    let version = word(request.version, "1.1", "version", &rloc, diags, |b| {
        b.is_ascii_graphic()
    });
    let mut paths = request.path.map(split_list).unwrap_or_default();
    if paths.is_empty() {
        paths.push("/".to_owned());
    }
    for p in &paths {
        if p.is_empty() || !p.bytes().all(|b| b.is_ascii_graphic() || b >= 0x80) {
            diags.push(rloc.key("path").error(format!(
                "path `{p}` must be non-empty, without spaces or control characters"
            )));
        } else if !p.starts_with('/') {
            diags.push(rloc.key("path").warning(format!(
                "path `{p}` does not start with \"/\": a server never matches it (Xray accepts it the same)"
            )));
        }
    }
    let request_headers = http_headers(request.headers, &rloc.key("headers"), diags);

    let rversion = word(response.version, "1.1", "version", &sloc, diags, |b| {
        b.is_ascii_graphic()
    });
    let status = word(response.status, "200", "status", &sloc, diags, |b| {
        b.is_ascii_graphic()
    });
    let reason = word(response.reason, "OK", "reason", &sloc, diags, |b| {
        b == b' ' || b == b'\t' || b.is_ascii_graphic() || b >= 0x80
    });
    let response_headers = http_headers(response.headers, &sloc.key("headers"), diags);

    (error_count(diags) == before).then_some(HttpHeaderPlan {
        request: HttpRequestPlan {
            method,
            version,
            paths,
            headers: request_headers,
        },
        response: HttpResponsePlan {
            version: rversion,
            status,
            reason,
            headers: response_headers,
        },
    })
}

/// Xray's `StringList`: a list as given, one string split at commas.
fn split_list(list: StringList) -> Vec<String> {
    if list.was_list {
        list.items
    } else {
        list.items
            .iter()
            .flat_map(|s| s.split(','))
            .map(str::to_owned)
            .collect()
    }
}

/// A `headers` object: None when absent or empty (Xray's defaults then), else sorted by name.
fn http_headers(
    headers: Option<Map<String, Value>>,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<Vec<(String, Vec<String>)>> {
    let headers = headers.filter(|h| !h.is_empty())?;
    let mut out = Vec::new();
    for (name, value) in headers {
        let hloc = loc.key(&name);
        if value.is_null() {
            diags.push(hloc.error(format!(
                "empty HTTP header value: {name} (null, as Xray refuses)"
            )));
            continue;
        }
        let Some(list) = decode::<StringList>(&value, &hloc, diags) else {
            continue;
        };
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
        {
            diags.push(hloc.error(format!("`{name}` is not a valid HTTP header name")));
            continue;
        }
        let values = split_list(list);
        if values
            .iter()
            .any(|v| v.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0))
        {
            diags.push(hloc.error("a header value must not contain CR, LF or NUL"));
            continue;
        }
        out.push((name, values));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Some(out)
}

/// `sockopt.tcpCongestion`: an algorithm name as the kernel knows it ("bbr", "cubic", "reno").
/// "" means the default. A name this kernel does not list is a warning, not an error: the
/// kernel loads modules on demand for privileged processes.
fn congestion_control(value: &Value, loc: &Loc, diags: &mut Vec<Diagnostic>) -> Option<String> {
    let Some(name) = value.as_str() else {
        diags.push(loc.error(format!(
            "invalid type: {}, expected a string such as \"bbr\"",
            crate::raw::kind(value)
        )));
        return None;
    };
    let name = name.trim();
    if name.is_empty() {
        return None;
    }
    // TCP_CA_NAME_MAX is 16 bytes with the terminating zero.
    if name.len() > 15 || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        diags.push(loc.error(format!(
            "`{name}` is not a TCP congestion control name (letters, digits and _, at most 15)"
        )));
        return None;
    }
    if let Ok(available) =
        std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        && !available.split_whitespace().any(|a| a == name)
    {
        diags.push(loc.warning(format!(
            "TCP congestion control `{name}` is not loaded on this system (available: {}); \
             connections keep the default if the kernel cannot load it",
            available.trim()
        )));
    }
    Some(name.to_owned())
}

/// The other socket options are not modelled yet. Those that change where or how traffic flows are
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
