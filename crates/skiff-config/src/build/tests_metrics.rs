//! The `metrics` section.

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
fn listen_is_served() {
    let plan = ok(r#"{"metrics": {"listen": "127.0.0.1:11111"}}"#);
    assert_eq!(
        plan.metrics.expect("metrics").listen,
        "127.0.0.1:11111".parse::<SocketAddr>().unwrap()
    );
    assert!(ok("{}").metrics.is_none());
}

#[test]
fn a_tag_beside_listen_is_a_warning() {
    let d = diagnostics(r#"{"metrics": {"tag": "Metrics", "listen": "127.0.0.1:11111"}}"#);
    assert!(
        d.iter().any(|(p, m)| p == "metrics.tag"
            && m.contains("warning")
            && m.contains("not routable")),
        "{d:?}"
    );
}

#[test]
fn mistakes_are_named_by_path() {
    let d = diagnostics(r#"{"metrics": {"listen": "localhost:1"}}"#);
    assert!(
        d.iter()
            .any(|(p, m)| p == "metrics.listen" && m.contains("not an IP address")),
        "{d:?}"
    );
    let d = diagnostics(r#"{"metrics": {"tag": "Metrics"}}"#);
    assert!(
        d.iter()
            .any(|(p, m)| p == "metrics.tag" && m.contains("error") && m.contains("not supported")),
        "{d:?}"
    );
    let d = diagnostics(r#"{"metrics": {}}"#);
    assert!(
        d.iter()
            .any(|(p, m)| p == "metrics" && m.contains("needs `listen`")),
        "{d:?}"
    );
    let d = diagnostics(r#"{"metrics": {"listen": 5}}"#);
    assert!(d.iter().any(|(p, _)| p == "metrics.listen"), "{d:?}");
}
