//! Xray's RoutingService over the running router (skiff-api's [`Routing`]): the rules of an
//! AddRule, Xray's `xray.app.router.Config` protobuf, turned into the same [`RulePlan`]s a
//! config file's rules become, and TestRoute's session description into [`Metadata`].
//!
//! What `xray api adrules` sends is what Xray's config code builds from the JSON: domains
//! typed (keyword, regexp, domain, full), `geoip:`/`geosite:` entries as references to a list
//! of a .dat file (file, code, attributes), which the server loads from its own asset
//! directory (here through skiff-config's [`GeoLists`], as for the config's rules), CIDRs as
//! address bytes and prefix, ports as ranges. A condition Skiff's router does not evaluate is
//! refused (Unimplemented), never ignored: ignoring it would widen the rule.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use skiff_api::proto::geodata::{CidrRule, DomainRule, IpRule, domain, domain_rule, ip_rule};
use skiff_api::proto::net::{Network as ProtoNetwork, PortList};
use skiff_api::proto::router::{BalancingRule, Config, RoutingRule, routing_rule};
use skiff_api::proto::routing::RoutingContext;
use skiff_api::routing_service::{ListedRule, Picked, Routing, RoutingError};
use skiff_config::rule_lists::{GeoLists, domain_set, ip_matcher};
use skiff_config::{
    BalancerPlan, BalancerStrategy, Domain, DomainEntry, DomainKind, IpEntry, RulePlan, RuleTarget,
};
use skiff_core::{Address, BoxFuture, Cidr, Metadata, Network, Networks, PortRange};

use crate::router::Route;
use crate::shared::Shared;

/// The service's view of the instance.
pub struct RoutingApi {
    shared: Arc<Shared>,
}

impl RoutingApi {
    pub fn new(shared: Arc<Shared>) -> RoutingApi {
        RoutingApi { shared }
    }
}

impl Routing for RoutingApi {
    fn add_rules(&self, config: Config, append: bool) -> Result<(), RoutingError> {
        let mut geo = GeoLists::new();
        let balancers = config
            .balancing_rule
            .iter()
            .map(balancer_plan)
            .collect::<Result<Vec<_>, _>>()?;
        let rules = config
            .rule
            .iter()
            .map(|r| rule_plan(r, &mut geo))
            .collect::<Result<Vec<_>, _>>()?;
        // The .dat files' bytes go now; the matchers keep what they need.
        drop(geo);
        let count = rules.len();
        self.shared
            .router
            .add_rules(rules, &balancers, append)
            .map_err(RoutingError::Xray)?;
        tracing::info!(
            "routing: {} {count} rule(s) through the API",
            if append { "appended" } else { "replaced with" }
        );
        Ok(())
    }

    fn remove_rule(&self, rule_tag: &str) -> Result<(), RoutingError> {
        self.shared.router.remove_rule(rule_tag);
        Ok(())
    }

    fn list_rules(&self) -> Vec<ListedRule> {
        self.shared
            .router
            .list_rules()
            .into_iter()
            .map(|r| ListedRule {
                outbound_tag: r.outbound_tag,
                rule_tag: r.rule_tag,
            })
            .collect()
    }

    fn test_route(&self, context: RoutingContext) -> BoxFuture<'_, Result<Picked, RoutingError>> {
        Box::pin(async move {
            let (meta, given_ips) = session(&context)?;
            let router = &self.shared.router;
            // A domain given with its IPs is matched against those, as Xray does; a domain
            // alone is resolved when the strategy asks.
            let is_domain = matches!(meta.destination, Some(Address::Domain(..)));
            let first = if is_domain && !given_ips.is_empty() {
                router.decide(&meta, Some(&given_ips))
            } else {
                router.decide(&meta, None)
            };
            let route = match first {
                Some(Route::NeedIps) => {
                    let ips = match &meta.destination {
                        Some(Address::Domain(name, port)) => {
                            self.shared.resolve_for_routing(name, *port).await
                        }
                        _ => Vec::new(),
                    };
                    router.decide(&meta, Some(&ips))
                }
                other => other,
            };
            Ok(match route {
                Some(Route::To(i)) => Some(router.tag(i)),
                Some(Route::Nowhere(tag)) => Some(tag),
                Some(Route::NeedIps) | None => None,
            })
        })
    }
}

