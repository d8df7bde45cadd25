//! Builds outbound handlers from the plan, wiring `proxySettings.tag` chains (the config has
//! already rejected cycles and missing tags).

use std::collections::HashMap;
use std::sync::Arc;

use skiff_config::{
    FreedomDomainStrategy, OutboundPlan, OutboundProtocol, SystemPolicy, Udp443Plan, VlessFlow,
    VmessSecurity,
};
use skiff_core::{Address, Counter, Dialer, Outbound, Stats};
use skiff_proto::mux;
use skiff_proto::shadowsocks::ShadowsocksOutbound;
use skiff_proto::shadowsocks::client::ClientConfig;
use skiff_proto::trojan::TrojanOutbound;
use skiff_proto::trojan::codec::PasswordHash;
use skiff_proto::user_id::UserId;
use skiff_proto::vless::{self, VlessOutbound};
use skiff_proto::vmess::{Security, VmessClient, VmessOutbound};

use crate::outbound_kcptun::KcptunOutbound;
use skiff_proto::blackhole::Blackhole;
use skiff_proto::freedom::{Freedom, Resolve};
use skiff_transport::kcp::client::KcpClient;

pub struct OutboundHandler {
    pub tag: Arc<str>,
    pub handler: Arc<dyn Outbound>,
    pub uplink: Arc<Counter>,
    pub downlink: Arc<Counter>,
}

impl OutboundHandler {
    /// Takes every connection and refuses it: where routing to an outbound the API removed
    /// leads.
    pub fn none() -> OutboundHandler {
        OutboundHandler {
            tag: Arc::from(""),
            handler: Arc::new(NoOutbound),
            uplink: Arc::default(),
            downlink: Arc::default(),
        }
    }
}

struct NoOutbound;

fn no_outbound() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::NotFound,
        "the outbound routing picked was removed through the API",
    )
}

impl Outbound for NoOutbound {
    fn connect<'a>(
        &'a self,
        _meta: &'a skiff_core::Metadata,
        _destination: &'a skiff_core::Address,
    ) -> skiff_core::BoxFuture<'a, std::io::Result<skiff_core::BoxStream>> {
        Box::pin(async { Err(no_outbound()) })
    }

    fn bind<'a>(
        &'a self,
        _meta: &'a skiff_core::Metadata,
    ) -> skiff_core::BoxFuture<'a, std::io::Result<skiff_core::BoxPacketConn>> {
        Box::pin(async { Err(no_outbound()) })
    }
}

/// `resolver` is the DNS module, when the config has a `dns` section (freedom's UseIP*).
pub fn build(
    plans: &[OutboundPlan],
    stats: &Stats,
    system: &SystemPolicy,
    resolver: Option<&Arc<dyn skiff_core::Resolve>>,
) -> Result<Vec<OutboundHandler>, String> {
    let mut built: HashMap<String, Arc<dyn Outbound>> = HashMap::new();
    // Chains are acyclic and at most as long as the list: build in rounds until all exist.
    for _ in 0..=plans.len() {
        for plan in plans {
            if built.contains_key(&plan.tag) {
                continue;
            }
            let via = match &plan.via {
                None => None,
                Some(tag) => match built.get(tag) {
                    Some(handler) => Some(handler.clone()),
                    None => continue,
                },
            };
            let handler =
                make(plan, via, resolver).map_err(|e| format!("outbound `{}`: {e}", plan.tag))?;
            let handler = with_mux(plan, handler);
            built.insert(plan.tag.clone(), handler);
        }
    }
    plans
        .iter()
        .map(|plan| {
            let handler = match built.get(&plan.tag) {
                Some(h) => h.clone(),
                None => with_mux(
                    plan,
                    make(plan, None, resolver)
                        .map_err(|e| format!("outbound `{}`: {e}", plan.tag))?,
                ),
            };
            Ok(OutboundHandler {
                tag: Arc::from(plan.tag.as_str()),
                handler,
                // Listed as Xray lists them: when the system policy asks, for tagged outbounds.
                uplink: stats.counter_if(
                    system.stats_outbound_uplink && !plan.tag.is_empty(),
                    &format!("outbound>>>{}>>>traffic>>>uplink", plan.tag),
                ),
                downlink: stats.counter_if(
                    system.stats_outbound_downlink && !plan.tag.is_empty(),
                    &format!("outbound>>>{}>>>traffic>>>downlink", plan.tag),
                ),
            })
        })
        .collect()
}

/// The outbound behind its `mux` pools when the plan enables mux. XTLS Vision keeps TCP off
/// mux, as Xray's Vision server breaks Mux connections that carry TCP; its UDP still goes
/// over mux.
fn with_mux(plan: &OutboundPlan, handler: Arc<dyn Outbound>) -> Arc<dyn Outbound> {
    let Some(m) = plan.mux else {
        return handler;
    };
    let udp443 = match m.xudp_proxy_udp443 {
        Udp443Plan::Reject => mux::Udp443::Reject,
        Udp443Plan::Allow => mux::Udp443::Allow,
        Udp443Plan::Skip => mux::Udp443::Skip,
    };
    let mut settings = mux::MuxSettings::from_config(m.concurrency, m.xudp_concurrency, udp443);
    if let OutboundProtocol::Vless(v) = &plan.protocol
        && v.flow != VlessFlow::None
    {
        settings.tcp = None;
    }
    Arc::new(mux::MuxOutbound::new(handler, settings))
}

/// How an outbound reaches `server`: its stream settings' layers, directly or through the
/// chained outbound `via`.
fn server_dialer(
    plan: &OutboundPlan,
    server: &str,
    via: Option<Arc<dyn Outbound>>,
) -> Result<Arc<dyn Dialer>, String> {
    crate::stream_settings::client_dialer(&plan.stream, server, via)
}

