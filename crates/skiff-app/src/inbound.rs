//! Inbound handlers as the listener sees them: which handshake to run and where to count.

use std::net::IpAddr;
use std::sync::Arc;

use skiff_config::{InboundPlan, InboundProtocol};
use skiff_core::tcp_tuning::TcpTuning;
use skiff_core::{Address, Counter, Inbound, Stats};
use skiff_proto::http::server::HttpServerConfig;
use skiff_proto::socks::server::SocksServerConfig;
use skiff_proto::tunnel::TunnelInbound;

use crate::stack::InboundLayers;
use crate::tunnel::TunnelConfig;
use skiff_config::FallbackPlan;
use skiff_proto::shadowsocks::server::{ServerUser, ShadowsocksServer};
use skiff_proto::trojan::codec::PasswordHash;
use skiff_proto::trojan::server::{TrojanServer, TrojanUser};
use skiff_proto::vless::server::{VlessServer, VlessUser};
use skiff_proto::vless::user::UserId;
use skiff_proto::vmess::{VmessServer, VmessUser};

pub enum InboundKind {
    Socks {
        config: SocksServerConfig,
        announce_ip: Option<IpAddr>,
    },
    Http(HttpServerConfig),
    Tunnel(TunnelConfig),
    Vless(VlessServer),
    Trojan(TrojanServer),
    Shadowsocks(Arc<ShadowsocksServer>),
    /// Users and replay filters, shared by the inbound's connections.
    Vmess(Box<VmessServer>),
    /// A kcptun server: KCP sessions on UDP, every smux stream to `target`.
    Kcptun {
        params: skiff_transport::kcp::TunnelParams,
        target: Address,
    },
}

pub struct InboundHandler {
    pub tag: Arc<str>,
    pub kind: InboundKind,
    /// TLS and WebSocket under the protocol (streamSettings).
    pub layers: InboundLayers,
    /// Where connections that are not a valid request go (VLESS and Trojan); the same
    /// selection for every protocol (`crate::fallback`).
    pub fallbacks: Vec<FallbackPlan>,
    pub level: u32,
    pub uplink: Arc<Counter>,
    pub downlink: Arc<Counter>,
    /// This inbound listens on TCP (SOCKS and HTTP always do, unless over mKCP or kcptun).
    pub tcp: bool,
    /// Tunnel or Shadowsocks inbound with `network` containing udp: listen on UDP too.
    pub udp_listener: bool,
    /// No delay and the congestion control for accepted connections (`sockopt`).
    pub tcp_tuning: TcpTuning,
    /// `sniffing`, when enabled.
    pub sniffing: Option<skiff_config::SniffingPlan>,
}

