//! What one XHTTP request asks for, decided from its method, target and `Referer` alone
//! (sans-IO), as Xray's `requestHandler.ServeHTTP` decides it
//! (transport/internet/splithttp/hub.go): the path prefix, the `x_padding` length, then the
//! session id and sequence number as path segments after the prefix.

use std::fmt;

use super::Mode;

/// Longest session id accepted. Xray's are UUIDs (36 bytes); the bound keeps a hostile
/// client from making the session table hold long keys.
pub const MAX_SESSION_ID_LEN: usize = 128;

/// What the server checks every request against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestRules {
    /// The configured path, normalised as Xray does: a leading and a trailing `/`.
    pub path: String,
    /// When set, the `Host` a request must carry (port ignored).
    pub host: Option<String>,
    /// `xPaddingBytes`: the padding a request must carry, inclusive bounds.
    pub padding: (u32, u32),
    /// `mode`: which request shapes the server takes.
    pub mode: Mode,
}

/// The request shapes of XHTTP.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// CORS preflight: answered 200 with no tunnel.
    Options,
    /// A request without a session id: up and down in one request (stream-one).
    StreamOne,
    /// `GET /path/SESSION`: the download half of packet-up or stream-up.
    Download { session: String },
    /// A body-carrying request without a sequence number: the streaming upload (stream-up).
    StreamUp { session: String },
    /// `POST /path/SESSION/SEQ`: one upload packet (packet-up).
    Packet { session: String, seq: u64 },
}

/// Why a request is refused, with the status Xray answers it with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    Host,
    Path,
    /// The padding's length (0 when absent) is outside `xPaddingBytes`.
    Padding(usize),
    ModeNotAllowed(&'static str),
    SessionId,
    /// The sequence number is not a decimal u64.
    Seq,
}

impl Refusal {
    /// Whether Xray has written its common answer headers (CORS, padding) before refusing:
    /// it checks the host and path first.
    pub fn after_common_headers(&self) -> bool {
        !matches!(self, Refusal::Host | Refusal::Path)
    }

    /// The status Xray's listener answers with.
    pub fn status(&self) -> u16 {
        match self {
            Refusal::Host | Refusal::Path => 404,
            Refusal::Seq => 500,
            Refusal::Padding(_) | Refusal::ModeNotAllowed(_) | Refusal::SessionId => 400,
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Host => write!(f, "wrong Host"),
            Refusal::Path => write!(f, "wrong path"),
            Refusal::Padding(n) => write!(f, "invalid x_padding length {n}"),
            Refusal::ModeNotAllowed(m) => write!(f, "{m} mode is not allowed"),
            Refusal::SessionId => write!(f, "session id too long or not printable"),
            Refusal::Seq => write!(f, "sequence number is not a decimal u64"),
        }
    }
}

/// The parts of a request the decision needs.
#[derive(Clone, Copy, Debug)]
pub struct RequestParts<'a> {
    pub method: &'a str,
    /// The request target: path and optional query.
    pub target: &'a str,
    pub host: Option<&'a str>,
    pub referer: Option<&'a str>,
}

/// Decides what `req` is, or why it is refused.
pub fn route(req: &RequestParts<'_>, rules: &RequestRules) -> Result<Route, Refusal> {
    if let Some(want) = &rules.host {
        let got = req.host.map(strip_port).unwrap_or("");
        if !got.eq_ignore_ascii_case(strip_port(want)) {
            return Err(Refusal::Host);
        }
    }
    let (path, query) = match req.target.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (req.target, None),
    };
    let Some(rest) = path.strip_prefix(rules.path.as_str()) else {
        return Err(Refusal::Path);
    };
    if req.method == "OPTIONS" {
        return Ok(Route::Options);
    }
    // Xray (not in obfs mode): the padding rides in the Referer's query when there is a
    // Referer, else in the request's own query.
    let padding = match req.referer {
        Some(r) if !r.is_empty() => r
            .split_once('?')
            .and_then(|(_, q)| query_value(q, "x_padding")),
        _ => query.and_then(|q| query_value(q, "x_padding")),
    }
    .unwrap_or("");
    let n = padding.len();
    let (from, to) = rules.padding;
    if n == 0 || n < from as usize || n > to as usize {
        return Err(Refusal::Padding(n));
    }
    let mut segments = rest.split('/');
    let session = segments.next().unwrap_or("");
    let seq = segments.next().unwrap_or("");
    if session.len() > MAX_SESSION_ID_LEN || !session.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(Refusal::SessionId);
    }
    let allows = |m: Mode| rules.mode == Mode::Auto || rules.mode == m;
    if session.is_empty() && !(allows(Mode::StreamOne) || rules.mode == Mode::StreamUp) {
        return Err(Refusal::ModeNotAllowed("stream-one"));
    }
    let uplink = req.method != "GET" || !seq.is_empty();
    if uplink && !session.is_empty() {
        let session = session.to_owned();
        if seq.is_empty() {
            if !allows(Mode::StreamUp) {
                return Err(Refusal::ModeNotAllowed("stream-up"));
            }
            return Ok(Route::StreamUp { session });
        }
        if !allows(Mode::PacketUp) {
            return Err(Refusal::ModeNotAllowed("packet-up"));
        }
        let seq = parse_seq(seq).ok_or(Refusal::Seq)?;
        return Ok(Route::Packet { session, seq });
    }
    if session.is_empty() {
        Ok(Route::StreamOne)
    } else {
        Ok(Route::Download {
            session: session.to_owned(),
        })
    }
}

