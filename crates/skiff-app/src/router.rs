//! The router: a pure function from session metadata to an outbound. It never does I/O; when
//! the routing domainStrategy needs a domain's IPs it says so and the dispatcher resolves.

use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};

use skiff_config::{
    BalancerPlan, BalancerStrategy, RoutingDomainStrategy, RoutingPlan, RulePlan, RuleTarget,
};
use skiff_core::{Address, Metadata};
use tracing::debug;

/// Index into the instance's outbound list.
pub type OutboundIndex = usize;

#[derive(Debug, PartialEq, Eq)]
pub enum Route {
    To(OutboundIndex),
    /// Resolve the destination domain and ask again with its IPs.
    NeedIps,
}

pub struct Router {
    strategy: RoutingDomainStrategy,
    rules: Vec<(RulePlan, Target)>,
    balancers: Vec<Balancer>,
    any_ip_rule: bool,
    /// Outbound tags by index, for the log line of a tagged rule.
    tags: Vec<String>,
}

/// What a rule leads to, resolved to indices once.
#[derive(Clone, Copy, Debug)]
enum Target {
    Outbound(OutboundIndex),
    Balancer(usize),
}

/// A balancer with its candidates fixed at start (outbounds do not come and go at run time).
struct Balancer {
    tag: String,
    /// Outbounds whose tag starts with a selector, in tag order as Xray sorts them (so
    /// round-robin visits them in the same order as Xray).
    candidates: Vec<OutboundIndex>,
    strategy: BalancerStrategy,
    /// `fallbackTag`, taken when no outbound matches the selectors.
    fallback: Option<OutboundIndex>,
    next: AtomicUsize,
}

impl Balancer {
    fn new(plan: &BalancerPlan, tags: &[&str]) -> Balancer {
        let mut candidates: Vec<OutboundIndex> = (0..tags.len())
            .filter(|&i| {
                plan.selectors
                    .iter()
                    .any(|s| tags[i].starts_with(s.as_str()))
            })
            .collect();
        candidates.sort_by_key(|&i| tags[i]);
        Balancer {
            tag: plan.tag.clone(),
            candidates,
            strategy: plan.strategy,
            fallback: plan
                .fallback_tag
                .as_deref()
                .and_then(|f| tags.iter().position(|t| *t == f)),
            next: AtomicUsize::new(0),
        }
    }

    /// The outbound for one session; None when there is neither a candidate nor a fallback
    /// (Xray then takes the default outbound).
    fn pick(&self) -> Option<OutboundIndex> {
        let n = self.candidates.len();
        if n == 0 {
            return self.fallback;
        }
        let i = match self.strategy {
            BalancerStrategy::RoundRobin => self.next.fetch_add(1, Ordering::Relaxed) % n,
            BalancerStrategy::Random => {
                let mut bytes = [0u8; 8];
                skiff_crypto::random::fill(&mut bytes);
                (u64::from_le_bytes(bytes) % n as u64) as usize
            }
        };
        Some(self.candidates[i])
    }
}

impl Router {
    /// `tags` are the outbound tags in order (index 0 is the default); the config already
    /// checked that every rule's outbound and balancer exists, so a miss falls back to the
    /// default outbound.
    pub fn new(plan: &RoutingPlan, tags: &[&str]) -> Router {
        let balancers: Vec<Balancer> = plan
            .balancers
            .iter()
            .map(|b| Balancer::new(b, tags))
            .collect();
        let rules: Vec<_> = plan
            .rules
            .iter()
            .map(|r| {
                let target = match &r.target {
                    RuleTarget::Outbound(tag) => {
                        Target::Outbound(tags.iter().position(|t| t == tag).unwrap_or(0))
                    }
                    RuleTarget::Balancer(tag) => match balancers.iter().position(|b| &b.tag == tag)
                    {
                        Some(i) => Target::Balancer(i),
                        None => Target::Outbound(0),
                    },
                };
                (r.clone(), target)
            })
            .collect();
        let any_ip_rule = rules.iter().any(|(r, _)| r.ip_set.is_some());
        Router {
            strategy: plan.domain_strategy,
            rules,
            balancers,
            any_ip_rule,
            tags: tags.iter().map(|t| (*t).to_owned()).collect(),
        }
    }

