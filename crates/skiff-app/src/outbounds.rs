//! Builds outbound handlers from the plan, wiring `proxySettings.tag` chains (the config has
//! already rejected cycles and missing tags).

use std::collections::HashMap;
use std::sync::Arc;

use skiff_config::{FreedomDomainStrategy, OutboundPlan, OutboundProtocol};
use skiff_core::{Counter, Outbound, Stats};
use skiff_proto::blackhole::Blackhole;
use skiff_proto::freedom::{Freedom, Resolve};

pub struct OutboundHandler {
    pub tag: Arc<str>,
    pub handler: Arc<dyn Outbound>,
    pub uplink: Arc<Counter>,
    pub downlink: Arc<Counter>,
}

pub fn build(plans: &[OutboundPlan], stats: &Stats) -> Vec<OutboundHandler> {
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
            built.insert(plan.tag.clone(), make(&plan.protocol, via));
        }
    }
    plans
        .iter()
        .map(|plan| OutboundHandler {
            tag: Arc::from(plan.tag.as_str()),
            handler: built
                .get(&plan.tag)
                .cloned()
                .unwrap_or_else(|| make(&plan.protocol, None)),
            uplink: stats.counter(&format!("outbound>>>{}>>>traffic>>>uplink", plan.tag)),
            downlink: stats.counter(&format!("outbound>>>{}>>>traffic>>>downlink", plan.tag)),
        })
        .collect()
}

fn make(protocol: &OutboundProtocol, via: Option<Arc<dyn Outbound>>) -> Arc<dyn Outbound> {
    match protocol {
        OutboundProtocol::Freedom(f) => Arc::new(Freedom {
            resolve: match f.domain_strategy {
                FreedomDomainStrategy::AsIs => Resolve::AsIs,
                FreedomDomainStrategy::UseIp => Resolve::Any,
                FreedomDomainStrategy::UseIpv4 => Resolve::V4,
                FreedomDomainStrategy::UseIpv6 => Resolve::V6,
            },
            redirect: f.redirect.clone(),
            via,
        }),
        OutboundProtocol::Blackhole(b) => Arc::new(Blackhole {
            http_response: b.response == skiff_config::BlackholeResponse::Http,
        }),
    }
}
