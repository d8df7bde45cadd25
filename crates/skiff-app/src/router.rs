//! The router: a pure function from session metadata to an outbound. It never does I/O; when
//! the routing domainStrategy needs a domain's IPs it says so and the dispatcher resolves.
//!
//! Its rules and balancers are a table Xray's RoutingService replaces at run time (AddRule,
//! RemoveRule): each routing decision reads one snapshot of it, so a new connection sees the
//! new table at once and one being routed sees the old or the new, never a mix. Connections
//! already routed keep their outbound.

use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use skiff_config::{
    BalancerPlan, BalancerStrategy, RoutingDomainStrategy, RoutingPlan, RulePlan, RuleTarget,
};
use skiff_core::{Address, Metadata, Swap};
use tracing::debug;

/// Index into the instance's outbound list.
pub type OutboundIndex = usize;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    To(OutboundIndex),
    /// Resolve the destination domain and ask again with its IPs.
    NeedIps,
    /// A rule added through the API names this outbound tag, which no outbound has: Xray
    /// closes such a connection ("non existing outTag") rather than take the default.
    Nowhere(String),
}

pub struct Router {
    strategy: RoutingDomainStrategy,
    table: Swap<Table>,
    /// Outbound tags by index (the outbounds table's slots, which only grow): what rules are
    /// resolved against, and the log line of a tagged rule.
    tags: RwLock<Vec<String>>,
}

/// The rules and balancers in force.
#[derive(Default)]
struct Table {
    rules: Vec<Rule>,
    balancers: Vec<Arc<Balancer>>,
    any_ip_rule: bool,
}

impl Table {
    fn new(rules: Vec<Rule>, balancers: Vec<Arc<Balancer>>) -> Table {
        let any_ip_rule = rules.iter().any(|r| r.plan.ip_set.is_some());
        Table {
            rules,
            balancers,
            any_ip_rule,
        }
    }
}

#[derive(Clone)]
struct Rule {
    plan: RulePlan,
    target: Target,
}

/// What a rule leads to, resolved once.
#[derive(Clone, Debug)]
enum Target {
    Outbound(OutboundIndex),
    Balancer(Arc<Balancer>),
    /// An outbound tag no outbound has (only rules added through the API).
    Missing(String),
}

/// A balancer with its candidates fixed when it is made (outbounds do not come and go at run
/// time).
#[derive(Debug)]
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

/// A rule as Xray's ListRule shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedRule {
    /// The outbound's tag; "" when the rule names a balancer.
    pub outbound_tag: String,
    /// "" when the rule has no `ruleTag`.
    pub rule_tag: String,
}

impl Router {
    /// `tags` are the outbound tags in order (index 0 is the default); the config already
    /// checked that every rule's outbound and balancer exists.
    pub fn new(plan: &RoutingPlan, tags: &[&str]) -> Router {
        let balancers: Vec<Arc<Balancer>> = plan
            .balancers
            .iter()
            .map(|b| Arc::new(Balancer::new(b, tags)))
            .collect();
        let rules = plan
            .rules
            .iter()
            .map(|r| {
                let target = resolve_target(r, tags, &balancers).unwrap_or(Target::Outbound(0));
                Rule {
                    plan: r.clone(),
                    target,
                }
            })
            .collect();
        Router {
            strategy: plan.domain_strategy,
            table: Swap::new(Table::new(rules, balancers)),
            tags: RwLock::new(tags.iter().map(|t| (*t).to_owned()).collect()),
        }
    }

    /// The outbounds table gave slot `index` to `tag` (an outbound added through the API or
    /// a reload): rules added from now on can name it.
    pub fn set_outbound_tag(&self, index: OutboundIndex, tag: &str) {
        let mut tags = self.tags.write().unwrap_or_else(PoisonError::into_inner);
        if tags.len() <= index {
            tags.resize(index + 1, String::new());
        }
        tags[index] = tag.to_owned();
    }

    fn tags(&self) -> std::sync::RwLockReadGuard<'_, Vec<String>> {
        self.tags.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Xray's AddRule: `rules` and `balancers` after the current ones (`append`), or in place
    /// of all of them. All or nothing: on an error (Xray's text) nothing changes.
    pub fn add_rules(
        &self,
        rules: Vec<RulePlan>,
        balancers: &[BalancerPlan],
        append: bool,
    ) -> Result<(), String> {
        let all = self.tags();
        let tags: Vec<&str> = all.iter().map(String::as_str).collect();
        self.table.update(|current| {
            let (mut table_rules, mut table_balancers): (Vec<Rule>, Vec<Arc<Balancer>>) = if append
            {
                (current.rules.clone(), current.balancers.clone())
            } else {
                (Vec::new(), Vec::new())
            };
            for plan in balancers {
                if table_balancers.iter().any(|b| b.tag == plan.tag) {
                    return Err("app/router: duplicate balancer tag".to_owned());
                }
                table_balancers.push(Arc::new(Balancer::new(plan, &tags)));
            }
            for plan in rules {
                if let Some(tag) = &plan.rule_tag
                    && table_rules
                        .iter()
                        .any(|r| r.plan.rule_tag.as_ref() == Some(tag))
                {
                    return Err(format!("app/router: duplicate ruleTag {tag}"));
                }
                let target = resolve_target(&plan, &tags, &table_balancers)?;
                table_rules.push(Rule { plan, target });
            }
            Ok(Table::new(table_rules, table_balancers))
        })
    }

