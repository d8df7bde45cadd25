//! `udp2raw` settings: udp2raw's flags as camelCase keys (`key`, `rawMode`, `cipherMode`,
//! `authMode`, `seqMode`, `fixGro`, `autoRule`) with udp2raw's defaults (faketcp, aes128cbc,
//! md5, seq mode 3); the inbound adds `target` (its `-r`), the outbound `address` and `port`.

use serde::Deserialize;

use super::super::error_count;
use super::common::{server_address, server_port};
use super::parse_redirect;
use crate::diag::Diagnostic;
use crate::plan_udp2raw::{
    AuthMode, CipherMode, RawMode, Udp2rawInbound, Udp2rawOutbound, Udp2rawTuning,
};
use crate::raw::values::{Int, out_of_range};
use crate::source::Loc;

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Udp2rawSettings {
    pub target: Option<String>,
    pub address: Option<String>,
    pub port: Option<Int>,
    pub key: Option<String>,
    pub raw_mode: Option<String>,
    pub cipher_mode: Option<String>,
    pub auth_mode: Option<String>,
    pub seq_mode: Option<Int>,
    pub fix_gro: Option<bool>,
    pub auto_rule: Option<bool>,
}

pub fn inbound(
    s: Udp2rawSettings,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<Udp2rawInbound> {
    let before = error_count(diags);
    let target = match s.target.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
        None => {
            diags.push(loc.key("target").error(
                "missing `target`: the \"host:port\" every conversation goes to (udp2raw -s -r)",
            ));
            None
        }
        Some(t) => match parse_redirect(t) {
            Some((host, port)) if !host.is_empty() && port != 0 => Some((host, port)),
            _ => {
                diags.push(loc.key("target").error(format!(
                    "`{t}` is not \"host:port\" (e.g. \"127.0.0.1:51820\")"
                )));
                None
            }
        },
    };
    let tuning = tuning(&s, loc, diags);
    if error_count(diags) > before {
        return None;
    }
    let (target_host, target_port) = target?;
    Some(Udp2rawInbound {
        target_host,
        target_port,
        tuning: tuning?,
    })
}

pub fn outbound(
    s: Udp2rawSettings,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<Udp2rawOutbound> {
    let before = error_count(diags);
    let address = server_address(s.address.as_deref(), &loc.key("address"), "udp2raw", diags);
    if let Some(a) = &address
        && a.parse::<std::net::IpAddr>().is_err()
    {
        diags.push(loc.key("address").error(format!(
            "`{a}` is not an IP address: udp2raw's raw packets need the server's IPv4 or IPv6 address (names are not resolved)"
        )));
    }
    let port = server_port(s.port, &loc.key("port"), "udp2raw", diags);
    let tuning = tuning(&s, loc, diags);
    if error_count(diags) > before {
        return None;
    }
    Some(Udp2rawOutbound {
        address: address?,
        port: port?,
        tuning: tuning?,
    })
}

/// `streamSettings.udp2rawSettings` (Skiff's own key): the tuning keys only, with the same
/// names and defaults. The server is the outbound's address and port (the inbound's listen
/// and port), so `target`, `address` and `port` are errors here.
pub fn layer(
    value: &serde_json::Value,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<Udp2rawTuning> {
    let s = crate::decode::decode::<Udp2rawSettings>(value, loc, diags)?;
    let before = error_count(diags);
    for (key, given) in [
        ("target", s.target.is_some()),
        ("address", s.address.is_some()),
        ("port", s.port.is_some()),
    ] {
        if given {
            diags.push(loc.key(key).error(format!(
                "`{key}` is a key of the udp2raw protocol's settings: under a transport, the tunnel's server is the outbound's server (an inbound's listen and port)"
            )));
        }
    }
    let tuning = tuning(&s, loc, diags);
    (error_count(diags) == before).then_some(tuning?)
}

fn named<T>(
    value: Option<&str>,
    default: T,
    parse: impl Fn(&str) -> Option<T>,
    names: &str,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> T {
    let Some(v) = value else { return default };
    parse(v.trim()).unwrap_or_else(|| {
        diags.push(loc.error(format!("`{v}` is not one of {names}")));
        default
    })
}

fn tuning(s: &Udp2rawSettings, loc: &Loc, diags: &mut Vec<Diagnostic>) -> Option<Udp2rawTuning> {
    let before = error_count(diags);
    let raw_mode = named(
        s.raw_mode.as_deref(),
        RawMode::FakeTcp,
        RawMode::from_name,
        "\"faketcp\", \"udp\", \"icmp\"",
        &loc.key("rawMode"),
        diags,
    );
    let cipher = named(
        s.cipher_mode.as_deref(),
        CipherMode::Aes128Cbc,
        |n| CipherMode::from_name(n).filter(|m| *m != CipherMode::Aes128CfbOld),
        "\"aes128cbc\", \"aes128cfb\", \"xor\", \"none\"",
        &loc.key("cipherMode"),
        diags,
    );
    let auth = named(
        s.auth_mode.as_deref(),
        AuthMode::Md5,
        AuthMode::from_name,
        "\"md5\", \"crc32\", \"simple\", \"hmac_sha1\", \"none\"",
        &loc.key("authMode"),
        diags,
    );
    let seq_mode = match s.seq_mode {
        None => 3,
        Some(v) => v.within(0, 4).unwrap_or_else(|| {
            diags.push(loc.key("seqMode").error(out_of_range(v, "an integer 0–4")));
            3
        }) as u8,
    };
    let key = match s.key.as_deref() {
        None => "secret key".to_string(),
        Some(k) => {
            if k.is_empty() || k.chars().any(|c| c.is_whitespace() || c == '\0') {
                diags.push(loc.key("key").error(
                    "`key` must be one word without whitespace (udp2raw reads only the first word of -k)",
                ));
            }
            k.to_string()
        }
    };
    if error_count(diags) > before {
        return None;
    }
    Some(Udp2rawTuning {
        key: key.into_bytes(),
        raw_mode,
        cipher,
        auth,
        seq_mode,
        fix_gro: s.fix_gro.unwrap_or(false),
        auto_rule: s.auto_rule.unwrap_or(false),
    })
}
