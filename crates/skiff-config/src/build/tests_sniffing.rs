//! `sniffing` on inbounds and the routing parts that use it (`protocol`, `attrs`) plus
//! balancers: build-step tests through the public entry point.

use crate::{
    BalancerStrategy, Diagnostic, Plan, RuleTarget, Severity, SniffProtocol, Source, load_sources,
};

fn load(text: &str) -> Result<(Plan, Vec<Diagnostic>), Vec<Diagnostic>> {
    load_sources(&[Source {
        name: "t.json".into(),
        text: text.into(),
    }])
    .map(|l| (l.plan, l.warnings))
}

fn errors(text: &str) -> Vec<(String, String)> {
    match load(text) {
        Ok(_) => panic!("expected errors for {text}"),
        Err(diags) => diags
            .into_iter()
            .filter(|d| d.severity == Severity::Error)
            .map(|d| (d.path.clone(), d.message.clone()))
            .collect(),
    }
}

fn has_error(text: &str, path: &str, needle: &str) {
    let errs = errors(text);
    assert!(
        errs.iter().any(|(p, m)| p == path && m.contains(needle)),
        "no error at `{path}` containing `{needle}` in {errs:#?}"
    );
}

fn with_sniffing(sniffing: &str) -> String {
    format!(r#"{{"inbounds": [{{"port": 1, "protocol": "socks", "sniffing": {sniffing}}}]}}"#)
}

#[test]
fn sniffing_fields() {
    let (plan, warnings) = load(&with_sniffing(
        r#"{"enabled": true, "destOverride": ["HTTP", "https", "quic", "fakedns"], "routeOnly": true,
            "domainsExcluded": ["courier.push.apple.com", "domain:mi.com", "regexp:^x\\."], "ipsExcluded": ["10.0.0.0/8"]}"#,
    ))
    .unwrap();
    let s = plan.inbounds[0].sniffing.as_ref().unwrap();
    assert_eq!(
        s.dest_override,
        [SniffProtocol::Http, SniffProtocol::Tls, SniffProtocol::Quic]
    );
    assert!(s.route_only && !s.metadata_only);
    let excluded = s.domains_excluded.as_ref().unwrap();
    assert!(excluded.matches("a.mi.com") && excluded.matches("x.y") && !excluded.matches("b.com"));
    assert_eq!(s.ips_excluded.len(), 1);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0].path, "inbounds[0].sniffing.destOverride[3]");
    assert!(warnings[0].message.contains("fake-IP pool"));

    let (plan, _) = load(&with_sniffing(
        r#"{"enabled": false, "destOverride": ["http"]}"#,
    ))
    .unwrap();
    assert!(plan.inbounds[0].sniffing.is_none());
}

#[test]
fn sniffing_errors() {
    has_error(
        &with_sniffing(r#"{"enabled": true, "destOverride": ["fakedns"]}"#),
        "inbounds[0].sniffing.destOverride[0]",
        "fake-IP pool",
    );
    has_error(
        &with_sniffing(r#"{"enabled": true, "destOverride": ["http", "bittorrent"]}"#),
        "inbounds[0].sniffing.destOverride[1]",
        "unknown sniffing protocol",
    );
    has_error(
        &with_sniffing(r#"{"enabled": true, "domainsExcluded": ["regexp:("]}"#),
        "inbounds[0].sniffing.domainsExcluded[0]",
        "",
    );
    let errs = errors(&with_sniffing(
        r#"{"enabled": true, "destOverride": "http"}"#,
    ));
    assert!(errs[0].0.starts_with("inbounds[0].sniffing"), "{errs:?}");
}

const OUTBOUNDS: &str = r#""outbounds": [{"tag": "direct", "protocol": "freedom"},
    {"tag": "proxy-a", "protocol": "blackhole"}, {"tag": "proxy-b", "protocol": "blackhole"}]"#;

fn routing(routing: &str) -> String {
    format!(r#"{{{OUTBOUNDS}, "routing": {routing}}}"#)
}

#[test]
fn balancers_and_sniffed_conditions() {
    let (plan, warnings) = load(&routing(
        r#"{"domainMatcher": "linear", "balancers": [
            {"tag": "b", "selector": ["proxy-"], "strategy": {"type": "roundRobin"}, "fallbackTag": "direct"},
            {"tag": "r", "selector": "proxy-a"}],
          "rules": [
            {"protocol": ["tls", "HTTP"], "balancerTag": "b", "ruleTag": "sniffed"},
            {"attrs": {":Method": "^GET$"}, "outboundTag": "direct", "balancerTag": "b"}]}"#,
    ))
    .unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    let r = &plan.routing;
    assert_eq!(r.balancers.len(), 2);
    assert_eq!(r.balancers[0].strategy, BalancerStrategy::RoundRobin);
    assert_eq!(r.balancers[0].fallback_tag.as_deref(), Some("direct"));
    assert_eq!(r.balancers[1].strategy, BalancerStrategy::Random);
    assert_eq!(r.balancers[1].selectors, ["proxy-a"]);
    assert_eq!(r.rules[0].target, RuleTarget::Balancer("b".into()));
    assert_eq!(r.rules[0].protocols, ["tls", "http"]);
    assert_eq!(r.rules[0].rule_tag.as_deref(), Some("sniffed"));
    // Both tags: the outbound wins, as in Xray.
    assert_eq!(r.rules[1].target, RuleTarget::Outbound("direct".into()));
    assert_eq!(r.rules[1].attrs[0].0, ":method");
    assert!(r.rules[1].attrs[0].1.is_match("GET"));
}

#[test]
fn protocols_skiff_does_not_sniff_are_warned_about() {
    let (plan, warnings) = load(&routing(
        r#"{"rules": [{"protocol": ["bittorrent", "tls"], "outboundTag": "direct"}]}"#,
    ))
    .unwrap();
    assert_eq!(plan.routing.rules[0].protocols, ["bittorrent", "tls"]);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0].path, "routing.rules[0].protocol[0]");
}

#[test]
fn balancer_errors() {
    has_error(
        &routing(
            r#"{"balancers": [{"tag": "b", "selector": ["p"], "strategy": {"type": "leastPing"}}]}"#,
        ),
        "routing.balancers[0].strategy.type",
        "observatory",
    );
    has_error(
        &routing(
            r#"{"balancers": [{"tag": "b", "selector": ["p"], "strategy": {"type": "fastest"}}]}"#,
        ),
        "routing.balancers[0].strategy.type",
        "unknown balancing strategy",
    );
    has_error(
        &routing(r#"{"balancers": [{"tag": "b", "selector": []}]}"#),
        "routing.balancers[0].selector",
        "empty selector",
    );
    has_error(
        &routing(r#"{"balancers": [{"selector": ["p"]}]}"#),
        "routing.balancers[0].tag",
        "empty balancer tag",
    );
    has_error(
        &routing(
            r#"{"balancers": [{"tag": "b", "selector": ["p"]}, {"tag": "b", "selector": ["p"]}]}"#,
        ),
        "routing.balancers[1].tag",
        "already tagged",
    );
    has_error(
        &routing(r#"{"balancers": [{"tag": "b", "selector": ["p"], "fallbackTag": "nope"}]}"#),
        "routing.balancers[0].fallbackTag",
        "no outbound is tagged `nope`",
    );
    has_error(
        &routing(r#"{"rules": [{"attrs": [1], "outboundTag": "direct"}]}"#),
        "routing.rules[0].attrs",
        "expected an object",
    );
}
