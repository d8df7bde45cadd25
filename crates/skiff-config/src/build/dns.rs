//! `dns`: Xray's DNS module config into skiff-dns's [`DnsConfig`]. Each host and server is
//! checked at its own path, so every mistake in the section is reported in one run.

use std::cell::RefCell;
use std::net::IpAddr;
use std::time::Duration;

use serde_json::Value;
use skiff_dns::config::DEFAULT_TIMEOUT;
use skiff_dns::{DnsConfig, Endpoint, HostEntry, HostValue, IpFilter, QueryStrategy, ServerConfig};

use super::error_count;
use super::geo_load::GeoLoader;
use super::routing::{domain_entry, domain_set, each, ip_entry, ip_matcher};
use crate::decode::decode;
use crate::diag::Diagnostic;
use crate::plan::{DomainEntry, DomainKind};
use crate::raw::dns::{RawDns, RawNameServer};
use crate::raw::values::StringList;
use crate::raw::{Item, kind};
use crate::source::Loc;

/// Prefixes that give a hosts key its matching kind; a bare key is a full name (Xray's
/// default for hosts, where routing's default is a keyword).
const KEY_PREFIXES: &[&str] = &[
    "domain:",
    "full:",
    "keyword:",
    "regexp:",
    "geosite:",
    "ext:",
    "ext-domain:",
    "ext-site:",
];

pub fn build_dns(
    item: Option<&Item<RawDns>>,
    geo: &RefCell<GeoLoader>,
    diags: &mut Vec<Diagnostic>,
) -> Option<DnsConfig> {
    let Item { loc, raw } = item?;
    let mut config = DnsConfig {
        query_strategy: strategy(
            raw.query_strategy.as_deref(),
            &loc.key("queryStrategy"),
            diags,
        ),
        disable_cache: raw.disable_cache.unwrap_or(false),
        disable_fallback: raw.disable_fallback.unwrap_or(false),
        disable_fallback_if_match: raw.disable_fallback_if_match.unwrap_or(false),
        client_ip: client_ip(raw.client_ip.as_deref(), &loc.key("clientIp"), diags),
        tag: raw.tag.clone().filter(|t| !t.is_empty()),
        ..DnsConfig::default()
    };
    if config.tag.is_some() {
        diags.push(loc.key("tag").warning(
            "DNS queries go out directly in this version of skiff: routing rules on this tag never see them",
        ));
    }
    let ignored = [
        ("serveStale", raw.serve_stale.is_some()),
        ("serveExpiredTTL", raw.serve_expired_ttl.is_some()),
        ("enableParallelQuery", raw.enable_parallel_query.is_some()),
    ];
    for (key, set) in ignored {
        if set {
            diags.push(loc.key(key).warning(format!(
                "`{key}` is accepted and not acted on by this version of skiff"
            )));
        }
    }
    if raw
        .use_system_hosts
        .as_ref()
        .is_some_and(|v| v != &Value::Bool(false))
    {
        diags.push(
            loc.key("useSystemHosts")
                .error("`useSystemHosts` is not supported by this version of skiff yet"),
        );
    }
    for (key, value) in raw.hosts.iter().flatten() {
        if let Some(entry) = host(key, value, &loc.key("hosts").key(key), geo, diags) {
            config.hosts.push(entry);
        }
    }
    for (i, value) in raw.servers.iter().flatten().enumerate() {
        let sloc = loc.key("servers").index(i);
        if let Some(server) = server(value, &sloc, &config, geo, diags) {
            config.servers.push(server);
        }
    }
    Some(config)
}

fn strategy(text: Option<&str>, loc: &Loc, diags: &mut Vec<Diagnostic>) -> QueryStrategy {
    match text.map(QueryStrategy::parse) {
        None => QueryStrategy::default(),
        Some(Ok(s)) => s,
        Some(Err(e)) => {
            diags.push(loc.error(e));
            QueryStrategy::default()
        }
    }
}

