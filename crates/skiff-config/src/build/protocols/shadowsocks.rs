//! Shadowsocks `settings` in Xray's format (infra/conf/shadowsocks.go): inbound users (one in
//! `method`/`password`, several in `clients`; 2022 multi-user with identity headers) and the
//! outbound server. Methods and keys are parsed by the protocol code itself, so a config that
//! loads has keys the handlers accept.

use std::collections::HashSet;

use skiff_core::Networks;
use skiff_proto::shadowsocks::method::{client_keys, key_from_password};
use skiff_proto::shadowsocks::{Method, MethodError};

use super::super::error_count;
use super::valid_host;
use crate::diag::Diagnostic;
use crate::plan::{
    Password, ShadowsocksInbound, ShadowsocksKey, ShadowsocksOutbound, ShadowsocksUser,
};
use crate::raw::settings::{
    RawShadowsocksServer, RawShadowsocksUser, ShadowsocksInboundSettings,
    ShadowsocksOutboundSettings,
};
use crate::raw::values::{Int, LEVEL, PORT_NUMBER, out_of_range};
use crate::source::Loc;

/// `method` at `loc`: parsed, or an error naming the problem (insecure, none, unknown).
fn method(name: Option<&str>, loc: &Loc, diags: &mut Vec<Diagnostic>) -> Option<Method> {
    let name = name.map(str::trim).filter(|n| !n.is_empty());
    let Some(name) = name else {
        diags.push(
            loc.error("missing `method` (e.g. \"aes-128-gcm\" or \"2022-blake3-aes-128-gcm\")"),
        );
        return None;
    };
    match Method::from_name(name) {
        Ok(m) => Some(m),
        Err(e @ (MethodError::Insecure(_) | MethodError::Plain(_) | MethodError::Unknown(_))) => {
            diags.push(loc.error(e.to_string()));
            None
        }
    }
}

