//! The validated plan: what `skiff run` builds handlers from. Everything here has already been
//! checked (tags unique, rules point at existing outbounds, ports valid), so the app never has
//! to re-validate or guess defaults.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use skiff_core::{Cidr, Networks, PortRange};

#[derive(Clone, Debug)]
pub struct Plan {
    pub log: LogPlan,
    pub inbounds: Vec<InboundPlan>,
    /// Never empty: the first outbound is the default route (Xray's rule). A config without
    /// outbounds gets a `freedom` tagged "direct".
    pub outbounds: Vec<OutboundPlan>,
    pub routing: RoutingPlan,
    pub policy: PolicyPlan,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Debug,
    Info,
    Warning,
    Error,
    None,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogTarget {
    Stderr,
    File(PathBuf),
    Off,
}

#[derive(Clone, Debug)]
pub struct LogPlan {
    /// Xray's `loglevel`, default `warning`.
    pub level: LogLevel,
    /// Xray's `access`: "" or absent = stderr, "none" = off, else a file path.
    pub access: LogTarget,
    /// Xray's `error`: same rules as `access`.
    pub error: LogTarget,
}

#[derive(Clone, Debug)]
pub struct InboundPlan {
    /// Xray allows an empty tag; the plan keeps "" then (routing by inboundTag cannot match it).
    pub tag: String,
    /// `listen`, default 0.0.0.0 as in Xray.
    pub listen: IpAddr,
    /// `port`: a number, "a-b" or "a,b,c-d" in Xray; each range is listened on port by port.
    pub ports: Vec<PortRange>,
    pub protocol: InboundProtocol,
    pub stream: StreamPlan,
    /// `sniffing.enabled` was true: accepted, warned about, not acted on yet.
    pub sniffing: bool,
}

#[derive(Clone, Debug)]
pub enum InboundProtocol {
    Socks(SocksInbound),
    Http(HttpInbound),
    Tunnel(TunnelInbound),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Account {
    pub user: String,
    pub pass: String,
}

#[derive(Clone, Debug)]
pub struct SocksInbound {
    /// `auth`: "noauth" (default) → empty; "password" → the `accounts` (must be non-empty).
    pub accounts: Vec<Account>,
    /// `udp`, default false.
    pub udp: bool,
    /// `ip`: the address announced in UDP ASSOCIATE replies; None = the inbound's local address.
    pub announce_ip: Option<IpAddr>,
    /// `userLevel`, default 0.
    pub user_level: u32,
}

#[derive(Clone, Debug)]
pub struct HttpInbound {
    /// `accounts`; empty = no authentication.
    pub accounts: Vec<Account>,
    /// `allowTransparent`, default false.
    pub allow_transparent: bool,
    pub user_level: u32,
}

#[derive(Clone, Debug)]
pub struct TunnelInbound {
    /// `address` (IP or domain); None only when `followRedirect` is true.
    pub address: Option<String>,
    /// `port`; 0 = "same port as the accepted connection" is not Xray's rule: required unless
    /// `followRedirect`, then 0.
    pub port: u16,
    /// `network`, default "tcp".
    pub network: Networks,
    /// `followRedirect`, default false.
    pub follow_redirect: bool,
    pub user_level: u32,
}

#[derive(Clone, Debug)]
pub struct OutboundPlan {
    /// Unique among outbounds; Xray allows an empty tag on one outbound, we keep "" then.
    pub tag: String,
    pub protocol: OutboundProtocol,
    pub stream: StreamPlan,
    /// `proxySettings.tag`: dial through that outbound instead of directly (chaining). Checked
    /// to exist and not to form a cycle.
    pub via: Option<String>,
}

#[derive(Clone, Debug)]
pub enum OutboundProtocol {
    Freedom(FreedomOutbound),
    Blackhole(BlackholeOutbound),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FreedomDomainStrategy {
    AsIs,
    UseIp,
    UseIpv4,
    UseIpv6,
}

#[derive(Clone, Debug)]
pub struct FreedomOutbound {
    /// `domainStrategy`, default AsIs; Xray's aliases UseIPv4v6/UseIPv6v4 map to UseIp.
    pub domain_strategy: FreedomDomainStrategy,
    /// `redirect` "host:port": every connection goes there instead. Port 0 keeps the original
    /// port; an empty host keeps the original host.
    pub redirect: Option<(String, u16)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlackholeResponse {
    None,
    Http,
}

#[derive(Clone, Debug)]
pub struct BlackholeOutbound {
    /// `response.type`, default "none".
    pub response: BlackholeResponse,
}

/// `streamSettings`. Only raw TCP without security exists yet; anything else is a config error
/// naming the unsupported value. Later issues add TLS, WebSocket and KCP here.
#[derive(Clone, Debug, Default)]
pub struct StreamPlan {
    pub network: StreamNetwork,
    pub security: StreamSecurity,
    /// `sockopt.tcpFastOpen` etc. are not modelled yet.
    pub _reserved: (),
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StreamNetwork {
    #[default]
    Tcp,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StreamSecurity {
    #[default]
    None,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RoutingDomainStrategy {
    #[default]
    AsIs,
    IpIfNonMatch,
    IpOnDemand,
}

#[derive(Clone, Debug, Default)]
pub struct RoutingPlan {
    pub domain_strategy: RoutingDomainStrategy,
    /// In config order; the first rule whose every present condition matches wins.
    pub rules: Vec<RulePlan>,
}

/// One routing rule. Empty lists / None mean "no condition"; a rule needs at least one.
#[derive(Clone, Debug)]
pub struct RulePlan {
    pub inbound_tags: Vec<String>,
    pub domains: Vec<DomainMatcher>,
    pub ips: Vec<Cidr>,
    /// `port` (destination): "53", "1000-2000", "53,443,1000-2000" or a number.
    pub ports: Vec<PortRange>,
    pub networks: Option<Networks>,
    pub sources: Vec<Cidr>,
    pub source_ports: Vec<PortRange>,
    /// `user`: emails.
    pub users: Vec<String>,
    /// Always names an existing outbound (`balancerTag` is unsupported → config error).
    pub outbound_tag: String,
}

/// Names in `Keyword`, `Full` and `Suffix` are lowercased at load time (domain names are
/// case-insensitive): match them against the lowercased destination domain.
#[derive(Clone, Debug)]
pub enum DomainMatcher {
    /// No prefix or `keyword:`: substring match.
    Keyword(String),
    /// `full:`: the whole domain.
    Full(String),
    /// `domain:`: the domain itself or any subdomain of it.
    Suffix(String),
    /// `regexp:`: compiled at load time so a bad pattern is a config error with its path.
    Regex(regex_lite::Regex),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LevelPolicy {
    /// Default 4 s.
    pub handshake: Duration,
    /// Default 300 s.
    pub conn_idle: Duration,
    /// Default 2 s: how long the uplink may stay idle once the downlink has closed.
    pub uplink_only: Duration,
    /// Default 5 s: how long the downlink may stay idle once the uplink has closed.
    pub downlink_only: Duration,
    pub stats_user_uplink: bool,
    pub stats_user_downlink: bool,
}

impl Default for LevelPolicy {
    fn default() -> Self {
        LevelPolicy {
            handshake: Duration::from_secs(4),
            conn_idle: Duration::from_secs(300),
            uplink_only: Duration::from_secs(2),
            downlink_only: Duration::from_secs(5),
            stats_user_uplink: false,
            stats_user_downlink: false,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SystemPolicy {
    pub stats_inbound_uplink: bool,
    pub stats_inbound_downlink: bool,
    pub stats_outbound_uplink: bool,
    pub stats_outbound_downlink: bool,
}

#[derive(Clone, Debug, Default)]
pub struct PolicyPlan {
    /// `policy.levels`, keyed by level number; a level not listed uses `LevelPolicy::default()`.
    pub levels: HashMap<u32, LevelPolicy>,
    pub system: SystemPolicy,
}

impl PolicyPlan {
    pub fn level(&self, level: u32) -> LevelPolicy {
        self.levels.get(&level).copied().unwrap_or_default()
    }
}
