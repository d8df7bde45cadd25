//! The `dns` section: what a valid one becomes, and every mistake at its own path.

use std::time::Duration;

use skiff_core::Family;
use skiff_dns::{Endpoint, Host, HostValue, QueryStrategy};

use crate::{Diagnostic, Plan, Severity, Source, load_sources};

fn load(text: &str) -> Result<(Plan, Vec<Diagnostic>), Vec<Diagnostic>> {
    load_sources(&[Source {
        name: "t.json".into(),
        text: text.into(),
    }])
    .map(|l| (l.plan, l.warnings))
}

fn errors(text: &str) -> Vec<(String, usize, String)> {
    match load(text) {
        Ok(_) => panic!("expected errors for {text}"),
        Err(diags) => diags
            .into_iter()
            .filter(|d| d.severity == Severity::Error)
            .map(|d| (d.path, d.line, d.message))
            .collect(),
    }
}

#[test]
fn a_full_section() {
    let text = r#"{"dns": {
        "hosts": {
            "router.lan": "192.168.1.1",
            "domain:corp.example": ["10.0.0.1", "10.0.0.2"],
            "keyword:ads": "127.0.0.1",
            "regexp:^x[0-9]+\\.test$": "::1",
            "full:old.example": "new.example"
        },
        "servers": [
            "1.1.1.1",
            {"address": "https://dns.example/dns-query", "domains": ["domain:example.com", "full:a.test"],
             "expectIPs": ["192.0.2.0/24", "*"], "skipFallback": true, "queryStrategy": "UseIPv4",
             "clientIp": "198.51.100.1", "timeoutMs": 1500, "finalQuery": true},
            {"address": "tcp://9.9.9.9", "port": 5353, "expectedIPs": ["10.0.0.0/8"], "unexpectedIPs": "10.9.0.0/16"},
            "localhost"
        ],
        "queryStrategy": "UseIPv6",
        "disableCache": true,
        "disableFallbackIfMatch": true,
        "clientIp": "203.0.113.7"
    }}"#;
    let (plan, warnings) = load(text).unwrap();
    assert!(warnings.is_empty(), "{warnings:#?}");
    let dns = plan.dns.expect("a dns plan");
    assert_eq!(dns.hosts.len(), 5);
    let router = dns.hosts.iter().find(|h| h.key == "router.lan").unwrap();
    assert!(router.matcher.matches("router.lan") && !router.matcher.matches("x.router.lan"));
    let corp = dns
        .hosts
        .iter()
        .find(|h| h.key == "domain:corp.example")
        .unwrap();
    assert!(corp.matcher.matches("a.corp.example"));
    assert_eq!(
        corp.value,
        HostValue::Ips(vec![
            "10.0.0.1".parse().unwrap(),
            "10.0.0.2".parse().unwrap()
        ])
    );
    let old = dns
        .hosts
        .iter()
        .find(|h| h.key == "full:old.example")
        .unwrap();
    assert_eq!(old.value, HostValue::Alias("new.example".into()));
    assert_eq!(dns.servers.len(), 4);
    assert_eq!(
        dns.servers[0].endpoint,
        Endpoint::Udp(Host::Ip("1.1.1.1".parse().unwrap()), 53)
    );
    let doh = &dns.servers[1];
    assert_eq!(
        doh.endpoint,
        Endpoint::Https(Host::Name("dns.example".into()), 443, "/dns-query".into())
    );
    assert!(doh.domains.as_ref().unwrap().matches("www.example.com"));
    assert!(doh.expect_ips.as_ref().unwrap().prefer);
    assert!(doh.skip_fallback && doh.final_query && doh.disable_cache);
    assert_eq!(doh.query_strategy, QueryStrategy(Some(Family::V4)));
    assert_eq!(doh.timeout, Duration::from_millis(1500));
    assert_eq!(doh.client_ip, Some("198.51.100.1".parse().unwrap()));
    let tcp = &dns.servers[2];
    assert_eq!(
        tcp.endpoint,
        Endpoint::Tcp(Host::Ip("9.9.9.9".parse().unwrap()), 5353)
    );
    assert!(
        tcp.expect_ips
            .as_ref()
            .unwrap()
            .set
            .matches("10.1.1.1".parse().unwrap())
    );
    assert!(tcp.unexpected_ips.is_some());
    assert_eq!(dns.servers[3].endpoint, Endpoint::System);
    assert_eq!(dns.query_strategy, QueryStrategy(Some(Family::V6)));
    assert!(dns.disable_cache && dns.disable_fallback_if_match && !dns.disable_fallback);
    assert_eq!(dns.client_ip, Some("203.0.113.7".parse().unwrap()));
    // Without the section, no DNS module.
    assert!(load("{}").unwrap().0.dns.is_none());
}