/// TestRoute's session: the metadata routing reads, and the target IPs given beside a
/// target domain.
fn session(c: &RoutingContext) -> Result<(Metadata, Vec<IpAddr>), RoutingError> {
    let ips = |list: &[Vec<u8>], what: &str| -> Result<Vec<IpAddr>, RoutingError> {
        list.iter().map(|b| ip_bytes(b, what)).collect()
    };
    let sources = ips(&c.source_i_ps, "SourceIPs")?;
    let targets = ips(&c.target_i_ps, "TargetIPs")?;
    let locals = ips(&c.local_i_ps, "LocalIPs")?;
    let port = |p: u32, what: &str| {
        u16::try_from(p).map_err(|_| RoutingError::Invalid(format!("{what} {p} is not a port")))
    };
    let unspecified = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
    let source = SocketAddr::new(
        sources.first().copied().unwrap_or(unspecified),
        port(c.source_port, "SourcePort")?,
    );
    let local = SocketAddr::new(
        locals.first().copied().unwrap_or(unspecified),
        port(c.local_port, "LocalPort")?,
    );
    let mut meta = Metadata::new(Arc::from(c.inbound_tag.as_str()), source, local);
    meta.network = match ProtoNetwork::try_from(c.network) {
        Ok(ProtoNetwork::Udp) => Network::Udp,
        // Skiff routes TCP and UDP only; an unknown network is asked about as TCP.
        _ => Network::Tcp,
    };
    let target_port = port(c.target_port, "TargetPort")?;
    meta.destination = if !c.target_domain.is_empty() {
        Some(Address::Domain(c.target_domain.clone(), target_port))
    } else {
        targets
            .first()
            .map(|ip| Address::Ip(SocketAddr::new(*ip, target_port)))
    };
    meta.user = (!c.user.is_empty()).then(|| Arc::from(c.user.as_str()));
    // The names Skiff's sniffers give (a rule's `protocol` is matched against these).
    meta.protocol = ["http", "tls", "quic"]
        .into_iter()
        .find(|p| *p == c.protocol.to_ascii_lowercase());
    if !c.attributes.is_empty() {
        let attributes: Vec<(String, String)> = c
            .attributes
            .iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
            .collect();
        meta.attributes = Some(Arc::from(attributes));
    }
    Ok((meta, targets))
}

fn ip_bytes(bytes: &[u8], what: &str) -> Result<IpAddr, RoutingError> {
    match bytes.len() {
        4 => Ok(IpAddr::V4(Ipv4Addr::from(
            <[u8; 4]>::try_from(bytes).unwrap_or_default(),
        ))),
        16 => Ok(IpAddr::V6(Ipv6Addr::from(
            <[u8; 16]>::try_from(bytes).unwrap_or_default(),
        ))),
        n => Err(RoutingError::Invalid(format!(
            "{what}: an address of {n} bytes (expected 4 or 16)"
        ))),
    }
}

fn unsupported(what: &str) -> RoutingError {
    RoutingError::Unsupported(format!(
        "rule condition `{what}` is not supported by this version of skiff yet"
    ))
}

/// One `routing.balancers` entry, as a config's would be.
pub fn balancer_plan(b: &BalancingRule) -> Result<BalancerPlan, RoutingError> {
    let strategy = match b.strategy.to_ascii_lowercase().as_str() {
        "" | "random" => BalancerStrategy::Random,
        "roundrobin" => BalancerStrategy::RoundRobin,
        name @ ("leastping" | "leastload") => {
            return Err(RoutingError::Unsupported(format!(
                "balancing strategy `{name}` needs an observatory (outbound health probes), which skiff does not have; use random or roundRobin"
            )));
        }
        _ => {
            return Err(RoutingError::Xray(
                "app/router: unrecognized balancer type".into(),
            ));
        }
    };
    Ok(BalancerPlan {
        tag: b.tag.clone(),
        selectors: b
            .outbound_selector
            .iter()
            .filter(|s| !s.is_empty())
            .cloned()
            .collect(),
        strategy,
        fallback_tag: Some(b.fallback_tag.clone()).filter(|t| !t.is_empty()),
    })
}