fn client_ip(text: Option<&str>, loc: &Loc, diags: &mut Vec<Diagnostic>) -> Option<IpAddr> {
    let text = text.filter(|t| !t.is_empty())?;
    text.parse()
        .map_err(|_| diags.push(loc.error(format!("clientIp `{text}` is not an IP address"))))
        .ok()
}

/// A one-entry list, so the routing helpers report at `loc` itself.
fn single(text: &str) -> StringList {
    StringList {
        items: vec![text.to_owned()],
        was_list: false,
    }
}

fn host(
    key: &str,
    value: &Value,
    loc: &Loc,
    geo: &RefCell<GeoLoader>,
    diags: &mut Vec<Diagnostic>,
) -> Option<HostEntry> {
    let before = error_count(diags);
    let entry = if KEY_PREFIXES.iter().any(|p| key.starts_with(p)) {
        domain_entry(key)
    } else if key.trim().is_empty() {
        Err("empty hosts key".to_owned())
    } else {
        Ok(DomainEntry::Custom(crate::plan::Domain {
            kind: DomainKind::Full,
            value: key.trim().to_ascii_lowercase(),
        }))
    };
    let entry = entry.map_err(|e| diags.push(loc.error(e))).ok()?;
    let matcher = domain_set(Some(&single(key)), &[entry], loc, geo, diags);
    let value = host_value(value, loc, diags);
    if error_count(diags) != before {
        return None;
    }
    Some(HostEntry {
        key: key.to_owned(),
        matcher: matcher?,
        value: value?,
    })
}

/// An IP, a list of IPs, or one domain (an alias), as Xray reads them.
fn host_value(value: &Value, loc: &Loc, diags: &mut Vec<Diagnostic>) -> Option<HostValue> {
    let texts: Vec<(&str, Loc)> = match value {
        Value::String(s) => vec![(s.as_str(), loc.clone())],
        Value::Array(items) => {
            let mut texts = Vec::new();
            for (i, item) in items.iter().enumerate() {
                match item.as_str() {
                    Some(s) => texts.push((s, loc.index(i))),
                    None => diags.push(loc.index(i).error(format!(
                        "invalid type: {}, expected an IP address",
                        kind(item)
                    ))),
                }
            }
            texts
        }
        other => {
            diags.push(loc.error(format!(
                "invalid type: {}, expected an IP address, a list of them or a domain",
                kind(other)
            )));
            return None;
        }
    };
    if texts.is_empty() {
        diags.push(loc.error("no address for this host"));
        return None;
    }
    let mut ips = Vec::new();
    for (text, at) in &texts {
        let text = text.trim();
        if let Ok(ip) = text.trim_matches(['[', ']']).parse::<IpAddr>() {
            ips.push(ip);
        } else if text.starts_with('#') {
            diags.push(at.error(format!(
                "`{text}` (an answer code instead of addresses) is not supported by this version of skiff yet"
            )));
            return None;
        } else if texts.len() == 1
            && Endpoint::parse(text, 0)
                .is_ok_and(|e| matches!(e, Endpoint::Udp(skiff_dns::Host::Name(_), _)))
        {
            return Some(HostValue::Alias(
                text.trim_end_matches('.').to_ascii_lowercase(),
            ));
        } else {
            diags.push(at.error(format!("`{text}` is not an IP address")));
            return None;
        }
    }
    Some(HostValue::Ips(ips))
}

