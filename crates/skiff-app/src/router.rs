//! The router: a pure function from session metadata to an outbound. It never does I/O; when
//! the routing domainStrategy needs a domain's IPs it says so and the dispatcher resolves.

use std::net::IpAddr;

use skiff_config::{RoutingDomainStrategy, RoutingPlan, RulePlan};
use skiff_core::{Address, Metadata};

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
    rules: Vec<(RulePlan, OutboundIndex)>,
    any_ip_rule: bool,
}

impl Router {
    /// `outbound_index` maps an outbound tag to its index; the config already checked that every
    /// rule's tag exists, so a miss falls back to the default outbound.
    pub fn new(plan: &RoutingPlan, outbound_index: impl Fn(&str) -> Option<usize>) -> Router {
        let rules: Vec<_> = plan
            .rules
            .iter()
            .map(|r| (r.clone(), outbound_index(&r.outbound_tag).unwrap_or(0)))
            .collect();
        let any_ip_rule = rules.iter().any(|(r, _)| r.ip_set.is_some());
        Router {
            strategy: plan.domain_strategy,
            rules,
            any_ip_rule,
        }
    }

    /// Picks the outbound for `meta`. `resolved` is None on the first call and the domain's
    /// IPs (possibly none) on the second.
    pub fn route(&self, meta: &Metadata, resolved: Option<&[IpAddr]>) -> Route {
        let is_domain = matches!(meta.destination, Some(Address::Domain(..)));
        for (rule, index) in &self.rules {
            match rule_matches(rule, meta, resolved) {
                Match::Yes => return Route::To(*index),
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
    let Some(destination) = &meta.destination else {
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
            outbound_tag: outbound.into(),
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

    fn index(tag: &str) -> Option<usize> {
        ["direct", "block", "other"].iter().position(|t| *t == tag)
    }

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
        };
        let router = Router::new(&plan, index);
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
            };
            let router = Router::new(&plan, index);
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
        };
        let router = Router::new(&plan, index);
        let mut m = meta(Address::Ip("1.1.1.1:53".parse().unwrap()));
        assert_eq!(router.route(&m, None), Route::To(0));
        m.network = Network::Udp;
        assert_eq!(router.route(&m, None), Route::To(1));
        m.inbound_tag = Arc::from("other-in");
        assert_eq!(router.route(&m, None), Route::To(0));
    }
}