#[test]
fn every_mistake_at_its_own_path() {
    let text = r##"{"dns": {
        "hosts": {
            "a.test": "not an ip!",
            "b.test": ["10.0.0.1", 5],
            "c.test": "#3",
            "regexp:(": "10.0.0.1",
            "geosite:": "10.0.0.1"
        },
        "servers": [
            "quic+local://1.1.1.1",
            {"address": "udp://1.1.1.1", "port": 70000},
            {"address": "8.8.8.8", "expectIPs": ["not-a-cidr"], "queryStrategy": "UseIPv5"},
            {"port": 53},
            {"address": "8.8.4.4", "domains": ["regexp:["], "clientIp": "nowhere"},
            true
        ],
        "queryStrategy": "Fastest",
        "clientIp": "1.2.3"
    }}"##;
    let errs = errors(text);
    let expect = [
        ("dns.hosts.a.test", "not an IP address"),
        ("dns.hosts.b.test[1]", "expected an IP address"),
        ("dns.hosts.c.test", "answer code"),
        ("dns.hosts.regexp:(", "regular expression"),
        ("dns.hosts.geosite:", "empty list code"),
        ("dns.servers[0]", "not supported"),
        ("dns.servers[1].port", "65535"),
        ("dns.servers[2].expectIPs[0]", ""),
        ("dns.servers[2].queryStrategy", "UseIPv5"),
        ("dns.servers[3]", "missing `address`"),
        ("dns.servers[4].domains[0]", "regular expression"),
        ("dns.servers[4].clientIp", "not an IP"),
        (
            "dns.servers[5]",
            "expected an address string or a server object",
        ),
        ("dns.queryStrategy", "Fastest"),
        ("dns.clientIp", "not an IP"),
    ];
    for (path, needle) in expect {
        assert!(
            errs.iter().any(|(p, _, m)| p == path && m.contains(needle)),
            "no error at `{path}` containing `{needle}` in {errs:#?}"
        );
    }
    assert_eq!(errs.len(), expect.len(), "{errs:#?}");
    // Lines point into the file: the first host is on line 3.
    assert!(
        errs.iter()
            .any(|(p, line, _)| p == "dns.hosts.a.test" && *line == 3),
        "{errs:#?}"
    );
}

