//! VMess: build-step tests through the public entry point (helpers from the VLESS tests).

use super::tests_vless::{UUID, UUID_BYTES, has_error, ok, tls_stream, warned};
use crate::{InboundProtocol, OutboundProtocol, StreamNetwork, VmessSecurity};

fn vmess_in(settings: &str) -> String {
    format!(r#"{{"inbounds": [{{"port": 443, "protocol": "vmess", "settings": {settings}}}]}}"#)
}

fn vmess_out(settings: &str) -> String {
    format!(
        r#"{{"outbounds": [{{"tag": "p", "protocol": "vmess", "settings": {settings}, "streamSettings": {{"network": "ws"}}}}]}}"#
    )
}

fn vnext(user: &str) -> String {
    format!(r#"{{"vnext": [{{"address": "example.com", "port": 443, "users": [{user}]}}]}}"#)
}

#[test]
fn vmess_inbound_clients() {
    let settings = format!(
        r#"{{"clients": [
              {{"id": "{UUID}", "email": "a@x", "level": 2, "alterId": 0}},
              {{"id": "example"}},
              {{"id": "B831381D63244D53AD4F8CDA48B30811", "email": ""}}
            ],
            "default": {{"level": 5}}}}"#
    );
    let plan = ok(&vmess_in(&settings));
    let InboundProtocol::Vmess(v) = &plan.inbounds[0].protocol else {
        panic!()
    };
    assert_eq!(v.clients.len(), 3);
    assert_eq!(v.clients[0].id, UUID_BYTES);
    assert_eq!(v.clients[0].email.as_deref(), Some("a@x"));
    assert_eq!(v.clients[0].level, 2);
    let mapped = skiff_proto::vless::UserId::parse("example").unwrap();
    assert_eq!(&v.clients[1].id, mapped.as_bytes());
    // `default.level` applies to clients without their own.
    assert_eq!(v.clients[1].level, 5);
    assert_eq!(v.clients[2].email, None);
    assert!(!v.disable_insecure_encryption);
    let text = plan.to_string();
    assert!(
        text.contains("vmess on 0.0.0.0:443, 3 clients (b831381d… a@x level 2"),
        "{text}"
    );
    assert!(
        !text.contains("4d53"),
        "the summary shows ids only by their first 8 digits"
    );

    // Xray 26's `users` is the same list; no clients at all is allowed; any transport.
    let plan = ok(&format!(
        r#"{{"inbounds": [{{"port": 1, "protocol": "vmess", "settings": {{"users": [{{"id": "{UUID}"}}], "disableInsecureEncryption": true}}, "streamSettings": {}}}]}}"#,
        tls_stream()
    ));
    let InboundProtocol::Vmess(v) = &plan.inbounds[0].protocol else {
        panic!()
    };
    assert_eq!(v.clients.len(), 1);
    assert!(v.disable_insecure_encryption);
    let plan = ok(r#"{"inbounds": [{"port": 1, "protocol": "vmess"}]}"#);
    let InboundProtocol::Vmess(v) = &plan.inbounds[0].protocol else {
        panic!()
    };
    assert!(v.clients.is_empty());
}

