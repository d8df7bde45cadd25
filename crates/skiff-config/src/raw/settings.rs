//! Serde mirrors of each supported protocol's `settings` object. They are decoded only once
//! the protocol name is known, starting from the raw `settings` value and keeping its path as
//! prefix, so a type error reads `inbounds[0].settings.udp`, not just `udp`.

use serde::Deserialize;
use serde_json::Value;

use super::values::{Int, PortSpec, StringList};

/// A user of socks/http password authentication.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct RawAccount {
    pub user: Option<String>,
    pub pass: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SocksSettings {
    pub auth: Option<String>,
    pub accounts: Option<Vec<RawAccount>>,
    /// Newer Xray documents the same list as `users`; both are read.
    pub users: Option<Vec<RawAccount>>,
    pub udp: Option<bool>,
    pub ip: Option<String>,
    pub user_level: Option<Int>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpSettings {
    pub accounts: Option<Vec<RawAccount>>,
    pub users: Option<Vec<RawAccount>>,
    pub allow_transparent: Option<bool>,
    pub user_level: Option<Int>,
    /// Deprecated in Xray (policy `connIdle` replaces it): accepted with a warning.
    pub timeout: Option<Value>,
}

/// dokodemo-door / tunnel. Xray reads both the old names (`address`, `port`, `network`) and
/// the new ones (`rewriteAddress`, `rewritePort`, `allowedNetwork`); the old ones win when
/// both are present, as in Xray.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TunnelSettings {
    pub address: Option<String>,
    pub rewrite_address: Option<String>,
    pub port: Option<Int>,
    pub rewrite_port: Option<Int>,
    pub network: Option<StringList>,
    pub allowed_network: Option<StringList>,
    pub port_map: Option<Value>,
    pub follow_redirect: Option<bool>,
    pub user_level: Option<Int>,
    pub timeout: Option<Value>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FreedomSettings {
    pub domain_strategy: Option<String>,
    pub redirect: Option<String>,
    /// Accepted; the freedom plan has no level of its own (the inbound's level applies).
    pub user_level: Option<Int>,
    pub fragment: Option<Value>,
    pub noises: Option<Value>,
    pub proxy_protocol: Option<Int>,
    pub final_rules: Option<Vec<RawFinalRule>>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct RawFinalRule {
    pub action: Option<String>,
    pub network: Option<StringList>,
    pub port: Option<PortSpec>,
    pub ip: Option<StringList>,
}

/// The `dns` outbound. Xray reads `network`/`address`/`port` and their older `rewrite*`
/// names (the short ones win), the newer `rules`, and the legacy `nonIPQuery`/`blockTypes`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DnsOutboundSettings {
    pub network: Option<String>,
    pub rewrite_network: Option<String>,
    pub address: Option<String>,
    pub rewrite_address: Option<String>,
    pub port: Option<Int>,
    pub rewrite_port: Option<Int>,
    pub user_level: Option<Int>,
    pub rules: Option<Vec<RawDnsOutboundRule>>,
    #[serde(rename = "nonIPQuery")]
    pub non_ip_query: Option<String>,
    pub block_types: Option<Vec<Int>>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawDnsOutboundRule {
    pub action: Option<String>,
    pub q_type: Option<PortSpec>,
    pub domain: Option<StringList>,
    pub r_code: Option<Int>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct BlackholeSettings {
    pub response: Option<RawResponse>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct RawResponse {
    #[serde(rename = "type")]
    pub kind: Option<String>,
}

/// VLESS inbound `settings`.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct VlessInboundSettings {
    pub clients: Option<Vec<RawVlessUser>>,
    pub decryption: Option<String>,
    pub fallbacks: Option<Vec<RawFallback>>,
}

/// A VLESS client (inbound) or user (outbound): the same object in Xray.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct RawVlessUser {
    pub id: Option<String>,
    pub email: Option<String>,
    pub level: Option<Int>,
    pub flow: Option<String>,
    /// Outbound users only.
    pub encryption: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct RawFallback {
    pub name: Option<String>,
    pub alpn: Option<String>,
    pub path: Option<String>,
    /// A number or a string: checked by hand for a precise message.
    pub dest: Option<Value>,
    pub xver: Option<Int>,
}

/// VLESS outbound `settings`: `vnext`, or Xray's newer flat form (`address`, `port`, `id`,
/// `encryption`, `flow`, `level` directly in `settings`).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct VlessOutboundSettings {
    pub vnext: Option<Vec<RawVnext>>,
    pub address: Option<String>,
    pub port: Option<Int>,
    pub id: Option<String>,
    pub encryption: Option<String>,
    pub flow: Option<String>,
    pub level: Option<Int>,
    pub email: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct RawVnext {
    pub address: Option<String>,
    pub port: Option<Int>,
    pub users: Option<Vec<RawVlessUser>>,
}

/// Trojan inbound `settings`.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct TrojanInboundSettings {
    pub clients: Option<Vec<RawTrojanUser>>,
    pub fallbacks: Option<Vec<RawFallback>>,
}

/// A Trojan inbound client.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct RawTrojanUser {
    pub password: Option<String>,
    pub email: Option<String>,
    pub level: Option<Int>,
    /// Xray's old XTLS flows: refused with a message.
    pub flow: Option<String>,
}

/// Trojan outbound `settings`.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct TrojanOutboundSettings {
    pub servers: Option<Vec<RawTrojanServer>>,
}

