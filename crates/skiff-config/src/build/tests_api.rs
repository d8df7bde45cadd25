//! The `api` section.

use std::net::SocketAddr;

use super::tests_vless::ok;
use crate::Source;
use crate::load_sources;

fn diagnostics(text: &str) -> Vec<(String, String)> {
    let result = load_sources(&[Source {
        name: "t.json".into(),
        text: text.into(),
    }]);
    let list = match result {
        Ok(loaded) => loaded.warnings,
        Err(errors) => errors,
    };
    list.into_iter()
        .map(|d| (d.path.clone(), d.to_string()))
        .collect()
}

#[test]
fn listen_form() {
    let plan = ok(
        r#"{"api": {"tag": "api", "listen": "127.0.0.1:10085", "services": ["StatsService", "LoggerService"]}}"#,
    );
    let api = plan.api.expect("api");
    assert_eq!(
        api.listen,
        Some("127.0.0.1:10085".parse::<SocketAddr>().unwrap())
    );
    assert_eq!(api.services, ["StatsService", "LoggerService"]);
}

#[test]
fn tag_form_makes_the_tag_routable() {
    let plan = ok(r#"{
        "api": {"tag": "api", "services": ["StatsService"]},
        "inbounds": [{"tag": "api-in", "listen": "127.0.0.1", "port": 10085,
            "protocol": "dokodemo-door", "settings": {"address": "127.0.0.1"}}],
        "routing": {"rules": [{"inboundTag": ["api-in"], "outboundTag": "api"}]}
    }"#);
    assert_eq!(plan.api.unwrap().tag.as_deref(), Some("api"));
}

#[test]
fn mistakes_are_named_by_path() {
    let d = diagnostics(r#"{"api": {"listen": "localhost:1"}}"#);
    assert!(
        d.iter()
            .any(|(p, m)| p == "api.listen" && m.contains("not an IP address")),
        "{d:?}"
    );
    let d = diagnostics(r#"{"api": {"services": ["StatsService"]}}"#);
    assert!(
        d.iter()
            .any(|(p, m)| p == "api" && m.contains("needs `listen`")),
        "{d:?}"
    );
    let d = diagnostics(r#"{"api": {"tag": "api", "services": ["StatService"]}}"#);
    assert!(
        d.iter()
            .any(|(p, m)| p == "api.services[0]" && m.contains("unknown API service")),
        "{d:?}"
    );
    // Panels list every service Xray has: those skiff lacks are a warning, not a refusal.
    let d = diagnostics(
        r#"{"api": {"tag": "api", "services": ["ObservatoryService", "StatsService"]}}"#,
    );
    assert!(
        d.iter().any(|(p, m)| p == "api.services[0]"
            && m.contains("warning")
            && m.contains("ObservatoryService")),
        "{d:?}"
    );
}
