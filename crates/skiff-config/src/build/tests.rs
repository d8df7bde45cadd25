//! Build-step tests through the public entry point (one in-memory file each).

use std::net::IpAddr;
use std::time::Duration;

use skiff_core::{Networks, PortRange};

use crate::{
    BlackholeResponse, Diagnostic, DomainEntry, DomainKind, FreedomDomainStrategy, InboundProtocol,
    LogLevel, LogTarget, OutboundProtocol, Plan, RoutingDomainStrategy, Severity, SniffProtocol,
    Source, load_sources,
};

fn load(text: &str) -> Result<(Plan, Vec<Diagnostic>), Vec<Diagnostic>> {
    load_sources(&[Source {
        name: "t.json".into(),
        text: text.into(),
    }])
    .map(|l| (l.plan, l.warnings))
}

fn ok(text: &str) -> Plan {
    match load(text) {
        Ok((plan, warnings)) => {
            assert!(warnings.is_empty(), "unexpected warnings: {warnings:#?}");
            plan
        }
        Err(diags) => panic!("expected Ok, got {diags:#?}"),
    }
}

/// The errors, as `(path, message)`.
fn errors(text: &str) -> Vec<(String, String)> {
    match load(text) {
        Ok(_) => panic!("expected errors for {text}"),
        Err(diags) => diags
            .into_iter()
            .filter(|d| d.severity == Severity::Error)
            .map(|d| (d.path, d.message))
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

fn inbound(settings: &str) -> String {
    format!(r#"{{"inbounds": [{{"port": 1080, "protocol": {settings}}}]}}"#)
}

#[test]
fn defaults() {
    let plan = ok("{}");
    assert_eq!(plan.log.level, LogLevel::Warning);
    assert_eq!(plan.log.access, LogTarget::Stderr);
    assert!(plan.inbounds.is_empty());
    assert_eq!(plan.outbounds.len(), 1, "no outbounds → freedom \"direct\"");
    assert_eq!(plan.outbounds[0].tag, "direct");
    assert!(matches!(
        plan.outbounds[0].protocol,
        OutboundProtocol::Freedom(_)
    ));
    assert_eq!(plan.routing.domain_strategy, RoutingDomainStrategy::AsIs);
    assert_eq!(plan.policy.level(0).handshake, Duration::from_secs(60));

    let plan = ok(r#"{"inbounds": [{"port": 1, "protocol": "socks"}]}"#);
    let ib = &plan.inbounds[0];
    assert_eq!(ib.listen, "0.0.0.0".parse::<IpAddr>().unwrap());
    assert_eq!(ib.tag, "");
    let InboundProtocol::Socks(s) = &ib.protocol else {
        panic!()
    };
    assert!(s.accounts.is_empty() && !s.udp && s.announce_ip.is_none() && s.user_level == 0);
}

#[test]
fn the_default_config_loads() {
    let plan = ok(crate::DEFAULT_CONFIG);
    assert_eq!(plan.inbounds.len(), 2);
    let socks = &plan.inbounds[0];
    assert_eq!(
        (socks.tag.as_str(), socks.ports.as_slice()),
        ("socks-in", &[PortRange::single(10808)][..])
    );
    assert_eq!(socks.listen, "127.0.0.1".parse::<IpAddr>().unwrap());
    let InboundProtocol::Socks(s) = &socks.protocol else {
        panic!()
    };
    assert!(s.udp && s.accounts.is_empty());
    assert!(matches!(
        plan.inbounds[1].protocol,
        InboundProtocol::Http(_)
    ));
    assert_eq!(plan.inbounds[1].ports, [PortRange::single(10809)]);
    let tags: Vec<&str> = plan.outbounds.iter().map(|o| o.tag.as_str()).collect();
    assert_eq!(tags, ["direct", "block"]);
    assert!(plan.routing.rules.is_empty());
}

#[test]
fn inbound_port_syntaxes() {
    let plan = ok(r#"{"inbounds": [
        {"port": "1000-1002", "protocol": "http", "tag": "a"},
        {"port": "53,443, 8000-8001", "protocol": "http", "tag": "b", "listen": "::1"}
    ]}"#);
    assert_eq!(
        plan.inbounds[0].ports,
        [PortRange {
            first: 1000,
            last: 1002
        }]
    );
    assert_eq!(plan.inbounds[1].ports.len(), 3);
    assert_eq!(plan.inbounds[1].listen, "::1".parse::<IpAddr>().unwrap());
    has_error(
        &inbound("\"socks\"").replace("1080", "0"),
        "inbounds[0].port",
        "port 0",
    );
    has_error(
        &inbound("\"socks\"").replace("1080", "65536"),
        "inbounds[0].port",
        "out of range",
    );
    has_error(
        &inbound("\"socks\"").replace("1080", "\"9-8\""),
        "inbounds[0].port",
        "reversed",
    );
    has_error(
        r#"{"inbounds": [{"protocol": "socks"}]}"#,
        "inbounds[0].port",
        "missing `port`",
    );
}

#[test]
fn listen_must_be_an_ip() {
    has_error(
        r#"{"inbounds": [{"port": 1, "protocol": "socks", "listen": "localhost"}]}"#,
        "inbounds[0].listen",
        "not an IP address",
    );
    has_error(
        r#"{"inbounds": [{"port": 1, "protocol": "socks", "listen": "/run/x.sock"}]}"#,
        "inbounds[0].listen",
        "Unix socket",
    );
}

#[test]
fn protocol_names() {
    has_error(
        &inbound("\"wireguard\""),
        "inbounds[0].protocol",
        "protocol `wireguard` is not supported by this version of skiff yet",
    );
    has_error(
        &inbound("\"foo\""),
        "inbounds[0].protocol",
        "unknown protocol `foo`",
    );
    has_error(
        &inbound("\"freedom\""),
        "inbounds[0].protocol",
        "outbound protocol",
    );
    has_error(
        r#"{"inbounds": [{"port": 1}]}"#,
        "inbounds[0].protocol",
        "missing `protocol`",
    );
    has_error(
        r#"{"outbounds": [{"protocol": "wireguard"}]}"#,
        "outbounds[0].protocol",
        "`wireguard` is not supported",
    );
    has_error(
        r#"{"outbounds": [{"protocol": "socks"}]}"#,
        "outbounds[0].protocol",
        "`socks` is not supported",
    );
    has_error(
        r#"{"outbounds": [{"protocol": "tunnel"}]}"#,
        "outbounds[0].protocol",
        "inbound protocol",
    );
    // Xray lowercases protocol names.
    ok(
        r#"{"inbounds": [{"port": 1, "protocol": "SOCKS"}], "outbounds": [{"protocol": "Freedom"}]}"#,
    );
}

#[test]
fn socks_settings() {
    let plan = ok(
        r#"{"inbounds": [{"port": 1, "protocol": "socks", "settings": {
        "auth": "password", "accounts": [{"user": "u", "pass": "p"}], "udp": true, "ip": "10.0.0.1", "userLevel": 2
    }}]}"#,
    );
    let InboundProtocol::Socks(s) = &plan.inbounds[0].protocol else {
        panic!()
    };
    assert_eq!(s.accounts.len(), 1);
    assert_eq!(s.announce_ip, Some("10.0.0.1".parse().unwrap()));
    assert_eq!(s.user_level, 2);
    has_error(
        &inbound(r#""socks", "settings": {"auth": "password"}"#),
        "inbounds[0].settings.auth",
        "no accounts",
    );
    has_error(
        &inbound(r#""socks", "settings": {"auth": "password", "accounts": [{"user": "u"}]}"#),
        "inbounds[0].settings.accounts[0].pass",
        "missing `pass`",
    );
    has_error(
        &inbound(r#""socks", "settings": {"auth": "weird"}"#),
        "inbounds[0].settings.auth",
        "unknown auth",
    );
    has_error(
        &inbound(r#""socks", "settings": {"ip": "nope"}"#),
        "inbounds[0].settings.ip",
        "not an IP",
    );
    has_error(
        &inbound(r#""socks", "settings": {"userLevel": -1}"#),
        "inbounds[0].settings.userLevel",
        "out of range",
    );
    has_error(
        &inbound(r#""socks", "settings": {"udp": "yes"}"#),
        "inbounds[0].settings.udp",
        "invalid type",
    );
}

#[test]
fn http_settings_and_deprecated_timeout() {
    let (plan, warnings) = load(&inbound(
        r#""http", "settings": {"users": [{"user": "a", "pass": "b"}], "allowTransparent": true, "timeout": 30}"#,
    ))
    .unwrap();
    let InboundProtocol::Http(h) = &plan.inbounds[0].protocol else {
        panic!()
    };
    assert_eq!(h.accounts.len(), 1);
    assert!(h.allow_transparent);
    assert_eq!(warnings.len(), 1);
    assert_eq!(warnings[0].path, "inbounds[0].settings.timeout");
    assert!(warnings[0].message.contains("deprecated"));
}

#[test]
fn tunnel_settings() {
    let plan = ok(&inbound(
        r#""dokodemo-door", "settings": {"address": "127.0.0.1", "port": 5201, "network": "tcp,udp"}"#,
    ));
    let InboundProtocol::Tunnel(t) = &plan.inbounds[0].protocol else {
        panic!()
    };
    assert_eq!((t.address.as_deref(), t.port), (Some("127.0.0.1"), 5201));
    assert_eq!(
        t.network,
        Networks {
            tcp: true,
            udp: true
        }
    );
    // New Xray names, and the alias.
    let plan = ok(&inbound(
        r#""tunnel", "settings": {"rewriteAddress": "example.com", "rewritePort": 53, "allowedNetwork": ["udp"]}"#,
    ));
    let InboundProtocol::Tunnel(t) = &plan.inbounds[0].protocol else {
        panic!()
    };
    assert_eq!(
        (t.address.as_deref(), t.port, t.network.udp, t.network.tcp),
        (Some("example.com"), 53, true, false)
    );
    let plan = ok(&inbound(
        r#""dokodemo-door", "settings": {"followRedirect": true}"#,
    ));
    let InboundProtocol::Tunnel(t) = &plan.inbounds[0].protocol else {
        panic!()
    };
    assert_eq!(
        (t.address.as_deref(), t.port, t.follow_redirect),
        (None, 0, true)
    );
    has_error(
        &inbound(r#""dokodemo-door", "settings": {"port": 1}"#),
        "inbounds[0].settings.address",
        "missing `address`",
    );
    // As in Xray, where the API's dokodemo-door has no port.
    let plan = ok(&inbound(
        r#""dokodemo-door", "settings": {"address": "a.b"}"#,
    ));
    let InboundProtocol::Tunnel(t) = &plan.inbounds[0].protocol else {
        panic!("a tunnel");
    };
    assert_eq!(t.port, 0);
    has_error(
        &inbound(r#""dokodemo-door""#),
        "inbounds[0].settings.address",
        "missing `address`",
    );
    has_error(
        &inbound(
            r#""dokodemo-door", "settings": {"address": "a.b", "port": 1, "network": "sctp"}"#,
        ),
        "inbounds[0].settings.network",
        "unknown network",
    );
    has_error(
        &inbound(
            r#""dokodemo-door", "settings": {"address": "a.b", "port": 1, "portMap": {"1": ":2"}}"#,
        ),
        "inbounds[0].settings.portMap",
        "not supported",
    );
}

#[test]
fn freedom_and_blackhole_settings() {
    let plan = ok(r#"{"outbounds": [
        {"tag": "a", "protocol": "freedom", "settings": {"domainStrategy": "UseIPv4v6", "redirect": ":8443",
            "finalRules": [{"action": "allow", "ip": ["geoip:private", "10.0.0.0/8"]}], "proxyProtocol": 0}},
        {"tag": "b", "protocol": "freedom", "settings": {"domainStrategy": "UseIPv6"}},
        {"tag": "c", "protocol": "blackhole", "settings": {"response": {"type": "http"}}}
    ]}"#);
    let OutboundProtocol::Freedom(a) = &plan.outbounds[0].protocol else {
        panic!()
    };
    assert_eq!(a.domain_strategy, FreedomDomainStrategy::UseIp);
    assert_eq!(a.redirect, Some((String::new(), 8443)));
    let OutboundProtocol::Freedom(b) = &plan.outbounds[1].protocol else {
        panic!()
    };
    assert_eq!(b.domain_strategy, FreedomDomainStrategy::UseIpv6);
    let OutboundProtocol::Blackhole(c) = &plan.outbounds[2].protocol else {
        panic!()
    };
    assert_eq!(c.response, BlackholeResponse::Http);

    let freedom =
        |s: &str| format!(r#"{{"outbounds": [{{"protocol": "freedom", "settings": {s}}}]}}"#);
    has_error(
        &freedom(r#"{"finalRules": [{"action": "block", "port": 25}]}"#),
        "outbounds[0].settings.finalRules[0].action",
        "not supported",
    );
    has_error(
        &freedom(r#"{"fragment": {"packets": "tlshello"}}"#),
        "outbounds[0].settings.fragment",
        "not supported",
    );
    has_error(
        &freedom(r#"{"noises": []}"#),
        "outbounds[0].settings.noises",
        "not supported",
    );
    has_error(
        &freedom(r#"{"proxyProtocol": 2}"#),
        "outbounds[0].settings.proxyProtocol",
        "not supported",
    );
    has_error(
        &freedom(r#"{"domainStrategy": "ForceIP"}"#),
        "outbounds[0].settings.domainStrategy",
        "not supported",
    );
    has_error(
        &freedom(r#"{"domainStrategy": "Sometimes"}"#),
        "outbounds[0].settings.domainStrategy",
        "unknown",
    );
    has_error(
        &freedom(r#"{"redirect": "nope"}"#),
        "outbounds[0].settings.redirect",
        "host:port",
    );
    has_error(
        r#"{"outbounds": [{"protocol": "blackhole", "settings": {"response": {"type": "teapot"}}}]}"#,
        "outbounds[0].settings.response.type",
        "unknown response type",
    );
}

#[test]
fn stream_settings() {
    let with_stream = |s: &str| {
        format!(r#"{{"inbounds": [{{"port": 1, "protocol": "socks", "streamSettings": {s}}}]}}"#)
    };
    ok(&with_stream(
        r#"{"network": "raw", "security": "none", "wsSettings": {"path": "/unused"}}"#,
    ));
    ok(&with_stream(
        r#"{"network": "tcp", "tcpSettings": {"header": {"type": "none"}}}"#,
    ));
    ok(&with_stream(r#"{"network": "kcp"}"#));
    ok(&with_stream(r#"{"network": "grpc"}"#));
    ok(&with_stream(
        r#"{"network": "xhttp", "xhttpSettings": {"path": "/x", "mode": "packet-up"}}"#,
    ));
    ok(&with_stream(
        r#"{"network": "splithttp", "splithttpSettings": {"path": "/x"}}"#,
    ));
    // downloadSettings: a stream settings object with the server's address and port.
    ok(&with_stream(
        r#"{"network": "xhttp", "xhttpSettings": {"mode": "packet-up", "extra": {"downloadSettings":
            {"address": "dl.example", "port": 443, "network": "xhttp", "security": "tls",
             "tlsSettings": {"serverName": "dl.example"}, "xhttpSettings": {"path": "/d"}}}}}"#,
    ));
    has_error(
        &with_stream(
            r#"{"network": "xhttp", "xhttpSettings": {"extra": {"downloadSettings": {}}}}"#,
        ),
        "inbounds[0].streamSettings.xhttpSettings.extra.downloadSettings",
        "needs the `address`",
    );
    has_error(
        &with_stream(
            r#"{"network": "xhttp", "xhttpSettings": {"extra": {"downloadSettings":
                {"address": "a", "port": 1, "network": "ws"}}}}"#,
        ),
        "inbounds[0].streamSettings.xhttpSettings.extra.downloadSettings.network",
        "must use the \"xhttp\" network",
    );
    has_error(
        &with_stream(
            r#"{"network": "xhttp", "xhttpSettings": {"mode": "stream-one", "extra":
                {"downloadSettings": {"address": "a", "port": 1, "network": "xhttp"}}}}"#,
        ),
        "inbounds[0].streamSettings.xhttpSettings.extra.downloadSettings",
        "cannot be used in \"stream-one\" mode",
    );
    has_error(
        &with_stream(
            r#"{"network": "xhttp", "xhttpSettings": {"extra": {"downloadSettings":
                {"address": "a", "port": 1, "network": "xhttp", "security": "tls",
                 "tlsSettings": {"alpn": 3}}}}}"#,
        ),
        "inbounds[0].streamSettings.xhttpSettings.extra.downloadSettings.tlsSettings.alpn",
        "invalid type",
    );
    for net in ["h2", "http", "quic", "domainsocket"] {
        has_error(
            &with_stream(&format!(r#"{{"network": "{net}"}}"#)),
            "inbounds[0].streamSettings.network",
            &format!("transport `{net}` is not supported"),
        );
    }
    has_error(
        &with_stream(r#"{"network": "carrier-pigeon"}"#),
        "inbounds[0].streamSettings.network",
        "unknown transport",
    );
    has_error(
        &with_stream(r#"{"security": "xtls"}"#),
        "inbounds[0].streamSettings.security",
        "`xtls`",
    );
    has_error(
        &with_stream(r#"{"rawSettings": {"header": {"type": "srtp"}}}"#),
        "inbounds[0].streamSettings.rawSettings.header.type",
        "unknown header type",
    );
    has_error(
        &with_stream(r#"{"sockopt": {"dialerProxy": "x"}}"#),
        "inbounds[0].streamSettings.sockopt.dialerProxy",
        "proxySettings",
    );
    let (_, warnings) = load(&with_stream(
        r#"{"sockopt": {"tcpFastOpen": true, "mark": 0}}"#,
    ))
    .unwrap();
    assert_eq!(warnings.len(), 1);
    assert_eq!(
        warnings[0].path,
        "inbounds[0].streamSettings.sockopt.tcpFastOpen"
    );
}

#[test]
fn sockopt_tcp_congestion_is_modelled() {
    let with_stream = |s: &str| {
        format!(r#"{{"inbounds": [{{"port": 1, "protocol": "socks", "streamSettings": {s}}}]}}"#)
    };
    // "reno" is in every kernel's list, so no warning.
    let (plan, warnings) = load(&with_stream(r#"{"sockopt": {"tcpCongestion": "reno"}}"#)).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(
        plan.inbounds[0].stream.tcp_congestion.as_deref(),
        Some("reno")
    );
    // Go's JSON matches keys regardless of case; Xray users write it both ways.
    let (plan, _) = load(&with_stream(r#"{"sockopt": {"tcpcongestion": "reno"}}"#)).unwrap();
    assert_eq!(
        plan.inbounds[0].stream.tcp_congestion.as_deref(),
        Some("reno")
    );
    let (plan, warnings) = load(&with_stream(r#"{"sockopt": {"tcpCongestion": ""}}"#)).unwrap();
    assert!(warnings.is_empty());
    assert_eq!(plan.inbounds[0].stream.tcp_congestion, None);
    has_error(
        &with_stream(r#"{"sockopt": {"tcpCongestion": 1}}"#),
        "inbounds[0].streamSettings.sockopt.tcpCongestion",
        "expected a string",
    );
    has_error(
        &with_stream(r#"{"sockopt": {"tcpCongestion": "bbr; rm"}}"#),
        "inbounds[0].streamSettings.sockopt.tcpCongestion",
        "not a TCP congestion control name",
    );
    let (_, warnings) = load(&with_stream(
        r#"{"sockopt": {"tcpCongestion": "nosuchcc"}}"#,
    ))
    .unwrap();
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0].message.contains("not loaded"), "{warnings:?}");
}

#[test]
fn inbound_extras() {
    let (plan, warnings) = load(r#"{"inbounds": [{"port": 1, "protocol": "socks",
        "sniffing": {"enabled": true, "destOverride": ["http", "tls"]}, "allocate": {"strategy": "always"}}]}"#)
    .unwrap();
    let sniffing = plan.inbounds[0].sniffing.as_ref().unwrap();
    assert_eq!(
        sniffing.dest_override,
        [SniffProtocol::Http, SniffProtocol::Tls]
    );
    assert!(warnings.is_empty(), "{warnings:?}");
    has_error(
        r#"{"inbounds": [{"port": 1, "protocol": "socks", "allocate": {"strategy": "random"}}]}"#,
        "inbounds[0].allocate.strategy",
        "not supported",
    );
}

#[test]
fn outbound_extras() {
    has_error(
        r#"{"outbounds": [{"protocol": "freedom", "mux": {"enabled": true}}]}"#,
        "outbounds[0].mux.enabled",
        "mux",
    );
    ok(r#"{"outbounds": [{"protocol": "freedom", "mux": {"enabled": false, "concurrency": 8}}]}"#);
    has_error(
        r#"{"outbounds": [{"protocol": "freedom", "sendThrough": "10.0.0.2"}]}"#,
        "outbounds[0].sendThrough",
        "sendThrough",
    );
}

#[test]
fn duplicate_tags() {
    has_error(
        r#"{"inbounds": [{"tag": "a", "port": 1, "protocol": "socks"}, {"tag": "a", "port": 2, "protocol": "socks"}]}"#,
        "inbounds[1].tag",
        "duplicate inbound tag `a`",
    );
    has_error(
        r#"{"outbounds": [{"tag": "a", "protocol": "freedom"}, {"tag": "a", "protocol": "blackhole"}]}"#,
        "outbounds[1].tag",
        "duplicate outbound tag `a`",
    );
    // Untagged items may repeat.
    ok(
        r#"{"inbounds": [{"port": 1, "protocol": "socks"}, {"port": 2, "protocol": "http"}],
           "outbounds": [{"protocol": "freedom"}, {"protocol": "blackhole"}]}"#,
    );
}

#[test]
fn proxy_chains() {
    let plan = ok(r#"{"outbounds": [
        {"tag": "a", "protocol": "freedom", "proxySettings": {"tag": "b"}},
        {"tag": "b", "protocol": "freedom"}
    ]}"#);
    assert_eq!(plan.outbounds[0].via.as_deref(), Some("b"));
    has_error(
        r#"{"outbounds": [{"tag": "a", "protocol": "freedom", "proxySettings": {"tag": "zz"}}]}"#,
        "outbounds[0].proxySettings.tag",
        "no outbound is tagged `zz`",
    );
    has_error(
        r#"{"outbounds": [{"tag": "a", "protocol": "freedom", "proxySettings": {}}]}"#,
        "outbounds[0].proxySettings.tag",
        "missing `tag`",
    );
    has_error(
        r#"{"outbounds": [{"tag": "a", "protocol": "freedom", "proxySettings": {"tag": "a"}}]}"#,
        "outbounds[0].proxySettings.tag",
        "cycle: a → a",
    );
    let text = r#"{"outbounds": [
        {"tag": "x", "protocol": "freedom", "proxySettings": {"tag": "a"}},
        {"tag": "a", "protocol": "freedom", "proxySettings": {"tag": "b"}},
        {"tag": "b", "protocol": "freedom", "proxySettings": {"tag": "c"}},
        {"tag": "c", "protocol": "freedom", "proxySettings": {"tag": "a"}}
    ]}"#;
    let errs = errors(text);
    assert_eq!(errs.len(), 3, "each cycle member once, not x: {errs:#?}");
    assert!(
        errs.iter()
            .any(|(p, m)| p == "outbounds[1].proxySettings.tag" && m.contains("a → b → c → a"))
    );
}

#[test]
fn each_domain_matcher_kind() {
    let plan = ok(r#"{"routing": {"rules": [{"domain": [
        "Example", "keyword:ads", "full:WWW.example.com", "domain:example.org", "regexp:^cdn[0-9]+\\.net$"
    ], "outboundTag": "direct"}]}}"#);
    let r = &plan.routing.rules[0];
    let kinds: Vec<_> = r
        .domains
        .iter()
        .map(|e| match e {
            DomainEntry::Custom(d) => (d.kind, d.value.as_str()),
            DomainEntry::Geosite { .. } => panic!("no geosite here"),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            (DomainKind::Plain, "example"),
            (DomainKind::Plain, "ads"),
            (DomainKind::Full, "www.example.com"),
            (DomainKind::Suffix, "example.org"),
            (DomainKind::Regex, "^cdn[0-9]+\\.net$"),
        ]
    );
    let set = r.domain_set.as_ref().unwrap();
    assert!(set.matches("cdn12.net") && !set.matches("cdn.net"));
    assert!(set.matches("a.example.org") && set.matches("www.example.com"));
    assert!(!set.matches("other.net"));
    let rule = |d: &str| {
        format!(r#"{{"routing": {{"rules": [{{"domain": {d}, "outboundTag": "direct"}}]}}}}"#)
    };
    has_error(
        &rule(r#"["ok.com", "regexp:(unclosed"]"#),
        "routing.rules[0].domain[1]",
        "invalid regular expression",
    );
    has_error(
        &rule(r#"["ext:my.dat"]"#),
        "routing.rules[0].domain[0]",
        "expected ext:FILE:CODE",
    );
    has_error(
        &rule(r#"["geosite:cn@"]"#),
        "routing.rules[0].domain[0]",
        "empty attribute",
    );
    has_error(
        &rule(r#"["ok.com", "ext:../x.dat:cn"]"#),
        "routing.rules[0].domain[1]",
        "relative path",
    );
    has_error(
        &rule(r#"["full:"]"#),
        "routing.rules[0].domain[0]",
        "empty domain",
    );
}

#[test]
fn rule_conditions() {
    let plan = ok(r#"{
      "inbounds": [{"tag": "in", "port": 1, "protocol": "socks"}],
      "outbounds": [{"tag": "direct", "protocol": "freedom"}, {"tag": "block", "protocol": "blackhole"}],
      "routing": {"domainStrategy": "IPIfNonMatch", "domainMatcher": "hybrid", "rules": [
        {"type": "field", "inboundTag": ["in"], "ip": ["10.0.0.0/8", "::1", "fc00::/7"], "outboundTag": "block"},
        {"port": 53, "network": "udp", "outboundTag": "direct", "ruleTag": "dns"},
        {"port": "80,443,1000-2000", "sourcePort": "0-65535", "source": "192.168.0.0/16", "user": ["a@b"], "outboundTag": "direct"},
        {"network": ["tcp", "udp"], "sourceIP": ["127.0.0.1"], "outboundTag": "direct"}
      ]}}"#);
    assert_eq!(
        plan.routing.domain_strategy,
        RoutingDomainStrategy::IpIfNonMatch
    );
    let r = &plan.routing.rules;
    assert_eq!(r[0].inbound_tags, ["in"]);
    assert_eq!(r[0].ips.len(), 3);
    let ips = r[0].ip_set.as_ref().unwrap();
    assert!(ips.matches("10.9.9.9".parse().unwrap()) && ips.matches("fd00::1".parse().unwrap()));
    assert!(!ips.matches("11.0.0.1".parse().unwrap()));
    assert_eq!(r[0].target, crate::RuleTarget::Outbound("block".into()));
    assert_eq!(r[1].ports, [PortRange::single(53)]);
    assert_eq!(
        r[1].networks,
        Some(Networks {
            tcp: false,
            udp: true
        })
    );
    assert_eq!(r[2].ports.len(), 3);
    assert_eq!(
        r[2].source_ports,
        [PortRange {
            first: 0,
            last: 65535
        }]
    );
    assert_eq!(r[2].sources.len(), 1);
    assert_eq!(r[2].users, ["a@b"]);
    assert_eq!(
        r[3].networks,
        Some(Networks {
            tcp: true,
            udp: true
        })
    );
    assert_eq!(r[3].sources.len(), 1);
}

#[test]
fn rule_errors() {
    let rule = |r: &str| format!(r#"{{"routing": {{"rules": [{r}]}}}}"#);
    has_error(
        &rule(r#"{"ip": ["10.0.0.0/33"], "outboundTag": "direct"}"#),
        "routing.rules[0].ip[0]",
        "prefix length",
    );
    has_error(
        &rule(r#"{"ip": ["geoip:"], "outboundTag": "direct"}"#),
        "routing.rules[0].ip[0]",
        "empty list code",
    );
    has_error(
        &rule(r#"{"source": ["geoip:cn"], "outboundTag": "direct"}"#),
        "routing.rules[0].source[0]",
        "not supported",
    );
    has_error(
        &rule(r#"{"source": ["nope"], "outboundTag": "direct"}"#),
        "routing.rules[0].source[0]",
        "not an IP",
    );
    has_error(
        &rule(r#"{"port": "10-", "outboundTag": "direct"}"#),
        "routing.rules[0].port",
        "not a port",
    );
    has_error(
        &rule(r#"{"port": 1, "outboundTag": "proxy"}"#),
        "routing.rules[0].outboundTag",
        "no outbound is tagged `proxy`",
    );
    has_error(
        &rule(r#"{"port": 1}"#),
        "routing.rules[0].outboundTag",
        "missing `outboundTag`",
    );
    has_error(
        &rule(r#"{"outboundTag": "direct"}"#),
        "routing.rules[0]",
        "no condition",
    );
    has_error(
        &rule(r#"{"domain": [], "outboundTag": "direct"}"#),
        "routing.rules[0]",
        "no condition",
    );
    has_error(
        &rule(r#"{"attrs": {":method": "GE(T"}, "outboundTag": "direct"}"#),
        "routing.rules[0].attrs.:method",
        "invalid regular expression",
    );
    has_error(
        &rule(r#"{"port": 1, "balancerTag": "b"}"#),
        "routing.rules[0].balancerTag",
        "no balancer is tagged `b`",
    );
    has_error(
        &rule(r#"{"type": "chinasites", "port": 1, "outboundTag": "direct"}"#),
        "routing.rules[0].type",
        "unknown rule type",
    );
    has_error(
        &rule(r#"{"port": 1, "localPort": 2, "outboundTag": "direct"}"#),
        "routing.rules[0].localPort",
        "not supported",
    );
    has_error(&rule("5"), "routing.rules[0]", "expected a rule object");
    has_error(
        r#"{"routing": {"domainStrategy": "Never"}}"#,
        "routing.domainStrategy",
        "unknown domainStrategy",
    );
}

#[test]
fn many_errors_in_one_run() {
    let text = r#"{
      "inbounds": [
        {"tag": "a", "port": 0, "protocol": "socks"},
        {"tag": "a", "port": 1, "protocol": "wireguard"}
      ],
      "routing": {"rules": [
        {"ip": ["1.2.3.4/99"], "outboundTag": "direct"},
        {"port": 1, "outboundTag": "nowhere"}
      ]}
    }"#;
    let errs = errors(text);
    let paths: Vec<&str> = errs.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        [
            "inbounds[0].port",
            "inbounds[1].tag",
            "inbounds[1].protocol",
            "routing.rules[0].ip[0]",
            "routing.rules[1].outboundTag"
        ]
    );
}

#[test]
fn type_errors_do_not_hide_later_checks() {
    let errs = errors(
        r#"{"inbounds": [{"port": true, "protocol": "socks"}],
            "routing": {"rules": [{"ip": ["1.2.3.4/99"], "outboundTag": "direct"}, {"port": 1, "outboundTag": ""}]}}"#,
    );
    let paths: Vec<&str> = errs.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        [
            "inbounds[0].port",
            "routing.rules[0].ip[0]",
            "routing.rules[1].outboundTag"
        ]
    );
}

#[test]
fn rules_reach_outbounds_that_failed_without_echo_errors() {
    // The vless outbound is an error of its own; the rule naming it must not add a second one.
    let errs = errors(
        r#"{"outbounds": [{"tag": "p", "protocol": "vless"}, {"tag": "q", "protocol": "freedom", "settings": 5}],
            "routing": {"rules": [{"port": 1, "outboundTag": "p"}, {"port": 2, "outboundTag": "q"}]}}"#,
    );
    assert_eq!(errs.len(), 2, "{errs:#?}");
}

#[test]
fn broken_sections_do_not_echo() {
    // `outbounds` is not an array: rules naming any outbound must not add errors, and no
    // default outbound is invented.
    let diags = load(r#"{"outbounds": {"tag": "proxy"}, "routing": {"rules": [{"port": 1, "outboundTag": "proxy"}]}}"#)
        .unwrap_err();
    assert_eq!(diags.len(), 1, "{diags:#?}");
    assert_eq!(diags[0].path, "outbounds");
    // A broken inbound: a rule selecting it by tag gets no "no inbound is tagged" warning.
    let diags = load(
        r#"{"inbounds": [{"tag": "in", "port": "x-y-z", "protocol": 5}],
        "routing": {"rules": [{"inboundTag": ["in"], "outboundTag": "direct"}]}}"#,
    )
    .unwrap_err();
    assert_eq!(diags.len(), 1, "{diags:#?}");
    assert_eq!(diags[0].path, "inbounds[0].protocol");
}

#[test]
fn inbound_tag_typo_warns() {
    let (_, warnings) = load(
        r#"{"inbounds": [{"tag": "socks-in", "port": 1, "protocol": "socks"}],
        "routing": {"rules": [{"inboundTag": ["sock-in"], "outboundTag": "direct"}]}}"#,
    )
    .unwrap();
    assert_eq!(warnings.len(), 1);
    assert_eq!(warnings[0].path, "routing.rules[0].inboundTag[0]");
}

#[test]
fn policy_levels() {
    let plan = ok(
        r#"{"policy": {"levels": {"0": {"connIdle": 600, "uplinkOnly": 0}, "3": {"handshake": 10, "statsUserUplink": true, "statsUserOnline": true}},
        "system": {"statsInboundUplink": true}}, "stats": {}}"#,
    );
    let l0 = plan.policy.level(0);
    assert_eq!(
        (l0.conn_idle, l0.uplink_only, l0.handshake),
        (
            Duration::from_secs(600),
            Duration::ZERO,
            Duration::from_secs(60)
        )
    );
    let l3 = plan.policy.level(3);
    assert!(l3.stats_user_uplink);
    assert!(l3.stats_user_online && !l0.stats_user_online);
    assert_eq!(l3.handshake, Duration::from_secs(10));
    assert_eq!(plan.policy.level(7), Default::default());
    assert!(plan.policy.system.stats_inbound_uplink);
    has_error(
        r#"{"policy": {"levels": {"0": {"connIdle": -5}}}}"#,
        "policy.levels.0.connIdle",
        "must not be negative",
    );
    has_error(
        r#"{"policy": {"levels": {"x": {}}}}"#,
        "policy.levels.x",
        "not a level number",
    );
    has_error(
        r#"{"policy": {"levels": {"0": {"handshake": 1.5}}}}"#,
        "policy.levels.0.handshake",
        "invalid type",
    );
}

/// Xray reads the four timeouts as uint32 seconds; anything larger passed `check` and then
/// overflowed `Instant + Duration` in every relay task.
#[test]
fn policy_durations_are_bounded_as_in_xray() {
    let max = u32::MAX;
    for key in ["handshake", "connIdle", "uplinkOnly", "downlinkOnly"] {
        let plan = ok(&format!(
            r#"{{"policy": {{"levels": {{"0": {{"{key}": {max}}}}}}}}}"#
        ));
        let l0 = plan.policy.level(0);
        let got = match key {
            "handshake" => l0.handshake,
            "connIdle" => l0.conn_idle,
            "uplinkOnly" => l0.uplink_only,
            _ => l0.downlink_only,
        };
        assert_eq!(got, Duration::from_secs(u64::from(max)), "{key}");
        let path = format!("policy.levels.0.{key}");
        for (too_big, shown) in [
            ("4294967296", "4294967296"),
            ("9223372036854775807", "9223372036854775807"),
            ("18446744073709551616", "1.8446744073709552e19"),
            ("1e300", "1e300"),
        ] {
            let errs = errors(&format!(
                r#"{{"policy": {{"levels": {{"0": {{"{key}": {too_big}}}}}}}}}"#
            ));
            assert_eq!(
                errs,
                vec![(
                    path.clone(),
                    format!("{shown} is out of range, expected seconds ≤ 4294967295")
                )],
                "{key}: {too_big}"
            );
        }
    }
    // bufferSize is int32 kilobytes in Xray (accepted and ignored here).
    has_error(
        r#"{"policy": {"levels": {"0": {"bufferSize": 2147483648}}}}"#,
        "policy.levels.0.bufferSize",
        "2147483648 is out of range, expected kilobytes ≤ 2147483647",
    );
}

/// An integer too large for its field (even for i64, or for u64) names the field's range,
/// not only "expected an integer".
#[test]
fn integers_too_large_name_the_field_range() {
    const UUID: &str = "b831381d-6324-4d53-ad4f-8cda48b30811";
    let big = "99999999999999999999";
    let cases = [
        (
            format!(r#"{{"inbounds": [{{"port": {big}, "protocol": "socks"}}]}}"#),
            "inbounds[0].port",
            "1e20 is out of range, expected a port number 1–65535",
        ),
        (
            format!(
                r#"{{"outbounds": [{{"protocol": "vless", "settings": {{"vnext": [{{"address": "a.example", "port": 18446744073709551615, "users": [{{"id": "{UUID}", "encryption": "none"}}]}}]}}}}]}}"#
            ),
            "outbounds[0].settings.vnext[0].port",
            "18446744073709551615 is out of range, expected a port number 1–65535",
        ),
        (
            inbound(&format!(r#""socks", "settings": {{"userLevel": {big}}}"#)),
            "inbounds[0].settings.userLevel",
            "1e20 is out of range, expected a level 0–4294967295",
        ),
        (
            inbound(&format!(
                r#""dokodemo-door", "settings": {{"address": "1.1.1.1", "port": {big}}}"#
            )),
            "inbounds[0].settings.port",
            "1e20 is out of range, expected a port number 1–65535",
        ),
        (
            format!(
                r#"{{"inbounds": [{{"port": 1, "protocol": "vless", "settings": {{"clients": [{{"id": "{UUID}"}}], "decryption": "none", "fallbacks": [{{"dest": {big}}}]}}}}]}}"#
            ),
            "inbounds[0].settings.fallbacks[0].dest",
            "1e20 is out of range, expected a port number 1–65535",
        ),
        (
            format!(
                r#"{{"outbounds": [{{"protocol": "kcptun", "settings": {{"address": "a.example", "port": 1, "mtu": {big}}}}}]}}"#
            ),
            "outbounds[0].settings.mtu",
            "1e20 is out of range, expected an integer 64–1500",
        ),
        (
            format!(
                r#"{{"inbounds": [{{"port": 1, "protocol": "socks", "streamSettings": {{"network": "kcp", "kcpSettings": {{"tti": {big}}}}}}}]}}"#
            ),
            "inbounds[0].streamSettings.kcpSettings.tti",
            "1e20 is out of range, expected an integer 10–100",
        ),
    ];
    for (text, path, message) in cases {
        let errs = errors(&text);
        assert!(
            errs.iter().any(|(p, m)| p == path && m == message),
            "no `{path}: {message}` in {errs:#?}"
        );
    }
    // A fraction is still a type error, as in Xray.
    has_error(
        &inbound(r#""socks", "settings": {"userLevel": 1.5}"#),
        "inbounds[0].settings.userLevel",
        "invalid type: floating point `1.5`, expected an integer",
    );
}

#[test]
fn log_settings() {
    let plan = ok(
        r#"{"log": {"loglevel": "Debug", "access": "none", "error": "/var/log/skiff.log", "dnsLog": false}}"#,
    );
    assert_eq!(plan.log.level, LogLevel::Debug);
    assert_eq!(plan.log.access, LogTarget::Off);
    assert_eq!(plan.log.error, LogTarget::File("/var/log/skiff.log".into()));
    has_error(
        r#"{"log": {"loglevel": "loud"}}"#,
        "log.loglevel",
        "unknown loglevel",
    );
}

#[test]
fn unknown_keys_warn_with_full_path() {
    let (_, warnings) = load(r#"{"inbounds": [{"port": 1, "protocol": "socks", "settings": {"udpp": true,
        "accounts": [{"user": "a", "pass": "b", "email": "x"}]}}], "routing": {"rules": [{"port": 1, "outboundTag": "direct", "ouboundTag": "x"}]}}"#)
    .unwrap();
    let paths: Vec<&str> = warnings.iter().map(|w| w.path.as_str()).collect();
    assert!(paths.contains(&"inbounds[0].settings.udpp"), "{paths:?}");
    assert!(
        paths.contains(&"inbounds[0].settings.accounts[0].email"),
        "{paths:?}"
    );
    assert!(paths.contains(&"routing.rules[0].ouboundTag"), "{paths:?}");
}

#[test]
fn summary_is_readable_and_hides_passwords() {
    let plan = ok(r#"{
      "inbounds": [
        {"tag": "s", "listen": "127.0.0.1", "port": 1080, "protocol": "socks",
         "settings": {"auth": "password", "accounts": [{"user": "alice", "pass": "s3cret-pw"}], "udp": true}},
        {"tag": "fwd", "listen": "::", "port": "5201", "protocol": "dokodemo-door",
         "settings": {"address": "127.0.0.1", "port": 5201, "network": "tcp,udp"}}
      ],
      "outbounds": [{"tag": "direct", "protocol": "freedom"}, {"tag": "block", "protocol": "blackhole"}],
      "routing": {"rules": [{"domain": ["domain:ads.example"], "port": "80,443", "outboundTag": "block"}]},
      "policy": {"levels": {"0": {"connIdle": 60}}}
    }"#);
    let text = plan.to_string();
    assert!(!text.contains("s3cret-pw"), "{text}");
    assert!(
        text.contains(
            "inbound \"s\": socks on 127.0.0.1:1080, password auth, 1 account (alice), udp on"
        ),
        "{text}"
    );
    assert!(
        text.contains("inbound \"fwd\": dokodemo-door on [::]:5201, to 127.0.0.1:5201, tcp,udp"),
        "{text}"
    );
    assert!(
        text.contains("outbound \"direct\": freedom (default route)"),
        "{text}"
    );
    assert!(
        text.contains("rule 1: domain domain:ads.example; port 80,443 → \"block\""),
        "{text}"
    );
    assert!(text.contains("policy level 0: connIdle 60s"), "{text}");
}

#[test]
fn websocket_and_httpupgrade_headers_share_their_checks() {
    // A value with CR or LF would end the header early on the wire: refused under either
    // transport, at the header's own path.
    for (network, settings) in [("ws", "wsSettings"), ("httpupgrade", "httpupgradeSettings")] {
        let text = format!(
            r#"{{"inbounds": [{{"port": 1, "protocol": "vless",
                "settings": {{"clients": [{{"id": "a"}}], "decryption": "none"}},
                "streamSettings": {{"network": "{network}",
                    "{settings}": {{"headers": {{"X-A": "b\r\nEvil: 1", "bad name": "c"}}}}}}}}]}}"#
        );
        let paths: Vec<String> = errors(&text).into_iter().map(|(p, _)| p).collect();
        assert_eq!(
            paths,
            [
                format!("inbounds[0].streamSettings.{settings}.headers.X-A"),
                format!("inbounds[0].streamSettings.{settings}.headers.bad name"),
            ],
            "{network}"
        );
    }
}
