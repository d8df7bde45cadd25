//! The resolver against loopback servers: hosts, UDP, TCP fallback, DoH, server order,
//! expectIPs, the cache, and servers that misbehave.

mod support;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use skiff_core::Family;
use skiff_dns::{
    DnsConfig, DnsError, Endpoint, Host, HostEntry, HostValue, IpFilter, QueryStrategy, Resolver,
    ServerConfig, TlsRoots,
};
use skiff_geodata::{Domain, DomainKind, DomainSet, IpMatcher, IpSet};
use support::{Fault, TestServer, Zone, doh_server, dot_server, udp_server};

fn ips(list: &[&str]) -> Vec<IpAddr> {
    list.iter().map(|s| s.parse().unwrap()).collect()
}

fn domains(kind: DomainKind, values: &[&str]) -> Arc<DomainSet> {
    Arc::new(
        DomainSet::new(values.iter().map(|v| Domain {
            kind,
            value: (*v).to_owned(),
        }))
        .unwrap(),
    )
}

fn server(endpoint: Endpoint) -> ServerConfig {
    ServerConfig {
        endpoint,
        domains: None,
        expect_ips: None,
        unexpected_ips: None,
        skip_fallback: false,
        query_strategy: QueryStrategy::default(),
        client_ip: None,
        timeout: Duration::from_millis(800),
        disable_cache: false,
        final_query: false,
    }
}

fn udp(s: &TestServer) -> ServerConfig {
    server(Endpoint::Udp(Host::Ip(s.addr.ip()), s.addr.port()))
}

fn resolver(config: DnsConfig) -> Resolver {
    Resolver::new(config, &TlsRoots::default()).unwrap()
}

fn zone() -> Zone {
    Zone::new(
        300,
        &[
            ("www.example.com", &["192.0.2.10", "2001:db8::10"]),
            ("intranet.example", &["10.1.2.3"]),
        ],
    )
}

#[tokio::test]
async fn hosts_answer_before_any_server() {
    let upstream = udp_server(zone(), Fault::None).await;
    let entry = |kind, key: &str, value| HostEntry {
        key: key.into(),
        matcher: domains(kind, &[key]),
        value,
    };
    let r = resolver(DnsConfig {
        hosts: vec![
            entry(
                DomainKind::Full,
                "exact.test",
                HostValue::Ips(ips(&["10.0.0.1", "::1"])),
            ),
            entry(
                DomainKind::Suffix,
                "suffix.test",
                HostValue::Ips(ips(&["10.0.0.2"])),
            ),
            entry(
                DomainKind::Plain,
                "keyword",
                HostValue::Ips(ips(&["10.0.0.3"])),
            ),
            entry(
                DomainKind::Regex,
                "^re[0-9]+\\.test$",
                HostValue::Ips(ips(&["10.0.0.4"])),
            ),
            entry(
                DomainKind::Full,
                "alias.test",
                HostValue::Alias("exact.test".into()),
            ),
            entry(
                DomainKind::Full,
                "to-server.test",
                HostValue::Alias("www.example.com".into()),
            ),
        ],
        servers: vec![udp(&upstream)],
        ..DnsConfig::default()
    });
    assert_eq!(
        r.lookup("exact.test", Family::Any).await.unwrap(),
        ips(&["10.0.0.1", "::1"])
    );
    assert_eq!(
        r.lookup("EXACT.test.", Family::V6).await.unwrap(),
        ips(&["::1"])
    );
    assert_eq!(
        r.lookup("a.b.suffix.test", Family::Any).await.unwrap(),
        ips(&["10.0.0.2"])
    );
    assert!(matches!(
        r.lookup("suffix.test", Family::V6).await,
        Err(DnsError::Empty)
    ));
    assert_eq!(
        r.lookup("my-keyword-host.org", Family::Any).await.unwrap(),
        ips(&["10.0.0.3"])
    );
    assert_eq!(
        r.lookup("re42.test", Family::Any).await.unwrap(),
        ips(&["10.0.0.4"])
    );
    assert_eq!(
        r.lookup("alias.test", Family::V4).await.unwrap(),
        ips(&["10.0.0.1"])
    );
    assert_eq!(upstream.count(), 0, "hosts must not reach the server");
    // An alias to a name hosts does not know is asked of the servers.
    assert_eq!(
        r.lookup("to-server.test", Family::V4).await.unwrap(),
        ips(&["192.0.2.10"])
    );
    assert_eq!(upstream.count(), 1);
    // IP literals are their own answer.
    assert_eq!(
        r.lookup("192.0.2.99", Family::Any).await.unwrap(),
        ips(&["192.0.2.99"])
    );
}