fn make(
    plan: &OutboundPlan,
    via: Option<Arc<dyn Outbound>>,
    resolver: Option<&Arc<dyn skiff_core::Resolve>>,
) -> Result<Arc<dyn Outbound>, String> {
    Ok(match &plan.protocol {
        OutboundProtocol::Freedom(f) => Arc::new(Freedom {
            resolve: match f.domain_strategy {
                FreedomDomainStrategy::AsIs => Resolve::AsIs,
                FreedomDomainStrategy::UseIp => Resolve::Any,
                FreedomDomainStrategy::UseIpv4 => Resolve::V4,
                FreedomDomainStrategy::UseIpv6 => Resolve::V6,
            },
            redirect: f.redirect.clone(),
            dialer: crate::stream_settings::direct_dialer(&plan.stream, via),
            resolver: resolver.cloned(),
        }),
        OutboundProtocol::Dns(d) => {
            // Without a `dns` section Xray's default DNS is the system resolver: an empty
            // module is exactly that.
            let resolver = match resolver {
                Some(r) => r.clone(),
                None => Arc::new(skiff_dns::Resolver::new(
                    skiff_dns::DnsConfig::default(),
                    &skiff_dns::TlsRoots::default(),
                )?),
            };
            Arc::new(skiff_dns::outbound::DnsOutbound::new(
                d.clone(),
                resolver,
                crate::stream_settings::direct_dialer(&plan.stream, via),
            ))
        }
        OutboundProtocol::Blackhole(b) => Arc::new(Blackhole {
            http_response: b.response == skiff_config::BlackholeResponse::Http,
        }),
        OutboundProtocol::Vless(v) => Arc::new(VlessOutbound {
            server: Address::from_host(&v.address, v.port),
            user: UserId::from_bytes(v.id),
            flow: match v.flow {
                VlessFlow::None => vless::Flow::None,
                VlessFlow::Vision => vless::Flow::Vision,
                VlessFlow::VisionUdp443 => vless::Flow::VisionUdp443,
            },
            dialer: server_dialer(plan, &v.address, via)?,
        }),
        OutboundProtocol::Trojan(t) => Arc::new(TrojanOutbound {
            server: Address::from_host(&t.address, t.port),
            hash: PasswordHash::of(&t.password),
            dialer: server_dialer(plan, &t.address, via)?,
        }),
        OutboundProtocol::Shadowsocks(ss) => Arc::new(ShadowsocksOutbound {
            server: Address::from_host(&ss.address, ss.port),
            config: ClientConfig {
                method: ss.method,
                key: ss.key.0.clone(),
                identity_keys: ss.identity_keys.iter().map(|k| k.0.clone()).collect(),
            },
            dialer: server_dialer(plan, &ss.address, via)?,
        }),
        OutboundProtocol::Udpspeeder(u) => match &plan.stream.udp2raw {
            None => Arc::new(skiff_proto::udpspeeder::client::UdpspeederClient::new(
                crate::udpspeeder::config(&u.tuning),
                u.address.clone(),
                u.port,
            )),
            // udp2rawSettings: speederv2's datagrams to the tunnel's loopback port.
            Some(tuning) => {
                let layer = crate::udp2raw_layer::ClientLayer::new(tuning.clone())
                    .map_err(|e| format!("udp2rawSettings: {e}"))?;
                let local = layer.local();
                let server = Address::from_host(&u.address, u.port);
                layer.connect_early(server.clone());
                Arc::new(crate::udp2raw_layer::LayerOutbound {
                    inner: Arc::new(skiff_proto::udpspeeder::client::UdpspeederClient::new(
                        crate::udpspeeder::config(&u.tuning),
                        local.ip().to_string(),
                        local.port(),
                    )),
                    server,
                    layer,
                })
            }
        },
        OutboundProtocol::Udp2raw(u) => {
            let client = Arc::new(crate::udp2raw::Udp2rawClient::new(u.clone()));
            client.connect_early();
            client
        }
        OutboundProtocol::Kcptun(k) => {
            let server = Address::from_host(&k.address, k.port);
            let outbound = |to: Address| KcptunOutbound {
                client: KcpClient::new(crate::kcp_params::from_plan(&k.tuning), to, k.conn),
                server: server.clone(),
                told: Default::default(),
            };
            match &plan.stream.udp2raw {
                None => Arc::new(outbound(server.clone())),
                // udp2rawSettings: the KCP datagrams to the tunnel's loopback port.
                Some(tuning) => {
                    let layer = crate::udp2raw_layer::ClientLayer::new(tuning.clone())
                        .map_err(|e| format!("udp2rawSettings: {e}"))?;
                    layer.connect_early(server.clone());
                    Arc::new(crate::udp2raw_layer::LayerOutbound {
                        inner: Arc::new(outbound(Address::Ip(layer.local()))),
                        server: server.clone(),
                        layer,
                    })
                }
            }
        }
        OutboundProtocol::Vmess(v) => {
            let security = match v.security {
                VmessSecurity::Auto => Security::Auto,
                VmessSecurity::Aes128Gcm => Security::Aes128Gcm,
                VmessSecurity::ChaCha20Poly1305 => Security::ChaCha20Poly1305,
                VmessSecurity::None => Security::None,
                VmessSecurity::Zero => Security::Zero,
            };
            Arc::new(VmessOutbound {
                server: Address::from_host(&v.address, v.port),
                client: Arc::new(VmessClient::new(
                    &UserId::from_bytes(v.id),
                    security,
                    v.authenticated_length,
                    v.no_termination_signal,
                )),
                dialer: server_dialer(plan, &v.address, via)?,
            })
        }
    })
}
