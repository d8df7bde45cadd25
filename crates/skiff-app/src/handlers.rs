//! The running instance's inbounds and outbounds as Xray's HandlerService sees them
//! (skiff-api's [`Handlers`]): list them, list, add and remove an inbound's users, stop an
//! inbound's listeners.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};

use std::net::IpAddr;

use skiff_api::handler_service::{
    Account, ApiUser, HandlerError, Handlers, typed_message, user_to_proto, vmess_security,
};
use skiff_api::proto::core::{InboundHandlerConfig, OutboundHandlerConfig};
use skiff_api::proto::net::{IpOrDomain, Network, PortList, PortRange, ip_or_domain};
use skiff_api::proto::protocol::User;
use skiff_api::proto::proxy::{
    DokodemoConfig, Shadowsocks2022MultiUserServerConfig, TrojanServerConfig, VlessInboundConfig,
    VmessInboundConfig,
};
use skiff_api::proto::receiver::ReceiverConfig;
use skiff_api::proto::serial::TypedMessage;
use skiff_config::{InboundPlan, InboundProtocol, OutboundProtocol};
use tokio::task::AbortHandle;
use tracing::info;

use crate::inbound::InboundHandler;
use crate::shared::Shared;

/// One inbound as the API knows it.
struct Registered {
    handler: Arc<InboundHandler>,
    /// As ListInbounds reports it: the config it started with, as Xray does.
    config: InboundHandlerConfig,
    /// Its listeners' tasks (accept loops, UDP servers): aborted by RemoveInbound, which
    /// closes the listening sockets; connections already accepted run in tasks of their own.
    listeners: Vec<AbortHandle>,
}

