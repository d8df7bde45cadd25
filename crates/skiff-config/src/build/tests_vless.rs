//! VLESS, WebSocket and TLS: build-step tests through the public entry point.

use std::path::PathBuf;

use crate::{
    Diagnostic, FallbackDest, InboundProtocol, OutboundProtocol, Plan, Severity, Source,
    StreamNetwork, StreamSecurity, load_sources,
};

pub(super) const UUID: &str = "b831381d-6324-4d53-ad4f-8cda48b30811";
pub(super) const UUID_BYTES: [u8; 16] = [
    0xb8, 0x31, 0x38, 0x1d, 0x63, 0x24, 0x4d, 0x53, 0xad, 0x4f, 0x8c, 0xda, 0x48, 0xb3, 0x08, 0x11,
];
const CERT: &str = "-----BEGIN CERTIFICATE-----\\nMIIB\\n-----END CERTIFICATE-----\\n";
const KEY: &str = "-----BEGIN PRIVATE KEY-----\\nSECRETKEYMATERIAL\\n-----END PRIVATE KEY-----\\n";

pub(super) fn load(text: &str) -> Result<(Plan, Vec<Diagnostic>), Vec<Diagnostic>> {
    load_sources(&[Source {
        name: "t.json".into(),
        text: text.into(),
    }])
    .map(|l| (l.plan, l.warnings))
}

pub(super) fn ok(text: &str) -> Plan {
    match load(text) {
        Ok((plan, warnings)) => {
            assert!(warnings.is_empty(), "unexpected warnings: {warnings:#?}");
            plan
        }
        Err(diags) => panic!("expected Ok, got {diags:#?}"),
    }
}

pub(super) fn warned(text: &str, path: &str, needle: &str) -> Plan {
    match load(text) {
        Ok((plan, warnings)) => {
            assert!(
                warnings
                    .iter()
                    .any(|w| w.path == path && w.message.contains(needle)),
                "no warning at `{path}` containing `{needle}` in {warnings:#?}"
            );
            plan
        }
        Err(diags) => panic!("expected Ok, got {diags:#?}"),
    }
}

