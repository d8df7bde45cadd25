//! Inbound handlers as the listener sees them: which handshake to run and where to count.

use std::net::IpAddr;
use std::sync::Arc;

use skiff_config::{InboundPlan, InboundProtocol};
use skiff_core::{Address, Counter, Stats};
use skiff_proto::http::server::HttpServerConfig;
use skiff_proto::socks::server::SocksServerConfig;

use crate::tunnel::TunnelConfig;

pub enum InboundKind {
    Socks {
        config: SocksServerConfig,
        announce_ip: Option<IpAddr>,
    },
    Http(HttpServerConfig),
    Tunnel(TunnelConfig),
}

pub struct InboundHandler {
    pub tag: Arc<str>,
    pub kind: InboundKind,
    pub level: u32,
    pub uplink: Arc<Counter>,
    pub downlink: Arc<Counter>,
    /// This inbound listens on TCP (SOCKS and HTTP always do).
    pub tcp: bool,
    /// Tunnel inbound with `network` containing udp: listen on UDP too.
    pub udp_listener: bool,
}

impl InboundHandler {
    pub fn build(plan: &InboundPlan, stats: &Stats) -> InboundHandler {
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
        };
        InboundHandler {
            tag: Arc::from(plan.tag.as_str()),
            kind,
            level,
            uplink: stats.counter(&format!("inbound>>>{}>>>traffic>>>uplink", plan.tag)),
            downlink: stats.counter(&format!("inbound>>>{}>>>traffic>>>downlink", plan.tag)),
            tcp,
            udp_listener,
        }
    }

    pub fn protocol_name(&self) -> &'static str {
        match self.kind {
            InboundKind::Socks { .. } => "socks",
            InboundKind::Http(_) => "http",
            InboundKind::Tunnel(_) => "tunnel",
        }
    }
}