    fn take(&self, rule: &RulePlan, target: Target, meta: &Metadata) -> Route {
        let index = match target {
            Target::Outbound(i) => i,
            Target::Balancer(b) => self.balancers[b].pick().unwrap_or(0),
        };
        // Xray names a tagged rule in its log ("hit route rule [tag] … detour [outbound]").
        if let Some(tag) = &rule.rule_tag {
            let outbound = self.tags.get(index).map_or("", String::as_str);
            debug!(rule = %tag, %outbound, destination = ?meta.routing_destination(), "hit route rule");
        }
        Route::To(index)
    }

    /// Picks the outbound for `meta`. `resolved` is None on the first call and the domain's
    /// IPs (possibly none) on the second.
    pub fn route(&self, meta: &Metadata, resolved: Option<&[IpAddr]>) -> Route {
        let is_domain = matches!(meta.routing_destination(), Some(Address::Domain(..)));
        for (rule, target) in &self.rules {
            match rule_matches(rule, meta, resolved) {
                Match::Yes => return self.take(rule, *target, meta),
                Match::No => {}
                Match::NeedIps => {
                    if self.strategy == RoutingDomainStrategy::IpOnDemand && resolved.is_none() {
                        return Route::NeedIps;
                    }
                }
            }
        }
        if self.strategy == RoutingDomainStrategy::IpIfNonMatch
            && is_domain
            && resolved.is_none()
            && self.any_ip_rule
        {
            return Route::NeedIps;
        }
        Route::To(0)
    }
}

enum Match {
    Yes,
    No,
    NeedIps,
}

fn rule_matches(rule: &RulePlan, meta: &Metadata, resolved: Option<&[IpAddr]>) -> Match {
    if !rule.inbound_tags.is_empty() && !rule.inbound_tags.iter().any(|t| **t == *meta.inbound_tag)
    {
        return Match::No;
    }
    if let Some(networks) = rule.networks
        && !networks.contains(meta.network)
    {
        return Match::No;
    }
    if !rule.sources.is_empty() && !rule.sources.iter().any(|c| c.contains(meta.source.ip())) {
        return Match::No;
    }
    if !rule.source_ports.is_empty()
        && !rule
            .source_ports
            .iter()
            .any(|p| p.contains(meta.source.port()))
    {
        return Match::No;
    }
    if !rule.users.is_empty() {
        let Some(user) = &meta.user else {
            return Match::No;
        };
        if !rule.users.iter().any(|u| **u == **user) {
            return Match::No;
        }
    }
    if !rule.protocols.is_empty() {
        // Xray's test: the sniffed name starts with the rule's (so `tls` also takes `tls1.3`).
        let Some(protocol) = meta.protocol else {
            return Match::No;
        };
        if !rule
            .protocols
            .iter()
            .any(|p| protocol.starts_with(p.as_str()))
        {
            return Match::No;
        }
    }
    if !rule.attrs.is_empty() {
        let Some(attributes) = &meta.attributes else {
            return Match::No;
        };
        let all = rule.attrs.iter().all(|(key, re)| {
            attributes
                .iter()
                .find(|(k, _)| k == key)
                .is_some_and(|(_, v)| re.is_match(v))
        });
        if !all {
            return Match::No;
        }
    }
    let Some(destination) = meta.routing_destination() else {
        return Match::No;
    };
    if !rule.ports.is_empty() && !rule.ports.iter().any(|p| p.contains(destination.port())) {
        return Match::No;
    }
    if let Some(set) = &rule.domain_set {
        let Some(domain) = destination.domain() else {
            return Match::No;
        };
        let domain = domain.to_ascii_lowercase();
        if !set.matches(&domain) {
            return Match::No;
        }
    }
    if let Some(set) = &rule.ip_set {
        match (destination.ip(), resolved) {
            (Some(ip), _) => {
                if !set.matches(ip) {
                    return Match::No;
                }
            }
            (None, Some(ips)) => {
                if !ips.iter().any(|ip| set.matches(*ip)) {
                    return Match::No;
                }
            }
            (None, None) => return Match::NeedIps,
        }
    }
    Match::Yes
}