#[tokio::test]
async fn udp_upstream_with_query_strategies() {
    let upstream = udp_server(zone(), Fault::None).await;
    let r = resolver(DnsConfig {
        servers: vec![udp(&upstream)],
        disable_cache: true,
        ..DnsConfig::default()
    });
    let mut all = r.lookup("www.example.com", Family::Any).await.unwrap();
    all.sort();
    assert_eq!(all, ips(&["192.0.2.10", "2001:db8::10"]));
    assert_eq!(
        r.lookup("www.example.com", Family::V6).await.unwrap(),
        ips(&["2001:db8::10"])
    );
    assert!(matches!(
        r.lookup("nowhere.example", Family::Any).await,
        Err(DnsError::Empty)
    ));

    let v4_only = resolver(DnsConfig {
        servers: vec![udp(&upstream)],
        query_strategy: QueryStrategy::parse("UseIPv4").unwrap(),
        ..DnsConfig::default()
    });
    assert_eq!(
        v4_only
            .lookup("www.example.com", Family::Any)
            .await
            .unwrap(),
        ips(&["192.0.2.10"])
    );
    assert!(matches!(
        v4_only.lookup("www.example.com", Family::V6).await,
        Err(DnsError::Empty)
    ));
}

#[tokio::test]
async fn tcp_upstream_and_truncated_udp_retries_over_tcp() {
    let upstream = udp_server(zone(), Fault::Truncate).await;
    let r = resolver(DnsConfig {
        servers: vec![udp(&upstream)],
        ..DnsConfig::default()
    });
    assert_eq!(
        r.lookup("www.example.com", Family::V4).await.unwrap(),
        ips(&["192.0.2.10"])
    );
    // One datagram, then one TCP connection.
    assert_eq!(upstream.count(), 2);
    let plain = udp_server(zone(), Fault::None).await;
    let tcp = resolver(DnsConfig {
        servers: vec![server(Endpoint::Tcp(
            Host::Ip(plain.addr.ip()),
            plain.addr.port(),
        ))],
        ..DnsConfig::default()
    });
    assert_eq!(
        tcp.lookup("intranet.example", Family::V4).await.unwrap(),
        ips(&["10.1.2.3"])
    );
}

fn doh(s: &TestServer) -> (ServerConfig, TlsRoots) {
    let endpoint = Endpoint::parse(&format!("https://{}/dns-query", s.addr), 0).unwrap();
    let roots = TlsRoots {
        extra: vec![s.ca.clone().unwrap()],
        no_system: true,
    };
    (server(endpoint), roots)
}

#[tokio::test]
async fn doh_upstream_over_http2() {
    let upstream = doh_server(zone(), Fault::None).await;
    let (config, roots) = doh(&upstream);
    let r = Resolver::new(
        DnsConfig {
            servers: vec![config],
            disable_cache: true,
            ..DnsConfig::default()
        },
        &roots,
    )
    .unwrap();
    let mut all = r.lookup("www.example.com", Family::Any).await.unwrap();
    all.sort();
    assert_eq!(all, ips(&["192.0.2.10", "2001:db8::10"]));
    assert_eq!(
        r.lookup("intranet.example", Family::V4).await.unwrap(),
        ips(&["10.1.2.3"])
    );
    assert_eq!(upstream.count(), 3);

    // A certificate from a CA we do not trust is refused.
    let other = doh_server(zone(), Fault::None).await;
    let (config, _) = doh(&other);
    let strict = Resolver::new(
        DnsConfig {
            servers: vec![config],
            ..DnsConfig::default()
        },
        &roots,
    )
    .unwrap();
    let err = strict
        .lookup("www.example.com", Family::V4)
        .await
        .unwrap_err();
    assert!(matches!(err, DnsError::Io(_)), "{err}");
    assert_eq!(other.count(), 0);
}

