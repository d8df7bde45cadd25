//! `xhttpSettings` (or `splithttpSettings`), as Xray reads them (infra/conf
//! `SplitHTTPConfig.Build` and splithttp's `GetNormalized*`): `extra`, when present, replaces
//! every key but `host`, `path` and `mode`; ranges are a number or `"from-to"`; defaults are
//! Xray's. Keys Xray has and Skiff does not implement yet are errors naming them, not silence.

use serde_json::{Map, Value};

use super::error_count;
use super::stream::{Side, build_stream, header_list};
use crate::decode::decode;
use crate::diag::Diagnostic;
use crate::plan::{StreamNetwork, XhttpDownloadPlan, XhttpMode, XhttpPlan, XmuxPlan};
use crate::raw::bounds::RawStream;
use crate::source::Loc;

/// Largest `scMaxBufferedPosts`: each buffered post may hold `scMaxEachPostBytes`.
const MAX_BUFFERED_POSTS: i64 = 1024;

/// Keys Xray accepts that are not implemented, and the value each may keep (its default).
const NOT_YET: &[(&str, Option<&str>)] = &[
    ("xPaddingObfsMode", Some("false")),
    ("xPaddingKey", Some("\"x_padding\"")),
    ("xPaddingHeader", Some("\"X-Padding\"")),
    ("xPaddingPlacement", Some("\"queryInHeader\"")),
    ("xPaddingMethod", Some("\"repeat-x\"")),
    ("uplinkHTTPMethod", Some("\"POST\"")),
    ("sessionIDPlacement", Some("\"path\"")),
    ("sessionIDKey", None),
    ("sessionIDTable", None),
    ("sessionIDLength", None),
    ("seqPlacement", Some("\"path\"")),
    ("seqKey", None),
    ("uplinkDataPlacement", Some("\"body\"")),
    ("uplinkDataKey", None),
    ("uplinkChunkSize", None),
    ("serverMaxHeaderBytes", None),
];

const KNOWN: &[&str] = &[
    "host",
    "path",
    "mode",
    "headers",
    "xPaddingBytes",
    "noGRPCHeader",
    "noSSEHeader",
    "scMaxEachPostBytes",
    "scMinPostsIntervalMs",
    "scMaxBufferedPosts",
    "scStreamUpServerSecs",
    "xmux",
    "downloadSettings",
    "extra",
];

