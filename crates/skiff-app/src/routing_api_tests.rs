//! The AddRule conversion: a rule sent as Xray's protobuf routes exactly as the same rule
//! written in a config file (a property over generated rules and sessions); malformed or
//! unsupported rules are refused with the error kind and text the API answers.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use proptest::prelude::*;
use prost::Message;
use skiff_api::proto::geodata::{Cidr as ProtoCidr, Domain as ProtoDomain, GeoIpRule};
use skiff_api::proto::net::{PortList as ProtoPortList, PortRange as ProtoPortRange};
use skiff_api::proto::router::WebhookConfig;
use skiff_config::RoutingPlan;

use super::*;
use crate::router::Router;

const TAGS: &[&str] = &["direct", "block"];

fn no_geo() -> GeoLists {
    GeoLists::in_dirs(Vec::new())
}

fn to(tag: &str) -> Option<routing_rule::TargetTag> {
    Some(routing_rule::TargetTag::Tag(tag.into()))
}

fn custom_domain(kind: domain::Type, value: &str) -> DomainRule {
    DomainRule {
        value: Some(domain_rule::Value::Custom(ProtoDomain {
            r#type: kind as i32,
            value: value.into(),
            attribute: vec![],
        })),
    }
}

fn cidr(ip: &[u8], prefix: u32, reverse: bool) -> IpRule {
    IpRule {
        value: Some(ip_rule::Value::Custom(CidrRule {
            cidr: Some(ProtoCidr {
                ip: ip.to_vec(),
                prefix,
            }),
            reverse_match: reverse,
        })),
    }
}

fn ports(ranges: &[(u32, u32)]) -> Option<ProtoPortList> {
    Some(ProtoPortList {
        range: ranges
            .iter()
            .map(|&(from, to)| ProtoPortRange { from, to })
            .collect(),
    })
}

fn base() -> RoutingRule {
    RoutingRule {
        target_tag: to("block"),
        inbound_tag: vec!["in".into()],
        ..Default::default()
    }
}

fn refused(rule: RoutingRule) -> RoutingError {
    match rule_plan(&rule, &mut no_geo()) {
        Ok(_) => panic!("accepted: {rule:?}"),
        Err(e) => e,
    }
}

#[test]
fn malformed_rules_are_invalid_arguments() {
    let cases: Vec<(RoutingRule, &str)> = vec![
        (
            RoutingRule {
                ip: vec![cidr(&[10, 0, 0], 8, false)],
                ..base()
            },
            "3 bytes",
        ),
        (
            RoutingRule {
                ip: vec![cidr(&[10, 0, 0, 0], 33, false)],
                ..base()
            },
            "prefix length",
        ),
        (
            RoutingRule {
                source_ip: vec![cidr(&[0; 16], 129, false)],
                ..base()
            },
            "prefix length",
        ),
        (
            RoutingRule {
                port_list: ports(&[(443, 80)]),
                ..base()
            },
            "443-80",
        ),
        (
            RoutingRule {
                source_port_list: ports(&[(1, 70_000)]),
                ..base()
            },
            "70000",
        ),
        (
            RoutingRule {
                domain: vec![DomainRule {
                    value: Some(domain_rule::Value::Custom(ProtoDomain {
                        r#type: 9,
                        value: "a.test".into(),
                        attribute: vec![],
                    })),
                }],
                ..base()
            },
            "unknown type 9",
        ),
        (
            RoutingRule {
                domain: vec![custom_domain(domain::Type::Regex, "(unclosed")],
                ..base()
            },
            "(unclosed",
        ),
        (
            RoutingRule {
                domain: vec![DomainRule { value: None }],
                ..base()
            },
            "empty domain rule",
        ),
        (
            RoutingRule {
                networks: vec![42],
                ..base()
            },
            "unknown value 42",
        ),
        (
            RoutingRule {
                attributes: [(":path".to_string(), "[".to_string())].into(),
                ..base()
            },
            "invalid regular expression",
        ),
        (
            RoutingRule {
                target_tag: None,
                ..base()
            },
            "outbound tag or a balancer tag",
        ),
        (
            RoutingRule {
                target_tag: to(""),
                ..base()
            },
            "outbound tag or a balancer tag",
        ),
        (
            RoutingRule {
                inbound_tag: vec![String::new()],
                ..base()
            },
            "empty inboundTag",
        ),
    ];
    for (rule, says) in cases {
        let e = refused(rule);
        let RoutingError::Invalid(text) = &e else {
            panic!("{e:?} is not Invalid");
        };
        assert!(text.contains(says), "{text:?} does not say {says:?}");
    }
}

