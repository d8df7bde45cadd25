//! `routing`: rules are checked one by one (each decoded from its raw value with its own
//! path), so a config with five bad rules gets five errors in one run.

use std::cell::RefCell;
use std::collections::HashSet;
use std::sync::Arc;

use skiff_core::{Cidr, PortRange};
use skiff_geodata::domain_set::check_regex;

use super::geo_load::GeoLoader;
use super::{error_count, lower};
use crate::decode::decode;
use crate::diag::Diagnostic;
use crate::plan::{
    BalancerPlan, BalancerStrategy, Domain, DomainEntry, DomainKind, DomainSet, IpEntry, IpMatcher,
    IpSet, RoutingDomainStrategy, RoutingPlan, RulePlan, RuleTarget,
};
use crate::raw::top::{RawBalancer, RawRouting, RawRule};
use crate::raw::values::{PortSpec, StringList};
use crate::raw::{Damage, Item, kind};
use crate::source::Loc;

pub fn build_routing(
    item: Option<&Item<RawRouting>>,
    outbound_tags: &HashSet<String>,
    inbound_tags: &HashSet<String>,
    damage: &Damage,
    geo: GeoLoader,
    diags: &mut Vec<Diagnostic>,
) -> RoutingPlan {
    let Some(Item { loc, raw }) = item else {
        return RoutingPlan::default();
    };
    let domain_strategy = match lower(raw.domain_strategy.as_deref()).as_deref() {
        None | Some("asis") => RoutingDomainStrategy::AsIs,
        Some("ipifnonmatch") => RoutingDomainStrategy::IpIfNonMatch,
        Some("ipondemand") => RoutingDomainStrategy::IpOnDemand,
        Some(_) => {
            diags.push(loc.key("domainStrategy").error(format!(
                "unknown domainStrategy `{}` (expected AsIs, IPIfNonMatch or IPOnDemand)",
                raw.domain_strategy.as_deref().unwrap_or_default()
            )));
            RoutingDomainStrategy::AsIs
        }
    };
    check_domain_matcher(
        raw.domain_matcher.as_deref(),
        &loc.key("domainMatcher"),
        diags,
    );
    let balancers = build_balancers(
        raw.balancers.as_deref().unwrap_or_default(),
        &loc.key("balancers"),
        outbound_tags,
        damage,
        diags,
    );
    let ctx = RuleContext {
        outbound_tags,
        inbound_tags,
        balancer_tags: balancers.iter().map(|b| b.tag.clone()).collect(),
        damage,
        geo: RefCell::new(geo),
    };
    let mut rules = Vec::new();
    for (i, value) in raw.rules.iter().flatten().enumerate() {
        let rloc = loc.key("rules").index(i);
        if !value.is_object() {
            diags.push(rloc.error(format!(
                "invalid type: {}, expected a rule object",
                kind(value)
            )));
            continue;
        }
        let Some(rule) = decode::<RawRule>(value, &rloc, diags) else {
            continue;
        };
        if let Some(plan) = build_rule(&rule, &rloc, &ctx, diags) {
            rules.push(plan);
        }
    }
    RoutingPlan {
        domain_strategy,
        rules,
        balancers,
    }
}

struct RuleContext<'a> {
    outbound_tags: &'a HashSet<String>,
    inbound_tags: &'a HashSet<String>,
    balancer_tags: HashSet<String>,
    damage: &'a Damage,
    /// Holds the .dat files read so far; dropped (with them) when routing is built.
    geo: RefCell<GeoLoader>,
}

/// `domainMatcher` picks an Xray matching algorithm; the results are the same, so both known
/// values are accepted and skiff uses its own.
fn check_domain_matcher(value: Option<&str>, loc: &Loc, diags: &mut Vec<Diagnostic>) {
    match lower(value).as_deref() {
        None | Some("hybrid" | "linear") => {}
        Some(other) => diags.push(loc.error(format!(
            "unknown domainMatcher `{other}` (expected hybrid or linear)"
        ))),
    }
}