pub fn xhttp_plan(value: &Value, loc: &Loc, diags: &mut Vec<Diagnostic>) -> Option<XhttpPlan> {
    let before = error_count(diags);
    let empty = Map::new();
    let Some(top) = value.as_object().or(value.is_null().then_some(&empty)) else {
        diags.push(loc.error(format!(
            "invalid type: {}, expected an object",
            crate::raw::kind(value)
        )));
        return None;
    };
    let string =
        |obj: &Map<String, Value>, key: &str, diags: &mut Vec<Diagnostic>| -> Option<String> {
            match obj.get(key) {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s.clone()),
                Some(v) => {
                    diags.push(loc.key(key).error(format!(
                        "invalid type: {}, expected a string",
                        crate::raw::kind(v)
                    )));
                    None
                }
            }
        };
    let host = string(top, "host", diags)
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty());
    let path = string(top, "path", diags).unwrap_or_default();
    if path
        .bytes()
        .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
    {
        diags.push(loc.key("path").error(format!(
            "XHTTP path `{path}` must not contain spaces or control characters"
        )));
    }
    let mode = match string(top, "mode", diags).as_deref() {
        None | Some("") | Some("auto") => XhttpMode::Auto,
        Some("packet-up") => XhttpMode::PacketUp,
        Some("stream-up") => XhttpMode::StreamUp,
        Some("stream-one") => XhttpMode::StreamOne,
        Some(m) => {
            diags.push(loc.key("mode").error(format!(
                "unsupported mode: {m} (expected auto, packet-up, stream-up or stream-one)"
            )));
            XhttpMode::Auto
        }
    };
    // `extra` replaces every other key, as in Xray.
    let (obj, oloc) = match top.get("extra") {
        None | Some(Value::Null) => (top, loc.clone()),
        Some(Value::Object(extra)) => (extra, loc.key("extra")),
        Some(v) => {
            diags.push(loc.key("extra").error(format!(
                "invalid type: {}, expected an object",
                crate::raw::kind(v)
            )));
            return None;
        }
    };
    for key in obj.keys() {
        if let Some((_, default)) = NOT_YET.iter().find(|(k, _)| k == key) {
            let v = &obj[key];
            let is_default =
                v.is_null() || default.is_some_and(|d| v.to_string().eq_ignore_ascii_case(d));
            if !is_default {
                diags.push(oloc.key(key).error(format!(
                    "XHTTP `{key}` is not supported by this version of skiff yet"
                )));
            }
        } else if !KNOWN.contains(&key.as_str()) {
            diags.push(
                oloc.key(key)
                    .warning(format!("unknown key `{key}` is ignored")),
            );
        } else if !std::ptr::eq(obj, top)
            && matches!(key.as_str(), "host" | "path" | "mode" | "extra")
        {
            diags.push(oloc.key(key).warning(format!(
                "`{key}` inside `extra` is ignored (Xray takes it from the top level)"
            )));
        }
    }
    let headers = match obj.get("headers") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Object(h)) => header_list(Some(h), &oloc, diags, |_, name_loc, diags| {
            diags.push(
                name_loc
                    .error("\"headers\" can't contain \"host\" (use the `host` key, as in Xray)"),
            );
        }),
        Some(v) => {
            diags.push(oloc.key("headers").error(format!(
                "invalid type: {}, expected an object",
                crate::raw::kind(v)
            )));
            Vec::new()
        }
    };
    let flag = |key: &str, diags: &mut Vec<Diagnostic>| match obj.get(key) {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(v) => {
            diags.push(oloc.key(key).error(format!(
                "invalid type: {}, expected a boolean",
                crate::raw::kind(v)
            )));
            false
        }
    };
    let no_grpc_header = flag("noGRPCHeader", diags);
    let no_sse_header = flag("noSSEHeader", diags);
    let x_padding_bytes = match range_key(obj, &oloc, "xPaddingBytes", diags) {
        Some((from, to)) if from == 0 || to == 0 => {
            diags.push(
                oloc.key("xPaddingBytes")
                    .error("xPaddingBytes cannot be disabled"),
            );
            (100, 1000)
        }
        Some(r) => r,
        None => (100, 1000),
    };
    let or = |r: Option<(u32, u32)>, d: (u32, u32)| r.filter(|r| r.1 != 0).unwrap_or(d);
    let sc_max_each_post_bytes = or(
        range_key(obj, &oloc, "scMaxEachPostBytes", diags),
        (1_000_000, 1_000_000),
    );
    if sc_max_each_post_bytes.0 == 0 {
        diags.push(
            oloc.key("scMaxEachPostBytes")
                .error("`scMaxEachPostBytes` should be bigger than 0"),
        );
    }
    let sc_min_posts_interval_ms = or(
        range_key(obj, &oloc, "scMinPostsIntervalMs", diags),
        (30, 30),
    );
    let sc_stream_up_server_secs = or(
        range_key(obj, &oloc, "scStreamUpServerSecs", diags),
        (20, 80),
    );
    let sc_max_buffered_posts = match obj.get("scMaxBufferedPosts") {
        None | Some(Value::Null) => 30,
        Some(v) => match v.as_i64() {
            Some(0) => 30,
            Some(n) if (1..=MAX_BUFFERED_POSTS).contains(&n) => n as usize,
            _ => {
                diags.push(oloc.key("scMaxBufferedPosts").error(format!(
                    "scMaxBufferedPosts must be an integer from 0 to {MAX_BUFFERED_POSTS}"
                )));
                30
            }
        },
    };
    let xmux = match obj.get("xmux") {
        None | Some(Value::Null) => XmuxPlan::default(),
        Some(Value::Object(x)) => xmux_plan(x, &oloc.key("xmux"), diags),
        Some(v) => {
            diags.push(oloc.key("xmux").error(format!(
                "invalid type: {}, expected an object",
                crate::raw::kind(v)
            )));
            XmuxPlan::default()
        }
    };
    let download = match obj.get("downloadSettings") {
        None | Some(Value::Null) => None,
        Some(v) => download_plan(v, &oloc.key("downloadSettings"), mode, diags).map(Box::new),
    };
    (error_count(diags) == before).then_some(XhttpPlan {
        path: if path.is_empty() { "/".into() } else { path },
        host,
        mode,
        headers,
        x_padding_bytes,
        no_grpc_header,
        no_sse_header,
        sc_max_each_post_bytes,
        sc_min_posts_interval_ms,
        sc_max_buffered_posts,
        sc_stream_up_server_secs,
        xmux,
        download,
    })
}