/// One entry of a Trojan outbound's `servers`.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct RawTrojanServer {
    pub address: Option<String>,
    pub port: Option<Int>,
    pub password: Option<String>,
    pub email: Option<String>,
    pub level: Option<Int>,
    pub flow: Option<String>,
}

/// Shadowsocks inbound `settings`: one user in `method`/`password`/`email`/`level`, or several
/// in `clients` (`users` is Xray's other name for it).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ShadowsocksInboundSettings {
    pub method: Option<String>,
    pub password: Option<String>,
    pub level: Option<Int>,
    pub email: Option<String>,
    pub clients: Option<Vec<RawShadowsocksUser>>,
    pub users: Option<Vec<RawShadowsocksUser>>,
    pub network: Option<StringList>,
}

/// A Shadowsocks inbound client. `address`/`port` make it a 2022 relay destination in Xray.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct RawShadowsocksUser {
    pub method: Option<String>,
    pub password: Option<String>,
    pub level: Option<Int>,
    pub email: Option<String>,
    pub address: Option<Value>,
    pub port: Option<Value>,
}

/// Shadowsocks outbound `settings`: `servers`, or the flat form directly in `settings`.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ShadowsocksOutboundSettings {
    pub servers: Option<Vec<RawShadowsocksServer>>,
    pub address: Option<String>,
    pub port: Option<Int>,
    pub method: Option<String>,
    pub password: Option<String>,
    pub level: Option<Int>,
    pub email: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct RawShadowsocksServer {
    pub address: Option<String>,
    pub port: Option<Int>,
    pub method: Option<String>,
    pub password: Option<String>,
    pub level: Option<Int>,
    pub email: Option<String>,
}

/// VMess inbound `settings`. Xray 26 reads `clients` (or `users`) and `default.level`; v2ray
/// 4.x also `default.alterId`, `detour` and `disableInsecureEncryption`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VmessInboundSettings {
    pub clients: Option<Vec<RawVmessUser>>,
    pub users: Option<Vec<RawVmessUser>>,
    pub default: Option<RawVmessDefault>,
    pub detour: Option<Value>,
    pub disable_insecure_encryption: Option<bool>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawVmessDefault {
    pub level: Option<Int>,
    pub alter_id: Option<Int>,
}

/// A VMess client (inbound) or user (outbound): the same object in Xray.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawVmessUser {
    pub id: Option<String>,
    pub email: Option<String>,
    pub level: Option<Int>,
    /// Legacy (MD5) authentication when above 0; only 0 or absent is accepted.
    pub alter_id: Option<Int>,
    /// Outbound users only: the body security.
    pub security: Option<String>,
    /// Outbound users only: `AuthenticatedLength`, `NoTerminationSignal` joined by `|`.
    pub experiments: Option<String>,
}

/// VMess outbound `settings`: `vnext`, or Xray's newer flat form (`address`, `port`, `id`,
/// `security`, `experiments`, `level`, `email` directly in `settings`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VmessOutboundSettings {
    pub vnext: Option<Vec<RawVmessVnext>>,
    pub address: Option<String>,
    pub port: Option<Int>,
    pub id: Option<String>,
    pub security: Option<String>,
    pub experiments: Option<String>,
    pub level: Option<Int>,
    pub email: Option<String>,
    pub alter_id: Option<Int>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct RawVmessVnext {
    pub address: Option<String>,
    pub port: Option<Int>,
    pub users: Option<Vec<RawVmessUser>>,
}

