//! State every connection task reads: outbounds, router, policy, counters, access log.

use std::net::IpAddr;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use skiff_config::{LevelPolicy, PolicyPlan};
use skiff_core::{
    Address, DirectionCounters, Family, Metadata, RelayCounters, RelayPolicy, Resolve, Stats,
};

use tokio::sync::watch;

use crate::access_log::AccessLog;
use crate::fallback::FallbackChains;
use crate::inbound::InboundHandler;
use crate::outbounds::OutboundHandler;
use crate::router::{Route, Router};

/// How long resolving a domain for routing may take before the rule is treated as unmatched.
const ROUTING_RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);

pub struct Shared {
    /// The outbounds routing picks from; the API removes and adds them.
    pub outbounds: Outbounds,
    pub router: Router,
    pub policy: PolicyPlan,
    pub stats: Arc<Stats>,
    pub access: AccessLog,
    /// Turns true when the shutdown's grace period is over: relays still running reset.
    pub cut: watch::Receiver<bool>,
    /// Open fallback connections to our own kind of listener, for loop detection.
    pub fallback_chains: FallbackChains,
    /// The DNS module (a `dns` section) routing resolves through; the system resolver
    /// without one.
    pub resolver: Option<Arc<dyn Resolve>>,
}

impl Shared {
    pub fn level(&self, level: u32) -> LevelPolicy {
        self.policy.level(level)
    }

    /// Routes `meta`, resolving its domain first if the routing strategy asks for IPs.
    pub async fn pick(&self, meta: &Metadata) -> Arc<OutboundHandler> {
        let route = match self.router.route(meta, None) {
            Route::NeedIps => {
                let ips = match meta.routing_destination() {
                    Some(Address::Domain(name, port)) => {
                        resolve(self.resolver.as_deref(), name, *port).await
                    }
                    _ => Vec::new(),
                };
                match self.router.route(meta, Some(&ips)) {
                    Route::NeedIps => Route::To(0),
                    route => route,
                }
            }
            route => route,
        };
        let index = match route {
            Route::To(i) => i,
            Route::NeedIps => 0,
            Route::Nowhere(tag) => {
                // Xray closes the connection ("non existing outTag"), rather than take the
                // default outbound.
                tracing::warn!("routing: no outbound is tagged `{tag}`; the connection is closed");
                return self.outbounds.none();
            }
        };
        self.outbounds.routed(index)
    }

    /// The domain's IPs for routing (the system resolver without a `dns` section); none when
    /// it does not resolve in time.
    pub async fn resolve_for_routing(&self, name: &str, port: u16) -> Vec<IpAddr> {
        resolve(self.resolver.as_deref(), name, port).await
    }

    pub fn relay_policy(&self, level: u32) -> RelayPolicy {
        let p = self.level(level);
        RelayPolicy {
            conn_idle: p.conn_idle,
            uplink_only: p.uplink_only,
            downlink_only: p.downlink_only,
            cut: Some(self.cut.clone()),
        }
    }

    /// The counters one connection feeds, live.
    pub fn counters(
        &self,
        inbound: &InboundHandler,
        outbound: &OutboundHandler,
        meta: &Metadata,
    ) -> RelayCounters {
        let mut up = vec![inbound.uplink.clone(), outbound.uplink.clone()];
        let mut down = vec![inbound.downlink.clone(), outbound.downlink.clone()];
        if let Some(user) = &meta.user {
            let policy = self.level(meta.level);
            if policy.stats_user_uplink {
                up.push(
                    self.stats
                        .counter(&format!("user>>>{user}>>>traffic>>>uplink")),
                );
            }
            if policy.stats_user_downlink {
                down.push(
                    self.stats
                        .counter(&format!("user>>>{user}>>>traffic>>>downlink")),
                );
            }
        }
        RelayCounters {
            uplink: DirectionCounters::new(up),
            downlink: DirectionCounters::new(down),
            spliced: self.stats.spliced().clone(),
            copied: self.stats.copied().clone(),
        }
    }
}

/// One outbound of the table: the router's index names it by position.
pub struct Slot {
    pub tag: Arc<str>,
    /// None once RemoveOutbound removed it.
    pub handler: Option<Arc<OutboundHandler>>,
    /// Xray's config type, by which ListOutbounds lists it; None for the API's own tag,
    /// which Xray does not list.
    pub listed_as: Option<&'static str>,
}

#[derive(Default)]
struct Table {
    /// The config's outbounds (and the API's tag) at the router's indices, then the ones
    /// AddOutbound added under new tags.
    slots: Vec<Slot>,
    /// Xray's default outbound: the first one added, until it is removed; then the next one
    /// added.
    default: Option<usize>,
}

/// The outbounds routing picks from. The config's are at the router's indices; RemoveOutbound
/// empties a slot, AddOutbound fills the slot of its tag again (so rules naming that tag
/// reach it) or adds one.
pub struct Outbounds {
    table: RwLock<Table>,
    /// Where a connection routed to a removed outbound goes: nowhere (it is closed).
    none: Arc<OutboundHandler>,
}