fn build_rule(
    rule: &RawRule,
    loc: &Loc,
    ctx: &RuleContext<'_>,
    diags: &mut Vec<Diagnostic>,
) -> Option<RulePlan> {
    let before = error_count(diags);
    match lower(rule.kind.as_deref()).as_deref() {
        None | Some("field") => {}
        Some(other) => diags.push(
            loc.key("type")
                .error(format!("unknown rule type `{other}` (only \"field\")")),
        ),
    }
    check_domain_matcher(
        rule.domain_matcher.as_deref(),
        &loc.key("domainMatcher"),
        diags,
    );

    let domains = each(
        rule.domain.as_ref(),
        &loc.key("domain"),
        diags,
        domain_entry,
    );
    let ips = each(rule.ip.as_ref(), &loc.key("ip"), diags, ip_entry);
    let domain_set = domain_set(
        rule.domain.as_ref(),
        &domains,
        &loc.key("domain"),
        &ctx.geo,
        diags,
    );
    let ip_set = ip_matcher(rule.ip.as_ref(), &ips, &loc.key("ip"), &ctx.geo, diags);
    let mut sources = each(rule.source.as_ref(), &loc.key("source"), diags, cidr);
    sources.extend(each(
        rule.source_ip.as_ref(),
        &loc.key("sourceIP"),
        diags,
        cidr,
    ));
    let dest_ports = ports(rule.port.as_ref(), &loc.key("port"), diags);
    let source_ports = ports(rule.source_port.as_ref(), &loc.key("sourcePort"), diags);
    let networks = rule.network.as_ref().and_then(|n| {
        n.networks()
            .map_err(|e| diags.push(loc.key("network").error(e)))
            .ok()
    });
    let users = each(rule.user.as_ref(), &loc.key("user"), diags, |u| {
        non_empty(u, "user")
    });
    let inbound_tags = each(
        rule.inbound_tag.as_ref(),
        &loc.key("inboundTag"),
        diags,
        |t| non_empty(t, "tag"),
    );
    if let Some(list) = &rule.inbound_tag {
        for (i, tag) in list.items.iter().enumerate() {
            if !tag.is_empty()
                && !ctx.inbound_tags.contains(tag)
                && !ctx.damage.may_hide_inbound(tag)
            {
                diags.push(item_loc(list, &loc.key("inboundTag"), i).warning(format!(
                    "no inbound is tagged `{tag}`, so this condition never matches"
                )));
            }
        }
    }

    let protocols = each(rule.protocol.as_ref(), &loc.key("protocol"), diags, |p| {
        non_empty(&p.to_ascii_lowercase(), "protocol")
    });
    if let Some(list) = &rule.protocol {
        for (i, name) in list.items.iter().enumerate() {
            // Xray also sniffs BitTorrent; skiff does not, so such a condition never matches.
            if !["http", "tls", "quic"]
                .iter()
                .any(|known| known.starts_with(name.to_ascii_lowercase().as_str()))
            {
                diags.push(item_loc(list, &loc.key("protocol"), i).warning(format!(
                    "skiff sniffs http, tls and quic only: protocol `{name}` never matches"
                )));
            }
        }
    }
    let attrs = rule
        .attrs
        .as_ref()
        .map(|value| attrs(value, &loc.key("attrs"), diags))
        .unwrap_or_default();
    // Conditions skiff cannot evaluate: an error each. Ignoring one would widen the rule.
    let unsupported = [
        ("localIP", &rule.local_ip),
        ("localPort", &rule.local_port),
        ("vlessRoute", &rule.vless_route),
        ("process", &rule.process),
    ];
    for (key, value) in unsupported {
        if value.is_some() {
            diags.push(loc.key(key).error(format!(
                "rule condition `{key}` is not supported by this version of skiff yet"
            )));
        }
    }

    let has_condition = [
        &rule.domain,
        &rule.ip,
        &rule.source,
        &rule.source_ip,
        &rule.user,
        &rule.inbound_tag,
        &rule.protocol,
    ]
    .iter()
    .any(|l| l.as_ref().is_some_and(|l| !l.items.is_empty()))
        || rule.port.is_some()
        || rule.source_port.is_some()
        || rule.network.is_some()
        || unsupported.iter().any(|(_, v)| v.is_some())
        || rule.attrs.is_some();
    if !has_condition {
        diags.push(loc.error(
            "this rule has no condition (domain, ip, port, sourcePort, network, source, user, inboundTag, protocol or attrs)",
        ));
    }

    let target = rule_target(rule, loc, ctx, diags);

    (error_count(diags) == before).then_some(RulePlan {
        inbound_tags,
        domains,
        domain_set,
        ips,
        ip_set,
        ports: dest_ports,
        networks,
        sources,
        source_ports,
        users,
        protocols,
        attrs,
        target,
        rule_tag: rule.rule_tag.clone().filter(|t| !t.is_empty()),
    })
}