#[tokio::test]
async fn dot_upstream() {
    let upstream = dot_server(zone()).await;
    let roots = TlsRoots {
        extra: vec![upstream.ca.clone().unwrap()],
        no_system: true,
    };
    let endpoint = Endpoint::parse(&format!("tls://{}", upstream.addr), 0).unwrap();
    let r = Resolver::new(
        DnsConfig {
            servers: vec![server(endpoint)],
            ..DnsConfig::default()
        },
        &roots,
    )
    .unwrap();
    assert_eq!(
        r.lookup("intranet.example", Family::V4).await.unwrap(),
        ips(&["10.1.2.3"])
    );
    assert_eq!(upstream.count(), 1);
}

#[tokio::test]
async fn server_order_and_expect_ips() {
    // `a` answers with private addresses only; `b` with public ones.
    let a = udp_server(
        Zone::new(300, &[("www.example.com", &["10.9.9.9"])]),
        Fault::None,
    )
    .await;
    let b = udp_server(zone(), Fault::None).await;
    let public = Arc::new(IpMatcher {
        plain: IpSet::new([("192.0.2.0".parse().unwrap(), 24)]),
        negated: vec![],
    });
    let mut first = udp(&a);
    first.expect_ips = Some(IpFilter {
        set: public.clone(),
        prefer: false,
    });
    let r = resolver(DnsConfig {
        servers: vec![first, udp(&b)],
        ..DnsConfig::default()
    });
    // a's answer fails expectIPs: b is asked and its answer is kept.
    assert_eq!(
        r.lookup("www.example.com", Family::V4).await.unwrap(),
        ips(&["192.0.2.10"])
    );
    assert_eq!((a.count(), b.count()), (1, 1));

    // With "*" (prefer), a's answer stands when nothing in it matches.
    let mut prefer = udp(&a);
    prefer.expect_ips = Some(IpFilter {
        set: public,
        prefer: true,
    });
    let r = resolver(DnsConfig {
        servers: vec![prefer, udp(&b)],
        ..DnsConfig::default()
    });
    assert_eq!(
        r.lookup("www.example.com", Family::V4).await.unwrap(),
        ips(&["10.9.9.9"])
    );

    // `domains` puts b first for its names; disableFallbackIfMatch then stops there.
    let mut routed = udp(&b);
    routed.domains = Some(domains(DomainKind::Suffix, &["example.com"]));
    let (a_before, b_before) = (a.count(), b.count());
    let r = resolver(DnsConfig {
        servers: vec![udp(&a), routed],
        disable_fallback_if_match: true,
        ..DnsConfig::default()
    });
    assert_eq!(
        r.lookup("www.example.com", Family::V4).await.unwrap(),
        ips(&["192.0.2.10"])
    );
    assert_eq!((a.count() - a_before, b.count() - b_before), (0, 1));
    // Not matched: a first (config order), and skipFallback keeps b out of the fallback list.
    let mut skipped = udp(&b);
    skipped.skip_fallback = true;
    let r = resolver(DnsConfig {
        servers: vec![udp(&a), skipped],
        ..DnsConfig::default()
    });
    assert!(r.lookup("intranet.example", Family::V4).await.is_err());
    assert_eq!(b.count() - b_before, 1, "b was not asked again");
    // finalQuery: nothing after a is asked, even when a has no answer.
    let mut last = udp(&a);
    last.final_query = true;
    let r = resolver(DnsConfig {
        servers: vec![last, udp(&b)],
        ..DnsConfig::default()
    });
    assert!(r.lookup("intranet.example", Family::V4).await.is_err());
    assert_eq!(
        b.count() - b_before,
        1,
        "b was not asked after a final server"
    );
}

