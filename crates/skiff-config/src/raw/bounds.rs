//! Serde mirrors of Xray's inbound and outbound objects (the parts around the protocol:
//! `settings` stays a raw value until the protocol is known, see [`super::settings`]).

use serde::Deserialize;
use serde_json::{Map, Value};

use super::values::PortSpec;

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawInbound {
    pub tag: Option<String>,
    pub listen: Option<String>,
    pub port: Option<PortSpec>,
    pub protocol: Option<String>,
    pub settings: Option<Value>,
    pub stream_settings: Option<RawStream>,
    pub sniffing: Option<RawSniffing>,
    pub allocate: Option<RawAllocate>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawSniffing {
    pub enabled: Option<bool>,
    #[allow(
        dead_code,
        reason = "an accepted Xray key: declared so it is not reported as unknown"
    )]
    pub dest_override: Option<Vec<String>>,
    #[allow(
        dead_code,
        reason = "an accepted Xray key: declared so it is not reported as unknown"
    )]
    pub metadata_only: Option<bool>,
    #[allow(
        dead_code,
        reason = "an accepted Xray key: declared so it is not reported as unknown"
    )]
    pub domains_excluded: Option<Vec<String>>,
    #[allow(
        dead_code,
        reason = "an accepted Xray key: declared so it is not reported as unknown"
    )]
    pub route_only: Option<bool>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawAllocate {
    pub strategy: Option<String>,
    #[allow(
        dead_code,
        reason = "an accepted Xray key: declared so it is not reported as unknown"
    )]
    pub refresh: Option<i64>,
    #[allow(
        dead_code,
        reason = "an accepted Xray key: declared so it is not reported as unknown"
    )]
    pub concurrency: Option<i64>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawOutbound {
    pub tag: Option<String>,
    pub protocol: Option<String>,
    pub settings: Option<Value>,
    pub stream_settings: Option<RawStream>,
    pub proxy_settings: Option<RawProxySettings>,
    pub mux: Option<RawMux>,
    pub send_through: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawProxySettings {
    pub tag: Option<String>,
    /// Xray's switch between "dial through" and "tunnel the transport through"; with only raw
    /// TCP both mean the same, so it is accepted.
    #[allow(
        dead_code,
        reason = "an accepted Xray key: declared so it is not reported as unknown"
    )]
    pub transport_layer: Option<bool>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawMux {
    pub enabled: Option<bool>,
    #[allow(
        dead_code,
        reason = "an accepted Xray key: declared so it is not reported as unknown"
    )]
    pub concurrency: Option<i64>,
    #[allow(
        dead_code,
        reason = "an accepted Xray key: declared so it is not reported as unknown"
    )]
    pub xudp_concurrency: Option<i64>,
    #[serde(rename = "xudpProxyUDP443")]
    #[allow(
        dead_code,
        reason = "an accepted Xray key: declared so it is not reported as unknown"
    )]
    pub xudp_proxy_udp443: Option<String>,
}

/// `streamSettings`. The settings objects of other transports and security layers are
/// accepted as raw values: Xray ignores those that `network`/`security` do not select, so a
/// config carrying an unused `wsSettings` is valid there and must stay valid here.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawStream {
    pub network: Option<String>,
    pub security: Option<String>,
    pub raw_settings: Option<RawTcpSettings>,
    pub tcp_settings: Option<RawTcpSettings>,
    pub sockopt: Option<Map<String, Value>>,
    #[allow(
        dead_code,
        reason = "an accepted Xray key: declared so it is not reported as unknown"
    )]
    pub tls_settings: Option<Value>,
    #[allow(
        dead_code,
        reason = "an accepted Xray key: declared so it is not reported as unknown"
    )]
    pub reality_settings: Option<Value>,
    #[allow(
        dead_code,
        reason = "an accepted Xray key: declared so it is not reported as unknown"
    )]
    pub ws_settings: Option<Value>,
    #[allow(
        dead_code,
        reason = "an accepted Xray key: declared so it is not reported as unknown"
    )]
    pub kcp_settings: Option<Value>,
    #[allow(
        dead_code,
        reason = "an accepted Xray key: declared so it is not reported as unknown"
    )]
    pub grpc_settings: Option<Value>,
    #[allow(
        dead_code,
        reason = "an accepted Xray key: declared so it is not reported as unknown"
    )]
    pub httpupgrade_settings: Option<Value>,
    #[allow(
        dead_code,
        reason = "an accepted Xray key: declared so it is not reported as unknown"
    )]
    pub xhttp_settings: Option<Value>,
    #[allow(
        dead_code,
        reason = "an accepted Xray key: declared so it is not reported as unknown"
    )]
    pub splithttp_settings: Option<Value>,
    #[allow(
        dead_code,
        reason = "an accepted Xray key: declared so it is not reported as unknown"
    )]
    pub http_settings: Option<Value>,
    #[allow(
        dead_code,
        reason = "an accepted Xray key: declared so it is not reported as unknown"
    )]
    pub quic_settings: Option<Value>,
    #[allow(
        dead_code,
        reason = "an accepted Xray key: declared so it is not reported as unknown"
    )]
    pub ds_settings: Option<Value>,
}

/// `rawSettings` / `tcpSettings` (the old name).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawTcpSettings {
    pub header: Option<RawHeader>,
    pub accept_proxy_protocol: Option<bool>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct RawHeader {
    #[serde(rename = "type")]
    pub kind: Option<String>,
    #[allow(
        dead_code,
        reason = "an accepted Xray key: declared so it is not reported as unknown"
    )]
    pub request: Option<Value>,
    #[allow(
        dead_code,
        reason = "an accepted Xray key: declared so it is not reported as unknown"
    )]
    pub response: Option<Value>,
}
