//! Serde mirrors of Xray's `log`, `routing`, `policy` and `stats` objects. Every field is
//! optional here: "missing" is decided (with a good message) in the build step, not by serde.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::values::{Int, PortSpec, StringList};

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawLog {
    pub loglevel: Option<String>,
    pub access: Option<String>,
    pub error: Option<String>,
    /// Accepted: skiff has no DNS module whose queries could be logged.
    #[allow(
        dead_code,
        reason = "an accepted Xray key: declared so it is not reported as unknown"
    )]
    pub dns_log: Option<bool>,
    /// Accepted: addresses are not masked yet (a warning says so when it is set).
    pub mask_address: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawRouting {
    pub domain_strategy: Option<String>,
    pub domain_matcher: Option<String>,
    /// Kept raw so that one broken rule does not hide the others: each rule is decoded on its
    /// own in the build step, with its own path.
    pub rules: Option<Vec<Value>>,
    pub balancers: Option<Vec<Value>>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawRule {
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub domain_matcher: Option<String>,
    pub domain: Option<StringList>,
    pub ip: Option<StringList>,
    pub port: Option<PortSpec>,
    pub source_port: Option<PortSpec>,
    pub network: Option<StringList>,
    pub source: Option<StringList>,
    /// Xray's newer spelling of `source`.
    #[serde(rename = "sourceIP")]
    pub source_ip: Option<StringList>,
    pub user: Option<StringList>,
    pub inbound_tag: Option<StringList>,
    pub protocol: Option<StringList>,
    pub attrs: Option<Value>,
    pub outbound_tag: Option<String>,
    pub balancer_tag: Option<String>,
    /// A name for logs.
    pub rule_tag: Option<String>,
    // Known Xray conditions skiff cannot evaluate yet: errors, never silently dropped (dropping
    // a condition would make the rule match more than the user asked for).
    #[serde(rename = "localIP")]
    pub local_ip: Option<Value>,
    pub local_port: Option<Value>,
    pub vless_route: Option<Value>,
    pub process: Option<Value>,
}

/// One `routing.balancers` entry.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawBalancer {
    pub tag: Option<String>,
    pub selector: Option<StringList>,
    pub strategy: Option<RawStrategy>,
    pub fallback_tag: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct RawStrategy {
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// leastPing/leastLoad tuning; those strategies are refused, so it is never read.
    #[allow(
        dead_code,
        reason = "an accepted Xray key: declared so it is not reported as unknown"
    )]
    pub settings: Option<Value>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawPolicy {
    /// Keyed by the level number written as a string, as in Xray.
    pub levels: Option<BTreeMap<String, RawLevel>>,
    pub system: Option<RawSystem>,
}

/// Times are whole seconds (uint32 in Xray). Any integer is accepted here so that a negative
/// or too large value gets a message of ours that names the range, not serde's.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawLevel {
    pub handshake: Option<Int>,
    pub conn_idle: Option<Int>,
    pub uplink_only: Option<Int>,
    pub downlink_only: Option<Int>,
    pub stats_user_uplink: Option<bool>,
    pub stats_user_downlink: Option<bool>,
    #[allow(
        dead_code,
        reason = "an accepted Xray key: declared so it is not reported as unknown"
    )]
    pub stats_user_online: Option<bool>,
    pub buffer_size: Option<Int>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawSystem {
    pub stats_inbound_uplink: Option<bool>,
    pub stats_inbound_downlink: Option<bool>,
    pub stats_outbound_uplink: Option<bool>,
    pub stats_outbound_downlink: Option<bool>,
}

/// Xray's `stats` is an empty object that switches counting on; skiff always counts, so it is
/// accepted and has no fields (any key in it gets the unknown-key warning).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct RawStats {}

/// Xray's `api`: the gRPC API's services, reached on `listen` or through an inbound routed
/// to `tag` (Xray's older form).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawApi {
    pub tag: Option<String>,
    pub listen: Option<String>,
    pub services: Option<Vec<String>>,
}

/// Xray's `metrics`: the Prometheus and expvar endpoint, served on `listen` (or, in Xray,
/// through an inbound routed to `tag`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawMetrics {
    pub tag: Option<String>,
    pub listen: Option<String>,
}