#[cfg(test)]
mod tests {
    use super::*;
    use skiff_config::{Domain, DomainKind, DomainSet, IpMatcher, IpSet};
    use skiff_core::{Network, Networks, PortRange};
    use std::sync::Arc;

    fn rule(outbound: &str) -> RulePlan {
        RulePlan {
            inbound_tags: vec![],
            domains: vec![],
            domain_set: None,
            ips: vec![],
            ip_set: None,
            ports: vec![],
            networks: None,
            sources: vec![],
            source_ports: vec![],
            users: vec![],
            protocols: vec![],
            attrs: vec![],
            target: RuleTarget::Outbound(outbound.into()),
            rule_tag: None,
        }
    }

    fn meta(dest: Address) -> Metadata {
        let mut m = Metadata::new(
            Arc::from("in"),
            "10.1.2.3:4000".parse().unwrap(),
            "127.0.0.1:1080".parse().unwrap(),
        );
        m.destination = Some(dest);
        m
    }

    const TAGS: &[&str] = &["direct", "block", "other"];

    fn suffixes(names: &[&str]) -> Option<Arc<DomainSet>> {
        let domains = names.iter().map(|n| Domain {
            kind: DomainKind::Suffix,
            value: (*n).to_owned(),
        });
        Some(Arc::new(DomainSet::new(domains).unwrap()))
    }

    fn cidrs(blocks: &[(&str, u8)]) -> Option<Arc<IpMatcher>> {
        let plain = IpSet::new(blocks.iter().map(|(a, p)| (a.parse().unwrap(), *p)));
        Some(Arc::new(IpMatcher {
            plain,
            negated: vec![],
        }))
    }

    #[test]
    fn first_matching_rule_wins_and_default_is_first_outbound() {
        let mut block_ads = rule("block");
        block_ads.domain_set = suffixes(&["ads.example"]);
        let mut lan = rule("other");
        lan.ip_set = cidrs(&[("192.168.0.0", 16)]);
        lan.ports = vec![PortRange::parse("1-1000").unwrap()];
        let plan = RoutingPlan {
            domain_strategy: RoutingDomainStrategy::AsIs,
            rules: vec![block_ads, lan],
            balancers: vec![],
        };
        let router = Router::new(&plan, TAGS);
        assert_eq!(
            router.route(&meta(Address::Domain("x.ads.example".into(), 80)), None),
            Route::To(1)
        );
        assert_eq!(
            router.route(&meta(Address::Ip("192.168.1.1:80".parse().unwrap())), None),
            Route::To(2)
        );
        assert_eq!(
            router.route(
                &meta(Address::Ip("192.168.1.1:8080".parse().unwrap())),
                None
            ),
            Route::To(0)
        );
        // AsIs never asks for IPs.
        assert_eq!(
            router.route(&meta(Address::Domain("lan.host".into(), 80)), None),
            Route::To(0)
        );
    }

    #[test]
    fn ip_strategies_ask_for_resolution() {
        let mut lan = rule("block");
        lan.ip_set = cidrs(&[("10.0.0.0", 8)]);
        for strategy in [
            RoutingDomainStrategy::IpIfNonMatch,
            RoutingDomainStrategy::IpOnDemand,
        ] {
            let plan = RoutingPlan {
                domain_strategy: strategy,
                rules: vec![lan.clone()],
                balancers: vec![],
            };
            let router = Router::new(&plan, TAGS);
            let m = meta(Address::Domain("intranet".into(), 80));
            assert_eq!(router.route(&m, None), Route::NeedIps);
            assert_eq!(
                router.route(&m, Some(&["10.0.0.5".parse().unwrap()])),
                Route::To(1)
            );
            assert_eq!(router.route(&m, Some(&[])), Route::To(0));
        }
    }

