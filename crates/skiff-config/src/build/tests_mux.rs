//! An outbound's `mux` object: built into the plan with Xray's defaults, bad values named by
//! their JSON path.

use super::tests_vless::{UUID, has_error, ok};
use crate::{MuxPlan, Udp443Plan};

fn vless_out(mux: &str) -> String {
    format!(
        r#"{{"outbounds": [{{"protocol": "vless", "settings": {{"vnext": [{{"address": "example.com", "port": 443, "users": [{{"id": "{UUID}", "encryption": "none"}}]}}]}}, "mux": {mux}}}]}}"#
    )
}

#[test]
fn mux_is_built_with_xrays_defaults() {
    let plan = ok(&vless_out(r#"{"enabled": true}"#));
    assert_eq!(
        plan.outbounds[0].mux,
        Some(MuxPlan {
            concurrency: 0,
            xudp_concurrency: 0,
            xudp_proxy_udp443: Udp443Plan::Reject,
        })
    );
    let plan = ok(&vless_out(
        r#"{"enabled": true, "concurrency": -1, "xudpConcurrency": 16, "xudpProxyUDP443": "skip"}"#,
    ));
    assert_eq!(
        plan.outbounds[0].mux,
        Some(MuxPlan {
            concurrency: -1,
            xudp_concurrency: 16,
            xudp_proxy_udp443: Udp443Plan::Skip,
        })
    );
    // Disabled (or absent): no mux, whatever the numbers say.
    let plan = ok(&vless_out(r#"{"enabled": false, "concurrency": 4}"#));
    assert_eq!(plan.outbounds[0].mux, None);
}

#[test]
fn bad_mux_values_are_errors_at_their_path() {
    has_error(
        &vless_out(r#"{"enabled": true, "concurrency": 4096}"#),
        "outbounds[0].mux.concurrency",
        "at most 1024",
    );
    has_error(
        &vless_out(r#"{"enabled": true, "xudpConcurrency": 2000}"#),
        "outbounds[0].mux.xudpConcurrency",
        "at most 1024",
    );
    has_error(
        &vless_out(r#"{"enabled": true, "xudpProxyUDP443": "maybe"}"#),
        "outbounds[0].mux.xudpProxyUDP443",
        "reject",
    );
}