/// `outboundTag` or `balancerTag` (Xray takes the outbound when both are given).
fn rule_target(
    rule: &RawRule,
    loc: &Loc,
    ctx: &RuleContext<'_>,
    diags: &mut Vec<Diagnostic>,
) -> RuleTarget {
    if let Some(tag) = rule.outbound_tag.as_deref().filter(|t| !t.is_empty()) {
        if !ctx.outbound_tags.contains(tag) && !ctx.damage.may_hide_outbound(tag) {
            diags.push(
                loc.key("outboundTag")
                    .error(format!("no outbound is tagged `{tag}`")),
            );
        }
        return RuleTarget::Outbound(tag.to_owned());
    }
    if let Some(tag) = rule.balancer_tag.as_deref().filter(|t| !t.is_empty()) {
        if !ctx.balancer_tags.contains(tag) {
            diags.push(loc.key("balancerTag").error(format!(
                "no balancer is tagged `{tag}` in routing.balancers"
            )));
        }
        return RuleTarget::Balancer(tag.to_owned());
    }
    diags.push(loc.key("outboundTag").error(
        "missing `outboundTag` (or `balancerTag`): a rule must name an outbound or a balancer",
    ));
    RuleTarget::Outbound(String::new())
}

/// `attrs`: an object of attribute name → regular expression (Go's RE2 syntax, which
/// regex-lite shares for what configs use). Names are matched lower-cased, as Xray does.
fn attrs(
    value: &serde_json::Value,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Vec<(String, regex_lite::Regex)> {
    let Some(object) = value.as_object() else {
        diags.push(loc.error(format!(
            "invalid type: {}, expected an object of attribute name to regular expression",
            kind(value)
        )));
        return Vec::new();
    };
    let mut out = Vec::new();
    for (key, pattern) in object {
        let Some(pattern) = pattern.as_str() else {
            diags.push(loc.key(key).error(format!(
                "invalid type: {}, expected a regular expression string",
                kind(pattern)
            )));
            continue;
        };
        match regex_lite::Regex::new(pattern) {
            Ok(re) => out.push((key.to_ascii_lowercase(), re)),
            Err(e) => diags.push(
                loc.key(key)
                    .error(format!("invalid regular expression `{pattern}`: {e}")),
            ),
        }
    }
    out
}

/// `balancers`: each with a unique `tag`, non-empty `selector`, a `strategy.type` skiff can
/// run without an observatory, and an existing `fallbackTag`.
fn build_balancers(
    raw: &[serde_json::Value],
    loc: &Loc,
    outbound_tags: &HashSet<String>,
    damage: &Damage,
    diags: &mut Vec<Diagnostic>,
) -> Vec<BalancerPlan> {
    let mut out: Vec<BalancerPlan> = Vec::new();
    for (i, value) in raw.iter().enumerate() {
        let bloc = loc.index(i);
        if !value.is_object() {
            diags.push(bloc.error(format!(
                "invalid type: {}, expected a balancer object",
                kind(value)
            )));
            continue;
        }
        let Some(raw) = decode::<RawBalancer>(value, &bloc, diags) else {
            continue;
        };
        let before = error_count(diags);
        let tag = raw.tag.clone().unwrap_or_default();
        if tag.is_empty() {
            diags.push(bloc.key("tag").error("empty balancer tag"));
        } else if out.iter().any(|b| b.tag == tag) {
            diags.push(
                bloc.key("tag")
                    .error(format!("another balancer is already tagged `{tag}`")),
            );
        }
        let selectors: Vec<String> = raw
            .selector
            .iter()
            .flat_map(|l| l.items.iter())
            .filter(|s| !s.is_empty())
            .cloned()
            .collect();
        if selectors.is_empty() {
            diags.push(bloc.key("selector").error("empty selector list"));
        }
        let strategy = raw.strategy.as_ref();
        let strategy = match lower(strategy.and_then(|s| s.kind.as_deref())).as_deref() {
            None | Some("" | "random") => BalancerStrategy::Random,
            Some("roundrobin") => BalancerStrategy::RoundRobin,
            Some(name @ ("leastping" | "leastload")) => {
                diags.push(bloc.key("strategy").key("type").error(format!(
                    "balancing strategy `{name}` needs an observatory (outbound health probes), which skiff does not have; use random or roundRobin"
                )));
                BalancerStrategy::Random
            }
            Some(other) => {
                diags.push(bloc.key("strategy").key("type").error(format!(
                    "unknown balancing strategy `{other}` (expected random, roundRobin, leastPing or leastLoad)"
                )));
                BalancerStrategy::Random
            }
        };
        let fallback_tag = raw.fallback_tag.clone().filter(|t| !t.is_empty());
        if let Some(tag) = &fallback_tag
            && !outbound_tags.contains(tag)
            && !damage.may_hide_outbound(tag)
        {
            diags.push(
                bloc.key("fallbackTag")
                    .error(format!("no outbound is tagged `{tag}`")),
            );
        }
        if error_count(diags) == before {
            out.push(BalancerPlan {
                tag,
                selectors,
                strategy,
                fallback_tag,
            });
        }
    }
    out
}

pub(super) fn item_loc(list: &StringList, loc: &Loc, i: usize) -> Loc {
    if list.was_list {
        loc.index(i)
    } else {
        loc.clone()
    }
}

/// Parses every entry of a string list, reporting each bad entry at its own index.
pub(super) fn each<T>(
    list: Option<&StringList>,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Vec<T> {
    let mut out = Vec::new();
    for (i, text) in list.iter().flat_map(|l| l.items.iter()).enumerate() {
        match parse(text) {
            Ok(v) => out.push(v),
            Err(e) => {
                if let Some(list) = list {
                    diags.push(item_loc(list, loc, i).error(e));
                }
            }
        }
    }
    out
}

/// `port` / `sourcePort`; rules may use port 0 (as in the common "0-65535").
fn ports(spec: Option<&PortSpec>, loc: &Loc, diags: &mut Vec<Diagnostic>) -> Vec<PortRange> {
    match spec {
        None => Vec::new(),
        Some(spec) => spec.ranges(true).unwrap_or_else(|e| {
            diags.push(loc.error(e));
            Vec::new()
        }),
    }
}

fn non_empty(text: &str, what: &str) -> Result<String, String> {
    if text.is_empty() {
        Err(format!("empty {what}"))
    } else {
        Ok(text.to_owned())
    }
}

/// One entry of `domain`: `geosite:CODE[@attr…]`, `ext:FILE:CODE`, `ext-domain:FILE:CODE`
/// (Xray also reads `ext-site:`), `regexp:`, `domain:`, `full:`, `keyword:` or a plain keyword.
/// Names are lowercased; regular expressions are checked here so a bad one is a config error
/// at its path.
pub fn domain_entry(text: &str) -> Result<DomainEntry, String> {
    let text = text.trim();
    if let Some(rest) = text.strip_prefix("geosite:") {
        return geosite("geosite.dat", rest);
    }
    for prefix in ["ext:", "ext-domain:", "ext-site:"] {
        if let Some(rest) = text.strip_prefix(prefix) {
            let (file, rest) = file_and_code(rest, text)?;
            return geosite(file, rest);
        }
    }
    if let Some(pattern) = text.strip_prefix("regexp:") {
        if pattern.is_empty() {
            return Err("empty regular expression".into());
        }
        check_regex(pattern)?;
        return Ok(custom(DomainKind::Regex, pattern.to_owned()));
    }
    let (kind, name) = if let Some(d) = text.strip_prefix("domain:") {
        (DomainKind::Suffix, d)
    } else if let Some(d) = text.strip_prefix("full:") {
        (DomainKind::Full, d)
    } else if let Some(d) = text.strip_prefix("keyword:") {
        (DomainKind::Plain, d)
    } else {
        (DomainKind::Plain, text)
    };
    if name.is_empty() {
        return Err(format!("empty domain in `{text}`"));
    }
    Ok(custom(kind, name.to_ascii_lowercase()))
}

fn custom(kind: DomainKind, value: String) -> DomainEntry {
    DomainEntry::Custom(Domain { kind, value })
}

/// `FILE:REST` of an `ext:` entry.
fn file_and_code<'a>(rest: &'a str, text: &str) -> Result<(&'a str, &'a str), String> {
    match rest.split_once(':') {
        Some((file, code)) if !file.is_empty() => Ok((file, code)),
        Some(_) => Err(format!("empty file name in `{text}`")),
        None => Err(format!("`{text}`: expected ext:FILE:CODE")),
    }
}

/// `CODE@attr@attr`: Xray lowercases attributes and needs every one of them.
fn geosite(file: &str, code_attrs: &str) -> Result<DomainEntry, String> {
    if code_attrs.ends_with('@') || code_attrs.contains("@@") {
        return Err(format!("empty attribute in `{code_attrs}`"));
    }
    let mut parts = code_attrs.split('@');
    let code = parts.next().unwrap_or_default();
    if code.is_empty() {
        return Err(format!("empty list code in `{code_attrs}`"));
    }
    Ok(DomainEntry::Geosite {
        file: file.to_owned(),
        code: code.to_owned(),
        attrs: parts.map(str::to_ascii_lowercase).collect(),
    })
}

/// Xray's leading `!`s: each one flips the sense.
fn strip_negation(mut text: &str) -> (&str, bool) {
    let mut negated = false;
    while let Some(rest) = text.strip_prefix('!') {
        text = rest;
        negated = !negated;
    }
    (text, negated)
}

/// One entry of `ip`: a CIDR, `geoip:CODE`, `ext:FILE:CODE` or `ext-ip:FILE:CODE`, each
/// negated by leading `!`s (and a geoip code by its own: `geoip:!cn`).
pub fn ip_entry(text: &str) -> Result<IpEntry, String> {
    let (rest, negated) = strip_negation(text.trim());
    let geo = if let Some(code) = rest.strip_prefix("geoip:") {
        Some(("geoip.dat", code))
    } else if let Some(r) = rest
        .strip_prefix("ext:")
        .or_else(|| rest.strip_prefix("ext-ip:"))
    {
        Some(file_and_code(r, text)?)
    } else {
        None
    };
    match geo {
        Some((file, code)) => {
            let (code, code_negated) = strip_negation(code);
            if code.is_empty() {
                return Err(format!("empty list code in `{text}`"));
            }
            Ok(IpEntry::Geoip {
                file: file.to_owned(),
                code: code.to_owned(),
                negated: negated != code_negated,
            })
        }
        None => Ok(IpEntry::Cidr {
            cidr: Cidr::parse(rest)?,
            negated,
        }),
    }
}

/// One entry of `source`: an IP or CIDR block.
pub fn cidr(text: &str) -> Result<Cidr, String> {
    let text = text.trim();
    for prefix in ["geoip:", "!geoip:", "ext:", "ext-ip:", "!"] {
        if text.starts_with(prefix) {
            return Err(format!(
                "`{prefix}` entries in `source` are not supported by this version of skiff yet (they are in `ip`)"
            ));
        }
    }
    Cidr::parse(text)
}

/// The rule's domains and the lists they name, loaded into one matcher; a list that cannot
/// be loaded is an error at its entry.
pub(super) fn domain_set(
    list: Option<&StringList>,
    entries: &[DomainEntry],
    loc: &Loc,
    geo: &RefCell<GeoLoader>,
    diags: &mut Vec<Diagnostic>,
) -> Option<Arc<DomainSet>> {
    let list = list?;
    let mut domains = Vec::new();
    let mut geo = geo.borrow_mut();
    // `entries` holds the valid ones in order; walk the texts again to know each one's index.
    let mut valid = entries.iter();
    for (i, text) in list.items.iter().enumerate() {
        if domain_entry(text).is_err() {
            continue;
        }
        match valid.next() {
            Some(DomainEntry::Custom(d)) => domains.push(d.clone()),
            Some(DomainEntry::Geosite { file, code, attrs }) => match geo.site(file, code, attrs) {
                Ok(found) => domains.extend(found),
                Err(e) => diags.push(item_loc(list, loc, i).error(e)),
            },
            None => {}
        }
    }
    match DomainSet::new(domains) {
        Ok(set) => Some(Arc::new(set)),
        Err(e) => {
            diags.push(loc.error(e));
            None
        }
    }
}

/// The rule's `ip` entries as Xray combines them: plain CIDRs and lists in one set, negated
/// CIDRs in a second, negated lists in a third.
pub(super) fn ip_matcher(
    list: Option<&StringList>,
    entries: &[IpEntry],
    loc: &Loc,
    geo: &RefCell<GeoLoader>,
    diags: &mut Vec<Diagnostic>,
) -> Option<Arc<IpMatcher>> {
    let list = list?;
    let (mut plain, mut neg_cidrs, mut neg_lists) = (Vec::new(), Vec::new(), Vec::new());
    let (mut any_neg_cidr, mut any_neg_list) = (false, false);
    let mut geo = geo.borrow_mut();
    let mut valid = entries.iter();
    for (i, text) in list.items.iter().enumerate() {
        if ip_entry(text).is_err() {
            continue;
        }
        match valid.next() {
            Some(IpEntry::Cidr { cidr, negated }) => {
                any_neg_cidr |= *negated;
                let to = if *negated { &mut neg_cidrs } else { &mut plain };
                to.push((cidr.addr, cidr.prefix));
            }
            Some(IpEntry::Geoip {
                file,
                code,
                negated,
            }) => {
                any_neg_list |= *negated;
                match geo.ip(file, code) {
                    Ok(found) if *negated => neg_lists.extend(found),
                    Ok(found) => plain.extend(found),
                    Err(e) => diags.push(item_loc(list, loc, i).error(e)),
                }
            }
            None => {}
        }
    }
    Some(Arc::new(combine_ips(
        plain,
        any_neg_cidr.then_some(neg_cidrs),
        any_neg_list.then_some(neg_lists),
    )))
}

/// Xray's combination of a rule's `ip` entries: the plain CIDRs and lists in one set, the
/// negated CIDRs (when there are any) in a second, the negated lists in a third.
pub(crate) fn combine_ips(
    plain: Vec<(std::net::IpAddr, u8)>,
    negated_cidrs: Option<Vec<(std::net::IpAddr, u8)>>,
    negated_lists: Option<Vec<(std::net::IpAddr, u8)>>,
) -> IpMatcher {
    IpMatcher {
        plain: IpSet::new(plain),
        negated: [negated_cidrs, negated_lists]
            .into_iter()
            .flatten()
            .map(IpSet::new)
            .collect(),
    }
}
