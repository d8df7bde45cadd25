//! VLESS `settings`: inbound clients and fallbacks, outbound server and user. Ids are parsed
//! exactly as the protocol code does ([`UserId::parse`]), so a config that loads has ids the
//! handlers accept.

use std::collections::HashSet;
use std::path::PathBuf;

use serde_json::Value;
use skiff_proto::vless::UserId;

use super::super::error_count;
use super::valid_host;
use crate::diag::Diagnostic;
use crate::plan::{FallbackDest, FallbackPlan, VlessClient, VlessInbound, VlessOutbound};
use crate::raw::kind;
use crate::raw::settings::{
    RawFallback, RawVlessUser, VlessInboundSettings, VlessOutboundSettings,
};
use crate::source::Loc;

const VISION: &str = "xtls-rprx-vision";
/// The protocol's name in messages.
const PROTO: &str = "VLESS";

pub fn inbound(
    s: VlessInboundSettings,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<VlessInbound> {
    let before = error_count(diags);
    match s.decryption.as_deref() {
        Some("none") => {}
        None => diags.push(loc.key("decryption").error(
            "missing `decryption`: VLESS inbounds must set \"decryption\": \"none\"",
        )),
        Some(other) => diags.push(loc.key("decryption").error(format!(
            "decryption `{other}` is not supported (VLESS inbounds must set \"decryption\": \"none\")"
        ))),
    }
    let mut clients = Vec::new();
    let mut emails = HashSet::new();
    for (i, raw) in s.clients.iter().flatten().enumerate() {
        let cloc = loc.key("clients").index(i);
        let id = user_id(raw.id.as_deref(), PROTO, &cloc, diags);
        flow(raw.flow.as_deref(), &cloc, diags);
        if raw.encryption.is_some() {
            diags.push(
                cloc.key("encryption")
                    .warning("`encryption` belongs to outbound users; inbounds use `decryption`"),
            );
        }
        let level = level(raw.level, &cloc.key("level"), diags);
        let email = raw
            .email
            .as_deref()
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .map(str::to_owned);
        if let Some(email) = &email
            && !emails.insert(email.to_lowercase())
        {
            // Xray refuses a second user with the same email (they key statistics).
            diags.push(
                cloc.key("email")
                    .error(format!("another client already has the email `{email}`")),
            );
        }
        if let Some(id) = id {
            clients.push(VlessClient { id, email, level });
        }
    }
    let mut fallbacks: Vec<FallbackPlan> = Vec::new();
    let mut seen = HashSet::new();
    for (i, raw) in s.fallbacks.iter().flatten().enumerate() {
        let floc = loc.key("fallbacks").index(i);
        if let Some(fb) = fallback(raw, &floc, diags) {
            let selector = (fb.name.clone(), fb.alpn.clone(), fb.path.clone());
            if !seen.insert(selector) {
                diags.push(floc.error(format!(
                    "another fallback already has the same name, alpn and path ({})",
                    describe_selector(&fb)
                )));
                continue;
            }
            fallbacks.push(fb);
        }
    }
    (error_count(diags) == before).then_some(VlessInbound { clients, fallbacks })
}

fn describe_selector(fb: &FallbackPlan) -> String {
    let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "any".to_owned());
    format!(
        "name {}, alpn {}, path {}",
        show(&fb.name),
        show(&fb.alpn),
        show(&fb.path)
    )
}

