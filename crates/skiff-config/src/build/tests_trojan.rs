//! Trojan settings: build-step tests through the public entry point. Fallbacks are the VLESS
//! list (tests_vless.rs covers every `dest` form); here: that Trojan gets the same list, the
//! same checks and the same transport rule.

use crate::{
    Diagnostic, FallbackDest, InboundProtocol, OutboundProtocol, Plan, Severity, Source,
    StreamNetwork, StreamSecurity, load_sources,
};

const CERT: &str = "-----BEGIN CERTIFICATE-----\\nMIIB\\n-----END CERTIFICATE-----\\n";
const KEY: &str = "-----BEGIN PRIVATE KEY-----\\nSECRETKEYMATERIAL\\n-----END PRIVATE KEY-----\\n";

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

fn has_error(text: &str, path: &str, needle: &str) {
    let diags = match load(text) {
        Ok(_) => panic!("expected errors for {text}"),
        Err(diags) => diags,
    };
    assert!(
        diags
            .iter()
            .any(|d| d.severity == Severity::Error && d.path == path && d.message.contains(needle)),
        "no error at `{path}` containing `{needle}` in {diags:#?}"
    );
}

fn tls_stream() -> String {
    format!(
        r#"{{"security": "tls", "tlsSettings": {{"certificates": [{{"certificate": "{CERT}", "key": "{KEY}"}}]}}}}"#
    )
}

fn trojan_in(settings: &str, stream: &str) -> String {
    format!(
        r#"{{"inbounds": [{{"port": 443, "protocol": "trojan", "settings": {settings}, "streamSettings": {stream}}}]}}"#
    )
}

fn trojan_out(settings: &str, stream: &str) -> String {
    format!(
        r#"{{"outbounds": [{{"tag": "t", "protocol": "Trojan", "settings": {settings}, "streamSettings": {stream}}}]}}"#
    )
}

#[test]
fn trojan_inbound_clients_and_fallbacks() {
    let settings = r#"{"clients": [
          {"password": "secret", "email": "a@x", "level": 1},
          {"password": "other one", "email": ""}
        ],
        "fallbacks": [
          {"dest": 80},
          {"alpn": "h2", "dest": "127.0.0.1:8080", "xver": 2},
          {"path": "/ws", "dest": "/dev/shm/ws.sock"}
        ]}"#;
    let plan = ok(&trojan_in(settings, &tls_stream()));
    let InboundProtocol::Trojan(t) = &plan.inbounds[0].protocol else {
        panic!("not trojan")
    };
    assert_eq!(t.clients.len(), 2);
    assert_eq!(t.clients[0].password, "secret");
    assert_eq!(t.clients[0].email.as_deref(), Some("a@x"));
    assert_eq!(t.clients[0].level, 1);
    assert_eq!(t.clients[1].email, None);
    assert_eq!(t.fallbacks.len(), 3);
    assert_eq!(t.fallbacks[0].dest, FallbackDest::Port(80));
    assert_eq!(t.fallbacks[1].alpn.as_deref(), Some("h2"));
    assert_eq!(t.fallbacks[1].xver, 2);
    assert_eq!(plan.inbounds[0].protocol.fallbacks().len(), 3);
    // Passwords never show in Debug or in `skiff check`'s summary.
    assert!(!format!("{plan:?}").contains("secret"));
    let summary = plan.to_string();
    assert!(!summary.contains("secret"), "{summary}");
    assert!(summary.contains("trojan"), "{summary}");
    assert!(
        summary.contains("fallback (alpn h2) to 127.0.0.1:8080 with PROXY v2"),
        "{summary}"
    );

    // No clients and no fallbacks over ws+tls: fine.
    let plan = ok(&trojan_in(
        r#"{"clients": []}"#,
        &tls_stream().replacen('{', r#"{"network": "ws", "#, 1),
    ));
    assert!(matches!(
        plan.inbounds[0].stream.network,
        StreamNetwork::Ws(_)
    ));
    let plan = ok(&trojan_in("{}", "{}"));
    assert!(plan.inbounds[0].protocol.fallbacks().is_empty());
}

