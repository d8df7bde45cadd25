//! Serde mirrors of Xray's inbound and outbound objects (the parts around the protocol:
//! `settings` stays a raw value until the protocol is known, see [`super::settings`]).

use serde::Deserialize;
use serde_json::{Map, Value};

use super::values::{Int, PortSpec, StringList};

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
    pub dest_override: Option<Vec<String>>,
    pub metadata_only: Option<bool>,
    pub domains_excluded: Option<Vec<String>>,
    pub ips_excluded: Option<Vec<String>>,
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
    pub refresh: Option<Int>,
    #[allow(
        dead_code,
        reason = "an accepted Xray key: declared so it is not reported as unknown"
    )]
    pub concurrency: Option<Int>,
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
    pub concurrency: Option<Int>,
    pub xudp_concurrency: Option<Int>,
    #[serde(rename = "xudpProxyUDP443")]
    pub xudp_proxy_udp443: Option<String>,
}

/// `streamSettings`. The settings objects of other transports and security layers are
/// accepted as raw values: Xray ignores those that `network`/`security` do not select, so a
/// config carrying an unused `wsSettings` is valid there and must stay valid here.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawStream {
    /// Read only inside `xhttpSettings.downloadSettings` (the server downloads come from);
    /// Xray ignores both elsewhere.
    pub address: Option<String>,
    pub port: Option<u16>,
    pub network: Option<String>,
    pub security: Option<String>,
    pub raw_settings: Option<RawTcpSettings>,
    pub tcp_settings: Option<RawTcpSettings>,
    pub sockopt: Option<Map<String, Value>>,
    /// Decoded only when `security`/`network` selects it (Xray ignores the others).
    pub tls_settings: Option<Value>,
    /// Decoded only when `security` is "reality".
    pub reality_settings: Option<Value>,
    /// Decoded only when `security`/`network` selects it (Xray ignores the others).
    pub ws_settings: Option<Value>,
    /// Decoded only when `network` is "kcp"/"mkcp".
    pub kcp_settings: Option<Value>,
    /// Decoded only when `network` is "kcptun" (Skiff's own transport name).
    pub kcptun_settings: Option<Value>,
    /// Skiff's own key (Xray has none): udp2raw under a UDP transport.
    pub udp2raw_settings: Option<Value>,
    /// Decoded only when `network` is "grpc"/"gun".
    pub grpc_settings: Option<Value>,
    /// Decoded only when `network` is "httpupgrade".
    pub httpupgrade_settings: Option<Value>,
    /// Decoded only when `network` is "xhttp"/"splithttp".
    pub xhttp_settings: Option<Value>,
    /// Xray's older name of `xhttpSettings`.
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
    /// Decoded only when `type` is "http".
    pub request: Option<Value>,
    /// Decoded only when `type` is "http".
    pub response: Option<Value>,
}

/// `header.request` of an HTTP header (Xray's `AuthenticatorRequest`).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct RawHttpRequest {
    pub version: Option<String>,
    pub method: Option<String>,
    /// A string list: an array of strings, or one string split at commas.
    pub path: Option<StringList>,
    pub headers: Option<Map<String, Value>>,
}

/// `header.response` of an HTTP header (Xray's `AuthenticatorResponse`).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct RawHttpResponse {
    pub version: Option<String>,
    pub status: Option<String>,
    pub reason: Option<String>,
    pub headers: Option<Map<String, Value>>,
}

/// `kcpSettings` (V2Ray 4.34's keys). Capacities and buffer sizes are in MB, as in V2Ray.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawKcpSettings {
    pub mtu: Option<Int>,
    pub tti: Option<Int>,
    pub uplink_capacity: Option<Int>,
    pub downlink_capacity: Option<Int>,
    pub congestion: Option<bool>,
    pub read_buffer_size: Option<Int>,
    pub write_buffer_size: Option<Int>,
    pub header: Option<RawKcpHeader>,
    pub seed: Option<String>,
}

/// `kcpSettings.header`.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct RawKcpHeader {
    #[serde(rename = "type")]
    pub kind: Option<String>,
}

/// `wsSettings`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawWsSettings {
    pub path: Option<String>,
    pub host: Option<String>,
    pub headers: Option<Map<String, Value>>,
    pub accept_proxy_protocol: Option<bool>,
    pub heartbeat_period: Option<Int>,
}

/// `httpupgradeSettings`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawHttpUpgradeSettings {
    pub path: Option<String>,
    pub host: Option<String>,
    pub headers: Option<Map<String, Value>>,
    pub accept_proxy_protocol: Option<bool>,
}

/// `tlsSettings`. Keys skiff does not implement are declared as raw values so they get a
/// precise message instead of "unknown key".
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawTlsSettings {
    pub server_name: Option<String>,
    pub alpn: Option<StringList>,
    pub min_version: Option<String>,
    pub max_version: Option<String>,
    pub allow_insecure: Option<bool>,
    pub pinned_peer_cert_sha256: Option<StringList>,
    pub reject_unknown_sni: Option<bool>,
    pub certificates: Option<Vec<RawCertificate>>,
    pub fingerprint: Option<String>,
    pub cipher_suites: Option<Value>,
    pub curve_preferences: Option<Value>,
    pub enable_session_resumption: Option<Value>,
    pub disable_system_root: Option<Value>,
    pub master_key_log: Option<Value>,
    pub pinned_peer_certificate_chain_sha256: Option<Value>,
    pub pinned_peer_certificate_public_key_sha256: Option<Value>,
    pub verify_peer_cert_in_names: Option<Value>,
    pub verify_peer_cert_by_name: Option<Value>,
    pub ech_config_list: Option<Value>,
    pub ech_server_keys: Option<Value>,
    pub ech_force_query: Option<Value>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawCertificate {
    pub certificate_file: Option<String>,
    pub key_file: Option<String>,
    /// A string or an array of lines: checked by hand.
    pub certificate: Option<Value>,
    pub key: Option<Value>,
    pub usage: Option<String>,
    #[allow(
        dead_code,
        reason = "an accepted Xray key: declared so it is not reported as unknown"
    )]
    pub ocsp_stapling: Option<Value>,
    #[allow(
        dead_code,
        reason = "an accepted Xray key: declared so it is not reported as unknown"
    )]
    pub one_time_loading: Option<Value>,
    pub build_chain: Option<Value>,
}