    /// Xray's RemoveRule: every rule tagged `rule_tag` goes (none is no error).
    pub fn remove_rule(&self, rule_tag: &str) {
        let _ = self.table.update(|current| {
            let rules = current
                .rules
                .iter()
                .filter(|r| r.plan.rule_tag.as_deref() != Some(rule_tag))
                .cloned()
                .collect();
            Ok::<_, ()>(Table::new(rules, current.balancers.clone()))
        });
    }

    /// Xray's ListRule: the rules in order.
    pub fn list_rules(&self) -> Vec<ListedRule> {
        self.table
            .load()
            .rules
            .iter()
            .map(|r| ListedRule {
                outbound_tag: match &r.plan.target {
                    RuleTarget::Outbound(tag) => tag.clone(),
                    RuleTarget::Balancer(_) => String::new(),
                },
                rule_tag: r.plan.rule_tag.clone().unwrap_or_default(),
            })
            .collect()
    }

    /// The outbound tag of `index`.
    pub fn tag(&self, index: OutboundIndex) -> String {
        self.tags().get(index).cloned().unwrap_or_default()
    }

    fn take(&self, rule: &Rule, meta: &Metadata) -> Route {
        let index = match &rule.target {
            Target::Outbound(i) => *i,
            Target::Balancer(b) => b.pick().unwrap_or(0),
            // Named before an outbound had the tag: one added since (the API's AddOutbound,
            // a reload) takes it, as Xray looks tags up per connection.
            Target::Missing(tag) => match self.tags().iter().position(|t| t == tag) {
                Some(index) => index,
                None => return Route::Nowhere(tag.clone()),
            },
        };
        // Xray names a tagged rule in its log ("hit route rule [tag] … detour [outbound]").
        if let Some(tag) = &rule.plan.rule_tag
            && tracing::enabled!(tracing::Level::DEBUG)
        {
            let outbound = self.tag(index);
            debug!(rule = %tag, %outbound, destination = ?meta.routing_destination(), "hit route rule");
        }
        Route::To(index)
    }

    /// Picks the outbound for `meta`. `resolved` is None on the first call and the domain's
    /// IPs (possibly none) on the second.
    pub fn route(&self, meta: &Metadata, resolved: Option<&[IpAddr]>) -> Route {
        self.decide(meta, resolved).unwrap_or(Route::To(0))
    }

    /// As [`Router::route`], but None when no rule matched (the default outbound's case):
    /// what Xray's router itself answers, e.g. to TestRoute.
    pub fn decide(&self, meta: &Metadata, resolved: Option<&[IpAddr]>) -> Option<Route> {
        let table = self.table.load();
        let is_domain = matches!(meta.routing_destination(), Some(Address::Domain(..)));
        for rule in &table.rules {
            match rule_matches(&rule.plan, meta, resolved) {
                Match::Yes => return Some(self.take(rule, meta)),
                Match::No => {}
                Match::NeedIps => {
                    if self.strategy == RoutingDomainStrategy::IpOnDemand && resolved.is_none() {
                        return Some(Route::NeedIps);
                    }
                }
            }
        }
        if self.strategy == RoutingDomainStrategy::IpIfNonMatch
            && is_domain
            && resolved.is_none()
            && table.any_ip_rule
        {
            return Some(Route::NeedIps);
        }
        None
    }
}

