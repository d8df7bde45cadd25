//! Inbound handlers as the listener sees them: which handshake to run and where to count.

use std::net::IpAddr;
use std::sync::Arc;

use skiff_config::{FallbackDest, FallbackPlan, InboundPlan, InboundProtocol, SystemPolicy};
use skiff_core::tcp_tuning::TcpTuning;
use skiff_core::{Address, Counter, Inbound, Stats};
use skiff_proto::http::server::HttpServerConfig;
use skiff_proto::socks::server::SocksServerConfig;
use skiff_proto::tunnel::TunnelInbound;
use skiff_transport::stack::{ServerBase, ServerStack};

use crate::tunnel::TunnelConfig;
use crate::users::InboundUsers;
use skiff_proto::fallback::{Destination, Fallback};
use skiff_proto::shadowsocks::server::{ServerUser, ShadowsocksServer};
use skiff_proto::trojan::codec::PasswordHash;
use skiff_proto::trojan::server::{TrojanServer, TrojanUser};
use skiff_proto::user_id::UserId;
use skiff_proto::vless::server::{VlessServer, VlessUser};
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
    /// A kcptun server: the kcptun network (KCP sessions on UDP, with kcptun's own stream
    /// semantics) under a tunnel to the server's fixed `target` (kcptun sends no destination).
    Kcptun {
        target: Address,
    },
    /// A UDPspeeder v2 server: FEC datagrams on the UDP port, conversations to its target.
    Udpspeeder(Arc<skiff_proto::udpspeeder::server::UdpspeederServer>),
    /// A udp2raw server: raw packets on the inbound's address and port, UDP to its target.
    Udp2raw(Arc<crate::udp2raw::Udp2rawServer>),
}

pub struct InboundHandler {
    pub tag: Arc<str>,
    pub kind: InboundKind,
    /// TLS and WebSocket under the protocol (streamSettings).
    pub layers: ServerStack,
    /// Where connections that are not a valid request go (VLESS and Trojan); the same
    /// selection for every protocol (`skiff_proto::fallback`).
    pub fallbacks: Vec<Fallback>,
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
    /// The users Xray's API may change at run time (VLESS, VMess, Trojan, Shadowsocks 2022
    /// multi-user), with the signals that close a removed user's connections.
    pub users: Option<InboundUsers>,
    /// Its connections being served now (by tag: a reload's new handler keeps counting).
    pub live: Arc<skiff_core::live_connections::LiveCount>,
}

impl InboundHandler {
    pub fn build(
        plan: &InboundPlan,
        stats: &Stats,
        system: &SystemPolicy,
    ) -> Result<InboundHandler, String> {
        let accounts = |list: &[skiff_config::Account]| {
            list.iter()
                .map(|a| (a.user.clone(), a.pass.clone()))
                .collect::<Vec<_>>()
        };
        // The kcptun protocol is the kcptun network with kcptun's own stream semantics.
        let mut kcptun_base = None;
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
                InboundKind::Vless(VlessServer::new(
                    v.clients
                        .iter()
                        .map(|c| VlessUser {
                            id: UserId::from_bytes(c.id),
                            email: c.email.clone(),
                            vision: c.flow.is_vision(),
                        })
                        .collect(),
                )),
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
            InboundProtocol::Kcptun(k) => {
                kcptun_base = Some(ServerBase::Kcptun(crate::kcp_params::from_plan(&k.tuning)));
                (
                    InboundKind::Kcptun {
                        target: Address::from_host(&k.target_host, k.target_port),
                    },
                    0,
                    false,
                    false,
                )
            }
            InboundProtocol::Udpspeeder(u) => (
                InboundKind::Udpspeeder(Arc::new(
                    skiff_proto::udpspeeder::server::UdpspeederServer {
                        config: crate::udpspeeder::config(&u.tuning),
                        target: Address::from_host(&u.target_host, u.target_port),
                    },
                )),
                0,
                false,
                true,
            ),
            InboundProtocol::Udp2raw(u) => (
                InboundKind::Udp2raw(Arc::new(crate::udp2raw::Udp2rawServer { plan: u.clone() })),
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
        let mut layers = crate::stream_settings::server_stack(&plan.stream)
            .map_err(|e| format!("inbound `{}`: {e}", plan.tag))?;
        if let Some(base) = kcptun_base {
            layers.base = base;
        }
        // Over mKCP the protocol's connections arrive on the UDP port instead.
        let tcp = tcp && layers.mkcp().is_none() && layers.kcptun().is_none();
        Ok(InboundHandler {
            tag: Arc::from(plan.tag.as_str()),
            kind,
            layers,
            fallbacks: plan.protocol.fallbacks().iter().map(fallback).collect(),
            level,
            // Listed as Xray lists them: when the system policy asks, for tagged inbounds.
            uplink: stats.counter_if(
                system.stats_inbound_uplink && !plan.tag.is_empty(),
                &format!("inbound>>>{}>>>traffic>>>uplink", plan.tag),
            ),
            downlink: stats.counter_if(
                system.stats_inbound_downlink && !plan.tag.is_empty(),
                &format!("inbound>>>{}>>>traffic>>>downlink", plan.tag),
            ),
            tcp,
            udp_listener,
            tcp_tuning: crate::stream_settings::tcp_tuning(&plan.stream),
            sniffing: plan.sniffing.clone(),
            users: InboundUsers::from_plan(&plan.protocol),
            live: stats.live().inbound(&plan.tag),
        })
    }

    /// The protocol's handshake. The one place a protocol is registered with the dispatcher.
    pub fn protocol(&self) -> Option<&dyn Inbound> {
        match &self.kind {
            InboundKind::Socks { config, .. } => Some(config),
            InboundKind::Http(config) => Some(config),
            InboundKind::Tunnel(_) => Some(&TunnelInbound),
            InboundKind::Vless(server) => Some(server),
            InboundKind::Trojan(server) => Some(server),
            InboundKind::Shadowsocks(server) => Some(&**server),
            InboundKind::Vmess(server) => Some(&**server),
            InboundKind::Kcptun { .. } => Some(&TunnelInbound),
            // UDP only: its listener is served by `udpspeeder::server`, never by dispatch.
            InboundKind::Udpspeeder(_) => None,
            // Raw packets: served by `udp2raw::serve`, never by dispatch.
            InboundKind::Udp2raw(_) => None,
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
            InboundKind::Udpspeeder(_) => "udpspeeder",
            InboundKind::Udp2raw(_) => "udp2raw",
        }
    }
}

/// A `fallbacks` entry as the protocols choose among them.
fn fallback(plan: &FallbackPlan) -> Fallback {
    Fallback {
        name: plan.name.clone(),
        alpn: plan.alpn.clone(),
        path: plan.path.clone(),
        dest: match &plan.dest {
            FallbackDest::Port(port) => Destination::Port(*port),
            FallbackDest::Addr(host, port) => Destination::Addr(host.clone(), *port),
            FallbackDest::Unix(path) => Destination::Unix(path.clone()),
            FallbackDest::AbstractUnix(name) => Destination::AbstractUnix(name.clone()),
        },
        xver: plan.xver,
    }
}