#[tokio::test]
async fn cache_honours_ttl() {
    let upstream = udp_server(Zone::new(1, &[("short.test", &["192.0.2.1"])]), Fault::None).await;
    let r = resolver(DnsConfig {
        servers: vec![udp(&upstream)],
        ..DnsConfig::default()
    });
    assert_eq!(
        r.lookup("short.test", Family::V4).await.unwrap(),
        ips(&["192.0.2.1"])
    );
    assert_eq!(
        r.lookup("short.test", Family::V4).await.unwrap(),
        ips(&["192.0.2.1"])
    );
    assert_eq!(upstream.count(), 1, "the second query came from the cache");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    r.lookup("short.test", Family::V4).await.unwrap();
    assert_eq!(upstream.count(), 2, "the TTL expired");

    let uncached = resolver(DnsConfig {
        servers: vec![udp(&upstream)],
        disable_cache: true,
        ..DnsConfig::default()
    });
    uncached.lookup("short.test", Family::V4).await.unwrap();
    uncached.lookup("short.test", Family::V4).await.unwrap();
    assert_eq!(upstream.count(), 4);
}

async fn failure(fault: Fault) -> (DnsError, Duration) {
    let upstream = udp_server(zone(), fault).await;
    let mut config = udp(&upstream);
    config.timeout = Duration::from_millis(300);
    let r = resolver(DnsConfig {
        servers: vec![config],
        ..DnsConfig::default()
    });
    let started = Instant::now();
    let err = r.lookup("www.example.com", Family::V4).await.unwrap_err();
    (err, started.elapsed())
}

#[tokio::test]
async fn misbehaving_udp_servers_are_clear_errors() {
    for fault in [Fault::Garbage, Fault::CutShort, Fault::CompressionLoop] {
        let (err, took) = failure(fault).await;
        assert!(matches!(err, DnsError::Malformed(_)), "{fault:?}: {err}");
        // Refused at once, not by waiting for the timeout.
        assert!(took < Duration::from_millis(250), "{fault:?} took {took:?}");
    }
    let (err, took) = failure(Fault::WrongId).await;
    assert!(
        matches!(err, DnsError::Timeout { wrong_ids: 3, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("wrong transaction id"), "{err}");
    assert!(took < Duration::from_secs(1), "{took:?}");
    let (err, took) = failure(Fault::Silent).await;
    assert!(matches!(err, DnsError::Timeout { .. }), "{err}");
    assert!(took < Duration::from_secs(1), "{took:?}");
}

#[tokio::test]
async fn misbehaving_doh_servers_are_clear_errors() {
    for (fault, check) in [
        (
            Fault::Oversize,
            (|e: &DnsError| matches!(e, DnsError::TooLarge(_))) as fn(&DnsError) -> bool,
        ),
        (Fault::Garbage, |e| matches!(e, DnsError::Malformed(_))),
        (Fault::CompressionLoop, |e| {
            matches!(e, DnsError::Malformed(_))
        }),
        (Fault::CutShort, |e| matches!(e, DnsError::Malformed(_))),
        (Fault::WrongId, |e| matches!(e, DnsError::WrongId { .. })),
        (Fault::Silent, |e| matches!(e, DnsError::Timeout { .. })),
    ] {
        let upstream = doh_server(zone(), fault).await;
        let (mut config, roots) = doh(&upstream);
        config.timeout = Duration::from_millis(500);
        let r = Resolver::new(
            DnsConfig {
                servers: vec![config],
                ..DnsConfig::default()
            },
            &roots,
        )
        .unwrap();
        let started = Instant::now();
        let err = r.lookup("www.example.com", Family::V4).await.unwrap_err();
        assert!(check(&err), "{fault:?}: {err}");
        assert!(started.elapsed() < Duration::from_secs(2), "{fault:?}");
    }
}
