//! Protocol names and the `settings` of each supported protocol. The settings object is kept
//! raw until here; once the protocol is known it is decoded into that protocol's struct with
//! the `settings` path as prefix (so unknown keys and type errors name the full path).

use std::net::IpAddr;

use serde_json::{Map, Value};
use skiff_core::{Cidr, Networks};

use super::routing::{domain_entry, domain_set, each};
use super::{error_count, lower, user_level};
use crate::decode::decode;
use crate::diag::Diagnostic;
use crate::plan::{
    Account, BlackholeOutbound, BlackholeResponse, FreedomDomainStrategy, FreedomOutbound,
    HttpInbound, InboundProtocol, OutboundProtocol, SocksInbound, TunnelInbound,
};
use crate::raw::settings::{
    BlackholeSettings, DnsOutboundSettings, FreedomSettings, HttpSettings, RawAccount,
    RawFinalRule, SocksSettings, TunnelSettings,
};
use crate::raw::values::{PORT_NUMBER, out_of_range};
use crate::source::Loc;

mod common;
mod fallbacks;
pub(super) mod kcptun;
mod shadowsocks;
mod trojan;
pub(super) mod udp2raw;
mod udpspeeder;
mod vless;
mod vmess;

/// Xray protocols skiff does not implement yet (either direction).
const NOT_YET: &[&str] = &["wireguard", "hysteria", "hysteria2", "mtproto"];
const INBOUND_ONLY: &[&str] = &["dokodemo-door", "tunnel", "tun"];
const OUTBOUND_ONLY: &[&str] = &["freedom", "blackhole", "dns", "loopback"];

/// The protocol name, lowercased as Xray does, or an error when it is missing.
fn protocol_name(name: Option<&str>, loc: &Loc, diags: &mut Vec<Diagnostic>) -> Option<String> {
    let name = lower(name);
    if name.is_none() {
        diags.push(loc.key("protocol").error("missing `protocol`"));
    }
    name
}

fn not_supported(name: &str, loc: &Loc) -> Diagnostic {
    loc.key("protocol").error(format!(
        "protocol `{name}` is not supported by this version of skiff yet"
    ))
}