impl Outbounds {
    /// `handlers` in the router's order; index 0 is the default.
    pub fn new(handlers: Vec<(OutboundHandler, Option<&'static str>)>) -> Outbounds {
        let slots: Vec<Slot> = handlers
            .into_iter()
            .map(|(h, listed_as)| Slot {
                tag: h.tag.clone(),
                handler: Some(Arc::new(h)),
                listed_as,
            })
            .collect();
        let default = (!slots.is_empty()).then_some(0);
        Outbounds {
            table: RwLock::new(Table { slots, default }),
            none: Arc::new(OutboundHandler::none()),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Table> {
        self.table.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Table> {
        self.table.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// The outbound at the router's `index`. Index 0, the router's default, is Xray's
    /// default outbound, which after the first one's removal is the next one added.
    pub fn routed(&self, index: usize) -> Arc<OutboundHandler> {
        let table = self.read();
        let index = if index == 0 {
            table.default
        } else {
            Some(index)
        };
        // Xray closes a connection routed to a removed outbound ("non existing outTag")
        // rather than take the default one.
        index
            .and_then(|i| table.slots.get(i))
            .and_then(|slot| slot.handler.clone())
            .unwrap_or_else(|| self.none.clone())
    }

    /// Where a connection goes that routing sends nowhere (it is closed).
    pub fn none(&self) -> Arc<OutboundHandler> {
        self.none.clone()
    }

    /// The listed outbounds present, in order: tag and Xray's config type.
    pub fn listed(&self) -> Vec<(Arc<str>, &'static str)> {
        self.read()
            .slots
            .iter()
            .filter(|s| s.handler.is_some())
            .filter_map(|s| Some((s.tag.clone(), s.listed_as?)))
            .collect()
    }

    /// Makes the outbound tagged `tag` the default (Xray's: the config's first); false when
    /// no listed outbound has that tag.
    pub fn set_default(&self, tag: &str) -> bool {
        let mut table = self.write();
        let found = table
            .slots
            .iter()
            .position(|s| s.handler.is_some() && s.listed_as.is_some() && &*s.tag == tag);
        if found.is_some() {
            table.default = found;
        }
        found.is_some()
    }

    /// Removes every listed outbound tagged `tag`; true when one was there.
    pub fn remove(&self, tag: &str) -> bool {
        let mut table = self.write();
        let Table { slots, default } = &mut *table;
        let mut removed = false;
        for (i, slot) in slots.iter_mut().enumerate() {
            if slot.listed_as.is_some() && &*slot.tag == tag && slot.handler.take().is_some() {
                removed = true;
                if *default == Some(i) {
                    *default = None;
                }
            }
        }
        removed
    }

    /// Adds `handler`; Err when an outbound with its (non-empty) tag is present. Returns its
    /// slot (the router's index), which a tag keeps for good.
    pub fn add(&self, handler: OutboundHandler, listed_as: &'static str) -> Result<usize, ()> {
        let mut table = self.write();
        let tag = handler.tag.clone();
        let taken = |s: &Slot| s.handler.is_some() && s.tag == tag;
        if !tag.is_empty() && table.slots.iter().any(taken) {
            return Err(());
        }
        let free = (!tag.is_empty())
            .then(|| {
                table
                    .slots
                    .iter()
                    .position(|s| s.handler.is_none() && s.tag == tag && s.listed_as.is_some())
            })
            .flatten();
        let slot = Slot {
            tag,
            handler: Some(Arc::new(handler)),
            listed_as: Some(listed_as),
        };
        let index = match free {
            Some(i) => {
                table.slots[i] = slot;
                i
            }
            None => {
                table.slots.push(slot);
                table.slots.len() - 1
            }
        };
        if table.default.is_none() {
            table.default = Some(index);
        }
        Ok(index)
    }
}

/// The domain's IPs for routing; none when it does not resolve in time (the IP rules then
/// do not match, as in Xray).
async fn resolve(resolver: Option<&dyn Resolve>, name: &str, port: u16) -> Vec<IpAddr> {
    if let Some(resolver) = resolver {
        let lookup = resolver.lookup(name, Family::Any);
        return match tokio::time::timeout(ROUTING_RESOLVE_TIMEOUT, lookup).await {
            Ok(Ok(ips)) => ips,
            Ok(Err(e)) => {
                tracing::debug!("routing: resolving {name}: {e}");
                Vec::new()
            }
            Err(_) => Vec::new(),
        };
    }
    match tokio::time::timeout(
        ROUTING_RESOLVE_TIMEOUT,
        tokio::net::lookup_host((name, port)),
    )
    .await
    {
        Ok(Ok(addrs)) => addrs.map(|a| a.ip()).collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handler(tag: &str) -> OutboundHandler {
        OutboundHandler {
            tag: Arc::from(tag),
            ..OutboundHandler::none()
        }
    }

    fn routed_tag(o: &Outbounds, index: usize) -> String {
        o.routed(index).tag.to_string()
    }

    #[test]
    fn added_outbounds_refill_their_tag_and_become_the_default_as_in_xray() {
        let o = Outbounds::new(vec![
            (handler("direct"), Some("freedom")),
            (handler("relay"), Some("blackhole")),
            (handler("api"), None),
        ]);
        assert_eq!(routed_tag(&o, 0), "direct");
        // A present tag is refused; the API's own is not listed nor removable.
        assert!(o.add(handler("relay"), "vless").is_err());
        assert!(!o.remove("api"));
        assert!(o.remove("relay"));
        assert!(!o.remove("relay"));
        // Routed to a removed outbound: nowhere (the none handler has no tag).
        assert_eq!(routed_tag(&o, 1), "");
        // Added again under its tag: rules naming it (index 1) reach the new one.
        o.add(handler("relay"), "vless").unwrap();
        assert_eq!(routed_tag(&o, 1), "relay");
        assert_eq!(o.listed()[1], (Arc::from("relay"), "vless"));
        // Without a default, nothing is routed by default until one is added, which
        // becomes the default.
        assert!(o.remove("direct"));
        assert_eq!(routed_tag(&o, 0), "");
        o.add(handler("new"), "trojan").unwrap();
        assert_eq!(routed_tag(&o, 0), "new");
        let tags: Vec<String> = o.listed().iter().map(|(t, _)| t.to_string()).collect();
        assert_eq!(tags, ["relay", "new"]);
    }
}