#[test]
fn unsupported_conditions_are_refused_not_ignored() {
    let cases: Vec<(RoutingRule, &str)> = vec![
        (
            RoutingRule {
                local_ip: vec![cidr(&[127, 0, 0, 1], 32, false)],
                ..base()
            },
            "`localIP`",
        ),
        (
            RoutingRule {
                local_port_list: ports(&[(1, 2)]),
                ..base()
            },
            "`localPort`",
        ),
        (
            RoutingRule {
                vless_route_list: ports(&[(1, 2)]),
                ..base()
            },
            "`vlessRoute`",
        ),
        (
            RoutingRule {
                process: vec!["curl".into()],
                ..base()
            },
            "`process`",
        ),
        (
            RoutingRule {
                webhook: Some(WebhookConfig {
                    url: "http://127.0.0.1:1/".into(),
                    ..Default::default()
                }),
                ..base()
            },
            "`webhook`",
        ),
        (
            RoutingRule {
                source_ip: vec![cidr(&[10, 0, 0, 0], 8, true)],
                ..base()
            },
            "`source`",
        ),
        (
            RoutingRule {
                source_ip: vec![IpRule {
                    value: Some(ip_rule::Value::Geoip(GeoIpRule {
                        file: "geoip.dat".into(),
                        code: "PRIVATE".into(),
                        reverse_match: false,
                    })),
                }],
                ..base()
            },
            "`source`",
        ),
    ];
    for (rule, says) in cases {
        let e = refused(rule);
        let RoutingError::Unsupported(text) = &e else {
            panic!("{e:?} is not Unsupported");
        };
        assert!(text.contains(says), "{text:?} does not say {says:?}");
    }
    let e = balancer_plan(&BalancingRule {
        tag: "b".into(),
        strategy: "leastPing".into(),
        ..Default::default()
    })
    .unwrap_err();
    assert!(matches!(e, RoutingError::Unsupported(t) if t.contains("observatory")));
}

#[test]
fn xray_s_own_refusals_keep_xray_s_words() {
    let e = refused(RoutingRule {
        inbound_tag: vec![],
        rule_tag: "empty".into(),
        ..base()
    });
    assert_eq!(
        e,
        RoutingError::Xray("app/router: this rule has no effective fields".into())
    );
    let e = balancer_plan(&BalancingRule {
        tag: "b".into(),
        strategy: "fastest".into(),
        ..Default::default()
    })
    .unwrap_err();
    assert_eq!(
        e,
        RoutingError::Xray("app/router: unrecognized balancer type".into())
    );
}

#[test]
fn a_missing_geo_list_names_the_file() {
    let e = refused(RoutingRule {
        ip: vec![IpRule {
            value: Some(ip_rule::Value::Geoip(GeoIpRule {
                file: "geoip.dat".into(),
                code: "PRIVATE".into(),
                reverse_match: false,
            })),
        }],
        ..base()
    });
    assert!(
        matches!(&e, RoutingError::Invalid(t) if t.contains("geoip.dat")),
        "{e:?}"
    );
}

#[test]
fn test_route_sessions_are_read_as_xray_describes_them() {
    let context = RoutingContext {
        inbound_tag: "in".into(),
        network: ProtoNetwork::Udp as i32,
        source_i_ps: vec![vec![192, 0, 2, 1]],
        source_port: 1234,
        target_i_ps: vec![vec![10, 0, 0, 1]],
        target_domain: "a.test".into(),
        target_port: 53,
        protocol: "QUIC".into(),
        user: "u@x".into(),
        ..Default::default()
    };
    let (meta, ips) = session(&context).unwrap();
    assert_eq!(meta.network, Network::Udp);
    assert_eq!(meta.source, "192.0.2.1:1234".parse::<SocketAddr>().unwrap());
    assert_eq!(meta.destination, Some(Address::Domain("a.test".into(), 53)));
    assert_eq!(ips, [IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1))]);
    assert_eq!(meta.protocol, Some("quic"));
    assert_eq!(meta.user.as_deref(), Some("u@x"));
    let bad = RoutingContext {
        target_port: 70_000,
        ..Default::default()
    };
    assert!(matches!(session(&bad), Err(RoutingError::Invalid(_))));
    let bad = RoutingContext {
        source_i_ps: vec![vec![1, 2, 3]],
        ..Default::default()
    };
    assert!(matches!(session(&bad), Err(RoutingError::Invalid(_))));
}

