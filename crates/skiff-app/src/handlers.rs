//! The running instance's inbounds and outbounds as Xray's HandlerService sees them
//! (skiff-api's [`Handlers`]): list them, list, add and remove an inbound's users, stop an
//! inbound's listeners, remove an outbound; start an inbound or add an outbound given as the
//! config's JSON form, built by skiff-config as the config file's are.

use std::sync::{Arc, Mutex, PoisonError};

use skiff_api::handler_service::{ApiUser, HandlerError, Handlers};
use skiff_api::proto::core::{InboundHandlerConfig, OutboundHandlerConfig};
use skiff_api::proto::serial::TypedMessage;
use skiff_config::{InboundPlan, OutboundPlan, OutboundProtocol, Plan, Source};
use tokio::task::AbortHandle;
use tracing::info;

use crate::inbound::InboundHandler;
use crate::inbound_listing::inbound_config;
use crate::instance::{ListenerContext, start_inbound};

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
    /// What AddInbound starts listeners with; its `shared` holds the outbounds.
    context: ListenerContext,
}

impl Registry {
    pub fn new(context: ListenerContext) -> Registry {
        Registry {
            inbounds: Mutex::default(),
            context,
        }
    }

    /// `plan` is the inbound's as started: ListInbounds reports it.
    pub fn add_inbound(
        &self,
        plan: &InboundPlan,
        handler: Arc<InboundHandler>,
        listeners: Vec<AbortHandle>,
    ) {
        let config = inbound_config(plan, &handler, None);
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

    /// What inbounds are started with (a reload starts its new ones with it).
    pub(crate) fn context(&self) -> &ListenerContext {
        &self.context
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
        OutboundProtocol::Udp2raw(_) => "skiff.proxy.udp2raw.Config",
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
        self.context
            .shared
            .outbounds
            .listed()
            .into_iter()
            .map(|(tag, kind)| OutboundHandlerConfig {
                tag: tag.to_string(),
                sender_settings: typed("xray.app.proxyman.SenderConfig"),
                proxy_settings: typed(kind),
                ..OutboundHandlerConfig::default()
            })
            .collect()
    }

    fn remove_outbound(&self, tag: &str) {
        if self.context.shared.outbounds.remove(tag) {
            info!(outbound = %tag, "API: outbound removed; connections routed to it are closed");
        }
    }

    fn add_inbound(
        &self,
        inbound: serde_json::Value,
        receiver: Option<TypedMessage>,
    ) -> Result<(), HandlerError> {
        let plan = built("inbounds", inbound)?
            .inbounds
            .pop()
            .ok_or_else(|| HandlerError::Build("the inbound did not build".into()))?;
        let shared = &self.context.shared;
        let handler = Arc::new(
            InboundHandler::build(&plan, &shared.stats, &shared.policy.system)
                .map_err(HandlerError::Build)?,
        );
        // Held until the inbound is registered, so that two calls cannot both take a tag.
        let mut inbounds = self.lock_inbounds();
        if !plan.tag.is_empty() && inbounds.iter().any(|r| *r.handler.tag == plan.tag) {
            return Err(HandlerError::InboundTagExists(plan.tag));
        }
        let (bound, tasks) = start_inbound(&self.context, &plan, &handler)
            .map_err(|e| HandlerError::Listen(e.to_string()))?;
        for l in &bound {
            info!(inbound = %l.tag, protocol = l.protocol, "API: inbound added, listening on {}/{}", l.address, l.network);
        }
        let config = inbound_config(&plan, &handler, receiver);
        inbounds.push(Registered {
            handler,
            config,
            listeners: tasks.iter().map(|t| t.abort_handle()).collect(),
        });
        Ok(())
    }

    fn add_outbound(&self, outbound: serde_json::Value) -> Result<(), HandlerError> {
        let plan: OutboundPlan = built("outbounds", outbound)?
            .outbounds
            .pop()
            .ok_or_else(|| HandlerError::Build("the outbound did not build".into()))?;
        let shared = &self.context.shared;
        let handler = crate::outbounds::build(
            std::slice::from_ref(&plan),
            &shared.stats,
            &shared.policy.system,
            shared.resolver.as_ref(),
        )
        .map_err(HandlerError::Build)?
        .pop()
        .ok_or_else(|| HandlerError::Build("the outbound did not build".into()))?;
        let index = shared
            .outbounds
            .add(handler, xray_config_type(&plan.protocol))
            .map_err(|()| HandlerError::OutboundTagExists(plan.tag.clone()))?;
        // Rules added from now on may name it.
        shared.router.set_outbound_tag(index, &plan.tag);
        info!(outbound = %plan.tag, "API: outbound added");
        Ok(())
    }
}

/// A config holding `handler` alone in its `section` ("inbounds" or "outbounds"), built
/// by skiff-config as a config file is: its errors are the API's answer, its warnings
/// logged.
fn built(section: &str, handler: serde_json::Value) -> Result<Plan, HandlerError> {
    let mut config = serde_json::Map::new();
    config.insert(section.into(), serde_json::Value::Array(vec![handler]));
    let source = Source {
        name: format!("API {section}"),
        text: serde_json::Value::Object(config).to_string(),
    };
    match skiff_config::load_sources(&[source]) {
        Ok(loaded) => {
            for w in &loaded.warnings {
                tracing::warn!("API: {}: {}", w.path, w.message);
            }
            Ok(loaded.plan)
        }
        Err(diags) => Err(HandlerError::Build(
            diags
                .iter()
                .filter(|d| d.is_error())
                .map(|d| format!("{}: {}", d.path, d.message))
                .collect::<Vec<_>>()
                .join("; "),
        )),
    }
}