/// The kcptun settings structs: each side's own keys plus the tuning keys both share, as in
/// kcptun's `-c` JSON (lowercase). Written out per struct, not `#[serde(flatten)]`ed: a
/// flattened struct hides unknown keys from the unknown-key warnings.
macro_rules! kcptun_settings {
    ($(#[$doc:meta])* $name:ident { $($field:ident: $ty:ty),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Debug, Default, Deserialize)]
        pub struct $name {
            $(pub $field: $ty,)*
            pub key: Option<String>,
            pub crypt: Option<String>,
            pub mode: Option<String>,
            pub mtu: Option<Int>,
            pub sndwnd: Option<Int>,
            pub rcvwnd: Option<Int>,
            pub datashard: Option<Int>,
            pub parityshard: Option<Int>,
            pub dscp: Option<Int>,
            pub nocomp: Option<bool>,
            pub acknodelay: Option<bool>,
            pub nodelay: Option<Int>,
            pub interval: Option<Int>,
            pub resend: Option<Int>,
            pub nc: Option<Int>,
            pub sockbuf: Option<Int>,
            pub smuxver: Option<Int>,
            pub smuxbuf: Option<Int>,
            pub streambuf: Option<Int>,
            pub keepalive: Option<Int>,
        }

        impl $name {
            /// The shared tuning keys.
            pub fn tuning(&self) -> RawKcpTuning {
                RawKcpTuning {
                    key: self.key.clone(),
                    crypt: self.crypt.clone(),
                    mode: self.mode.clone(),
                    mtu: self.mtu.clone(),
                    sndwnd: self.sndwnd.clone(),
                    rcvwnd: self.rcvwnd.clone(),
                    datashard: self.datashard.clone(),
                    parityshard: self.parityshard.clone(),
                    dscp: self.dscp.clone(),
                    nocomp: self.nocomp.clone(),
                    acknodelay: self.acknodelay.clone(),
                    nodelay: self.nodelay.clone(),
                    interval: self.interval.clone(),
                    resend: self.resend.clone(),
                    nc: self.nc.clone(),
                    sockbuf: self.sockbuf.clone(),
                    smuxver: self.smuxver.clone(),
                    smuxbuf: self.smuxbuf.clone(),
                    streambuf: self.streambuf.clone(),
                    keepalive: self.keepalive.clone(),
                }
            }
        }
    };
}

/// The tuning keys both kcptun sides share.
#[derive(Clone, Debug, Default)]
pub struct RawKcpTuning {
    pub key: Option<String>,
    pub crypt: Option<String>,
    pub mode: Option<String>,
    pub mtu: Option<Int>,
    pub sndwnd: Option<Int>,
    pub rcvwnd: Option<Int>,
    pub datashard: Option<Int>,
    pub parityshard: Option<Int>,
    pub dscp: Option<Int>,
    pub nocomp: Option<bool>,
    pub acknodelay: Option<bool>,
    pub nodelay: Option<Int>,
    pub interval: Option<Int>,
    pub resend: Option<Int>,
    pub nc: Option<Int>,
    pub sockbuf: Option<Int>,
    pub smuxver: Option<Int>,
    pub smuxbuf: Option<Int>,
    pub streambuf: Option<Int>,
    pub keepalive: Option<Int>,
}

kcptun_settings! {
    /// kcptun inbound `settings` (a kcptun server); `target` is kcptun-server's `-t`.
    KcptunInboundSettings { target: Option<String> }
}

kcptun_settings! {
    /// `streamSettings.kcptunSettings` of the `kcptun` transport: the same tuning keys, and
    /// `conn` (sessions per server) for outbounds.
    KcptunStreamSettings { conn: Option<Int> }
}

kcptun_settings! {
    /// kcptun outbound `settings` (a kcptun client): the server's `address` and `port`, and
    /// `conn`, the number of KCP sessions.
    KcptunOutboundSettings { address: Option<String>, port: Option<Int>, conn: Option<Int> }
}