/// The rule's outbound or balancer; an outbound tag no outbound has is kept (as Xray does:
/// its connections are closed); a balancer that does not exist is Xray's error.
fn resolve_target(
    rule: &RulePlan,
    tags: &[&str],
    balancers: &[Arc<Balancer>],
) -> Result<Target, String> {
    match &rule.target {
        RuleTarget::Outbound(tag) => Ok(match tags.iter().position(|t| t == tag) {
            Some(i) => Target::Outbound(i),
            None => Target::Missing(tag.clone()),
        }),
        RuleTarget::Balancer(tag) => balancers
            .iter()
            .find(|b| &b.tag == tag)
            .map(|b| Target::Balancer(b.clone()))
            .ok_or_else(|| format!("app/router: balancer {tag} not found")),
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
        // Only a session TestRoute describes can lack one: it matches the rules that ask
        // nothing of the destination.
        let asks = !rule.ports.is_empty() || rule.domain_set.is_some() || rule.ip_set.is_some();
        return if asks { Match::No } else { Match::Yes };
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
    fn tagged(outbound: &str, tag: &str, port: &str) -> RulePlan {
        let mut r = rule(outbound);
        r.rule_tag = Some(tag.into());
        r.ports = vec![PortRange::parse(port).unwrap()];
        r
    }

    fn listed(router: &Router) -> Vec<(String, String)> {
        router
            .list_rules()
            .into_iter()
            .map(|r| (r.outbound_tag, r.rule_tag))
            .collect()
    }

    #[test]
    fn rules_added_removed_and_replaced_at_run_time() {
        let mut to_balancer = tagged("direct", "b", "443");
        to_balancer.target = RuleTarget::Balancer("rr".into());
        let plan = RoutingPlan {
            domain_strategy: RoutingDomainStrategy::AsIs,
            rules: vec![tagged("block", "first", "80"), to_balancer],
            balancers: vec![BalancerPlan {
                tag: "rr".into(),
                selectors: vec!["other".into()],
                strategy: BalancerStrategy::RoundRobin,
                fallback_tag: None,
            }],
        };
        let router = Router::new(&plan, TAGS);
        let m = |port| meta(Address::Ip(format!("1.1.1.1:{port}").parse().unwrap()));
        assert_eq!(router.decide(&m(53), None), None);
        assert_eq!(router.route(&m(53), None), Route::To(0));
        assert_eq!(
            listed(&router),
            [
                ("block".into(), "first".into()),
                (String::new(), "b".into())
            ]
        );

        // Appended: after the others; a rule to an outbound nobody has closes the session.
        router
            .add_rules(
                vec![tagged("other", "dns", "53"), tagged("ghost", "g", "22")],
                &[],
                true,
            )
            .unwrap();
        assert_eq!(router.route(&m(53), None), Route::To(2));
        assert_eq!(router.route(&m(22), None), Route::Nowhere("ghost".into()));
        assert_eq!(router.route(&m(443), None), Route::To(2));
        // An outbound added under that tag since takes its connections.
        router.set_outbound_tag(7, "ghost");
        assert_eq!(router.route(&m(22), None), Route::To(7));

        // All or nothing: a duplicate ruleTag (in the table or the same call) or a missing
        // balancer leaves the table as it was, with Xray's words.
        let before = listed(&router);
        for (rules, error) in [
            (
                vec![tagged("block", "new", "1"), tagged("block", "dns", "2")],
                "app/router: duplicate ruleTag dns",
            ),
            (
                vec![tagged("block", "x", "1"), tagged("block", "x", "2")],
                "app/router: duplicate ruleTag x",
            ),
            (
                vec![{
                    let mut r = tagged("block", "y", "1");
                    r.target = RuleTarget::Balancer("nope".into());
                    r
                }],
                "app/router: balancer nope not found",
            ),
        ] {
            assert_eq!(router.add_rules(rules, &[], true), Err(error.into()));
            assert_eq!(listed(&router), before);
        }
        let again = plan.balancers.clone();
        assert_eq!(
            router.add_rules(vec![], &again, true),
            Err("app/router: duplicate balancer tag".into())
        );

        // Removed by tag (an unknown tag is no error).
        router.remove_rule("dns");
        router.remove_rule("nothing");
        assert_eq!(router.route(&m(53), None), Route::To(0));
        assert_eq!(listed(&router).len(), 3);

        // Replaced: the rules and the balancers go; a rule may name a balancer of the call.
        let mut to_new = tagged("direct", "nb", "443");
        to_new.target = RuleTarget::Balancer("new".into());
        let new_balancer = BalancerPlan {
            tag: "new".into(),
            selectors: vec!["block".into()],
            strategy: BalancerStrategy::Random,
            fallback_tag: None,
        };
        router
            .add_rules(vec![to_new], &[new_balancer], false)
            .unwrap();
        assert_eq!(listed(&router), [(String::new(), "nb".into())]);
        assert_eq!(router.route(&m(443), None), Route::To(1));
        assert_eq!(router.route(&m(80), None), Route::To(0));
        let mut old = tagged("direct", "old", "1");
        old.target = RuleTarget::Balancer("rr".into());
        assert_eq!(
            router.add_rules(vec![old], &[], true),
            Err("app/router: balancer rr not found".into())
        );
    }

    #[test]
    fn a_session_without_destination_matches_rules_that_ask_none() {
        let mut by_inbound = rule("block");
        by_inbound.inbound_tags = vec!["in".into()];
        let plan = RoutingPlan {
            domain_strategy: RoutingDomainStrategy::AsIs,
            rules: vec![tagged("other", "p", "1-65535"), by_inbound],
            balancers: vec![],
        };
        let router = Router::new(&plan, TAGS);
        let mut m = meta(Address::Ip("1.1.1.1:1".parse().unwrap()));
        m.destination = None;
        assert_eq!(router.decide(&m, None), Some(Route::To(1)));
    }
}