/// `downloadSettings`: where and how a client downloads. Xray needs the server's address and
/// port there and XHTTP as its network (its dialer crashes without them), and refuses it in
/// stream-one, whose single request carries both directions.
fn download_plan(
    value: &Value,
    loc: &Loc,
    mode: XhttpMode,
    diags: &mut Vec<Diagnostic>,
) -> Option<XhttpDownloadPlan> {
    if mode == XhttpMode::StreamOne {
        diags.push(loc.error("`downloadSettings` cannot be used in \"stream-one\" mode"));
        return None;
    }
    let before = error_count(diags);
    let raw = decode::<RawStream>(value, loc, diags)?;
    let address = raw.address.clone().filter(|a| !a.trim().is_empty());
    if address.is_none() {
        diags.push(loc.error("`downloadSettings` needs the `address` to download from"));
    }
    if raw.port.is_none_or(|p| p == 0) {
        diags.push(loc.error("`downloadSettings` needs the `port` to download from"));
    }
    // A client's settings: TLS there needs no certificate.
    let mut stream = build_stream(Some(&raw), loc, Side::Outbound, diags);
    match &mut stream.network {
        StreamNetwork::Xhttp(x) => {
            let nested = x.download.take();
            if nested.is_some() {
                diags.push(loc.key("xhttpSettings").warning(
                    "a `downloadSettings` inside `downloadSettings` is ignored (as in Xray)",
                ));
            }
        }
        _ if error_count(diags) == before => diags.push(
            loc.key("network")
                .error("`downloadSettings` must use the \"xhttp\" network"),
        ),
        _ => {}
    }
    (error_count(diags) == before).then(|| XhttpDownloadPlan {
        address: address.unwrap_or_default(),
        port: raw.port.unwrap_or_default(),
        stream,
    })
}

fn xmux_plan(x: &Map<String, Value>, loc: &Loc, diags: &mut Vec<Diagnostic>) -> XmuxPlan {
    const KEYS: &[&str] = &[
        "maxConcurrency",
        "maxConnections",
        "cMaxReuseTimes",
        "hMaxRequestTimes",
        "hMaxReusableSecs",
        "hKeepAlivePeriod",
    ];
    for key in x.keys().filter(|k| !KEYS.contains(&k.as_str())) {
        diags.push(
            loc.key(key)
                .warning(format!("unknown key `{key}` is ignored")),
        );
    }
    if x.get("hKeepAlivePeriod")
        .is_some_and(|v| v.as_i64() != Some(0))
    {
        diags.push(
            loc.key("hKeepAlivePeriod")
                .error("xmux `hKeepAlivePeriod` is not supported by this version of skiff yet"),
        );
    }
    let get =
        |key: &str, diags: &mut Vec<Diagnostic>| range_key(x, loc, key, diags).unwrap_or((0, 0));
    let plan = XmuxPlan {
        max_concurrency: get("maxConcurrency", diags),
        max_connections: get("maxConnections", diags),
        c_max_reuse_times: get("cMaxReuseTimes", diags),
        h_max_request_times: get("hMaxRequestTimes", diags),
        h_max_reusable_secs: get("hMaxReusableSecs", diags),
    };
    if plan.max_connections.1 > 0 && plan.max_concurrency.1 > 0 {
        diags.push(loc.error("maxConnections cannot be specified together with maxConcurrency"));
    }
    // Xray: an xmux of all zeros is the default xmux.
    if plan == XmuxPlan::zero() {
        return XmuxPlan::default();
    }
    plan
}

