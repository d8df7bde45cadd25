//! Shadowsocks inbound and outbound settings: build-step tests through the public entry point.

use crate::{
    Diagnostic, InboundProtocol, OutboundProtocol, Plan, Severity, ShadowsocksMethod, Source,
    load_sources,
};

const PSK16: &str = "AAECAwQFBgcICQoLDA0ODw==";
const PSK16_B: &str = "EBESExQVFhcYGRobHB0eHw==";
const PSK32: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

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

fn ss_in(settings: &str) -> String {
    format!(
        r#"{{"inbounds": [{{"port": 8388, "protocol": "shadowsocks", "settings": {settings}}}]}}"#
    )
}

fn ss_out(settings: &str) -> String {
    format!(
        r#"{{"outbounds": [{{"tag": "ss", "protocol": "shadowsocks", "settings": {settings}}}]}}"#
    )
}

fn inbound(plan: &Plan) -> &crate::ShadowsocksInbound {
    match &plan.inbounds[0].protocol {
        InboundProtocol::Shadowsocks(ss) => ss,
        other => panic!("not shadowsocks: {other:?}"),
    }
}

fn outbound(plan: &Plan) -> &crate::ShadowsocksOutbound {
    match &plan.outbounds[0].protocol {
        OutboundProtocol::Shadowsocks(ss) => ss,
        other => panic!("not shadowsocks: {other:?}"),
    }
}

#[test]
fn single_user_aead_inbound() {
    let plan = ok(&ss_in(
        r#"{"method": "AES-128-GCM", "password": "test", "email": "a@x", "level": 1, "network": "tcp,udp"}"#,
    ));
    let ss = inbound(&plan);
    assert_eq!(ss.users.len(), 1);
    assert_eq!(ss.users[0].method, ShadowsocksMethod::Aes128Gcm);
    // EVP_BytesToKey("test", 16) = MD5("test").
    assert_eq!(ss.users[0].key.0[..4], [0x09, 0x8f, 0x6b, 0xcd]);
    assert_eq!(ss.users[0].email.as_deref(), Some("a@x"));
    assert_eq!(ss.users[0].level, 1);
    assert!(ss.network.tcp && ss.network.udp);
    assert!(ss.identity_key.is_none());
    // Xray's default network is tcp only; keys never show in Debug or the summary.
    let plan = ok(&ss_in(
        r#"{"method": "chacha20-poly1305", "password": "secretpw"}"#,
    ));
    assert!(inbound(&plan).network.tcp && !inbound(&plan).network.udp);
    assert!(!format!("{plan:?}").contains("secretpw"));
    assert!(plan.to_string().contains("shadowsocks"));
}