pub(super) fn has_error(text: &str, path: &str, needle: &str) {
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

/// `{"certificate": CERT, "key": KEY}` as JSON.
pub(super) fn inline_cert() -> String {
    format!(r#"{{"certificate": "{CERT}", "key": "{KEY}"}}"#)
}

pub(super) fn tls_stream() -> String {
    format!(
        r#"{{"security": "tls", "tlsSettings": {{"certificates": [{}]}}}}"#,
        inline_cert()
    )
}

/// A VLESS inbound with the given settings and streamSettings.
fn vless_in(settings: &str, stream: &str) -> String {
    format!(
        r#"{{"inbounds": [{{"port": 443, "protocol": "vless", "settings": {settings}, "streamSettings": {stream}}}]}}"#
    )
}

fn clients(extra: &str) -> String {
    format!(r#"{{"clients": [{{"id": "{UUID}"}}], "decryption": "none"{extra}}}"#)
}

fn vless_out(settings: &str, stream: &str) -> String {
    format!(
        r#"{{"outbounds": [{{"tag": "p", "protocol": "vless", "settings": {settings}, "streamSettings": {stream}}}]}}"#
    )
}

fn vnext(user: &str) -> String {
    format!(r#"{{"vnext": [{{"address": "example.com", "port": 443, "users": [{user}]}}]}}"#)
}

fn good_user() -> String {
    format!(r#"{{"id": "{UUID}", "encryption": "none"}}"#)
}

fn socks_stream(stream: &str) -> String {
    format!(r#"{{"inbounds": [{{"port": 1, "protocol": "socks", "streamSettings": {stream}}}]}}"#)
}

fn out_stream(stream: &str) -> String {
    vless_out(&vnext(&good_user()), stream)
}

#[test]
fn vless_inbound_clients_and_fallbacks() {
    let settings = format!(
        r#"{{"clients": [
              {{"id": "{UUID}", "email": "a@x", "level": 2, "flow": ""}},
              {{"id": "example"}},
              {{"id": "B831381D63244D53AD4F8CDA48B30811", "email": ""}}
            ],
            "decryption": "none",
            "fallbacks": [
              {{"dest": 80}},
              {{"alpn": "h2", "dest": "8080"}},
              {{"name": "a.example", "path": "/ws", "dest": "10.0.0.1:8000", "xver": 1}},
              {{"path": "/u", "dest": "/dev/shm/u.sock", "xver": 2}},
              {{"path": "/a", "dest": "@abstract"}},
              {{"path": "/p", "dest": "@@padded"}}
            ]}}"#
    );
    let plan = ok(&vless_in(&settings, &tls_stream()));
    let InboundProtocol::Vless(v) = &plan.inbounds[0].protocol else {
        panic!()
    };
    assert_eq!(v.clients.len(), 3);
    assert_eq!(v.clients[0].id, UUID_BYTES);
    assert_eq!(v.clients[0].email.as_deref(), Some("a@x"));
    assert_eq!(v.clients[0].level, 2);
    // Xray's mapping of short strings (vless.md §2.1).
    let mapped = skiff_proto::vless::UserId::parse("example").unwrap();
    assert_eq!(&v.clients[1].id, mapped.as_bytes());
    assert_eq!(v.clients[2].id, UUID_BYTES);
    assert_eq!(v.clients[2].email, None);
    let dests: Vec<&FallbackDest> = v.fallbacks.iter().map(|f| &f.dest).collect();
    assert_eq!(
        dests,
        [
            &FallbackDest::Port(80),
            &FallbackDest::Port(8080),
            &FallbackDest::Addr("10.0.0.1".into(), 8000),
            &FallbackDest::Unix(PathBuf::from("/dev/shm/u.sock")),
            &FallbackDest::AbstractUnix("@abstract".into()),
            &FallbackDest::AbstractUnix("@@padded".into()),
        ]
    );
    assert_eq!(v.fallbacks[0].name, None);
    assert_eq!(v.fallbacks[0].xver, 0);
    assert_eq!(v.fallbacks[1].alpn.as_deref(), Some("h2"));
    assert_eq!(v.fallbacks[2].name.as_deref(), Some("a.example"));
    assert_eq!(v.fallbacks[2].path.as_deref(), Some("/ws"));
    assert_eq!(v.fallbacks[2].xver, 1);
    assert_eq!(v.fallbacks[3].xver, 2);

    // No clients is allowed (users may be added later); no fallbacks works on any transport.
    let plan = ok(&vless_in(
        r#"{"clients": [], "decryption": "none"}"#,
        r#"{"network": "ws"}"#,
    ));
    let InboundProtocol::Vless(v) = &plan.inbounds[0].protocol else {
        panic!()
    };
    assert!(v.clients.is_empty() && v.fallbacks.is_empty());
}

#[test]
fn vless_inbound_errors() {
    let s = "inbounds[0].settings";
    has_error(
        &vless_in(&format!(r#"{{"clients": [{{"id": "{UUID}"}}]}}"#), "{}"),
        &format!("{s}.decryption"),
        "missing `decryption`",
    );
    has_error(
        &vless_in(
            &format!(r#"{{"clients": [{{"id": "{UUID}"}}], "decryption": "aes"}}"#),
            "{}",
        ),
        &format!("{s}.decryption"),
        "decryption `aes` is not supported",
    );
    for (id, needle) in [
        ("", "user id is empty"),
        (&"a".repeat(31), "31 bytes"),
        ("b831381d-6324-4d53-ad4f-8cda48b3081z", "not a valid UUID"),
    ] {
        has_error(
            &vless_in(
                &format!(
                    r#"{{"clients": [{{"id": "{UUID}"}}, {{"id": "{id}"}}], "decryption": "none"}}"#
                ),
                "{}",
            ),
            &format!("{s}.clients[1].id"),
            needle,
        );
    }
    has_error(
        &vless_in(
            r#"{"clients": [{"email": "x"}], "decryption": "none"}"#,
            "{}",
        ),
        &format!("{s}.clients[0].id"),
        "missing `id`",
    );
    has_error(
        &vless_in(
            &format!(
                r#"{{"clients": [{{"id": "{UUID}", "flow": "xtls-rprx-vision"}}], "decryption": "none"}}"#
            ),
            "{}",
        ),
        "inbounds[0].streamSettings",
        "XTLS Vision (flow \"xtls-rprx-vision\") needs raw TCP with TLS",
    );
    has_error(
        &vless_in(
            &format!(
                r#"{{"clients": [{{"id": "{UUID}", "flow": "xtls-rprx-direct"}}], "decryption": "none"}}"#
            ),
            "{}",
        ),
        &format!("{s}.clients[0].flow"),
        "XTLS v1, which Xray removed",
    );
    has_error(
        &vless_in(
            &format!(
                r#"{{"clients": [{{"id": "{UUID}", "email": "A@x"}}, {{"id": "x", "email": "a@X"}}], "decryption": "none"}}"#
            ),
            "{}",
        ),
        &format!("{s}.clients[1].email"),
        "already has the email",
    );
    has_error(
        &vless_in(
            &format!(r#"{{"clients": [{{"id": "{UUID}", "level": -1}}], "decryption": "none"}}"#),
            "{}",
        ),
        &format!("{s}.clients[0].level"),
        "out of range",
    );
    let fb = |fallbacks: &str| {
        vless_in(
            &clients(&format!(r#", "fallbacks": {fallbacks}"#)),
            &tls_stream(),
        )
    };
    has_error(
        &fb(r#"[{"path": "ws", "dest": 80}]"#),
        &format!("{s}.fallbacks[0].path"),
        "must be empty or start with \"/\"",
    );
    has_error(
        &fb(r#"[{"dest": 80, "xver": 3}]"#),
        &format!("{s}.fallbacks[0].xver"),
        "xver 3",
    );
    has_error(
        &fb(r#"[{"dest": 80}, {"alpn": "h2", "dest": 81}, {"path": "", "alpn": "", "dest": 82}]"#),
        &format!("{s}.fallbacks[2]"),
        "same name, alpn and path",
    );
    has_error(
        &fb(r#"[{"path": "/a"}]"#),
        &format!("{s}.fallbacks[0].dest"),
        "missing `dest`",
    );
    has_error(
        &fb(r#"[{"dest": "nowhere"}]"#),
        &format!("{s}.fallbacks[0].dest"),
        "not a fallback destination",
    );
    has_error(
        &fb(r#"[{"dest": 65536}]"#),
        &format!("{s}.fallbacks[0].dest"),
        "out of range",
    );
    has_error(
        &fb(r#"[{"dest": [80]}]"#),
        &format!("{s}.fallbacks[0].dest"),
        "expected a port number or a string",
    );
    // Fallbacks on raw TCP, with or without TLS; not under WebSocket.
    ok(&vless_in(
        &clients(r#", "fallbacks": [{"dest": 80}]"#),
        "{}",
    ));
    has_error(
        &vless_in(
            &clients(r#", "fallbacks": [{"dest": 80}]"#),
            &format!(
                r#"{{"network": "ws", "security": "tls", "tlsSettings": {{"certificates": [{}]}}}}"#,
                inline_cert()
            ),
        ),
        &format!("{s}.fallbacks"),
        "fallbacks need a raw TCP inbound",
    );
}

#[test]
fn vless_outbound_forms_and_limits() {
    let plan = ok(&vless_out(
        &vnext(&format!(
            r#"{{"id": "{UUID}", "encryption": "none", "flow": "", "level": 1}}"#
        )),
        "{}",
    ));
    let OutboundProtocol::Vless(v) = &plan.outbounds[0].protocol else {
        panic!()
    };
    assert_eq!(
        (v.address.as_str(), v.port, v.id, v.level),
        ("example.com", 443, UUID_BYTES, 1)
    );
    // Xray's flat form; IPv6 addresses lose their brackets.
    let plan = ok(&vless_out(
        &format!(r#"{{"address": "[::1]", "port": 8443, "id": "{UUID}", "encryption": "none"}}"#),
        "{}",
    ));
    let OutboundProtocol::Vless(v) = &plan.outbounds[0].protocol else {
        panic!()
    };
    assert_eq!((v.address.as_str(), v.port), ("::1", 8443));

    let s = "outbounds[0].settings";
    has_error(
        &vless_out("{}", "{}"),
        &format!("{s}.vnext"),
        "missing `vnext`",
    );
    has_error(
        &vless_out(r#"{"vnext": []}"#, "{}"),
        &format!("{s}.vnext"),
        "is empty",
    );
    has_error(
        &vless_out(r#"{"vnext": [{"address": "a.com", "port": 1}]}"#, "{}"),
        &format!("{s}.vnext[0].users"),
        "missing `users`",
    );
    has_error(
        &vless_out(&vnext(""), "{}"),
        &format!("{s}.vnext[0].users"),
        "`users` is empty",
    );
    let two = format!(
        r#"{{"vnext": [{{"address": "a.com", "port": 1, "users": [{u}]}}, {{"address": "b.com", "port": 1, "users": [{u}]}}]}}"#,
        u = good_user()
    );
    has_error(
        &vless_out(&two, "{}"),
        &format!("{s}.vnext[1]"),
        "exactly one server",
    );
    has_error(
        &vless_out(&vnext(&format!("{},{}", good_user(), good_user())), "{}"),
        &format!("{s}.vnext[0].users[1]"),
        "exactly one user",
    );
    has_error(
        &vless_out(&vnext(&format!(r#"{{"id": "{UUID}"}}"#)), "{}"),
        &format!("{s}.vnext[0].users[0].encryption"),
        "missing `encryption`",
    );
    has_error(
        &vless_out(
            &vnext(&format!(r#"{{"id": "{UUID}", "encryption": "auto"}}"#)),
            "{}",
        ),
        &format!("{s}.vnext[0].users[0].encryption"),
        "encryption `auto` is not supported",
    );
    has_error(
        &vless_out(
            &vnext(&format!(
                r#"{{"id": "{UUID}", "encryption": "none", "flow": "xtls-rprx-vision"}}"#
            )),
            "{}",
        ),
        "outbounds[0].streamSettings",
        "XTLS Vision (flow \"xtls-rprx-vision\") needs raw TCP with TLS",
    );
    has_error(
        &vless_out(
            &vnext(r#"{"id": "not a uuid but far too long to be mapped", "encryption": "none"}"#),
            "{}",
        ),
        &format!("{s}.vnext[0].users[0].id"),
        "invalid VLESS id",
    );
    has_error(
        &vless_out(
            r#"{"vnext": [{"address": "a b", "port": 0, "users": []}]}"#,
            "{}",
        ),
        &format!("{s}.vnext[0].users"),
        "`users` is empty",
    );
    has_error(
        &vless_out(
            &format!(
                r#"{{"vnext": [{{"address": "a b", "port": 0, "users": [{}]}}]}}"#,
                good_user()
            ),
            "{}",
        ),
        &format!("{s}.vnext[0].address"),
        "not an IP address or domain name",
    );
    has_error(
        &vless_out(
            &format!(
                r#"{{"vnext": [{{"address": "a.com", "port": 70000, "users": [{}]}}]}}"#,
                good_user()
            ),
            "{}",
        ),
        &format!("{s}.vnext[0].port"),
        "out of range",
    );
    has_error(
        &vless_out(
            &format!(r#"{{"address": "a.com", "port": 1, "id": "{UUID}"}}"#),
            "{}",
        ),
        &format!("{s}.encryption"),
        "missing `encryption`",
    );
    has_error(
        &vless_out(
            &format!(
                r#"{{"address": "a.com", "port": 1, "id": "{UUID}", "encryption": "none", "vnext": []}}"#
            ),
            "{}",
        ),
        s,
        "not both",
    );
}

#[test]
fn websocket_settings() {
    let plan = ok(&socks_stream(r#"{"network": "ws"}"#));
    let StreamNetwork::Ws(ws) = &plan.inbounds[0].stream.network else {
        panic!()
    };
    assert_eq!(ws.path, "/");
    assert_eq!(ws.host, None);
    assert!(ws.headers.is_empty() && !ws.accept_proxy_protocol);

    let plan = ok(&socks_stream(
        r#"{"network": "websocket", "wsSettings": {"path": "/a?ed=2048", "headers": {"Host": "h.example", "X-A": "1"}, "acceptProxyProtocol": true}}"#,
    ));
    let StreamNetwork::Ws(ws) = &plan.inbounds[0].stream.network else {
        panic!()
    };
    assert_eq!(ws.path, "/a?ed=2048");
    assert_eq!(
        ws.host.as_deref(),
        Some("h.example"),
        "Host header moves to host"
    );
    assert_eq!(ws.headers, [("X-A".to_owned(), "1".to_owned())]);
    assert!(ws.accept_proxy_protocol);

    // `host` wins over a Host header.
    let plan = ok(&out_stream(
        r#"{"network": "ws", "wsSettings": {"host": "a.example", "headers": {"host": "b.example"}}}"#,
    ));
    let StreamNetwork::Ws(ws) = &plan.outbounds[0].stream.network else {
        panic!()
    };
    assert_eq!(ws.host.as_deref(), Some("a.example"));
    assert!(ws.headers.is_empty());

    let w = "inbounds[0].streamSettings.wsSettings";
    has_error(
        &socks_stream(r#"{"network": "ws", "wsSettings": {"path": "ws"}}"#),
        &format!("{w}.path"),
        "must start with \"/\"",
    );
    has_error(
        &socks_stream(r#"{"network": "ws", "wsSettings": {"headers": {"X": 1}}}"#),
        &format!("{w}.headers.X"),
        "expected a string",
    );
    has_error(
        &socks_stream(r#"{"network": "ws", "wsSettings": {"headers": {"Bad Name": "1"}}}"#),
        &format!("{w}.headers.Bad Name"),
        "not a valid HTTP header name",
    );
    has_error(
        &socks_stream(r#"{"network": "ws", "wsSettings": {"path": 5}}"#),
        &format!("{w}.path"),
        "expected a string",
    );
    warned(
        &out_stream(r#"{"network": "ws", "wsSettings": {"acceptProxyProtocol": true}}"#),
        "outbounds[0].streamSettings.wsSettings.acceptProxyProtocol",
        "only applies to inbounds",
    );
    // An unused wsSettings is ignored, as in Xray.
    let plan = ok(&socks_stream(
        r#"{"network": "tcp", "wsSettings": {"path": "x"}}"#,
    ));
    assert_eq!(plan.inbounds[0].stream.network, StreamNetwork::Tcp);
}

#[test]
fn httpupgrade_settings() {
    let plan = ok(&socks_stream(r#"{"network": "httpupgrade"}"#));
    let StreamNetwork::HttpUpgrade(h) = &plan.inbounds[0].stream.network else {
        panic!()
    };
    assert_eq!((h.path.as_str(), h.host.as_deref()), ("/", None));

    // As Xray: a missing leading "/" is added; `?ed=N` stays for the transport to read.
    let plan = ok(&out_stream(
        r#"{"network": "httpupgrade", "httpupgradeSettings": {"path": "up?ed=2048", "host": " h.example ", "headers": {"X-A": "1"}}}"#,
    ));
    let StreamNetwork::HttpUpgrade(h) = &plan.outbounds[0].stream.network else {
        panic!()
    };
    assert_eq!(h.path, "/up?ed=2048");
    assert_eq!(h.host.as_deref(), Some("h.example"));
    assert_eq!(h.headers, [("X-A".to_owned(), "1".to_owned())]);

    let h = "inbounds[0].streamSettings.httpupgradeSettings";
    has_error(
        &socks_stream(
            r#"{"network": "httpupgrade", "httpupgradeSettings": {"headers": {"Host": "x"}}}"#,
        ),
        &format!("{h}.headers.Host"),
        "can't contain \"host\"",
    );
    has_error(
        &socks_stream(
            r#"{"network": "httpupgrade", "httpupgradeSettings": {"headers": {"X": 1}}}"#,
        ),
        &format!("{h}.headers.X"),
        "expected a string",
    );
    has_error(
        &socks_stream(r#"{"network": "httpupgrade", "httpupgradeSettings": {"path": 5}}"#),
        &format!("{h}.path"),
        "expected a string",
    );
    has_error(
        &socks_stream(
            r#"{"network": "httpupgrade", "httpupgradeSettings": {"acceptProxyProtocol": true}}"#,
        ),
        &format!("{h}.acceptProxyProtocol"),
        "not supported",
    );
    warned(
        &out_stream(
            r#"{"network": "httpupgrade", "httpupgradeSettings": {"acceptProxyProtocol": true}}"#,
        ),
        "outbounds[0].streamSettings.httpupgradeSettings.acceptProxyProtocol",
        "only applies to inbounds",
    );
    // An unused httpupgradeSettings is ignored, as in Xray.
    let plan = ok(&socks_stream(
        r#"{"network": "tcp", "httpupgradeSettings": {"path": 5}}"#,
    ));
    assert_eq!(plan.inbounds[0].stream.network, StreamNetwork::Tcp);
}

#[test]
fn http_header_settings() {
    use crate::plan::HttpHeaderPlan;
    let header = |plan: &crate::Plan, inbound: bool| -> HttpHeaderPlan {
        let stream = if inbound {
            &plan.inbounds[0].stream
        } else {
            &plan.outbounds[0].stream
        };
        match &stream.network {
            StreamNetwork::HttpHeader(h) => h.clone(),
            other => panic!("{other:?}"),
        }
    };
    // Xray's defaults: GET / HTTP/1.1, 200 OK, the default header lists (None here).
    let h = header(
        &ok(&socks_stream(
            r#"{"network": "tcp", "tcpSettings": {"header": {"type": "HTTP"}}}"#,
        )),
        true,
    );
    assert_eq!(
        (h.request.method.as_str(), h.request.version.as_str()),
        ("GET", "1.1")
    );
    assert_eq!(h.request.paths, ["/"]);
    assert_eq!(h.request.headers, None);
    assert_eq!(
        (h.response.status.as_str(), h.response.reason.as_str()),
        ("200", "OK")
    );
    assert_eq!(h.response.headers, None);

    // rawSettings wins over tcpSettings; headers sorted by name, a string split at commas.
    let h = header(
        &ok(&out_stream(
            r#"{"network": "raw", "tcpSettings": {"header": {"type": "none"}},
                "rawSettings": {"header": {"type": "http", "request": {"method": "POST", "path": "/a,/b",
                "headers": {"User-Agent": ["x"], "Host": "a.example, b.example"}},
                "response": {"status": "201"}}}}"#,
        )),
        false,
    );
    assert_eq!(h.request.method, "POST");
    assert_eq!(h.request.paths, ["/a", "/b"]);
    assert_eq!(
        h.request.headers,
        Some(vec![
            (
                "Host".to_owned(),
                vec!["a.example".to_owned(), " b.example".to_owned()]
            ),
            ("User-Agent".to_owned(), vec!["x".to_owned()]),
        ])
    );
    assert_eq!(
        (h.response.status.as_str(), h.response.reason.as_str()),
        ("201", "OK")
    );

    let base = "inbounds[0].streamSettings.tcpSettings.header";
    let with =
        |header: &str| socks_stream(&format!(r#"{{"tcpSettings": {{"header": {header}}}}}"#));
    has_error(
        &with(r#"{"type": "srtp"}"#),
        &format!("{base}.type"),
        "unknown header type `srtp`",
    );
    has_error(&with(r#"{}"#), base, "needs a `type`");
    has_error(
        &with(r#"{"type": "http", "request": {"headers": {"X": null}}}"#),
        &format!("{base}.request.headers.X"),
        "empty HTTP header value",
    );
    has_error(
        &with(r#"{"type": "http", "request": {"headers": {"X": ["a\r\nb"]}}}"#),
        &format!("{base}.request.headers.X"),
        "CR, LF or NUL",
    );
    has_error(
        &with(r#"{"type": "http", "request": {"path": ["/a b"]}}"#),
        &format!("{base}.request.path"),
        "without spaces",
    );
    has_error(
        &with(r#"{"type": "http", "request": {"method": "G T"}}"#),
        &format!("{base}.request.method"),
        "would break",
    );
    has_error(
        &with(r#"{"type": "http", "response": {"status": 200}}"#),
        &format!("{base}.response.status"),
        "expected a string",
    );
    warned(
        &with(r#"{"type": "http", "request": {"path": "a"}}"#),
        &format!("{base}.request.path"),
        "does not start with",
    );
    // With TLS too (the header then travels inside TLS, as in Xray).
    let plan = ok(&out_stream(
        r#"{"security": "tls", "tcpSettings": {"header": {"type": "http"}}}"#,
    ));
    header(&plan, false);
    // Another network ignores the header.
    let plan = ok(&socks_stream(
        r#"{"network": "ws", "tcpSettings": {"header": {"type": "http"}}}"#,
    ));
    assert!(matches!(
        plan.inbounds[0].stream.network,
        StreamNetwork::Ws(_)
    ));
}

#[test]
fn tls_settings_inline_and_options() {
    let stream = format!(
        r#"{{"security": "tls", "tlsSettings": {{
            "serverName": "s.example", "alpn": ["h2", "http/1.1"], "minVersion": "1.2", "maxVersion": "1.3",
            "rejectUnknownSni": true,
            "certificates": [
              {},
              {{"certificate": ["-----BEGIN CERTIFICATE-----", "AAAA", "-----END CERTIFICATE-----"],
                "key": ["-----BEGIN EC PRIVATE KEY-----", "BBBB", "-----END EC PRIVATE KEY-----"],
                "usage": "encipherment", "ocspStapling": 3600}}
            ]}}}}"#,
        inline_cert()
    );
    let plan = ok(&socks_stream(&stream));
    let StreamSecurity::Tls(tls) = &plan.inbounds[0].stream.security else {
        panic!()
    };
    assert_eq!(tls.server_name.as_deref(), Some("s.example"));
    assert_eq!(tls.alpn, ["h2", "http/1.1"]);
    assert_eq!(tls.min_version.as_deref(), Some("1.2"));
    assert_eq!(tls.max_version.as_deref(), Some("1.3"));
    assert!(tls.reject_unknown_sni && !tls.allow_insecure);
    assert_eq!(tls.certificates.len(), 2);
    assert!(tls.certificates[0].key_pem.contains("SECRETKEYMATERIAL"));
    // Lines joined as Xray joins them (ListInbounds reports these bytes).
    assert_eq!(
        tls.certificates[1].certificate_pem,
        "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----"
    );
    assert_eq!(tls.certificates[1].certificate_file, None);

    // Outbound: pinned digests as a comma-separated string or an array, with or without `:`.
    let digest = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    let colons: String = digest
        .as_bytes()
        .chunks(2)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect::<Vec<_>>()
        .join(":")
        .to_uppercase();
    for pinned in [
        format!(r#""{digest}, {colons}""#),
        format!(r#"["{digest}", "{colons}"]"#),
    ] {
        let plan = ok(&out_stream(&format!(
            r#"{{"security": "tls", "tlsSettings": {{"allowInsecure": true, "alpn": "h2,http/1.1", "pinnedPeerCertSha256": {pinned}}}}}"#
        )));
        let StreamSecurity::Tls(tls) = &plan.outbounds[0].stream.security else {
            panic!()
        };
        assert!(tls.allow_insecure);
        assert_eq!(tls.alpn, ["h2", "http/1.1"]);
        assert_eq!(tls.pinned_peer_cert_sha256.len(), 2);
        assert_eq!(
            tls.pinned_peer_cert_sha256[0],
            tls.pinned_peer_cert_sha256[1]
        );
        assert_eq!(tls.pinned_peer_cert_sha256[0][0], 0xe3);
        assert_eq!(tls.pinned_peer_cert_sha256[0][31], 0x55);
        assert!(tls.certificates.is_empty());
    }
    // An outbound TLS without settings at all is fine.
    let plan = ok(&out_stream(r#"{"security": "tls"}"#));
    assert!(matches!(
        plan.outbounds[0].stream.security,
        StreamSecurity::Tls(_)
    ));
}

#[test]
fn tls_settings_errors_and_warnings() {
    let t = "inbounds[0].streamSettings.tlsSettings";
    let o = "outbounds[0].streamSettings.tlsSettings";
    has_error(
        &socks_stream(r#"{"security": "tls"}"#),
        t,
        "a TLS inbound needs at least one certificate",
    );
    has_error(
        &socks_stream(r#"{"security": "tls", "tlsSettings": {"certificates": []}}"#),
        &format!("{t}.certificates"),
        "a TLS inbound needs at least one certificate",
    );
    has_error(
        &out_stream(&tls_stream()),
        &format!("{o}.certificates"),
        "not supported",
    );
    let with = |settings: &str| {
        socks_stream(&format!(
            r#"{{"security": "tls", "tlsSettings": {{"certificates": [{}], {settings}}}}}"#,
            inline_cert()
        ))
    };
    has_error(
        &with(r#""minVersion": "1.1""#),
        &format!("{t}.minVersion"),
        "TLS 1.1 is not supported",
    );
    has_error(
        &with(r#""maxVersion": "2""#),
        &format!("{t}.maxVersion"),
        "unknown TLS version",
    );
    has_error(
        &with(r#""minVersion": "1.3", "maxVersion": "1.2""#),
        &format!("{t}.minVersion"),
        "higher than maxVersion",
    );
    has_error(
        &with(r#""pinnedPeerCertSha256": ["abcd"]"#),
        &format!("{t}.pinnedPeerCertSha256[0]"),
        "not a SHA-256 digest",
    );
    has_error(
        &with(&format!(r#""pinnedPeerCertSha256": "+{}""#, "f".repeat(63))),
        &format!("{t}.pinnedPeerCertSha256"),
        "not a SHA-256 digest",
    );
    has_error(
        &vless_in(
            &format!(
                r#"{{"clients": [{{"id": "{UUID}", "flow": "xtls-rprx-vision-udp443"}}], "decryption": "none"}}"#
            ),
            "{}",
        ),
        "inbounds[0].streamSettings",
        "needs raw TCP with TLS",
    );
    has_error(
        &with(r#""pinnedPeerCertSha256": "zz""#),
        &format!("{t}.pinnedPeerCertSha256"),
        "not a SHA-256 digest",
    );
    has_error(
        &with(r#""echConfigList": "AAAA""#),
        &format!("{t}.echConfigList"),
        "not supported",
    );
    has_error(
        &with(r#""verifyPeerCertInNames": ["a"]"#),
        &format!("{t}.verifyPeerCertInNames"),
        "not supported",
    );
    warned(
        &with(r#""cipherSuites": "TLS_AES_128_GCM_SHA256""#),
        &format!("{t}.cipherSuites"),
        "ignored",
    );
    let plan = ok(&out_stream(
        r#"{"security": "tls", "tlsSettings": {"fingerprint": "Chrome"}}"#,
    ));
    let StreamSecurity::Tls(tls) = &plan.outbounds[0].stream.security else {
        panic!()
    };
    assert_eq!(tls.fingerprint.as_deref(), Some("chrome"));
    has_error(
        &out_stream(r#"{"security": "tls", "tlsSettings": {"fingerprint": "netscape"}}"#),
        &format!("{o}.fingerprint"),
        "unknown fingerprint `netscape`",
    );
    let plan = warned(
        &socks_stream(r#"{"security": "none", "tlsSettings": {"serverName": "x"}}"#),
        "inbounds[0].streamSettings.tlsSettings",
        "ignored",
    );
    assert_eq!(plan.inbounds[0].stream.security, StreamSecurity::None);
    // An empty tlsSettings with security none says nothing.
    ok(&socks_stream(r#"{"tlsSettings": {}}"#));
    let c = format!("{t}.certificates[0]");
    let cert = |c: &str| {
        socks_stream(&format!(
            r#"{{"security": "tls", "tlsSettings": {{"certificates": [{c}]}}}}"#
        ))
    };
    has_error(
        &cert(&format!(r#"{{"certificate": "{CERT}"}}"#)),
        &c,
        "missing `keyFile` or `key`",
    );
    has_error(
        &cert(&format!(r#"{{"certificate": "{KEY}", "key": "{KEY}"}}"#)),
        &format!("{c}.certificate"),
        "no PEM",
    );
    has_error(
        &cert(&format!(r#"{{"certificate": "{CERT}", "key": "{CERT}"}}"#)),
        &format!("{c}.key"),
        "no PEM",
    );
    has_error(
        &cert(&format!(r#"{{"certificate": [1], "key": "{KEY}"}}"#)),
        &format!("{c}.certificate[0]"),
        "expected a string",
    );
    has_error(
        &cert(&format!(
            r#"{{"certificate": "{CERT}", "key": "{KEY}", "usage": "verify"}}"#
        )),
        &format!("{c}.usage"),
        "not supported",
    );
    has_error(
        &out_stream(r#"{"security": "xtls"}"#),
        "outbounds[0].streamSettings.security",
        "is not supported by this version of skiff yet",
    );
    has_error(
        &out_stream(r#"{"security": "quantum"}"#),
        "outbounds[0].streamSettings.security",
        "unknown security",
    );
}

#[test]
fn certificate_files_are_read_at_load_time() {
    let dir = std::env::temp_dir().join(format!("skiff-config-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cert_path = dir.join("c.pem");
    let key_path = dir.join("k.pem");
    std::fs::write(&cert_path, CERT.replace("\\n", "\n")).unwrap();
    std::fs::write(&key_path, KEY.replace("\\n", "\n")).unwrap();
    let cert = |c: &str| {
        socks_stream(&format!(
            r#"{{"security": "tls", "tlsSettings": {{"certificates": [{c}]}}}}"#
        ))
    };
    let plan = ok(&cert(&format!(
        r#"{{"certificateFile": "{}", "keyFile": "{}"}}"#,
        cert_path.display(),
        key_path.display()
    )));
    let StreamSecurity::Tls(tls) = &plan.inbounds[0].stream.security else {
        panic!()
    };
    assert_eq!(
        tls.certificates[0].certificate_pem,
        CERT.replace("\\n", "\n")
    );
    assert_eq!(tls.certificates[0].key_pem, KEY.replace("\\n", "\n"));

    let missing = dir.join("absent.pem");
    has_error(
        &cert(&format!(
            r#"{{"certificateFile": "{}", "key": "{KEY}"}}"#,
            missing.display()
        )),
        "inbounds[0].streamSettings.tlsSettings.certificates[0].certificateFile",
        &format!("cannot read `{}`", missing.display()),
    );
    has_error(
        &cert(&format!(
            r#"{{"certificate": "{CERT}", "keyFile": "{}"}}"#,
            missing.display()
        )),
        "inbounds[0].streamSettings.tlsSettings.certificates[0].keyFile",
        "cannot read",
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A relative certificate path that is not in the working directory is read from beside the
/// config file, so a config validates from any directory; when it is in neither place, the
/// error names both paths tried.
#[test]
fn relative_certificate_files_are_found_beside_the_config() {
    let dir = std::env::temp_dir().join(format!("skiff-config-beside-{}", std::process::id()));
    let sub = format!("beside-{}", std::process::id());
    std::fs::create_dir_all(dir.join(&sub)).unwrap();
    std::fs::write(dir.join(&sub).join("c.pem"), CERT.replace("\\n", "\n")).unwrap();
    std::fs::write(dir.join(&sub).join("k.pem"), KEY.replace("\\n", "\n")).unwrap();
    // The working directory (this crate's) has no `beside-PID/`.
    assert!(!std::path::Path::new(&sub).exists());
    let config = dir.join("config.json");
    let load_from = |cert_file: &str| {
        load_sources(&[Source {
            name: config.display().to_string(),
            text: socks_stream(&format!(
                r#"{{"security": "tls", "tlsSettings": {{"certificates": [{{"certificateFile": "{cert_file}", "keyFile": "{sub}/k.pem"}}]}}}}"#
            )),
        }])
    };
    let loaded = load_from(&format!("{sub}/c.pem")).expect("found beside the config");
    let StreamSecurity::Tls(tls) = &loaded.plan.inbounds[0].stream.security else {
        panic!()
    };
    assert_eq!(tls.certificates[0].key_pem, KEY.replace("\\n", "\n"));

    let diags = load_from(&format!("{sub}/absent.pem")).unwrap_err();
    let errors: Vec<&Diagnostic> = diags.iter().filter(|d| d.is_error()).collect();
    assert_eq!(errors.len(), 1, "{diags:?}");
    assert_eq!(
        errors[0].path,
        "inbounds[0].streamSettings.tlsSettings.certificates[0].certificateFile"
    );
    let cwd = std::env::current_dir().unwrap();
    let message = &errors[0].message;
    assert!(
        message.starts_with(&format!(
            "cannot read `{sub}/absent.pem`: not in the working directory"
        )),
        "{message}"
    );
    assert!(
        message.contains(&cwd.join(&sub).join("absent.pem").display().to_string()),
        "{message}"
    );
    assert!(
        message.contains(&dir.join(&sub).join("absent.pem").display().to_string()),
        "{message}"
    );
    // A config in the working directory: one place to look, named once.
    let diags = load_sources(&[Source {
        name: "config.json".into(),
        text: socks_stream(
            r#"{"security": "tls", "tlsSettings": {"certificates": [{"certificateFile": "absent.pem", "key": "k"}]}}"#,
        ),
    }])
    .unwrap_err();
    assert!(
        diags.iter().any(|d| d
            .message
            .starts_with("cannot read `absent.pem`: No such file")),
        "{diags:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn summary_shows_vless_without_secrets() {
    let settings = format!(
        r#"{{"clients": [{{"id": "{UUID}", "email": "a@x"}}], "decryption": "none",
            "fallbacks": [{{"dest": 80}}, {{"path": "/ws", "dest": "@ws", "xver": 1}}]}}"#
    );
    let mut text = vless_in(&settings, &tls_stream());
    text.truncate(text.len() - 1);
    text.push_str(&format!(
        r#", "outbounds": [{{"tag": "p", "protocol": "vless", "settings": {}, "streamSettings":
            {{"network": "ws", "security": "tls", "wsSettings": {{"path": "/v", "host": "h.example"}},
              "tlsSettings": {{"serverName": "s.example", "alpn": ["http/1.1"]}}}}}}]}}"#,
        vnext(&good_user())
    ));
    let plan = ok(&text);
    let shown = plan.to_string();
    let debug = format!("{plan:?}");
    for out in [&shown, &debug] {
        assert!(out.contains("b831381d"), "{out}");
        assert!(!out.contains("6324"), "full id leaked: {out}");
        assert!(!out.contains("SECRETKEYMATERIAL"), "key leaked: {out}");
    }
    assert!(shown.contains("vless on 0.0.0.0:443"), "{shown}");
    assert!(shown.contains("1 client (b831381d… a@x)"), "{shown}");
    assert!(shown.contains("fallback to 127.0.0.1:80"), "{shown}");
    assert!(
        shown.contains("fallback (path /ws) to unix:@ws with PROXY v1"),
        "{shown}"
    );
    assert!(shown.contains("tls (1 certificate(s))"), "{shown}");
    assert!(
        shown.contains("vless to example.com:443, id b831381d…, over WebSocket path /v host h.example, tls (sni s.example, alpn http/1.1)"),
        "{shown}"
    );
}

#[test]
fn vision_loads_on_raw_tcp_with_tls() {
    let tls = format!(
        r#"{{"network": "tcp", "security": "tls", "tlsSettings": {{"certificates": [{{"certificate": ["{CERT}"], "key": ["{KEY}"]}}]}}}}"#
    );
    let plan = ok(&vless_in(
        &format!(
            r#"{{"clients": [{{"id": "{UUID}", "flow": "xtls-rprx-vision"}}], "decryption": "none"}}"#
        ),
        &tls,
    ));
    let crate::plan::InboundProtocol::Vless(v) = &plan.inbounds[0].protocol else {
        panic!("not vless")
    };
    assert_eq!(v.clients[0].flow, crate::plan::VlessFlow::Vision);
    let plan = ok(&vless_out(
        &vnext(&format!(
            r#"{{"id": "{UUID}", "encryption": "none", "flow": "xtls-rprx-vision-udp443"}}"#
        )),
        r#"{"security": "tls", "tlsSettings": {"serverName": "example.com"}}"#,
    ));
    let crate::plan::OutboundProtocol::Vless(v) = &plan.outbounds[0].protocol else {
        panic!("not vless")
    };
    assert_eq!(v.flow, crate::plan::VlessFlow::VisionUdp443);
}
