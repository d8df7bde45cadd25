//! State every connection task reads: outbounds, router, policy, counters, access log.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
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
    pub outbounds: Vec<OutboundHandler>,
    /// Per outbound: removed through the API (RemoveOutbound).
    pub removed_outbounds: Vec<AtomicBool>,
    /// Where a connection routed to a removed outbound goes: nowhere (it is closed).
    pub no_outbound: OutboundHandler,
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
    pub async fn pick(&self, meta: &Metadata) -> &OutboundHandler {
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
                return &self.no_outbound;
            }
        };
        // The plan guarantees at least one outbound and valid indices.
        let index = index.min(self.outbounds.len().saturating_sub(1));
        if self.is_removed(index) {
            // Xray closes the connection too ("non existing outTag"), rather than take the
            // default outbound.
            &self.no_outbound
        } else {
            &self.outbounds[index]
        }
    }

    /// The domain's IPs for routing (the system resolver without a `dns` section); none when
    /// it does not resolve in time.
    pub async fn resolve_for_routing(&self, name: &str, port: u16) -> Vec<IpAddr> {
        resolve(self.resolver.as_deref(), name, port).await
    }

    fn is_removed(&self, index: usize) -> bool {
        self.removed_outbounds
            .get(index)
            .is_some_and(|r| r.load(Ordering::Relaxed))
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