/// One rule of an AddRule, as the same rule in the config file becomes; `geo` loads the
/// lists it names.
pub fn rule_plan(rule: &RoutingRule, geo: &mut GeoLists) -> Result<RulePlan, RoutingError> {
    // Conditions Skiff cannot evaluate: refused, as in a config file.
    let unsupported_present = [
        ("localIP", !rule.local_ip.is_empty()),
        ("localPort", rule.local_port_list.is_some()),
        ("vlessRoute", rule.vless_route_list.is_some()),
        ("process", !rule.process.is_empty()),
        ("webhook", rule.webhook.is_some()),
        ("localOS", !rule.local_os.is_empty()),
    ];
    if let Some((what, _)) = unsupported_present.iter().find(|(_, present)| *present) {
        return Err(unsupported(what));
    }
    let target = match &rule.target_tag {
        Some(routing_rule::TargetTag::Tag(tag)) if !tag.is_empty() => {
            RuleTarget::Outbound(tag.clone())
        }
        Some(routing_rule::TargetTag::BalancingTag(tag)) if !tag.is_empty() => {
            RuleTarget::Balancer(tag.clone())
        }
        _ => {
            return Err(RoutingError::Invalid(
                "a rule needs an outbound tag or a balancer tag".into(),
            ));
        }
    };

    let domains = rule
        .domain
        .iter()
        .map(domain_entry)
        .collect::<Result<Vec<_>, _>>()?;
    let domain_set = if domains.is_empty() {
        None
    } else {
        Some(domain_set(&domains, geo).map_err(RoutingError::Invalid)?)
    };
    let ips = rule
        .ip
        .iter()
        .map(|r| ip_entry(r, "ip"))
        .collect::<Result<Vec<_>, _>>()?;
    let ip_set = if ips.is_empty() {
        None
    } else {
        Some(ip_matcher(&ips, geo).map_err(RoutingError::Invalid)?)
    };
    let sources = rule
        .source_ip
        .iter()
        .map(|r| match ip_entry(r, "source")? {
            IpEntry::Cidr {
                cidr,
                negated: false,
            } => Ok(cidr),
            _ => Err(RoutingError::Unsupported(
                "negated and geoip entries in `source` are not supported by this version of skiff yet (they are in `ip`)".into(),
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let ports = rule
        .port_list
        .as_ref()
        .map(|l| port_ranges(l, "port"))
        .transpose()?;
    let source_ports = rule
        .source_port_list
        .as_ref()
        .map(|l| port_ranges(l, "sourcePort"))
        .transpose()?;
    let networks = if rule.networks.is_empty() {
        None
    } else {
        let mut n = Networks {
            tcp: false,
            udp: false,
        };
        for &value in &rule.networks {
            match ProtoNetwork::try_from(value) {
                Ok(ProtoNetwork::Tcp) => n.tcp = true,
                Ok(ProtoNetwork::Udp) => n.udp = true,
                // Skiff has no such sessions: the rule never matches them.
                Ok(ProtoNetwork::Unknown | ProtoNetwork::Unix) => {}
                Err(_) => {
                    return Err(RoutingError::Invalid(format!(
                        "network: unknown value {value}"
                    )));
                }
            }
        }
        Some(n)
    };
    let non_empty = |list: &[String], what: &str| -> Result<Vec<String>, RoutingError> {
        if list.iter().any(String::is_empty) {
            return Err(RoutingError::Invalid(format!("empty {what}")));
        }
        Ok(list.to_vec())
    };
    let users = non_empty(&rule.user_email, "user")?;
    let inbound_tags = non_empty(&rule.inbound_tag, "inboundTag")?;
    let protocols: Vec<String> = non_empty(&rule.protocol, "protocol")?
        .iter()
        .map(|p| p.to_ascii_lowercase())
        .collect();
    let mut attrs = Vec::new();
    let mut keys: Vec<&String> = rule.attributes.keys().collect();
    keys.sort();
    for key in keys {
        let pattern = &rule.attributes[key];
        let re = regex_lite::Regex::new(pattern).map_err(|e| {
            RoutingError::Invalid(format!(
                "attrs: invalid regular expression `{pattern}`: {e}"
            ))
        })?;
        attrs.push((key.to_ascii_lowercase(), re));
    }

    let has_condition = !domains.is_empty()
        || !ips.is_empty()
        || ports.is_some()
        || networks.is_some()
        || !sources.is_empty()
        || source_ports.is_some()
        || !users.is_empty()
        || !inbound_tags.is_empty()
        || !protocols.is_empty()
        || !attrs.is_empty();
    if !has_condition {
        return Err(RoutingError::Xray(
            "app/router: this rule has no effective fields".into(),
        ));
    }
    Ok(RulePlan {
        inbound_tags,
        domains,
        domain_set,
        ips,
        ip_set,
        ports: ports.unwrap_or_default(),
        networks,
        sources,
        source_ports: source_ports.unwrap_or_default(),
        users,
        protocols,
        attrs,
        target,
        rule_tag: Some(rule.rule_tag.clone()).filter(|t| !t.is_empty()),
    })
}

fn domain_entry(rule: &DomainRule) -> Result<DomainEntry, RoutingError> {
    match &rule.value {
        Some(domain_rule::Value::Custom(d)) => {
            let kind = match domain::Type::try_from(d.r#type) {
                Ok(domain::Type::Substr) => DomainKind::Plain,
                Ok(domain::Type::Regex) => DomainKind::Regex,
                Ok(domain::Type::Domain) => DomainKind::Suffix,
                Ok(domain::Type::Full) => DomainKind::Full,
                Err(_) => {
                    return Err(RoutingError::Invalid(format!(
                        "domain `{}`: unknown type {}",
                        d.value, d.r#type
                    )));
                }
            };
            if d.value.is_empty() {
                return Err(RoutingError::Invalid("empty domain".into()));
            }
            // As a config's: names lower-cased, expressions as written (checked when the
            // rule's matcher is built).
            let value = if kind == DomainKind::Regex {
                d.value.clone()
            } else {
                d.value.to_ascii_lowercase()
            };
            Ok(DomainEntry::Custom(Domain { kind, value }))
        }
        Some(domain_rule::Value::Geosite(g)) => {
            if g.file.is_empty() || g.code.is_empty() {
                return Err(RoutingError::Invalid(format!(
                    "geosite list `{}:{}`: empty file or code",
                    g.file, g.code
                )));
            }
            let attrs = if g.attrs.is_empty() {
                Vec::new()
            } else {
                g.attrs.split('@').map(str::to_ascii_lowercase).collect()
            };
            if attrs.iter().any(String::is_empty) {
                return Err(RoutingError::Invalid(format!(
                    "geosite list `{}`: empty attribute in `{}`",
                    g.code, g.attrs
                )));
            }
            Ok(DomainEntry::Geosite {
                file: g.file.clone(),
                code: g.code.clone(),
                attrs,
            })
        }
        None => Err(RoutingError::Invalid("an empty domain rule".into())),
    }
}

fn ip_entry(rule: &IpRule, what: &str) -> Result<IpEntry, RoutingError> {
    match &rule.value {
        Some(ip_rule::Value::Custom(CidrRule {
            cidr: Some(cidr),
            reverse_match,
        })) => {
            let addr = ip_bytes(&cidr.ip, what)?;
            let max = if addr.is_ipv4() { 32 } else { 128 };
            let prefix = u8::try_from(cidr.prefix)
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| {
                    RoutingError::Invalid(format!(
                        "{what}: {addr}/{}: the prefix length must be 0..={max}",
                        cidr.prefix
                    ))
                })?;
            Ok(IpEntry::Cidr {
                cidr: Cidr { addr, prefix },
                negated: *reverse_match,
            })
        }
        Some(ip_rule::Value::Geoip(g)) => {
            if g.file.is_empty() || g.code.is_empty() {
                return Err(RoutingError::Invalid(format!(
                    "{what}: geoip list `{}:{}`: empty file or code",
                    g.file, g.code
                )));
            }
            Ok(IpEntry::Geoip {
                file: g.file.clone(),
                code: g.code.clone(),
                negated: g.reverse_match,
            })
        }
        Some(ip_rule::Value::Custom(CidrRule { cidr: None, .. })) | None => {
            Err(RoutingError::Invalid(format!("{what}: an empty IP rule")))
        }
    }
}

fn port_ranges(list: &PortList, what: &str) -> Result<Vec<PortRange>, RoutingError> {
    list.range
        .iter()
        .map(|r| {
            let first = u16::try_from(r.from);
            let last = u16::try_from(r.to);
            match (first, last) {
                (Ok(first), Ok(last)) if first <= last => Ok(PortRange { first, last }),
                _ => Err(RoutingError::Invalid(format!(
                    "{what}: {}-{} is not a port range",
                    r.from, r.to
                ))),
            }
        })
        .collect()
}

#[cfg(test)]
#[path = "routing_api_tests.rs"]
mod tests;