pub fn outbound(
    s: VlessOutboundSettings,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<VlessOutbound> {
    let before = error_count(diags);
    let flat_given = s.address.is_some() || s.port.is_some() || s.id.is_some();
    let (address, port, user, uloc) = match (&s.vnext, flat_given) {
        (Some(_), true) => {
            diags.push(loc.error(
                "give either `vnext` or the flat form (`address`, `port`, `id` in settings), not both",
            ));
            return None;
        }
        (Some(vnext), false) => {
            let (server, sloc) = one_server(vnext, PROTO, loc, diags)?;
            let (user, uloc) = one_user(server.users.as_deref(), PROTO, &sloc, diags)?;
            (
                (server.address.as_deref(), sloc.key("address")),
                (server.port, sloc.key("port")),
                user.clone(),
                uloc,
            )
        }
        (None, true) => (
            (s.address.as_deref(), loc.key("address")),
            (s.port, loc.key("port")),
            RawVlessUser {
                id: s.id.clone(),
                email: s.email.clone(),
                level: s.level,
                flow: s.flow.clone(),
                encryption: s.encryption.clone(),
            },
            loc.clone(),
        ),
        (None, false) => {
            diags.push(
                loc.key("vnext")
                    .error("missing `vnext`: a VLESS outbound needs a server to connect to"),
            );
            return None;
        }
    };
    let address = server_address(address.0, PROTO, &address.1, diags);
    let port = server_port(port.0, PROTO, &port.1, diags);
    let id = user_id(user.id.as_deref(), PROTO, &uloc, diags);
    match user.encryption.as_deref() {
        Some("none") => {}
        None => diags.push(
            uloc.key("encryption")
                .error("missing `encryption`: VLESS users must set \"encryption\": \"none\""),
        ),
        Some(other) => diags.push(uloc.key("encryption").error(format!(
            "encryption `{other}` is not supported (VLESS users must set \"encryption\": \"none\")"
        ))),
    }
    flow(user.flow.as_deref(), &uloc, diags);
    let level = level(user.level, &uloc.key("level"), diags);
    if error_count(diags) > before {
        return None;
    }
    Some(VlessOutbound {
        address: address?,
        port: port?,
        id: id?,
        level,
    })
}

/// The one `vnext` entry skiff supports (Xray 26 requires exactly one too). `proto` names the
/// protocol in messages.
pub(super) fn one_server<'a, T>(
    vnext: &'a [T],
    proto: &str,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<(&'a T, Loc)> {
    let vloc = loc.key("vnext");
    match vnext {
        [] => {
            diags.push(vloc.error(format!(
                "`vnext` is empty: a {proto} outbound needs one server"
            )));
            None
        }
        [server] => Some((server, vloc.index(0))),
        _ => {
            diags.push(vloc.index(1).error(format!(
                "{} servers are listed, but this version of skiff supports exactly one server per {proto} outbound",
                vnext.len()
            )));
            None
        }
    }
}

/// The one user of a server entry (`loc`) skiff supports.
pub(super) fn one_user<'a, U>(
    users: Option<&'a [U]>,
    proto: &str,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<(&'a U, Loc)> {
    let uloc = loc.key("users");
    match users {
        None => {
            diags.push(uloc.error(format!(
                "missing `users`: a {proto} server entry needs one user"
            )));
            None
        }
        Some([]) => {
            diags.push(uloc.error(format!(
                "`users` is empty: a {proto} server entry needs one user"
            )));
            None
        }
        Some([user]) => Some((user, uloc.index(0))),
        Some(users) => {
            diags.push(uloc.index(1).error(format!(
                "{} users are listed, but this version of skiff supports exactly one user per {proto} server",
                users.len()
            )));
            None
        }
    }
}

pub(super) fn server_address(
    address: Option<&str>,
    proto: &str,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<String> {
    match address.map(str::trim).filter(|a| !a.is_empty()) {
        None => {
            diags.push(loc.error(format!("missing `address` of the {proto} server")));
            None
        }
        Some(a) if valid_host(a) => Some(
            a.strip_prefix('[')
                .and_then(|a| a.strip_suffix(']'))
                .unwrap_or(a)
                .to_owned(),
        ),
        Some(a) => {
            diags.push(loc.error(format!("`{a}` is not an IP address or domain name")));
            None
        }
    }
}

pub(super) fn server_port(
    port: Option<i64>,
    proto: &str,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<u16> {
    match port {
        None => {
            diags.push(loc.error(format!("missing `port` of the {proto} server")));
            None
        }
        Some(p) => match u16::try_from(p) {
            Ok(p) if p != 0 => Some(p),
            _ => {
                diags.push(loc.error(format!("port {p} is out of range (1-65535)")));
                None
            }
        },
    }
}

/// `id`: a UUID or a 1-30 byte string mapped as Xray does. `loc` is the user object.
pub(super) fn user_id(
    id: Option<&str>,
    proto: &str,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<[u8; 16]> {
    let Some(id) = id else {
        diags.push(loc.key("id").error("missing `id`"));
        return None;
    };
    match UserId::parse(id) {
        Ok(id) => Some(*id.as_bytes()),
        Err(e) => {
            diags.push(loc.key("id").error(format!("invalid {proto} id: {e}")));
            None
        }
    }
}

/// `flow`: none yet. `loc` is the user object.
fn flow(flow: Option<&str>, loc: &Loc, diags: &mut Vec<Diagnostic>) {
    match flow.map(str::trim) {
        None | Some("") => {}
        Some(f @ (VISION | "xtls-rprx-vision-udp443")) => diags.push(
            loc.key("flow")
                .error(format!("flow {f} is not supported yet")),
        ),
        Some(other) => diags.push(loc.key("flow").error(format!(
            "unknown flow `{other}` (expected \"\" or \"{VISION}\")"
        ))),
    }
}

pub(super) fn level(value: Option<i64>, loc: &Loc, diags: &mut Vec<Diagnostic>) -> u32 {
    match value {
        None => 0,
        Some(v) => u32::try_from(v).unwrap_or_else(|_| {
            diags.push(loc.error(format!("level {v} is out of range (0-{})", u32::MAX)));
            0
        }),
    }
}

fn fallback(raw: &RawFallback, loc: &Loc, diags: &mut Vec<Diagnostic>) -> Option<FallbackPlan> {
    let before = error_count(diags);
    let nonempty = |v: &Option<String>| v.as_deref().filter(|v| !v.is_empty()).map(str::to_owned);
    let name = nonempty(&raw.name);
    let alpn = nonempty(&raw.alpn);
    let path = nonempty(&raw.path);
    if let Some(p) = &path
        && !p.starts_with('/')
    {
        diags.push(loc.key("path").error(format!(
            "fallback path `{p}` must be empty or start with \"/\""
        )));
    }
    let xver = match raw.xver {
        None => 0,
        Some(v @ 0..=2) => u8::try_from(v).unwrap_or(0),
        Some(v) => {
            diags.push(loc.key("xver").error(format!(
                "xver {v} is not a PROXY protocol version (only 0 = off, 1 or 2)"
            )));
            0
        }
    };
    let dest = dest(raw.dest.as_ref(), loc, diags);
    if error_count(diags) > before {
        return None;
    }
    Some(FallbackPlan {
        name,
        alpn,
        path,
        dest: dest?,
        xver,
    })
}

/// `dest`: a port number (as a number or digits), "addr:port", a Unix socket path ("/…") or an
/// abstract Unix socket ("@…", "@@…"). `loc` is the fallback object.
fn dest(value: Option<&Value>, loc: &Loc, diags: &mut Vec<Diagnostic>) -> Option<FallbackDest> {
    let dloc = loc.key("dest");
    let port = |p: i64, diags: &mut Vec<Diagnostic>| match u16::try_from(p) {
        Ok(p) if p != 0 => Some(FallbackDest::Port(p)),
        _ => {
            diags.push(dloc.error(format!("port {p} is out of range (1-65535)")));
            None
        }
    };
    let text = match value {
        None | Some(Value::Null) => {
            diags.push(dloc.error("missing `dest`: every fallback needs a destination"));
            return None;
        }
        Some(Value::Number(n)) => match n.as_i64() {
            Some(p) => return port(p, diags),
            None => {
                diags.push(dloc.error(format!("`{n}` is not a port number")));
                return None;
            }
        },
        Some(Value::String(s)) => s.trim(),
        Some(other) => {
            diags.push(dloc.error(format!(
                "invalid type: {}, expected a port number or a string",
                kind(other)
            )));
            return None;
        }
    };
    if text.is_empty() {
        diags.push(dloc.error("`dest` is empty: every fallback needs a destination"));
        return None;
    }
    if text.starts_with('/') {
        return Some(FallbackDest::Unix(PathBuf::from(text)));
    }
    if text.starts_with('@') {
        if text.trim_start_matches('@').is_empty() {
            diags.push(dloc.error(format!("`{text}` names no abstract Unix socket")));
            return None;
        }
        return Some(FallbackDest::AbstractUnix(text.to_owned()));
    }
    if text.bytes().all(|b| b.is_ascii_digit()) {
        return match text.parse::<i64>() {
            Ok(p) => port(p, diags),
            Err(_) => {
                diags.push(dloc.error(format!("port {text} is out of range (1-65535)")));
                None
            }
        };
    }
    let parsed = text.rsplit_once(':').and_then(|(host, p)| {
        let p: u16 = p.parse().ok().filter(|&p| p != 0)?;
        let host = match host.strip_prefix('[') {
            Some(inner) => inner
                .strip_suffix(']')?
                .parse::<std::net::Ipv6Addr>()
                .ok()?
                .to_string(),
            None if host.contains(':') || !valid_host(host) => return None,
            None => host.to_owned(),
        };
        Some(FallbackDest::Addr(host, p))
    });
    if parsed.is_none() {
        diags.push(dloc.error(format!(
            "`{text}` is not a fallback destination (a port, \"addr:port\", \"/unix/path\" or \"@abstract\")"
        )));
    }
    parsed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::SourceFile;
    use std::rc::Rc;

    fn loc() -> Loc {
        Loc::root(Rc::new(SourceFile {
            name: "t".into(),
            stripped: "{}".into(),
            original: "{}".into(),
        }))
    }

    fn d(v: Value) -> Result<FallbackDest, String> {
        let mut diags = Vec::new();
        dest(Some(&v), &loc(), &mut diags).ok_or_else(|| diags[0].message.clone())
    }

    #[test]
    fn fallback_destinations() {
        use serde_json::json;
        assert_eq!(d(json!(80)), Ok(FallbackDest::Port(80)));
        assert_eq!(d(json!("8080")), Ok(FallbackDest::Port(8080)));
        assert_eq!(
            d(json!("example.com:443")),
            Ok(FallbackDest::Addr("example.com".into(), 443))
        );
        assert_eq!(
            d(json!("[::1]:80")),
            Ok(FallbackDest::Addr("::1".into(), 80))
        );
        assert_eq!(
            d(json!("/dev/shm/h1.sock")),
            Ok(FallbackDest::Unix("/dev/shm/h1.sock".into()))
        );
        assert_eq!(
            d(json!("@h2c")),
            Ok(FallbackDest::AbstractUnix("@h2c".into()))
        );
        assert_eq!(
            d(json!("@@padded")),
            Ok(FallbackDest::AbstractUnix("@@padded".into()))
        );
        for bad in [
            json!(0),
            json!(70000),
            json!(-1),
            json!(1.5),
            json!("99999"),
            json!("host"),
            json!("host:0"),
            json!("::1:80"),
            json!("@"),
            json!(""),
            json!(true),
        ] {
            assert!(d(bad.clone()).is_err(), "{bad} accepted");
        }
    }
}
