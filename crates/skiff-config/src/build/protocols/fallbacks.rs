//! `fallbacks`: where a connection that is not a valid request goes (vless.md §6). The same
//! list, checked the same way, for every protocol that falls back (VLESS, Trojan).

use std::collections::HashSet;
use std::path::PathBuf;

use serde::Deserialize;
use serde_json::Value;

use super::super::error_count;
use super::valid_host;
use crate::diag::Diagnostic;
use crate::plan::{FallbackDest, FallbackPlan};
use crate::raw::kind;
use crate::raw::settings::RawFallback;
use crate::raw::values::{Int, PORT_NUMBER, out_of_range};
use crate::source::Loc;

/// Checks a `fallbacks` list (`loc` is the settings object). Entries with errors are left
/// out; a second entry with the same name, alpn and path is an error, as in Xray.
pub fn fallbacks(
    list: Option<&[RawFallback]>,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Vec<FallbackPlan> {
    let mut fallbacks: Vec<FallbackPlan> = Vec::new();
    let mut seen = HashSet::new();
    for (i, raw) in list.into_iter().flatten().enumerate() {
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
    fallbacks
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
        Some(v) if v.within(0, 2).is_some() => v.get::<u8>().unwrap_or(0),
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
    let port = |p: Int, diags: &mut Vec<Diagnostic>| match p.get::<u16>() {
        Some(p) if p != 0 => Some(FallbackDest::Port(p)),
        _ => {
            diags.push(dloc.error(out_of_range(p, PORT_NUMBER)));
            None
        }
    };
    let text = match value {
        None | Some(Value::Null) => {
            diags.push(dloc.error("missing `dest`: every fallback needs a destination"));
            return None;
        }
        Some(Value::Number(n)) => match Int::deserialize(n) {
            Ok(p) => return port(p, diags),
            Err(_) => {
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
        return match text.parse::<i128>() {
            Ok(p) => port(Int::Exact(p), diags),
            Err(_) => {
                diags.push(dloc.error(out_of_range(text, PORT_NUMBER)));
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