/// One generated rule, as JSON (the config file's form) and as Xray's protobuf (what
/// `xray api adrules` builds from that JSON).
#[derive(Clone, Debug)]
struct Generated {
    json: serde_json::Value,
    proto: RoutingRule,
}

/// Names from a small alphabet, so that generated sessions hit generated rules.
fn name() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["a", "b", "ab", "x"]).prop_flat_map(|label| {
        prop::sample::select(vec!["test", "example", "a.test"])
            .prop_map(move |tld| format!("{label}.{tld}"))
    })
}

fn domain_condition() -> impl Strategy<Value = (String, DomainRule)> {
    (0..4usize, name()).prop_map(|(kind, value)| {
        let (prefix, t) = match kind {
            0 => ("keyword:", domain::Type::Substr),
            1 => ("domain:", domain::Type::Domain),
            2 => ("full:", domain::Type::Full),
            _ => ("", domain::Type::Substr),
        };
        // The CLI sends the name as written; a config's upper case is lowered by both.
        (format!("{prefix}{value}"), custom_domain(t, &value))
    })
}

fn v4_cidr() -> impl Strategy<Value = (String, IpRule)> {
    (
        prop::sample::select(vec![10u8, 127, 192]),
        any::<u8>(),
        0..=32u32,
        any::<bool>(),
    )
        .prop_map(|(a, b, prefix, negated)| {
            let text = format!("{}{a}.{b}.0.1/{prefix}", if negated { "!" } else { "" });
            (text, cidr(&[a, b, 0, 1], prefix, negated))
        })
}

fn port_range() -> impl Strategy<Value = (u32, u32)> {
    (1..=1000u32, 0..=200u32).prop_map(|(from, span)| (from, from + span))
}

fn generated_rule() -> impl Strategy<Value = Generated> {
    (
        prop::option::weighted(0.3, prop::collection::vec(domain_condition(), 1..4)),
        prop::option::weighted(0.3, prop::collection::vec(v4_cidr(), 1..3)),
        prop::option::weighted(0.3, prop::collection::vec(port_range(), 1..3)),
        prop::option::weighted(0.3, 0..3usize),
        prop::option::weighted(0.3, prop::sample::select(vec!["in", "other"])),
        prop::option::weighted(
            0.3,
            v4_cidr().prop_filter("no negated source", |(t, _)| !t.starts_with('!')),
        ),
        prop::option::weighted(0.3, prop::sample::select(vec!["u@x", "v@x"])),
        any::<bool>(),
    )
        .prop_filter("a rule needs a condition", |(d, i, p, n, t, s, u, _)| {
            d.is_some()
                || i.is_some()
                || p.is_some()
                || n.is_some()
                || t.is_some()
                || s.is_some()
                || u.is_some()
        })
        .prop_map(
            |(domains, ips, port_list, network, inbound, source, user, to_block)| {
                let outbound = if to_block { "block" } else { "direct" };
                let mut json = serde_json::json!({ "outboundTag": outbound });
                let mut proto = RoutingRule {
                    target_tag: to(outbound),
                    ..Default::default()
                };
                if let Some(domains) = domains {
                    json["domain"] = domains.iter().map(|(t, _)| t.clone()).collect();
                    proto.domain = domains.into_iter().map(|(_, p)| p).collect();
                }
                if let Some(ips) = ips {
                    json["ip"] = ips.iter().map(|(t, _)| t.clone()).collect();
                    proto.ip = ips.into_iter().map(|(_, p)| p).collect();
                }
                if let Some(ranges) = port_list {
                    let text: Vec<String> =
                        ranges.iter().map(|(a, b)| format!("{a}-{b}")).collect();
                    json["port"] = text.join(",").into();
                    proto.port_list = ports(&ranges);
                }
                if let Some(n) = network {
                    let (text, list): (&str, Vec<ProtoNetwork>) = match n {
                        0 => ("tcp", vec![ProtoNetwork::Tcp]),
                        1 => ("udp", vec![ProtoNetwork::Udp]),
                        _ => ("tcp,udp", vec![ProtoNetwork::Tcp, ProtoNetwork::Udp]),
                    };
                    json["network"] = text.into();
                    proto.networks = list.into_iter().map(|n| n as i32).collect();
                }
                if let Some(tag) = inbound {
                    json["inboundTag"] = serde_json::json!([tag]);
                    proto.inbound_tag = vec![tag.into()];
                }
                if let Some((text, rule)) = source {
                    json["source"] = serde_json::json!([text]);
                    proto.source_ip = vec![rule];
                }
                if let Some(user) = user {
                    json["user"] = serde_json::json!([user]);
                    proto.user_email = vec![user.into()];
                }
                Generated { json, proto }
            },
        )
}