#[test]
fn keys_skiff_does_not_act_on_are_said() {
    let (_, warnings) = load(r#"{"dns": {"servers": [{"address": "1.1.1.1", "tag": "dns-out"}], "serveStale": true, "tag": "dns-in"}}"#).unwrap();
    let paths: Vec<&str> = warnings.iter().map(|w| w.path.as_str()).collect();
    assert_eq!(
        paths,
        ["dns.servers[0].tag", "dns.serveStale", "dns.tag"],
        "{warnings:#?}"
    );
    let errs = errors(r#"{"dns": {"useSystemHosts": true}}"#);
    assert_eq!(errs[0].0, "dns.useSystemHosts");
}

fn dns_outbound(settings: &str) -> String {
    format!(r#"{{"outbounds": [{{"tag": "dns-out", "protocol": "dns", "settings": {settings}}}]}}"#)
}

fn dns_plan(settings: &str) -> (skiff_dns::outbound::DnsOutboundConfig, Vec<Diagnostic>) {
    let (plan, warnings) = load(&dns_outbound(settings)).expect("valid");
    match &plan.outbounds[0].protocol {
        crate::OutboundProtocol::Dns(d) => (d.clone(), warnings),
        other => panic!("not a dns outbound: {other:?}"),
    }
}

#[test]
fn dns_outbound_settings() {
    use skiff_core::Network;
    use skiff_dns::outbound::{Action, Rule};

    let (d, warnings) = dns_plan("{}");
    assert!(warnings.is_empty(), "{warnings:#?}");
    assert_eq!(d, Default::default());

    let (d, _) = dns_plan(
        r#"{"network": "TCP", "address": "1.1.1.1", "port": 5353, "rewritePort": 9, "userLevel": 0}"#,
    );
    assert_eq!(d.network, Some(Network::Tcp));
    assert_eq!(d.address.as_deref(), Some("1.1.1.1"));
    assert_eq!(d.port, 5353);
    // The older names, used when the short ones are absent.
    let (d, _) =
        dns_plan(r#"{"rewriteNetwork": "udp", "rewriteAddress": "dns.test", "rewritePort": 53}"#);
    assert_eq!(
        (d.network, d.address.as_deref(), d.port),
        (Some(Network::Udp), Some("dns.test"), 53)
    );

    let rule = |action, qtypes: &[(u16, u16)], rcode| Rule {
        action,
        qtypes: qtypes.to_vec(),
        rcode,
        domains: None,
    };
    let (d, warnings) = dns_plan(r#"{"nonIPQuery": "skip"}"#);
    assert_eq!(
        d.rules,
        vec![
            rule(Action::Hijack, &[(1, 1), (28, 28)], 0),
            rule(Action::Direct, &[], 0)
        ]
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.path == "outbounds[0].settings.nonIPQuery")
    );
    let (d, _) = dns_plan(r#"{"blockTypes": [65, 16]}"#);
    assert_eq!(
        d.rules,
        vec![
            rule(Action::Return, &[(65, 65), (16, 16)], 5),
            rule(Action::Hijack, &[(1, 1), (28, 28)], 0),
            rule(Action::Return, &[], 5)
        ]
    );
    let (d, _) = dns_plan(r#"{"nonIPQuery": "drop", "blockTypes": [65]}"#);
    assert_eq!(d.rules[0], rule(Action::Drop, &[(65, 65)], 0));
    assert_eq!(d.rules[2], rule(Action::Drop, &[], 0));

    let (d, warnings) = dns_plan(
        r#"{"rules": [{"action": "Hijack", "qType": "1,28"}, {"action": "return", "qType": 65, "rCode": 3},
            {"action": "drop", "qType": "10-20"}, {"action": "direct"}]}"#,
    );
    assert!(warnings.is_empty(), "{warnings:#?}");
    assert_eq!(
        d.rules,
        vec![
            rule(Action::Hijack, &[(1, 1), (28, 28)], 0),
            rule(Action::Return, &[(65, 65)], 3),
            rule(Action::Drop, &[(10, 20)], 0),
            rule(Action::Direct, &[], 0)
        ]
    );
}

#[test]
fn dns_outbound_mistakes_at_their_paths() {
    let cases = [
        (
            r#"{"network": "sctp"}"#,
            "outbounds[0].settings.network",
            "unknown network",
        ),
        (
            r#"{"rewriteNetwork": "x"}"#,
            "outbounds[0].settings.rewriteNetwork",
            "unknown network",
        ),
        (
            r#"{"address": "not a host"}"#,
            "outbounds[0].settings.address",
            "not an IP address",
        ),
        (
            r#"{"port": 70000}"#,
            "outbounds[0].settings.port",
            "out of range",
        ),
        (
            r#"{"nonIPQuery": "ignore"}"#,
            "outbounds[0].settings.nonIPQuery",
            "unknown nonIPQuery",
        ),
        (
            r#"{"blockTypes": [1, -1]}"#,
            "outbounds[0].settings.blockTypes[1]",
            "out of range",
        ),
        (
            r#"{"nonIPQuery": "drop", "rules": []}"#,
            "outbounds[0].settings.nonIPQuery",
            "cannot be mixed",
        ),
        (
            r#"{"rules": [{"qType": 1}]}"#,
            "outbounds[0].settings.rules[0].action",
            "missing",
        ),
        (
            r#"{"rules": [{"action": "steal"}]}"#,
            "outbounds[0].settings.rules[0].action",
            "unknown action",
        ),
        (
            r#"{"rules": [{"action": "drop", "qType": "x"}]}"#,
            "outbounds[0].settings.rules[0].qType",
            "",
        ),
        (
            r#"{"rules": [{"action": "drop", "domain": ["regexp:("]}]}"#,
            "outbounds[0].settings.rules[0].domain[0]",
            "invalid regular expression",
        ),
        (
            r#"{"rules": [{"action": "return", "rCode": 70000}]}"#,
            "outbounds[0].settings.rules[0].rCode",
            "out of range",
        ),
    ];
    for (settings, path, needle) in cases {
        let errs = errors(&dns_outbound(settings));
        assert!(
            errs.iter()
                .any(|(p, line, m)| p == path && *line == 1 && m.contains(needle)),
            "{settings}: no error at `{path}` containing `{needle}` in {errs:#?}"
        );
    }
    // A rule's `domain` takes routing's forms; a plain entry is a substring.
    let (d, _) = dns_plan(
        r#"{"rules": [{"action": "return", "rCode": 3, "domain": ["domain:ads.test", "tracker"]}]}"#,
    );
    let set = d.rules[0].domains.as_ref().expect("a domain set");
    assert!(set.matches("x.ads.test") && set.matches("my-tracker.example"));
    assert!(!set.matches("ads.test.example"));
    // An unknown key is a warning naming its path, as for every outbound.
    let (_, warnings) = dns_plan(r#"{"adress": "1.1.1.1"}"#);
    assert!(
        warnings
            .iter()
            .any(|w| w.path == "outbounds[0].settings.adress"),
        "{warnings:#?}"
    );
}