#[test]
fn multi_user_aead_inbound_each_with_its_method() {
    let plan = ok(&ss_in(
        r#"{"clients": [
              {"method": "aes-256-gcm", "password": "one", "email": "one@x"},
              {"method": "xchacha20-ietf-poly1305", "password": "two", "email": "two@x", "level": 3}
            ], "network": ["tcp", "udp"]}"#,
    ));
    let ss = inbound(&plan);
    assert_eq!(ss.users.len(), 2);
    assert_eq!(ss.users[1].method, ShadowsocksMethod::XChaCha20Poly1305);
    assert_eq!(ss.users[1].level, 3);
    // `users` is the same list; a top-level method is every client's default.
    let plan = ok(&ss_in(
        r#"{"method": "aes-128-gcm", "users": [{"password": "a"}, {"password": "b", "method": "aes-256-gcm"}]}"#,
    ));
    let ss = inbound(&plan);
    assert_eq!(ss.users[0].method, ShadowsocksMethod::Aes128Gcm);
    assert_eq!(ss.users[1].method, ShadowsocksMethod::Aes256Gcm);
    has_error(
        &ss_in(r#"{"clients": [{"password": "a"}]}"#),
        "inbounds[0].settings.clients[0].method",
        "missing `method`",
    );
    has_error(
        &ss_in(
            r#"{"clients": [{"method": "aes-128-gcm", "password": "a", "email": "x"}, {"method": "aes-128-gcm", "password": "b", "email": "X"}]}"#,
        ),
        "inbounds[0].settings.clients[1].email",
        "already has the email",
    );
    has_error(
        &ss_in(r#"{"clients": [{"method": "aes-128-gcm"}]}"#),
        "inbounds[0].settings.clients[0].password",
        "missing `password`",
    );
}

#[test]
fn insecure_and_plain_methods_are_refused_with_the_reason() {
    for legacy in [
        "aes-256-cfb",
        "rc4-md5",
        "chacha20",
        "aes-128-ctr",
        "salsa20",
        "bf-cfb",
    ] {
        has_error(
            &ss_in(&format!(r#"{{"method": "{legacy}", "password": "p"}}"#)),
            "inbounds[0].settings.method",
            "insecure and unsupported",
        );
        has_error(
            &ss_out(&format!(
                r#"{{"servers": [{{"address": "1.2.3.4", "port": 1, "method": "{legacy}", "password": "p"}}]}}"#
            )),
            "outbounds[0].settings.servers[0].method",
            "insecure and unsupported",
        );
    }
    for none in ["none", "plain"] {
        has_error(
            &ss_in(&format!(r#"{{"method": "{none}", "password": "p"}}"#)),
            "inbounds[0].settings.method",
            "no encryption",
        );
    }
    has_error(
        &ss_in(r#"{"method": "aes-192-gcm", "password": "p"}"#),
        "inbounds[0].settings.method",
        "unknown method",
    );
    has_error(
        &ss_in(r#"{"password": "p"}"#),
        "inbounds[0].settings.method",
        "missing `method`",
    );
    has_error(
        &ss_in(r#"{"clients": [{"method": "rc4-md5", "password": "p"}]}"#),
        "inbounds[0].settings.clients[0].method",
        "insecure",
    );
}

#[test]
fn inbound_2022_keys_single_and_multi_user() {
    let plan = ok(&ss_in(&format!(
        r#"{{"method": "2022-blake3-aes-128-gcm", "password": "{PSK16}", "network": "tcp,udp"}}"#
    )));
    let ss = inbound(&plan);
    assert_eq!(ss.users[0].key.0, (0..16).collect::<Vec<u8>>());
    assert!(ss.identity_key.is_none());
    let plan = ok(&ss_in(&format!(
        r#"{{"method": "2022-blake3-chacha20-poly1305", "password": "{PSK32}"}}"#
    )));
    assert_eq!(inbound(&plan).users[0].key.0.len(), 32);
    has_error(
        &ss_in(&format!(
            r#"{{"method": "2022-blake3-aes-256-gcm", "password": "{PSK16}"}}"#
        )),
        "inbounds[0].settings.password",
        "exactly 32",
    );
    has_error(
        &ss_in(r#"{"method": "2022-blake3-aes-128-gcm", "password": "a password"}"#),
        "inbounds[0].settings.password",
        "base64",
    );
    // Multi-user: the server key, and a key per user (identity headers).
    let plan = ok(&ss_in(&format!(
        r#"{{"method": "2022-blake3-aes-128-gcm", "password": "{PSK16}",
             "clients": [{{"password": "{PSK16_B}", "email": "u@x"}}]}}"#
    )));
    let ss = inbound(&plan);
    assert_eq!(
        ss.identity_key.as_ref().unwrap().0,
        (0..16).collect::<Vec<u8>>()
    );
    assert_eq!(ss.users[0].key.0, (16..32).collect::<Vec<u8>>());
    assert_eq!(ss.users[0].method, ShadowsocksMethod::Blake3Aes128Gcm);
    has_error(
        &ss_in(&format!(
            r#"{{"method": "2022-blake3-chacha20-poly1305", "password": "{PSK32}", "clients": [{{"password": "{PSK32}"}}]}}"#
        )),
        "inbounds[0].settings.method",
        "one user only",
    );
    has_error(
        &ss_in(&format!(
            r#"{{"method": "2022-blake3-aes-128-gcm", "password": "{PSK16}", "clients": [{{"method": "aes-128-gcm", "password": "{PSK16_B}"}}]}}"#
        )),
        "inbounds[0].settings.clients[0].method",
        "leave `method` out",
    );
    has_error(
        &ss_in(&format!(
            r#"{{"method": "2022-blake3-aes-128-gcm", "password": "{PSK16}", "clients": [{{"password": "{PSK16_B}", "address": "1.2.3.4", "port": 1}}]}}"#
        )),
        "inbounds[0].settings.clients[0].address",
        "relay",
    );
    has_error(
        &ss_in(&format!(
            r#"{{"clients": [{{"method": "2022-blake3-aes-128-gcm", "password": "{PSK16}"}}]}}"#
        )),
        "inbounds[0].settings.clients[0].method",
        "2022 multi-user servers set the method in settings",
    );
    has_error(
        &ss_in(r#"{"method": "aes-128-gcm", "password": "p", "network": "icmp"}"#),
        "inbounds[0].settings.network",
        "icmp",
    );
}

#[test]
fn outbound_servers_and_flat_form() {
    let plan = ok(&ss_out(
        r#"{"servers": [{"address": "example.com", "port": 8388, "method": "chacha20-ietf-poly1305", "password": "pw", "level": 2}]}"#,
    ));
    let ss = outbound(&plan);
    assert_eq!((ss.address.as_str(), ss.port), ("example.com", 8388));
    assert_eq!(ss.method, ShadowsocksMethod::ChaCha20Poly1305);
    assert_eq!(ss.key.0.len(), 32);
    assert_eq!(ss.level, 2);
    let plan = ok(&ss_out(
        r#"{"address": "[::1]", "port": 1, "method": "aes-128-gcm", "password": "pw"}"#,
    ));
    assert_eq!(outbound(&plan).address, "::1");
    // 2022 with identity keys: iPSK:uPSK.
    let plan = ok(&ss_out(&format!(
        r#"{{"servers": [{{"address": "1.2.3.4", "port": 1, "method": "2022-blake3-aes-128-gcm", "password": "{PSK16}:{PSK16_B}"}}]}}"#
    )));
    let ss = outbound(&plan);
    assert_eq!(ss.identity_keys.len(), 1);
    assert_eq!(ss.key.0, (16..32).collect::<Vec<u8>>());
    has_error(
        &ss_out(&format!(
            r#"{{"servers": [{{"address": "1.2.3.4", "port": 1, "method": "2022-blake3-chacha20-poly1305", "password": "{PSK32}:{PSK32}"}}]}}"#
        )),
        "outbounds[0].settings.servers[0].password",
        "2022-blake3-aes",
    );
    has_error(
        &ss_out(
            r#"{"servers": [{"address": "1.2.3.4", "port": 1, "method": "aes-128-gcm", "password": "a"}, {"address": "1.2.3.5", "port": 1, "method": "aes-128-gcm", "password": "a"}]}"#,
        ),
        "outbounds[0].settings.servers[1]",
        "exactly one",
    );
    has_error(
        &ss_out(r#"{"servers": []}"#),
        "outbounds[0].settings.servers",
        "empty",
    );
    has_error(
        &ss_out("{}"),
        "outbounds[0].settings.servers",
        "missing `servers`",
    );
    has_error(
        &ss_out(r#"{"servers": [{"address": "bad host!", "port": 0, "method": "aes-128-gcm"}]}"#),
        "outbounds[0].settings.servers[0].address",
        "not an IP address",
    );
    has_error(
        &ss_out(
            r#"{"servers": [{"address": "a.b", "port": 0, "method": "aes-128-gcm", "password": "x"}]}"#,
        ),
        "outbounds[0].settings.servers[0].port",
        "out of range",
    );
    has_error(
        &ss_out(r#"{"servers": [{"address": "a.b", "port": 1, "method": "aes-128-gcm"}]}"#),
        "outbounds[0].settings.servers[0].password",
        "missing `password`",
    );
    has_error(
        &ss_out(r#"{"servers": [], "address": "a.b"}"#),
        "outbounds[0].settings",
        "not both",
    );
}

#[test]
fn unknown_keys_warn_with_their_path() {
    let (_, warnings) = load(&ss_in(
        r#"{"method": "aes-128-gcm", "password": "p", "ivCheck": true}"#,
    ))
    .unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w.path == "inbounds[0].settings.ivCheck"),
        "{warnings:#?}"
    );
}

#[test]
fn udp_ignores_stream_settings_with_a_warning() {
    let (_, warnings) = load(
        r#"{"inbounds": [{"port": 1, "protocol": "shadowsocks",
             "settings": {"method": "aes-128-gcm", "password": "p", "network": "tcp,udp"},
             "streamSettings": {"network": "ws"}}]}"#,
    )
    .unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w.path == "inbounds[0].streamSettings" && w.message.contains("UDP")),
        "{warnings:#?}"
    );
}