/// A session to route: inbound, network, source, destination (a name or an IPv4), user.
fn session_strategy() -> impl Strategy<Value = Metadata> {
    (
        prop::sample::select(vec!["in", "other"]),
        any::<bool>(),
        (prop::sample::select(vec![10u8, 127, 192]), any::<u8>()),
        // A generated name or a subdomain of one, so that `domain:` and `full:` differ.
        prop::option::of(
            (name(), any::<bool>()).prop_map(
                |(name, sub)| {
                    if sub { format!("www.{name}") } else { name }
                },
            ),
        ),
        (prop::sample::select(vec![10u8, 127, 192]), any::<u8>()),
        1..=1300u16,
        prop::option::of(prop::sample::select(vec!["u@x", "v@x"])),
    )
        .prop_map(|(inbound, udp, (s1, s2), domain, (d1, d2), port, user)| {
            let source = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(s1, s2, 3, 4)), 5000);
            let mut meta = Metadata::new(Arc::from(inbound), source, source);
            if udp {
                meta.network = Network::Udp;
            }
            meta.destination = Some(match domain {
                Some(name) => Address::Domain(name, port),
                None => Address::Ip(SocketAddr::new(
                    IpAddr::V4(Ipv4Addr::new(d1, d2, 0, 9)),
                    port,
                )),
            });
            meta.user = user.map(Arc::from);
            meta
        })
}

/// The rule as a config file's only rule, built by skiff-config.
fn from_config(rule: &serde_json::Value) -> RoutingPlan {
    let config = serde_json::json!({
        "inbounds": [{ "tag": "in", "listen": "127.0.0.1", "port": 1, "protocol": "socks" }],
        "outbounds": [{ "tag": "direct", "protocol": "freedom" },
                      { "tag": "block", "protocol": "blackhole" }],
        "routing": { "rules": [rule] }
    });
    let source = skiff_config::Source {
        name: "rule.json".into(),
        text: config.to_string(),
    };
    match skiff_config::load_sources(&[source]) {
        Ok(loaded) => loaded.plan.routing,
        Err(diags) => panic!("the config refused {rule}: {diags:?}"),
    }
}

/// The property, run by hand so that the run can show it was not vacuous: over generated
/// rules and sessions, the rule added through the API and the same rule in a config file
/// decide alike, and they did send some sessions to the rule's outbound.
#[test]
fn a_rule_added_through_the_api_routes_as_the_same_rule_in_a_config() {
    use proptest::test_runner::{Config as RunnerConfig, TestRunner};
    let matched = std::cell::Cell::new(0usize);
    let mut runner = TestRunner::new(RunnerConfig {
        cases: 256,
        ..RunnerConfig::default()
    });
    let cases = (
        generated_rule(),
        prop::collection::vec(session_strategy(), 32),
    );
    let result = runner.run(&cases, |(rule, sessions)| {
        let configured = Router::new(&from_config(&rule.json), TAGS);
        let plan = rule_plan(&rule.proto, &mut no_geo()).expect("the API refused a valid rule");
        let added = Router::new(&RoutingPlan::default(), TAGS);
        added.add_rules(vec![plan], &[], true).unwrap();
        for meta in &sessions {
            let decided = added.decide(meta, None);
            prop_assert_eq!(
                configured.decide(meta, None),
                decided.clone(),
                "rule {} on {:?}",
                rule.json,
                meta
            );
            matched.set(matched.get() + usize::from(decided.is_some()));
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    assert!(
        matched.get() > 100,
        "only {} sessions matched",
        matched.get()
    );
}

proptest! {
    #[test]
    fn any_bytes_give_a_config_or_an_error_never_a_panic(
        bytes in prop::collection::vec(any::<u8>(), 0..256),
    ) {
        if let Ok(config) = Config::decode(bytes.as_slice()) {
            for rule in &config.rule {
                let _ = rule_plan(rule, &mut no_geo());
            }
            for balancer in &config.balancing_rule {
                let _ = balancer_plan(balancer);
            }
        }
    }
}