#[test]
fn vmess_inbound_errors_and_warnings() {
    let s = "inbounds[0].settings";
    has_error(
        &vmess_in(&format!(
            r#"{{"clients": [{{"id": "{UUID}", "alterId": 64}}]}}"#
        )),
        &format!("{s}.clients[0].alterId"),
        "only VMess AEAD is supported (alterId 0)",
    );
    has_error(
        &vmess_in(&format!(
            r#"{{"clients": [{{"id": "{UUID}", "alterId": -1}}]}}"#
        )),
        &format!("{s}.clients[0].alterId"),
        "out of range",
    );
    has_error(
        &vmess_in(r#"{"clients": [], "default": {"alterId": 4}}"#),
        &format!("{s}.default.alterId"),
        "only VMess AEAD",
    );
    has_error(
        &vmess_in(&format!(
            r#"{{"clients": [{{"id": "{UUID}"}}, {{"id": "x-y-z-"}}, {{}}]}}"#
        )),
        &format!("{s}.clients[2].id"),
        "missing `id`",
    );
    has_error(
        &vmess_in(r#"{"clients": [{"id": ""}]}"#),
        &format!("{s}.clients[0].id"),
        "invalid VMess id: user id is empty",
    );
    has_error(
        &vmess_in(&format!(
            r#"{{"clients": [{{"id": "{UUID}", "email": "A@x"}}, {{"id": "other", "email": "a@X"}}]}}"#
        )),
        &format!("{s}.clients[1].email"),
        "already has the email",
    );
    has_error(
        &vmess_in(r#"{"clients": [], "detour": {"to": "dyn"}}"#),
        &format!("{s}.detour"),
        "not supported",
    );
    has_error(
        &vmess_in(&format!(
            r#"{{"clients": [{{"id": "{UUID}", "level": -3}}]}}"#
        )),
        &format!("{s}.clients[0].level"),
        "out of range",
    );
    has_error(
        &vmess_in(r#"{"clients": {"id": "x"}}"#),
        &format!("{s}.clients"),
        "expected an array",
    );
    warned(
        &vmess_in(&format!(
            r#"{{"clients": [{{"id": "{UUID}", "security": "aes-128-gcm"}}]}}"#
        )),
        &format!("{s}.clients[0].security"),
        "no effect on an inbound",
    );
    warned(
        &vmess_in(&format!(
            r#"{{"clients": [{{"id": "{UUID}"}}], "users": []}}"#
        )),
        &format!("{s}.users"),
        "ignored because `clients` is given",
    );
    warned(
        &vmess_in(&format!(
            r#"{{"clients": [{{"id": "{UUID}", "flow": "x"}}]}}"#
        )),
        &format!("{s}.clients[0].flow"),
        "unknown key",
    );
}

#[test]
fn vmess_outbound_forms_and_securities() {
    for (given, want) in [
        ("", VmessSecurity::Auto),
        (r#", "security": "auto""#, VmessSecurity::Auto),
        (r#", "security": "AES-128-GCM""#, VmessSecurity::Aes128Gcm),
        (
            r#", "security": "chacha20-poly1305""#,
            VmessSecurity::ChaCha20Poly1305,
        ),
        (r#", "security": "none""#, VmessSecurity::None),
        (r#", "security": "zero""#, VmessSecurity::Zero),
    ] {
        let plan = ok(&vmess_out(&vnext(&format!(
            r#"{{"id": "{UUID}", "alterId": 0{given}}}"#
        ))));
        let OutboundProtocol::Vmess(v) = &plan.outbounds[0].protocol else {
            panic!()
        };
        assert_eq!(v.security, want, "{given}");
        assert_eq!((v.address.as_str(), v.port), ("example.com", 443));
        assert_eq!(v.id, UUID_BYTES);
        assert!(matches!(
            plan.outbounds[0].stream.network,
            StreamNetwork::Ws(_)
        ));
    }
    let plan = ok(&vmess_out(&vnext(&format!(
        r#"{{"id": "{UUID}", "security": "chacha20-poly1305", "level": 3,
             "experiments": "AuthenticatedLength|NoTerminationSignal"}}"#
    ))));
    let OutboundProtocol::Vmess(v) = &plan.outbounds[0].protocol else {
        panic!()
    };
    assert!(v.authenticated_length && v.no_termination_signal);
    assert_eq!(v.level, 3);
    let text = plan.to_string();
    assert!(
        text.contains("vmess to example.com:443, id b831381d…, security chacha20-poly1305, authenticated length, no termination signal, level 3"),
        "{text}"
    );
    // Xray's flat form.
    let plan = ok(&vmess_out(&format!(
        r#"{{"address": "::1", "port": 8443, "id": "{UUID}", "security": "aes-128-gcm"}}"#
    )));
    let OutboundProtocol::Vmess(v) = &plan.outbounds[0].protocol else {
        panic!()
    };
    assert_eq!((v.address.as_str(), v.port), ("::1", 8443));
    assert_eq!(v.security, VmessSecurity::Aes128Gcm);
    assert!(plan.to_string().contains("vmess to [::1]:8443"));
}

#[test]
fn vmess_outbound_errors_and_warnings() {
    let s = "outbounds[0].settings";
    let user = format!(r#"{{"id": "{UUID}"}}"#);
    has_error(
        &vmess_out(&vnext(&format!(r#"{{"id": "{UUID}", "alterId": 1}}"#))),
        &format!("{s}.vnext[0].users[0].alterId"),
        "only VMess AEAD",
    );
    has_error(
        &vmess_out(&vnext(&format!(
            r#"{{"id": "{UUID}", "security": "aes-128-cfb"}}"#
        ))),
        &format!("{s}.vnext[0].users[0].security"),
        "unknown VMess security `aes-128-cfb`",
    );
    has_error(
        &vmess_out(&vnext(r#"{"security": "auto"}"#)),
        &format!("{s}.vnext[0].users[0].id"),
        "missing `id`",
    );
    has_error(&vmess_out("{}"), &format!("{s}.vnext"), "missing `vnext`");
    has_error(
        &vmess_out(r#"{"vnext": []}"#),
        &format!("{s}.vnext"),
        "a VMess outbound needs one server",
    );
    has_error(
        &vmess_out(&format!(
            r#"{{"vnext": [{{"address": "a", "port": 1, "users": [{user}]}}, {{"address": "b", "port": 2, "users": [{user}]}}]}}"#
        )),
        &format!("{s}.vnext[1]"),
        "exactly one server per VMess outbound",
    );
    has_error(
        &vmess_out(r#"{"vnext": [{"address": "a", "port": 1}]}"#),
        &format!("{s}.vnext[0].users"),
        "a VMess server entry needs one user",
    );
    has_error(
        &vmess_out(&format!(
            r#"{{"vnext": [{{"address": "a", "port": 1, "users": [{user}, {user}]}}]}}"#
        )),
        &format!("{s}.vnext[0].users[1]"),
        "exactly one user per VMess server",
    );
    has_error(
        &vmess_out(&format!(
            r#"{{"vnext": [{{"port": 1, "users": [{user}]}}]}}"#
        )),
        &format!("{s}.vnext[0].address"),
        "missing `address` of the VMess server",
    );
    has_error(
        &vmess_out(&format!(
            r#"{{"vnext": [{{"address": "a b", "port": 1, "users": [{user}]}}]}}"#
        )),
        &format!("{s}.vnext[0].address"),
        "not an IP address or domain name",
    );
    has_error(
        &vmess_out(&format!(
            r#"{{"vnext": [{{"address": "a", "port": 70000, "users": [{user}]}}]}}"#
        )),
        &format!("{s}.vnext[0].port"),
        "out of range",
    );
    has_error(
        &vmess_out(&format!(
            r#"{{"vnext": [{{"address": "a", "port": 1, "users": [{user}]}}], "address": "b"}}"#
        )),
        s,
        "not both",
    );
    has_error(
        &vmess_out(&format!(r#"{{"address": "a", "id": "{UUID}"}}"#)),
        &format!("{s}.port"),
        "missing `port` of the VMess server",
    );
    warned(
        &vmess_out(&vnext(&format!(
            r#"{{"id": "{UUID}", "experiments": "AuthenticatedLength|Bogus"}}"#
        ))),
        &format!("{s}.vnext[0].users[0].experiments"),
        "unknown VMess experiment `Bogus`",
    );
    warned(
        &vmess_out(&vnext(&format!(
            r#"{{"id": "{UUID}", "security": "none", "experiments": "AuthenticatedLength"}}"#
        ))),
        &format!("{s}.vnext[0].users[0].experiments"),
        "no effect",
    );
    warned(
        &vmess_out(&vnext(&format!(
            r#"{{"id": "{UUID}", "encryption": "none"}}"#
        ))),
        &format!("{s}.vnext[0].users[0].encryption"),
        "unknown key",
    );
}