#[test]
fn trojan_inbound_errors() {
    let s = "inbounds[0].settings";
    has_error(
        &trojan_in(r#"{"clients": [{"email": "a"}]}"#, "{}"),
        &format!("{s}.clients[0].password"),
        "missing `password`",
    );
    has_error(
        &trojan_in(r#"{"clients": [{"password": ""}]}"#, "{}"),
        &format!("{s}.clients[0].password"),
        "must not be empty",
    );
    has_error(
        &trojan_in(r#"{"clients": [{"password": 5}]}"#, "{}"),
        &format!("{s}.clients[0].password"),
        "invalid type",
    );
    has_error(
        &trojan_in(
            r#"{"clients": [{"password": "a"}, {"password": "b"}, {"password": "a"}]}"#,
            "{}",
        ),
        &format!("{s}.clients[2].password"),
        "another client already has this password",
    );
    has_error(
        &trojan_in(
            r#"{"clients": [{"password": "a", "email": "X@y"}, {"password": "b", "email": "x@Y"}]}"#,
            "{}",
        ),
        &format!("{s}.clients[1].email"),
        "already has the email",
    );
    has_error(
        &trojan_in(r#"{"clients": [{"password": "a", "level": -1}]}"#, "{}"),
        &format!("{s}.clients[0].level"),
        "out of range",
    );
    has_error(
        &trojan_in(
            r#"{"clients": [{"password": "a", "flow": "xtls-rprx-direct"}]}"#,
            "{}",
        ),
        &format!("{s}.clients[0].flow"),
        "not supported for Trojan",
    );
    // The fallback list is checked exactly as VLESS's.
    has_error(
        &trojan_in(r#"{"fallbacks": [{"dest": 0}]}"#, "{}"),
        &format!("{s}.fallbacks[0].dest"),
        "out of range",
    );
    has_error(
        &trojan_in(r#"{"fallbacks": [{"dest": 80}, {"dest": 81}]}"#, "{}"),
        &format!("{s}.fallbacks[1]"),
        "same name, alpn and path",
    );
    has_error(
        &trojan_in(r#"{"fallbacks": [{"dest": 80, "xver": 3}]}"#, "{}"),
        &format!("{s}.fallbacks[0].xver"),
        "not a PROXY protocol version",
    );
    // Fallbacks hand on raw TCP bytes: not behind WebSocket.
    has_error(
        &trojan_in(r#"{"fallbacks": [{"dest": 80}]}"#, r#"{"network": "ws"}"#),
        &format!("{s}.fallbacks"),
        "fallbacks need a raw TCP inbound",
    );
}

#[test]
fn trojan_outbound() {
    let plan = ok(&trojan_out(
        r#"{"servers": [{"address": "[::1]", "port": 443, "password": "pw", "email": "me", "level": 3}]}"#,
        r#"{"security": "tls", "tlsSettings": {"serverName": "example.com", "allowInsecure": true}}"#,
    ));
    let OutboundProtocol::Trojan(t) = &plan.outbounds[0].protocol else {
        panic!("not trojan")
    };
    assert_eq!(
        (t.address.as_str(), t.port, t.password.as_str(), t.level),
        ("::1", 443, "pw", 3)
    );
    assert_eq!(t.email.as_deref(), Some("me"));
    assert!(matches!(
        plan.outbounds[0].stream.security,
        StreamSecurity::Tls(_)
    ));
    assert!(!format!("{plan:?}").contains("\"pw\""));
    let summary = plan.to_string();
    assert!(
        summary.contains("trojan to [::1]:443, email me, level 3"),
        "{summary}"
    );
}

#[test]
fn trojan_outbound_errors() {
    let s = "outbounds[0].settings";
    has_error(
        &trojan_out("{}", "{}"),
        &format!("{s}.servers"),
        "missing `servers`",
    );
    has_error(
        &trojan_out(r#"{"servers": []}"#, "{}"),
        &format!("{s}.servers"),
        "is empty",
    );
    has_error(
        &trojan_out(
            r#"{"servers": [{"address": "a", "port": 1, "password": "p"}, {"address": "b", "port": 1, "password": "p"}]}"#,
            "{}",
        ),
        &format!("{s}.servers[1]"),
        "exactly one server",
    );
    has_error(
        &trojan_out(r#"{"servers": [{"port": 1, "password": "p"}]}"#, "{}"),
        &format!("{s}.servers[0].address"),
        "missing `address` of the Trojan server",
    );
    has_error(
        &trojan_out(
            r#"{"servers": [{"address": "bad host", "port": 1, "password": "p"}]}"#,
            "{}",
        ),
        &format!("{s}.servers[0].address"),
        "not an IP address or domain name",
    );
    has_error(
        &trojan_out(
            r#"{"servers": [{"address": "a", "port": 70000, "password": "p"}]}"#,
            "{}",
        ),
        &format!("{s}.servers[0].port"),
        "out of range",
    );
    has_error(
        &trojan_out(r#"{"servers": [{"address": "a", "port": 1}]}"#, "{}"),
        &format!("{s}.servers[0].password"),
        "missing `password`",
    );
    // Unknown keys warn with their path.
    let (_, warnings) = load(&trojan_out(
        r#"{"servers": [{"address": "a", "port": 1, "password": "p", "pasword": "q"}]}"#,
        "{}",
    ))
    .expect("loads");
    assert!(
        warnings
            .iter()
            .any(|w| w.path == format!("{s}.servers[0].pasword")),
        "{warnings:#?}"
    );
}
