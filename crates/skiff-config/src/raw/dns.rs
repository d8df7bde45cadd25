//! Serde mirror of Xray's `dns` object. Hosts and servers are kept raw so each entry is
//! decoded (and its mistakes reported) at its own path in the build step.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::values::{Int, StringList};

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawDns {
    pub hosts: Option<Map<String, Value>>,
    pub servers: Option<Vec<Value>>,
    pub client_ip: Option<String>,
    pub tag: Option<String>,
    pub query_strategy: Option<String>,
    pub disable_cache: Option<bool>,
    pub disable_fallback: Option<bool>,
    pub disable_fallback_if_match: Option<bool>,
    // Xray keys skiff does not act on; the build step says so for each one set.
    pub serve_stale: Option<Value>,
    #[serde(rename = "serveExpiredTTL")]
    pub serve_expired_ttl: Option<Value>,
    pub enable_parallel_query: Option<Value>,
    pub use_system_hosts: Option<Value>,
}

/// One `servers` entry written as an object.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawNameServer {
    pub address: Option<String>,
    pub port: Option<Int>,
    pub domains: Option<StringList>,
    #[serde(rename = "expectIPs")]
    pub expect_ips: Option<StringList>,
    /// Xray's newer spelling; it wins when both are set, as in Xray.
    #[serde(rename = "expectedIPs")]
    pub expected_ips: Option<StringList>,
    #[serde(rename = "unexpectedIPs")]
    pub unexpected_ips: Option<StringList>,
    pub skip_fallback: Option<bool>,
    pub query_strategy: Option<String>,
    pub client_ip: Option<String>,
    pub tag: Option<String>,
    pub timeout_ms: Option<Int>,
    pub disable_cache: Option<bool>,
    pub final_query: Option<bool>,
    pub serve_stale: Option<Value>,
    #[serde(rename = "serveExpiredTTL")]
    pub serve_expired_ttl: Option<Value>,
}