/// A decimal u64 as Go's `strconv.ParseUint(s, 10, 64)` takes it (digits only, no sign).
pub fn parse_seq(s: &str) -> Option<u64> {
    if s.is_empty() || s.len() > 20 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// The first value of `key` in a query string (no percent-decoding: padding is `X`s).
fn query_value<'a>(query: &'a str, key: &str) -> Option<&'a str> {
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (k == key).then_some(v)
    })
}

fn strip_port(host: &str) -> &str {
    if host.starts_with('[') {
        return host.split_once(']').map_or(host, |(h, _)| &h[1..]);
    }
    match host.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') && p.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => host,
    }
}

/// The path as Xray normalises it for the wire: a leading `/`, a trailing `/`, no query.
pub fn normalize_path(path: &str) -> String {
    let path = path.split('?').next().unwrap_or("");
    let mut p = if path.starts_with('/') {
        path.to_owned()
    } else {
        format!("/{path}")
    };
    if !p.ends_with('/') {
        p.push('/');
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rules(mode: Mode) -> RequestRules {
        RequestRules {
            path: "/x/".into(),
            host: None,
            padding: (100, 1000),
            mode,
        }
    }

    fn parts<'a>(method: &'a str, target: &'a str, referer: Option<&'a str>) -> RequestParts<'a> {
        RequestParts {
            method,
            target,
            host: Some("h"),
            referer,
        }
    }

    fn pad() -> String {
        format!("http://h/x/?x_padding={}", "X".repeat(200))
    }

    #[test]
    fn the_four_shapes() {
        let r = rules(Mode::Auto);
        let p = pad();
        assert_eq!(
            route(&parts("GET", "/x/abc", Some(&p)), &r),
            Ok(Route::Download {
                session: "abc".into()
            })
        );
        assert_eq!(
            route(&parts("POST", "/x/abc/7", Some(&p)), &r),
            Ok(Route::Packet {
                session: "abc".into(),
                seq: 7
            })
        );
        assert_eq!(
            route(&parts("POST", "/x/abc", Some(&p)), &r),
            Ok(Route::StreamUp {
                session: "abc".into()
            })
        );
        assert_eq!(
            route(&parts("POST", "/x/", Some(&p)), &r),
            Ok(Route::StreamOne)
        );
    }

    #[test]
    fn padding_in_query_without_referer() {
        let target = format!("/x/s?x_padding={}", "X".repeat(100));
        assert!(route(&parts("GET", &target, None), &rules(Mode::Auto)).is_ok());
        assert_eq!(
            route(&parts("GET", "/x/s", None), &rules(Mode::Auto)),
            Err(Refusal::Padding(0))
        );
        let short = "http://h/x/?x_padding=XX";
        assert_eq!(
            route(&parts("GET", "/x/s", Some(short)), &rules(Mode::Auto)),
            Err(Refusal::Padding(2))
        );
    }

    #[test]
    fn refusals() {
        let p = pad();
        assert_eq!(
            route(&parts("GET", "/y/s", Some(&p)), &rules(Mode::Auto)),
            Err(Refusal::Path)
        );
        assert_eq!(
            route(&parts("POST", "/x/s/-1", Some(&p)), &rules(Mode::Auto)),
            Err(Refusal::Seq)
        );
        assert_eq!(
            route(
                &parts("POST", "/x/s/99999999999999999999", Some(&p)),
                &rules(Mode::Auto)
            ),
            Err(Refusal::Seq)
        );
        assert_eq!(
            route(&parts("POST", "/x/s/1", Some(&p)), &rules(Mode::StreamOne)),
            Err(Refusal::ModeNotAllowed("packet-up"))
        );
        assert_eq!(
            route(&parts("POST", "/x/", Some(&p)), &rules(Mode::PacketUp)),
            Err(Refusal::ModeNotAllowed("stream-one"))
        );
        let mut r = rules(Mode::Auto);
        r.host = Some("example.com".into());
        assert_eq!(
            route(&parts("GET", "/x/s", Some(&p)), &r),
            Err(Refusal::Host)
        );
        let long = format!("/x/{}", "a".repeat(MAX_SESSION_ID_LEN + 1));
        assert_eq!(
            route(&parts("GET", &long, Some(&p)), &rules(Mode::Auto)),
            Err(Refusal::SessionId)
        );
    }

    #[test]
    fn paths_normalise_as_xray() {
        assert_eq!(normalize_path(""), "/");
        assert_eq!(normalize_path("x"), "/x/");
        assert_eq!(normalize_path("/x?ed=1"), "/x/");
        assert_eq!(strip_port("h:443"), "h");
        assert_eq!(strip_port("[::1]:80"), "::1");
    }

    proptest! {
        #[test]
        fn never_panics(method in "[A-Z]{0,8}", target in ".{0,300}", referer in proptest::option::of(".{0,300}")) {
            let _ = route(&parts(&method, &target, referer.as_deref()), &rules(Mode::Auto));
        }

        #[test]
        fn packet_seq_round_trips(session in "[a-f0-9-]{1,40}", seq: u64) {
            let p = pad();
            let target = format!("/x/{session}/{seq}");
            prop_assert_eq!(
                route(&parts("POST", &target, Some(&p)), &rules(Mode::Auto)),
                Ok(Route::Packet { session, seq })
            );
        }

        #[test]
        fn accepted_padding_is_within_bounds(n in 0usize..1200) {
            let referer = format!("http://h/x/?x_padding={}", "X".repeat(n));
            let ok = route(&parts("GET", "/x/s", Some(&referer)), &rules(Mode::Auto)).is_ok();
            prop_assert_eq!(ok, (100..=1000).contains(&n));
        }
    }
}