/// The range under `key` of `obj`, if present; an error (at its path) if malformed.
fn range_key(
    obj: &Map<String, Value>,
    loc: &Loc,
    key: &str,
    diags: &mut Vec<Diagnostic>,
) -> Option<(u32, u32)> {
    match parse_range(obj.get(key)?) {
        Ok(r) => r,
        Err(e) => {
            diags.push(loc.key(key).error(e));
            None
        }
    }
}

/// Xray's `Int32Range`: a number, or a string `"n"` / `"from-to"` (swapped when reversed);
/// negative values are refused here (Xray only uses them as sentinels elsewhere).
pub fn parse_range(v: &Value) -> Result<Option<(u32, u32)>, String> {
    let bad =
        || format!("invalid integer range {v}, expected a non-negative integer or \"from-to\"");
    let (a, b) = match v {
        Value::Null => return Ok(None),
        Value::Number(n) => {
            let n = n
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(bad)?;
            (n, n)
        }
        Value::String(s) if s.trim().is_empty() => (0, 0),
        Value::String(s) => {
            let s = s.trim();
            let (a, b) = s.split_once('-').unwrap_or((s, s));
            let parse = |x: &str| x.trim().parse::<u32>().map_err(|_| bad());
            (parse(a)?, parse(b)?)
        }
        _ => return Err(bad()),
    };
    Ok(Some((a.min(b), a.max(b))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn build(v: Value) -> (Option<XhttpPlan>, Vec<Diagnostic>) {
        let mut diags = Vec::new();
        let text = serde_json::json!({ "xhttpSettings": v }).to_string();
        let file = std::rc::Rc::new(crate::source::SourceFile {
            name: "c.json".into(),
            stripped: text.clone(),
            original: text,
        });
        let loc = Loc::root(file).key("xhttpSettings");
        (xhttp_plan(&v, &loc, &mut diags), diags)
    }

    #[test]
    fn defaults_are_xrays() {
        let (p, d) = build(serde_json::json!({ "path": "/x" }));
        assert!(d.is_empty(), "{d:?}");
        let p = p.unwrap();
        assert_eq!(p.mode, XhttpMode::Auto);
        assert_eq!(p.x_padding_bytes, (100, 1000));
        assert_eq!(p.sc_max_each_post_bytes, (1_000_000, 1_000_000));
        assert_eq!(p.sc_max_buffered_posts, 30);
        assert_eq!(p.xmux.max_connections, (3, 3));
    }

    #[test]
    fn extra_replaces_all_but_host_path_mode() {
        let (p, d) = build(serde_json::json!({
            "path": "/x", "mode": "stream-one", "noSSEHeader": true,
            "extra": { "xPaddingBytes": "10-20", "xmux": { "maxConcurrency": "2-4" } }
        }));
        assert!(d.is_empty(), "{d:?}");
        let p = p.unwrap();
        assert_eq!(p.mode, XhttpMode::StreamOne);
        assert!(!p.no_sse_header);
        assert_eq!(p.x_padding_bytes, (10, 20));
        assert_eq!(p.xmux.max_concurrency, (2, 4));
        assert_eq!(p.xmux.max_connections, (0, 0));
    }

    #[test]
    fn errors_name_the_key() {
        let (p, d) = build(serde_json::json!({
            "mode": "fast", "extra": { "sessionIDPlacement": "cookie",
              "xmux": { "maxConcurrency": 2, "maxConnections": 3 }, "headers": { "Host": "a" } }
        }));
        assert!(p.is_none());
        let text = format!("{d:?}");
        for needle in [
            "unsupported mode",
            "sessionIDPlacement",
            "maxConnections cannot",
            "can't contain",
        ] {
            assert!(text.contains(needle), "{needle} missing from {text}");
        }
        let (p, d) = build(serde_json::json!({ "xPaddingBytes": 0 }));
        assert!(p.is_none() && format!("{d:?}").contains("cannot be disabled"));
    }

    proptest! {
        #[test]
        fn ranges_parse_ordered(a: u32, b: u32) {
            let r = parse_range(&Value::String(format!("{a}-{b}"))).unwrap().unwrap();
            prop_assert_eq!(r, (a.min(b), a.max(b)));
        }
    }
}