fn server(
    value: &Value,
    loc: &Loc,
    section: &DnsConfig,
    geo: &RefCell<GeoLoader>,
    diags: &mut Vec<Diagnostic>,
) -> Option<ServerConfig> {
    let raw = match value {
        Value::String(address) => RawNameServer {
            address: Some(address.clone()),
            ..RawNameServer::default()
        },
        Value::Object(_) => decode::<RawNameServer>(value, loc, diags)?,
        other => {
            diags.push(loc.error(format!(
                "invalid type: {}, expected an address string or a server object",
                kind(other)
            )));
            return None;
        }
    };
    let before = error_count(diags);
    let port = match raw.port {
        None => 0,
        Some(p) => p.get::<u16>().unwrap_or_else(|| {
            diags.push(loc.key("port").error("port must be 1 to 65535"));
            0
        }),
    };
    let address_loc = if value.is_string() {
        loc.clone()
    } else {
        loc.key("address")
    };
    let endpoint = match raw.address.as_deref() {
        None => {
            diags.push(loc.error("missing `address`"));
            None
        }
        Some(a) => Endpoint::parse(a, port)
            .map_err(|e| diags.push(address_loc.error(e)))
            .ok(),
    };
    let domains_loc = loc.key("domains");
    let entries = each(raw.domains.as_ref(), &domains_loc, diags, domain_entry);
    let domains = domain_set(raw.domains.as_ref(), &entries, &domains_loc, geo, diags);
    // Xray reads `expectedIPs` and falls back to `expectIPs`.
    let (expect_list, expect_key) = match (&raw.expected_ips, &raw.expect_ips) {
        (Some(l), _) => (Some(l), "expectedIPs"),
        (None, l) => (l.as_ref(), "expectIPs"),
    };
    let expect_ips = ip_filter(expect_list, &loc.key(expect_key), geo, diags);
    let unexpected_ips = ip_filter(
        raw.unexpected_ips.as_ref(),
        &loc.key("unexpectedIPs"),
        geo,
        diags,
    );
    let query_strategy = strategy(
        raw.query_strategy.as_deref(),
        &loc.key("queryStrategy"),
        diags,
    );
    let client_ip = client_ip(raw.client_ip.as_deref(), &loc.key("clientIp"), diags);
    let timeout = match raw.timeout_ms {
        None => DEFAULT_TIMEOUT,
        Some(ms) => match ms.get::<u64>() {
            Some(0) => DEFAULT_TIMEOUT,
            Some(ms) if ms <= 60_000 => Duration::from_millis(ms),
            _ => {
                diags.push(loc.key("timeoutMs").error("timeoutMs must be 0 to 60000"));
                DEFAULT_TIMEOUT
            }
        },
    };
    if raw.tag.as_deref().is_some_and(|t| !t.is_empty()) {
        diags.push(loc.key("tag").warning(
            "DNS queries go out directly in this version of skiff: routing rules on this tag never see them",
        ));
    }
    for (key, set) in [
        ("serveStale", raw.serve_stale.is_some()),
        ("serveExpiredTTL", raw.serve_expired_ttl.is_some()),
    ] {
        if set {
            diags.push(loc.key(key).warning(format!(
                "`{key}` is accepted and not acted on by this version of skiff"
            )));
        }
    }
    if error_count(diags) != before {
        return None;
    }
    Some(ServerConfig {
        endpoint: endpoint?,
        domains,
        expect_ips,
        unexpected_ips,
        skip_fallback: raw.skip_fallback.unwrap_or(false),
        query_strategy,
        client_ip,
        timeout,
        disable_cache: raw.disable_cache.unwrap_or(section.disable_cache),
        final_query: raw.final_query.unwrap_or(false),
    })
}

/// `expectIPs`-style lists: routing's `ip` entries, plus Xray's `"*"` meaning "prefer".
fn ip_filter(
    list: Option<&StringList>,
    loc: &Loc,
    geo: &RefCell<GeoLoader>,
    diags: &mut Vec<Diagnostic>,
) -> Option<IpFilter> {
    let list = list?;
    let prefer = list.items.iter().any(|s| s.trim() == "*");
    let rest = StringList {
        items: list
            .items
            .iter()
            .filter(|s| s.trim() != "*")
            .cloned()
            .collect(),
        was_list: list.was_list,
    };
    if rest.items.is_empty() {
        return None;
    }
    let entries = each(Some(&rest), loc, diags, ip_entry);
    let set = ip_matcher(Some(&rest), &entries, loc, geo, diags)?;
    Some(IpFilter { set, prefer })
}