impl InboundHandler {
    pub fn build(plan: &InboundPlan, stats: &Stats) -> Result<InboundHandler, String> {
        let accounts = |list: &[skiff_config::Account]| {
            list.iter()
                .map(|a| (a.user.clone(), a.pass.clone()))
                .collect::<Vec<_>>()
        };
        let (kind, level, tcp, udp_listener) = match &plan.protocol {
            InboundProtocol::Socks(s) => (
                InboundKind::Socks {
                    config: SocksServerConfig {
                        accounts: accounts(&s.accounts),
                        udp_enabled: s.udp,
                    },
                    announce_ip: s.announce_ip,
                },
                s.user_level,
                true,
                false,
            ),
            InboundProtocol::Http(h) => (
                InboundKind::Http(HttpServerConfig {
                    accounts: accounts(&h.accounts),
                    allow_transparent: h.allow_transparent,
                }),
                h.user_level,
                true,
                false,
            ),
            InboundProtocol::Tunnel(t) => (
                InboundKind::Tunnel(TunnelConfig {
                    destination: t
                        .address
                        .as_deref()
                        .map(|host| Address::from_host(host, t.port)),
                    follow_redirect: t.follow_redirect,
                }),
                t.user_level,
                t.network.tcp,
                t.network.udp,
            ),
            InboundProtocol::Vless(v) => (
                InboundKind::Vless(VlessServer {
                    users: v
                        .clients
                        .iter()
                        .map(|c| VlessUser {
                            id: UserId::from_bytes(c.id),
                            email: c.email.clone(),
                            vision: c.flow.is_vision(),
                        })
                        .collect(),
                }),
                v.clients.first().map_or(0, |c| c.level),
                true,
                false,
            ),
            InboundProtocol::Trojan(t) => (
                InboundKind::Trojan(TrojanServer::new(t.clients.iter().map(|c| {
                    (
                        PasswordHash::of(&c.password),
                        TrojanUser {
                            email: c.email.clone(),
                        },
                    )
                }))),
                t.clients.first().map_or(0, |c| c.level),
                true,
                false,
            ),
            InboundProtocol::Shadowsocks(ss) => (
                InboundKind::Shadowsocks(Arc::new(ShadowsocksServer::new(
                    ss.users
                        .iter()
                        .map(|u| ServerUser {
                            method: u.method,
                            key: u.key.0.clone(),
                            email: u.email.clone(),
                            level: u.level,
                        })
                        .collect(),
                    ss.identity_key.as_ref().map(|k| k.0.clone()),
                ))),
                ss.users.first().map_or(0, |u| u.level),
                ss.network.tcp,
                ss.network.udp,
            ),
            InboundProtocol::Kcptun(k) => (
                InboundKind::Kcptun {
                    params: crate::kcp_params::from_plan(&k.tuning),
                    target: Address::from_host(&k.target_host, k.target_port),
                },
                0,
                false,
                true,
            ),
            InboundProtocol::Vmess(v) => {
                let users: Vec<VmessUser> = v
                    .clients
                    .iter()
                    .map(|c| VmessUser {
                        id: UserId::from_bytes(c.id),
                        email: c.email.clone(),
                        level: c.level,
                    })
                    .collect();
                (
                    InboundKind::Vmess(Box::new(
                        VmessServer::new(&users).refuse_insecure(v.disable_insecure_encryption),
                    )),
                    // The handshake runs under level 0's timeout, as in Xray; after it the
                    // user's own level applies.
                    0,
                    true,
                    false,
                )
            }
        };
        let layers = InboundLayers::build(&plan.stream)
            .map_err(|e| format!("inbound `{}`: {e}", plan.tag))?;
        // Over mKCP the protocol's connections arrive on the UDP port instead.
        let tcp = tcp && layers.mkcp().is_none() && layers.kcptun().is_none();
        Ok(InboundHandler {
            tag: Arc::from(plan.tag.as_str()),
            kind,
            layers,
            fallbacks: plan.protocol.fallbacks().to_vec(),
            level,
            uplink: stats.counter(&format!("inbound>>>{}>>>traffic>>>uplink", plan.tag)),
            downlink: stats.counter(&format!("inbound>>>{}>>>traffic>>>downlink", plan.tag)),
            tcp,
            udp_listener,
            tcp_tuning: crate::stack::tcp_tuning(&plan.stream),
            sniffing: plan.sniffing.clone(),
        })
    }

    /// The protocol's handshake, or None for an inbound that takes no TCP connections. The
    /// one place a protocol is registered with the dispatcher.
    pub fn protocol(&self) -> Option<&dyn Inbound> {
        match &self.kind {
            InboundKind::Socks { config, .. } => Some(config),
            InboundKind::Http(config) => Some(config),
            InboundKind::Tunnel(_) => Some(&TunnelInbound),
            InboundKind::Vless(server) => Some(server),
            InboundKind::Trojan(server) => Some(server),
            InboundKind::Shadowsocks(server) => Some(&**server),
            InboundKind::Vmess(server) => Some(&**server),
            InboundKind::Kcptun { .. } => None,
        }
    }

    pub fn protocol_name(&self) -> &'static str {
        match self.kind {
            InboundKind::Socks { .. } => "socks",
            InboundKind::Http(_) => "http",
            InboundKind::Tunnel(_) => "tunnel",
            InboundKind::Vless(_) => "vless",
            InboundKind::Trojan(_) => "trojan",
            InboundKind::Shadowsocks(_) => "shadowsocks",
            InboundKind::Vmess(_) => "vmess",
            InboundKind::Kcptun { .. } => "kcptun",
        }
    }
}