/// Decodes `settings` (absent or null = `{}`, as in Xray).
fn settings<T: serde::de::DeserializeOwned>(
    settings: Option<&Value>,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<T> {
    let empty = Value::Object(Map::new());
    decode(settings.unwrap_or(&empty), loc, diags)
}

pub fn inbound_protocol(
    name: Option<&str>,
    raw_settings: Option<&Value>,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<InboundProtocol> {
    let name = protocol_name(name, loc, diags)?;
    let sloc = loc.key("settings");
    match name.as_str() {
        "socks" => {
            socks(settings(raw_settings, &sloc, diags)?, &sloc, diags).map(InboundProtocol::Socks)
        }
        "http" => {
            http(settings(raw_settings, &sloc, diags)?, &sloc, diags).map(InboundProtocol::Http)
        }
        "dokodemo-door" | "tunnel" => {
            tunnel(settings(raw_settings, &sloc, diags)?, &sloc, diags).map(InboundProtocol::Tunnel)
        }
        "vless" => vless::inbound(settings(raw_settings, &sloc, diags)?, &sloc, diags)
            .map(InboundProtocol::Vless),
        "trojan" => trojan::inbound(settings(raw_settings, &sloc, diags)?, &sloc, diags)
            .map(InboundProtocol::Trojan),
        "shadowsocks" => shadowsocks::inbound(settings(raw_settings, &sloc, diags)?, &sloc, diags)
            .map(InboundProtocol::Shadowsocks),
        "vmess" => vmess::inbound(settings(raw_settings, &sloc, diags)?, &sloc, diags)
            .map(InboundProtocol::Vmess),
        "kcptun" => kcptun::inbound(settings(raw_settings, &sloc, diags)?, &sloc, diags)
            .map(InboundProtocol::Kcptun),
        "udpspeeder" => udpspeeder::inbound(settings(raw_settings, &sloc, diags)?, &sloc, diags)
            .map(InboundProtocol::Udpspeeder),
        "udp2raw" => udp2raw::inbound(settings(raw_settings, &sloc, diags)?, &sloc, diags)
            .map(InboundProtocol::Udp2raw),
        n if NOT_YET.contains(&n) || n == "tun" => {
            diags.push(not_supported(n, loc));
            None
        }
        n if OUTBOUND_ONLY.contains(&n) => {
            diags.push(
                loc.key("protocol")
                    .error(format!("`{n}` is an outbound protocol, not an inbound one")),
            );
            None
        }
        n => {
            diags.push(loc.key("protocol").error(format!("unknown protocol `{n}`")));
            None
        }
    }
}

pub fn outbound_protocol(
    name: Option<&str>,
    raw_settings: Option<&Value>,
    loc: &Loc,
    geo: &std::cell::RefCell<super::geo_load::GeoLoader>,
    diags: &mut Vec<Diagnostic>,
) -> Option<OutboundProtocol> {
    let name = protocol_name(name, loc, diags)?;
    let sloc = loc.key("settings");
    match name.as_str() {
        "freedom" => freedom(settings(raw_settings, &sloc, diags)?, &sloc, diags)
            .map(OutboundProtocol::Freedom),
        "blackhole" => blackhole(settings(raw_settings, &sloc, diags)?, &sloc, diags)
            .map(OutboundProtocol::Blackhole),
        "vless" => vless::outbound(settings(raw_settings, &sloc, diags)?, &sloc, diags)
            .map(OutboundProtocol::Vless),
        "trojan" => trojan::outbound(settings(raw_settings, &sloc, diags)?, &sloc, diags)
            .map(OutboundProtocol::Trojan),
        "shadowsocks" => shadowsocks::outbound(settings(raw_settings, &sloc, diags)?, &sloc, diags)
            .map(OutboundProtocol::Shadowsocks),
        "vmess" => vmess::outbound(settings(raw_settings, &sloc, diags)?, &sloc, diags)
            .map(OutboundProtocol::Vmess),
        "kcptun" => kcptun::outbound(settings(raw_settings, &sloc, diags)?, &sloc, diags)
            .map(OutboundProtocol::Kcptun),
        "udpspeeder" => udpspeeder::outbound(settings(raw_settings, &sloc, diags)?, &sloc, diags)
            .map(OutboundProtocol::Udpspeeder),
        "udp2raw" => udp2raw::outbound(settings(raw_settings, &sloc, diags)?, &sloc, diags)
            .map(OutboundProtocol::Udp2raw),
        "dns" => dns_outbound(settings(raw_settings, &sloc, diags)?, &sloc, geo, diags)
            .map(OutboundProtocol::Dns),
        n if NOT_YET.contains(&n) || ["socks", "http", "loopback"].contains(&n) => {
            diags.push(not_supported(n, loc));
            None
        }
        n if INBOUND_ONLY.contains(&n) => {
            diags.push(
                loc.key("protocol")
                    .error(format!("`{n}` is an inbound protocol, not an outbound one")),
            );
            None
        }
        n => {
            diags.push(loc.key("protocol").error(format!("unknown protocol `{n}`")));
            None
        }
    }
}

/// `accounts` (and `users`, the newer name) of socks/http. `max_len`: socks5 limits user
/// names and passwords to 255 bytes (RFC 1929).
fn accounts(
    lists: [(&str, &Option<Vec<RawAccount>>); 2],
    loc: &Loc,
    max_len: Option<usize>,
    diags: &mut Vec<Diagnostic>,
) -> Vec<Account> {
    let mut out = Vec::new();
    for (key, list) in lists {
        for (i, account) in list.iter().flatten().enumerate() {
            let aloc = loc.key(key).index(i);
            let user = match account.user.as_deref() {
                None => {
                    diags.push(aloc.key("user").error("missing `user`"));
                    continue;
                }
                Some("") => {
                    diags.push(aloc.key("user").error("`user` must not be empty"));
                    continue;
                }
                Some(user) => user,
            };
            let Some(pass) = account.pass.as_deref() else {
                diags.push(aloc.key("pass").error("missing `pass`"));
                continue;
            };
            if let Some(max) = max_len {
                for (field, value) in [("user", user), ("pass", pass)] {
                    if value.len() > max {
                        diags.push(
                            aloc.key(field)
                                .error(format!("socks5 allows at most {max} bytes here")),
                        );
                    }
                }
            }
            out.push(Account {
                user: user.to_owned(),
                pass: pass.to_owned(),
            });
        }
    }
    out
}

fn socks(s: SocksSettings, loc: &Loc, diags: &mut Vec<Diagnostic>) -> Option<SocksInbound> {
    let before = error_count(diags);
    let listed = accounts(
        [("accounts", &s.accounts), ("users", &s.users)],
        loc,
        Some(255),
        diags,
    );
    let accounts = match lower(s.auth.as_deref()).as_deref() {
        None | Some("noauth") => {
            if !listed.is_empty() {
                diags.push(
                    loc.key("accounts")
                        .warning("accounts are ignored because `auth` is not \"password\""),
                );
            }
            Vec::new()
        }
        Some("password") => {
            if listed.is_empty() && error_count(diags) == before {
                diags.push(
                    loc.key("auth")
                        .error("`auth` is \"password\" but no accounts are given"),
                );
            }
            listed
        }
        Some(other) => {
            diags.push(loc.key("auth").error(format!(
                "unknown auth `{other}` (expected \"noauth\" or \"password\")"
            )));
            Vec::new()
        }
    };
    let announce_ip = s.ip.as_deref().and_then(|ip| {
        ip.trim()
            .parse::<IpAddr>()
            .map_err(|_| diags.push(loc.key("ip").error(format!("`{ip}` is not an IP address"))))
            .ok()
    });
    let user_level = user_level(s.user_level, &loc.key("userLevel"), diags);
    (error_count(diags) == before).then_some(SocksInbound {
        accounts,
        udp: s.udp.unwrap_or(false),
        announce_ip,
        user_level,
    })
}

fn http(s: HttpSettings, loc: &Loc, diags: &mut Vec<Diagnostic>) -> Option<HttpInbound> {
    let before = error_count(diags);
    let accounts = accounts(
        [("accounts", &s.accounts), ("users", &s.users)],
        loc,
        None,
        diags,
    );
    if s.timeout.is_some() {
        diags.push(deprecated_timeout(loc));
    }
    let user_level = user_level(s.user_level, &loc.key("userLevel"), diags);
    (error_count(diags) == before).then_some(HttpInbound {
        accounts,
        allow_transparent: s.allow_transparent.unwrap_or(false),
        user_level,
    })
}

fn deprecated_timeout(loc: &Loc) -> Diagnostic {
    loc.key("timeout").warning(
        "`timeout` is deprecated and ignored; set policy.levels.<userLevel>.connIdle instead",
    )
}

/// A destination host as Xray accepts it: an IP literal (IPv6 optionally in brackets) or a
/// domain name.
pub(super) fn valid_host(host: &str) -> bool {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    bare.parse::<IpAddr>().is_ok()
        || (!bare.is_empty()
            && bare.len() <= 253
            && bare
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_')))
}

fn tunnel(s: TunnelSettings, loc: &Loc, diags: &mut Vec<Diagnostic>) -> Option<TunnelInbound> {
    let before = error_count(diags);
    let follow_redirect = s.follow_redirect.unwrap_or(false);
    let (address_key, address) = match (&s.address, &s.rewrite_address) {
        (Some(a), _) => ("address", Some(a.trim())),
        (None, Some(a)) => ("rewriteAddress", Some(a.trim())),
        (None, None) => ("address", None),
    };
    let address = match address.filter(|a| !a.is_empty()) {
        Some(a) if valid_host(a) => Some(a.to_owned()),
        Some(a) => {
            diags.push(
                loc.key(address_key)
                    .error(format!("`{a}` is not an IP address or domain name")),
            );
            None
        }
        None if follow_redirect => None,
        None => {
            diags.push(loc.key(address_key).error(
                "missing `address`: dokodemo-door needs a destination address unless followRedirect is true",
            ));
            None
        }
    };
    // Xray: a non-zero `port` overrides `rewritePort`.
    let (port_key, port) = match (s.port, s.rewrite_port) {
        (Some(p), _) if !p.is_zero() => ("port", Some(p)),
        (_, Some(p)) => ("rewritePort", Some(p)),
        (p, None) => ("port", p),
    };
    let port = match port {
        Some(p) if p.within(1, 65535).is_some() => p.get::<u16>().unwrap_or(0),
        Some(p) if !p.is_zero() => {
            diags.push(loc.key(port_key).error(out_of_range(p, PORT_NUMBER)));
            0
        }
        _ if follow_redirect => 0,
        // Xray accepts this without a word: its own API example leaves the port out of the
        // dokodemo-door a rule routes to the API, where nothing is dialled. Routed anywhere
        // else, the connection fails at connect, naming port 0.
        _ => 0,
    };
    let (network_key, network) = match (&s.network, &s.allowed_network) {
        (Some(n), _) => ("network", Some(n)),
        (None, Some(n)) => ("allowedNetwork", Some(n)),
        (None, None) => ("network", None),
    };
    let network = match network {
        None => Networks::TCP,
        Some(list) => list.networks().unwrap_or_else(|e| {
            diags.push(loc.key(network_key).error(e));
            Networks::TCP
        }),
    };
    if s.port_map.is_some() {
        diags.push(
            loc.key("portMap")
                .error("`portMap` is not supported by this version of skiff yet"),
        );
    }
    if s.timeout.is_some() {
        diags.push(deprecated_timeout(loc));
    }
    let user_level = user_level(s.user_level, &loc.key("userLevel"), diags);
    (error_count(diags) == before).then_some(TunnelInbound {
        address,
        port,
        network,
        follow_redirect,
        user_level,
    })
}

fn freedom(s: FreedomSettings, loc: &Loc, diags: &mut Vec<Diagnostic>) -> Option<FreedomOutbound> {
    let before = error_count(diags);
    let domain_strategy = match lower(s.domain_strategy.as_deref()).as_deref() {
        None | Some("asis") => FreedomDomainStrategy::AsIs,
        // Preference orders between families are not modelled: both resolve to "any IP".
        Some("useip" | "useipv4v6" | "useipv6v4") => FreedomDomainStrategy::UseIp,
        Some("useipv4") => FreedomDomainStrategy::UseIpv4,
        Some("useipv6") => FreedomDomainStrategy::UseIpv6,
        Some(other) => {
            let original = s.domain_strategy.as_deref().unwrap_or(other);
            let message = if other.starts_with("forceip") {
                format!("domainStrategy `{original}` is not supported by this version of skiff yet")
            } else {
                format!(
                    "unknown domainStrategy `{original}` (expected AsIs, UseIP, UseIPv4 or UseIPv6)"
                )
            };
            diags.push(loc.key("domainStrategy").error(message));
            FreedomDomainStrategy::AsIs
        }
    };
    let redirect = s
        .redirect
        .as_deref()
        .filter(|r| !r.trim().is_empty())
        .and_then(|r| {
            let parsed = parse_redirect(r.trim());
            if parsed.is_none() {
                diags.push(loc.key("redirect").error(format!(
                    "`{r}` is not host:port (e.g. \"127.0.0.1:80\", \":443\" or \"example.com:0\")"
                )));
            }
            parsed
        });
    for key in ["fragment", "noises"] {
        let present = if key == "fragment" {
            s.fragment.is_some()
        } else {
            s.noises.is_some()
        };
        if present {
            diags.push(loc.key(key).error(format!(
                "`{key}` is not supported by this version of skiff yet"
            )));
        }
    }
    if let Some(v) = s.proxy_protocol.filter(|v| !v.is_zero()) {
        diags.push(loc.key("proxyProtocol").error(format!(
            "proxyProtocol {v} is not supported by this version of skiff yet (only 0, off)"
        )));
    }
    for (i, rule) in s.final_rules.iter().flatten().enumerate() {
        final_rule(rule, &loc.key("finalRules").index(i), diags);
    }
    // `userLevel` is accepted: the connection keeps the level its inbound gave it.
    let _ = user_level(s.user_level, &loc.key("userLevel"), diags);
    (error_count(diags) == before).then_some(FreedomOutbound {
        domain_strategy,
        redirect,
    })
}

/// `host:port` with an optional empty host (keep the original host) and port 0 (keep the
/// original port); IPv6 hosts in brackets.
pub(super) fn parse_redirect(text: &str) -> Option<(String, u16)> {
    let (host, port) = text.rsplit_once(':')?;
    let port: u16 = port.parse().ok()?;
    let host = match host.strip_prefix('[') {
        Some(inner) => inner
            .strip_suffix(']')?
            .parse::<std::net::Ipv6Addr>()
            .ok()?
            .to_string(),
        None if host.contains(':') => return None,
        None if host.is_empty() => String::new(),
        None if valid_host(host) => host.to_owned(),
        None => return None,
    };
    Some((host, port))
}

/// Freedom's `finalRules`. Xray's freedom blocks private and reserved destinations for traffic
/// from some inbounds unless a rule allows them; skiff's freedom never blocks anything, so an
/// `allow` rule changes nothing and is accepted as a no-op (its syntax is still checked).
/// `block` rules would need that filtering: an error rather than a rule silently not applied.
fn final_rule(rule: &RawFinalRule, loc: &Loc, diags: &mut Vec<Diagnostic>) {
    match lower(rule.action.as_deref()).as_deref() {
        Some("allow") => {}
        Some("block") => diags.push(loc.key("action").error(
            "finalRules with action \"block\" are not supported by this version of skiff yet (use a routing rule to a blackhole outbound)",
        )),
        Some(other) => diags.push(loc.key("action").error(format!("unknown action `{other}` (expected allow or block)"))),
        None => diags.push(loc.key("action").error("missing `action` (allow or block)")),
    }
    if let Some(Err(e)) = rule.network.as_ref().map(|n| n.networks()) {
        diags.push(loc.key("network").error(e));
    }
    if let Some(Err(e)) = rule.port.as_ref().map(|p| p.ranges(true)) {
        diags.push(loc.key("port").error(e));
    }
    if let Some(list) = &rule.ip {
        for (i, ip) in list.items.iter().enumerate() {
            let ip = ip.trim();
            // Named lists only matter to an allow rule, which is a no-op: don't require them.
            if ip.starts_with("geoip:") || ip.starts_with("ext:") || ip.starts_with("ext-ip:") {
                continue;
            }
            if let Err(e) = Cidr::parse(ip) {
                let iloc = if list.was_list {
                    loc.key("ip").index(i)
                } else {
                    loc.key("ip")
                };
                diags.push(iloc.error(e));
            }
        }
    }
}

/// The `dns` outbound's settings. The legacy `nonIPQuery`/`blockTypes` become rules exactly
/// as Xray 26 turns them into rules, so both spellings behave the same.
fn dns_outbound(
    s: DnsOutboundSettings,
    loc: &Loc,
    geo: &std::cell::RefCell<super::geo_load::GeoLoader>,
    diags: &mut Vec<Diagnostic>,
) -> Option<skiff_dns::outbound::DnsOutboundConfig> {
    use skiff_dns::outbound::{Action, DnsOutboundConfig, Rule};
    let before = error_count(diags);
    let pick = |short: &'static str, long: &'static str, a: bool, b: bool| {
        if a || !b { short } else { long }
    };
    let network_key = pick(
        "network",
        "rewriteNetwork",
        s.network.is_some(),
        s.rewrite_network.is_some(),
    );
    let network = match lower(s.network.as_deref().or(s.rewrite_network.as_deref())).as_deref() {
        None => None,
        Some("tcp") => Some(skiff_core::Network::Tcp),
        Some("udp") => Some(skiff_core::Network::Udp),
        Some(other) => {
            diags.push(
                loc.key(network_key)
                    .error(format!("unknown network `{other}` (expected tcp or udp)")),
            );
            None
        }
    };
    let address_key = pick(
        "address",
        "rewriteAddress",
        s.address.is_some(),
        s.rewrite_address.is_some(),
    );
    let address = match s
        .address
        .as_deref()
        .or(s.rewrite_address.as_deref())
        .map(str::trim)
        .filter(|a| !a.is_empty())
    {
        None => None,
        Some(a) if valid_host(a) => Some(a.to_owned()),
        Some(a) => {
            diags.push(
                loc.key(address_key)
                    .error(format!("`{a}` is not an IP address or domain name")),
            );
            None
        }
    };
    // Xray: a non-zero `port` overrides `rewritePort`; 0 keeps the query's own port.
    let (port_key, port) = match (s.port, s.rewrite_port) {
        (Some(p), _) if !p.is_zero() => ("port", Some(p)),
        (_, Some(p)) => ("rewritePort", Some(p)),
        (p, None) => ("port", p),
    };
    let port = match port {
        None => 0,
        Some(p) => p.get::<u16>().unwrap_or_else(|| {
            diags.push(
                loc.key(port_key)
                    .error(out_of_range(p, "a port number 0–65535")),
            );
            0
        }),
    };
    let _ = user_level(s.user_level, &loc.key("userLevel"), diags);

    let legacy = s.non_ip_query.is_some() || s.block_types.is_some();
    let mut rules = Vec::new();
    if legacy {
        let key = if s.non_ip_query.is_some() {
            "nonIPQuery"
        } else {
            "blockTypes"
        };
        if s.rules.is_some() {
            diags.push(
                loc.key(key).error(
                    "`nonIPQuery` and `blockTypes` cannot be mixed with `rules` (as in Xray)",
                ),
            );
        } else {
            diags.push(loc.key(key).warning(
                "`nonIPQuery` and `blockTypes` are deprecated in Xray in favour of `rules`; accepted",
            ));
        }
        let mode = lower(s.non_ip_query.as_deref()).unwrap_or_else(|| "reject".into());
        if !["reject", "drop", "skip"].contains(&mode.as_str()) {
            diags.push(loc.key("nonIPQuery").error(format!(
                "unknown nonIPQuery `{mode}` (expected reject, drop or skip)"
            )));
        }
        // Xray's REFUSED for rejected queries.
        let refuse = Rule {
            action: Action::Return,
            qtypes: Vec::new(),
            rcode: 5,
            domains: None,
        };
        let mut blocked = Vec::new();
        for (i, t) in s.block_types.iter().flatten().enumerate() {
            match t.get::<u16>() {
                Some(t) => blocked.push((t, t)),
                None => diags.push(
                    loc.key("blockTypes")
                        .index(i)
                        .error(out_of_range(t, "a query type 0–65535")),
                ),
            }
        }
        if !blocked.is_empty() {
            rules.push(if mode == "reject" {
                Rule {
                    qtypes: blocked,
                    ..refuse.clone()
                }
            } else {
                Rule {
                    action: Action::Drop,
                    qtypes: blocked,
                    rcode: 0,
                    domains: None,
                }
            });
        }
        rules.push(Rule {
            action: Action::Hijack,
            qtypes: vec![(1, 1), (28, 28)],
            rcode: 0,
            domains: None,
        });
        rules.push(match mode.as_str() {
            "drop" => Rule {
                action: Action::Drop,
                qtypes: Vec::new(),
                rcode: 0,
                domains: None,
            },
            "skip" => Rule {
                action: Action::Direct,
                qtypes: Vec::new(),
                rcode: 0,
                domains: None,
            },
            _ => refuse,
        });
    } else {
        for (i, raw) in s.rules.iter().flatten().enumerate() {
            let rloc = loc.key("rules").index(i);
            let action = match lower(raw.action.as_deref()).as_deref() {
                Some("direct") => Action::Direct,
                Some("drop") => Action::Drop,
                Some("return") => Action::Return,
                Some("hijack") => Action::Hijack,
                Some(other) => {
                    diags.push(rloc.key("action").error(format!(
                        "unknown action `{other}` (expected direct, drop, return or hijack)"
                    )));
                    continue;
                }
                None => {
                    diags.push(
                        rloc.key("action")
                            .error("missing `action` (direct, drop, return or hijack)"),
                    );
                    continue;
                }
            };
            let qtypes = match raw.q_type.as_ref().map(|q| q.ranges(true)) {
                None => Vec::new(),
                Some(Ok(ranges)) => ranges.iter().map(|r| (r.first, r.last)).collect(),
                Some(Err(e)) => {
                    diags.push(rloc.key("qType").error(e));
                    continue;
                }
            };
            // Routing's forms (a plain entry is a substring, as in Xray's dns rules).
            let dloc = rloc.key("domain");
            let entries = each(raw.domain.as_ref(), &dloc, diags, domain_entry);
            let domains = domain_set(raw.domain.as_ref(), &entries, &dloc, geo, diags);
            let rcode = match raw.r_code {
                None => 0,
                Some(c) => match c.get::<u16>() {
                    Some(c) if c <= 0x0fff => c,
                    // 12 bits is all a DNS message (with EDNS) can carry.
                    _ => {
                        diags.push(rloc.key("rCode").error(out_of_range(c, "an rcode 0–4095")));
                        continue;
                    }
                },
            };
            rules.push(Rule {
                action,
                qtypes,
                rcode,
                domains,
            });
        }
    }
    (error_count(diags) == before).then_some(DnsOutboundConfig {
        network,
        address,
        port,
        rules,
    })
}

fn blackhole(
    s: BlackholeSettings,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<BlackholeOutbound> {
    let kind = s.response.as_ref().and_then(|r| r.kind.as_deref());
    let response = match lower(kind).as_deref() {
        None | Some("none") => BlackholeResponse::None,
        Some("http") => BlackholeResponse::Http,
        Some(other) => {
            diags.push(loc.key("response").key("type").error(format!(
                "unknown response type `{other}` (expected none or http)"
            )));
            return None;
        }
    };
    Some(BlackholeOutbound { response })
}

#[cfg(test)]
mod tests {
    use super::parse_redirect;

    #[test]
    fn redirect_forms() {
        assert_eq!(
            parse_redirect("127.0.0.1:80"),
            Some(("127.0.0.1".into(), 80))
        );
        assert_eq!(parse_redirect(":443"), Some((String::new(), 443)));
        assert_eq!(
            parse_redirect("example.com:0"),
            Some(("example.com".into(), 0))
        );
        assert_eq!(parse_redirect("[::1]:53"), Some(("::1".into(), 53)));
        assert_eq!(parse_redirect("::1:53"), None);
        assert_eq!(parse_redirect("host"), None);
        assert_eq!(parse_redirect("host:99999"), None);
        assert_eq!(parse_redirect("bad host:1"), None);
    }
}