/// `password` at `loc` as the key of `method`.
fn key(
    method: Method,
    password: Option<&str>,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<ShadowsocksKey> {
    let Some(password) = password else {
        diags.push(loc.error("missing `password`"));
        return None;
    };
    match key_from_password(method, password) {
        Ok(k) => Some(ShadowsocksKey(k)),
        Err(e) => {
            diags.push(loc.error(format!("invalid password for {method}: {e}")));
            None
        }
    }
}

fn level(value: Option<Int>, loc: &Loc, diags: &mut Vec<Diagnostic>) -> u32 {
    match value {
        None => 0,
        Some(v) => v.get::<u32>().unwrap_or_else(|| {
            diags.push(loc.error(out_of_range(v, LEVEL)));
            0
        }),
    }
}

fn email(value: Option<&str>) -> Option<String> {
    value
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(str::to_owned)
}

pub fn inbound(
    s: ShadowsocksInboundSettings,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<ShadowsocksInbound> {
    let before = error_count(diags);
    let (list_key, list) = match (&s.clients, &s.users) {
        (Some(_), Some(_)) => {
            diags.push(
                loc.key("users")
                    .error("give the users in either `clients` or `users`, not both"),
            );
            return None;
        }
        (Some(c), None) => ("clients", c.as_slice()),
        (None, Some(u)) => ("users", u.as_slice()),
        (None, None) => ("clients", &[][..]),
    };
    let top = match s.method.as_deref() {
        None if !list.is_empty() => None,
        name => method(name, &loc.key("method"), diags),
    };
    let network = match &s.network {
        None => Networks::TCP,
        Some(n) => n.networks().unwrap_or_else(|e| {
            diags.push(loc.key("network").error(e));
            Networks::TCP
        }),
    };
    let mut users = Vec::new();
    let mut identity_key = None;
    if list.is_empty() {
        if let Some(m) = top
            && let Some(k) = key(m, s.password.as_deref(), &loc.key("password"), diags)
        {
            users.push(ShadowsocksUser {
                method: m,
                key: k,
                password: Password(s.password.clone().unwrap_or_default()),
                email: email(s.email.as_deref()),
                level: level(s.level, &loc.key("level"), diags),
            });
        }
    } else if let Some(m) = top.filter(|m| m.is_2022()) {
        // 2022 multi-user: the top-level password is the server's identity key.
        if !m.is_2022_aes() {
            diags.push(loc.key("method").error(format!(
                "{m} serves one user only: multi-user 2022 needs identity headers, which only 2022-blake3-aes-128-gcm and 2022-blake3-aes-256-gcm have"
            )));
        }
        identity_key = key(m, s.password.as_deref(), &loc.key("password"), diags);
        for (i, raw) in list.iter().enumerate() {
            let uloc = loc.key(list_key).index(i);
            users.extend(user_2022(m, raw, &uloc, diags));
        }
    } else {
        if s.password.is_some() {
            diags.push(
                loc.key("password")
                    .warning("ignored: with `clients`, every AEAD client has its own `password`"),
            );
        }
        for (i, raw) in list.iter().enumerate() {
            let uloc = loc.key(list_key).index(i);
            users.extend(user_2017(top, raw, &uloc, diags));
        }
    }
    let mut emails = HashSet::new();
    for (i, u) in users.iter().enumerate() {
        if let Some(e) = &u.email
            && !emails.insert(e.to_lowercase())
        {
            diags.push(
                loc.key(list_key)
                    .index(i)
                    .key("email")
                    .error(format!("another client already has the email `{e}`")),
            );
        }
    }
    if error_count(diags) > before {
        return None;
    }
    Some(ShadowsocksInbound {
        users,
        identity_key,
        network,
    })
}

fn relay_refused(raw: &RawShadowsocksUser, loc: &Loc, diags: &mut Vec<Diagnostic>) {
    if raw.address.is_some() || raw.port.is_some() {
        let key = if raw.address.is_some() {
            "address"
        } else {
            "port"
        };
        diags.push(loc.key(key).error(
            "Shadowsocks 2022 relay users (clients with an address) are not supported by this version of skiff",
        ));
    }
}

fn user_2022(
    server: Method,
    raw: &RawShadowsocksUser,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<ShadowsocksUser> {
    relay_refused(raw, loc, diags);
    if let Some(name) = raw.method.as_deref().filter(|n| !n.trim().is_empty())
        && Method::from_name(name) != Ok(server)
    {
        diags.push(loc.key("method").error(format!(
            "multi-user 2022 clients use the server's method ({server}); leave `method` out"
        )));
        return None;
    }
    let k = key(server, raw.password.as_deref(), &loc.key("password"), diags)?;
    Some(ShadowsocksUser {
        method: server,
        key: k,
        password: Password(raw.password.clone().unwrap_or_default()),
        email: email(raw.email.as_deref()),
        level: level(raw.level, &loc.key("level"), diags),
    })
}

fn user_2017(
    top: Option<Method>,
    raw: &RawShadowsocksUser,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<ShadowsocksUser> {
    relay_refused(raw, loc, diags);
    let m =
        match raw.method.as_deref() {
            Some(name) => method(Some(name), &loc.key("method"), diags)?,
            None => match top {
                Some(m) => m,
                None => {
                    diags.push(loc.key("method").error(
                        "missing `method` (each client names its own, or set one in settings)",
                    ));
                    return None;
                }
            },
        };
    if m.is_2022() {
        diags.push(loc.key("method").error(format!(
            "a 2022 method ({m}) for one client: 2022 multi-user servers set the method in settings and give clients only a `password`"
        )));
        return None;
    }
    let k = key(m, raw.password.as_deref(), &loc.key("password"), diags)?;
    Some(ShadowsocksUser {
        method: m,
        key: k,
        password: Password(raw.password.clone().unwrap_or_default()),
        email: email(raw.email.as_deref()),
        level: level(raw.level, &loc.key("level"), diags),
    })
}

pub fn outbound(
    s: ShadowsocksOutboundSettings,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<ShadowsocksOutbound> {
    let before = error_count(diags);
    let flat_given =
        s.address.is_some() || s.port.is_some() || s.method.is_some() || s.password.is_some();
    let (server, sloc) = match (&s.servers, flat_given) {
        (Some(_), true) => {
            diags.push(loc.error(
                "give either `servers` or the flat form (`address`, `port`, `method`, `password` in settings), not both",
            ));
            return None;
        }
        (Some(servers), false) => match servers.as_slice() {
            [] => {
                diags.push(
                    loc.key("servers")
                        .error("`servers` is empty: a Shadowsocks outbound needs one server"),
                );
                return None;
            }
            [one] => (one.clone(), loc.key("servers").index(0)),
            more => {
                diags.push(loc.key("servers").index(1).error(format!(
                    "{} servers are listed, but a Shadowsocks outbound has exactly one (as in Xray: use several outbounds and a balancer)",
                    more.len()
                )));
                return None;
            }
        },
        (None, true) => (
            RawShadowsocksServer {
                address: s.address.clone(),
                port: s.port,
                method: s.method.clone(),
                password: s.password.clone(),
                level: s.level,
                email: s.email.clone(),
            },
            loc.clone(),
        ),
        (None, false) => {
            diags.push(
                loc.key("servers").error(
                    "missing `servers`: a Shadowsocks outbound needs a server to connect to",
                ),
            );
            return None;
        }
    };
    let address = match server
        .address
        .as_deref()
        .map(str::trim)
        .filter(|a| !a.is_empty())
    {
        None => {
            diags.push(
                sloc.key("address")
                    .error("missing `address` of the Shadowsocks server"),
            );
            None
        }
        Some(a) if valid_host(a) => Some(
            a.strip_prefix('[')
                .and_then(|a| a.strip_suffix(']'))
                .unwrap_or(a)
                .to_owned(),
        ),
        Some(a) => {
            diags.push(
                sloc.key("address")
                    .error(format!("`{a}` is not an IP address or domain name")),
            );
            None
        }
    };
    let port = match server.port {
        None => {
            diags.push(
                sloc.key("port")
                    .error("missing `port` of the Shadowsocks server"),
            );
            None
        }
        Some(p) => match p.get::<u16>() {
            Some(p) if p != 0 => Some(p),
            _ => {
                diags.push(sloc.key("port").error(out_of_range(p, PORT_NUMBER)));
                None
            }
        },
    };
    let m = method(server.method.as_deref(), &sloc.key("method"), diags);
    let keys = m.and_then(|m| match server.password.as_deref() {
        None => {
            diags.push(sloc.key("password").error("missing `password`"));
            None
        }
        Some(p) => match client_keys(m, p) {
            Ok(keys) => Some(keys),
            Err(e) => {
                diags.push(
                    sloc.key("password")
                        .error(format!("invalid password for {m}: {e}")),
                );
                None
            }
        },
    });
    let level = level(server.level, &sloc.key("level"), diags);
    // `email` is accepted: Xray only counts per-user statistics with it on outbounds.
    let _ = server.email;
    if error_count(diags) > before {
        return None;
    }
    let (identity, key) = keys?;
    Some(ShadowsocksOutbound {
        address: address?,
        port: port?,
        method: m?,
        key: ShadowsocksKey(key),
        identity_keys: identity.into_iter().map(ShadowsocksKey).collect(),
        level,
    })
}