    #[test]
    fn conditions_combine() {
        let mut r = rule("block");
        r.inbound_tags = vec!["in".into()];
        r.networks = Some(Networks {
            tcp: false,
            udp: true,
        });
        r.sources = vec![skiff_core::Cidr::parse("10.0.0.0/8").unwrap()];
        let plan = RoutingPlan {
            domain_strategy: RoutingDomainStrategy::AsIs,
            rules: vec![r],
            balancers: vec![],
        };
        let router = Router::new(&plan, TAGS);
        let mut m = meta(Address::Ip("1.1.1.1:53".parse().unwrap()));
        assert_eq!(router.route(&m, None), Route::To(0));
        m.network = Network::Udp;
        assert_eq!(router.route(&m, None), Route::To(1));
        m.inbound_tag = Arc::from("other-in");
        assert_eq!(router.route(&m, None), Route::To(0));
    }

    #[test]
    fn sniffed_protocol_attrs_and_route_only_destination() {
        let mut tls = rule("block");
        tls.protocols = vec!["tls".into()];
        let mut get = rule("other");
        get.attrs = vec![(":method".into(), regex_lite::Regex::new("^GET$").unwrap())];
        let mut named = rule("other");
        named.domain_set = suffixes(&["b.test"]);
        let plan = RoutingPlan {
            domain_strategy: RoutingDomainStrategy::AsIs,
            rules: vec![tls, get, named],
            balancers: vec![],
        };
        let router = Router::new(&plan, TAGS);
        let mut m = meta(Address::Ip("127.0.0.1:443".parse().unwrap()));
        assert_eq!(router.route(&m, None), Route::To(0));
        m.protocol = Some("tls");
        assert_eq!(router.route(&m, None), Route::To(1));
        m.protocol = Some("http");
        m.attributes = Some(Arc::from(vec![(":method".to_string(), "POST".to_string())]));
        assert_eq!(router.route(&m, None), Route::To(0));
        m.attributes = Some(Arc::from(vec![(":method".to_string(), "GET".to_string())]));
        assert_eq!(router.route(&m, None), Route::To(2));
        // routeOnly: the sniffed name is matched, the destination stays.
        let mut m = meta(Address::Ip("127.0.0.1:80".parse().unwrap()));
        m.route_destination = Some(Address::Domain("x.b.test".into(), 80));
        assert_eq!(router.route(&m, None), Route::To(2));
    }

    #[test]
    fn balancers_pick_by_selector_prefix() {
        let tags = ["direct", "proxy-b", "proxy-a", "block"];
        let mut to_balancer = rule("direct");
        to_balancer.target = RuleTarget::Balancer("rr".into());
        to_balancer.ports = vec![PortRange::parse("443").unwrap()];
        let mut to_empty = rule("direct");
        to_empty.target = RuleTarget::Balancer("none".into());
        to_empty.ports = vec![PortRange::parse("80").unwrap()];
        let mut to_random = rule("direct");
        to_random.target = RuleTarget::Balancer("rand".into());
        to_random.ports = vec![PortRange::parse("53").unwrap()];
        let balancer = |tag: &str, sel: &str, strategy, fallback: Option<&str>| BalancerPlan {
            tag: tag.into(),
            selectors: vec![sel.into()],
            strategy,
            fallback_tag: fallback.map(Into::into),
        };
        let plan = RoutingPlan {
            domain_strategy: RoutingDomainStrategy::AsIs,
            rules: vec![to_balancer, to_empty, to_random],
            balancers: vec![
                balancer("rr", "proxy-", BalancerStrategy::RoundRobin, None),
                balancer("none", "nothing", BalancerStrategy::Random, Some("block")),
                balancer("rand", "proxy-", BalancerStrategy::Random, None),
            ],
        };
        let router = Router::new(&plan, &tags);
        let m = |port| meta(Address::Ip(format!("1.1.1.1:{port}").parse().unwrap()));
        // Round robin in tag order: proxy-a (2), proxy-b (1), proxy-a, …
        let picks: Vec<_> = (0..4).map(|_| router.route(&m(443), None)).collect();
        assert_eq!(
            picks,
            [Route::To(2), Route::To(1), Route::To(2), Route::To(1)]
        );
        assert_eq!(router.route(&m(80), None), Route::To(3));
        for _ in 0..20 {
            let Route::To(i) = router.route(&m(53), None) else {
                panic!("no route");
            };
            assert!(i == 1 || i == 2);
        }
    }
}