/// The instance's handlers, filled as listeners are bound.
pub struct Registry {
    inbounds: Mutex<Vec<Registered>>,
    /// Tag and Xray's config type of each outbound of the config, at its index in
    /// `shared.outbounds`.
    outbounds: Vec<(String, &'static str)>,
    /// Where removed outbounds are marked.
    shared: Arc<Shared>,
}

impl Registry {
    pub fn new(shared: Arc<Shared>, outbounds: Vec<(String, &'static str)>) -> Registry {
        Registry {
            inbounds: Mutex::default(),
            outbounds,
            shared,
        }
    }

    /// `plan` is the inbound's as started: ListInbounds reports it.
    pub fn add_inbound(
        &self,
        plan: &InboundPlan,
        handler: Arc<InboundHandler>,
        listeners: Vec<AbortHandle>,
    ) {
        let config = inbound_config(plan, &handler);
        self.lock_inbounds().push(Registered {
            handler,
            config,
            listeners,
        });
    }

    fn lock_inbounds(&self) -> std::sync::MutexGuard<'_, Vec<Registered>> {
        self.inbounds.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Unregisters inbound `tag` and closes its listeners (their tasks are aborted; the
    /// connections they accepted run in tasks of their own). False if there is none.
    pub fn stop_inbound(&self, tag: &str) -> bool {
        let removed = {
            let mut inbounds = self.lock_inbounds();
            let Some(index) = inbounds.iter().position(|r| &*r.handler.tag == tag) else {
                return false;
            };
            inbounds.remove(index)
        };
        for listener in &removed.listeners {
            listener.abort();
        }
        true
    }

    /// The running inbound with `tag`, if any.
    pub fn handler(&self, tag: &str) -> Option<Arc<InboundHandler>> {
        self.inbound(tag).ok()
    }

    /// The tags of the running inbounds.
    pub fn tags(&self) -> Vec<String> {
        self.lock_inbounds()
            .iter()
            .map(|r| r.handler.tag.to_string())
            .collect()
    }

    fn inbound(&self, tag: &str) -> Result<Arc<InboundHandler>, HandlerError> {
        self.lock_inbounds()
            .iter()
            .find(|r| &*r.handler.tag == tag)
            .map(|r| r.handler.clone())
            .ok_or_else(|| HandlerError::NoInbound(tag.to_string()))
    }
}

fn ip_or_domain(ip: IpAddr) -> IpOrDomain {
    IpOrDomain {
        address: Some(ip_or_domain::Address::Ip(match ip {
            IpAddr::V4(v4) => v4.octets().to_vec(),
            IpAddr::V6(v6) => v6.octets().to_vec(),
        })),
    }
}

fn networks(n: &skiff_core::Networks) -> Vec<i32> {
    let mut list = Vec::new();
    if n.tcp {
        list.push(Network::Tcp as i32);
    }
    if n.udp {
        list.push(Network::Udp as i32);
    }
    list
}

/// An inbound as Xray's ListInbounds reports it: where it listens, and its protocol's settings
/// with the users it started with (for the protocols panels manage; others by type only).
fn inbound_config(plan: &InboundPlan, handler: &InboundHandler) -> InboundHandlerConfig {
    let receiver = ReceiverConfig {
        port_list: Some(PortList {
            range: plan
                .ports
                .iter()
                .map(|r| PortRange {
                    from: u32::from(r.first),
                    to: u32::from(r.last),
                })
                .collect(),
        }),
        listen: Some(ip_or_domain(plan.listen)),
    };
    let users = || -> Vec<ApiUser> {
        handler
            .users
            .as_ref()
            .map(|u| u.list(None))
            .unwrap_or_default()
    };
    let protos = |users: Vec<ApiUser>| -> Vec<User> { users.iter().map(user_to_proto).collect() };
    let proxy = match &plan.protocol {
        InboundProtocol::Vless(_) => typed_message(
            "xray.proxy.vless.inbound.Config",
            &VlessInboundConfig {
                users: protos(users()),
                decryption: "none".into(),
            },
        ),
        InboundProtocol::Vmess(v) => typed_message(
            "xray.proxy.vmess.inbound.Config",
            &VmessInboundConfig {
                // The config's security, not the one it resolves to (which GetInboundUsers
                // reports): a user without one says auto.
                user: users()
                    .into_iter()
                    .zip(&v.clients)
                    .map(|(mut user, client)| {
                        if let Account::Vmess { security, .. } = &mut user.account {
                            *security =
                                vmess_security(client.security.as_deref().unwrap_or("auto"));
                        }
                        user_to_proto(&user)
                    })
                    .collect(),
            },
        ),
        InboundProtocol::Trojan(_) => typed_message(
            "xray.proxy.trojan.ServerConfig",
            &TrojanServerConfig {
                users: protos(users()),
            },
        ),
        InboundProtocol::Shadowsocks(ss) if ss.identity_key.is_some() => typed_message(
            "xray.proxy.shadowsocks_2022.MultiUserServerConfig",
            &Shadowsocks2022MultiUserServerConfig {
                method: ss
                    .users
                    .first()
                    .map(|u| u.method.name())
                    .unwrap_or_default()
                    .into(),
                key: ss
                    .identity_key
                    .as_ref()
                    .map(|k| skiff_transport::base64::encode_std(&k.0))
                    .unwrap_or_default(),
                users: protos(users()),
                network: networks(&ss.network),
            },
        ),
        InboundProtocol::Tunnel(t) => typed_message(
            "xray.proxy.dokodemo.Config",
            &DokodemoConfig {
                rewrite_address: t.address.as_deref().map(|a| match a.parse::<IpAddr>() {
                    Ok(ip) => ip_or_domain(ip),
                    Err(_) => IpOrDomain {
                        address: Some(ip_or_domain::Address::Domain(a.to_string())),
                    },
                }),
                rewrite_port: u32::from(t.port),
                follow_redirect: t.follow_redirect,
                user_level: t.user_level,
                allowed_networks: networks(&t.network),
            },
        ),
        other => typed_message(inbound_config_type(other), &()),
    };
    InboundHandlerConfig {
        tag: plan.tag.clone(),
        receiver_settings: Some(typed_message("xray.app.proxyman.ReceiverConfig", &receiver)),
        proxy_settings: Some(proxy),
    }
}

/// Xray's config message of the inbound protocols listed by type only.
fn inbound_config_type(protocol: &InboundProtocol) -> &'static str {
    match protocol {
        InboundProtocol::Socks(_) => "xray.proxy.socks.ServerConfig",
        InboundProtocol::Http(_) => "xray.proxy.http.ServerConfig",
        InboundProtocol::Shadowsocks(_) => "xray.proxy.shadowsocks.ServerConfig",
        InboundProtocol::Vless(_) => "xray.proxy.vless.inbound.Config",
        InboundProtocol::Vmess(_) => "xray.proxy.vmess.inbound.Config",
        InboundProtocol::Trojan(_) => "xray.proxy.trojan.ServerConfig",
        InboundProtocol::Tunnel(_) => "xray.proxy.dokodemo.Config",
        // Skiff's own protocols have no Xray message.
        InboundProtocol::Kcptun(_) => "skiff.proxy.kcptun.Config",
        InboundProtocol::Udpspeeder(_) => "skiff.proxy.udpspeeder.Config",
    }
}

/// Xray's config message of an outbound protocol, by which `xray api lso` names it.
pub fn xray_config_type(protocol: &OutboundProtocol) -> &'static str {
    match protocol {
        OutboundProtocol::Freedom(_) => "xray.proxy.freedom.Config",
        OutboundProtocol::Blackhole(_) => "xray.proxy.blackhole.Config",
        OutboundProtocol::Vless(_) => "xray.proxy.vless.outbound.Config",
        OutboundProtocol::Vmess(_) => "xray.proxy.vmess.outbound.Config",
        OutboundProtocol::Trojan(_) => "xray.proxy.trojan.ClientConfig",
        OutboundProtocol::Shadowsocks(_) => "xray.proxy.shadowsocks.ClientConfig",
        OutboundProtocol::Dns(_) => "xray.proxy.dns.Config",
        // Skiff's own protocols have no Xray message.
        OutboundProtocol::Kcptun(_) => "skiff.proxy.kcptun.Config",
        OutboundProtocol::Udpspeeder(_) => "skiff.proxy.udpspeeder.Config",
    }
}

fn typed(name: &str) -> Option<TypedMessage> {
    Some(TypedMessage {
        r#type: name.into(),
        value: Vec::new(),
    })
}

impl Handlers for Registry {
    fn inbounds(&self) -> Vec<InboundHandlerConfig> {
        self.lock_inbounds()
            .iter()
            .map(|r| r.config.clone())
            .collect()
    }

    fn users(&self, tag: &str, email: Option<&str>) -> Result<Vec<ApiUser>, HandlerError> {
        let inbound = self.inbound(tag)?;
        let users = inbound.users.as_ref().ok_or(HandlerError::NotUserManager)?;
        Ok(users.list(email))
    }

    fn user_count(&self, tag: &str) -> Result<usize, HandlerError> {
        let inbound = self.inbound(tag)?;
        let users = inbound.users.as_ref().ok_or(HandlerError::NotUserManager)?;
        Ok(users.count())
    }

    fn add_user(&self, tag: &str, user: ApiUser) -> Result<(), HandlerError> {
        let inbound = self.inbound(tag)?;
        let users = inbound.users.as_ref().ok_or(HandlerError::NotUserManager)?;
        users.add(&inbound.kind, user)?;
        info!(inbound = %inbound.tag, "API: user added");
        Ok(())
    }

    fn remove_user(&self, tag: &str, email: &str) -> Result<(), HandlerError> {
        let inbound = self.inbound(tag)?;
        let users = inbound.users.as_ref().ok_or(HandlerError::NotUserManager)?;
        users.remove(&inbound.kind, email)?;
        info!(inbound = %inbound.tag, "API: user removed; its connections are closed");
        Ok(())
    }

    fn remove_inbound(&self, tag: &str) -> Result<(), HandlerError> {
        if !self.stop_inbound(tag) {
            return Err(HandlerError::NoClue);
        }
        info!(inbound = %tag, "API: inbound removed; its listeners are closed");
        Ok(())
    }

    fn outbounds(&self) -> Vec<OutboundHandlerConfig> {
        self.outbounds
            .iter()
            .zip(&self.shared.removed_outbounds)
            .filter(|(_, removed)| !removed.load(Ordering::Relaxed))
            .map(|((tag, kind), _)| OutboundHandlerConfig {
                tag: tag.clone(),
                sender_settings: typed("xray.app.proxyman.SenderConfig"),
                proxy_settings: typed(kind),
                ..OutboundHandlerConfig::default()
            })
            .collect()
    }

    fn remove_outbound(&self, tag: &str) {
        for ((known, _), removed) in self.outbounds.iter().zip(&self.shared.removed_outbounds) {
            if known == tag && !removed.swap(true, Ordering::Relaxed) {
                info!(outbound = %tag, "API: outbound removed; connections routed to it are closed");
            }
        }
    }
}
