//! Raw (merged) config → validated [`Plan`]. Every check reports through `diags` and carries
//! on, so one run lists as many problems as possible; an item with an error is left out of
//! the plan, and the caller discards the plan when any error was reported.

mod api;
pub(crate) mod assets;
mod dns;
mod fallback_loops;
pub(crate) mod geo_load;
mod grpc;
mod inbound;
mod log;
mod metrics;
mod mux;
mod outbound;
mod policy;
mod protocols;
mod reality;
pub(crate) mod routing;
mod stream;
mod tls;
mod unique_tags;
mod xhttp;

use std::collections::HashSet;

use crate::diag::{Diagnostic, Severity};
use crate::merge::Merged;
use crate::plan::{
    FreedomDomainStrategy, FreedomOutbound, OutboundPlan, OutboundProtocol, Plan, StreamPlan,
};
use crate::raw::values::{Int, LEVEL, out_of_range};
use crate::source::Loc;

/// The outbound added when a config has none at all (Xray would refuse to route anything;
/// skiff connects directly, which is what a bare inbound-only config means in practice).
pub const DEFAULT_OUTBOUND_TAG: &str = "direct";

pub fn build(merged: &Merged, diags: &mut Vec<Diagnostic>) -> Plan {
    let log = log::build_log(merged.log.as_ref(), diags);
    let inbounds = inbound::build_inbounds(&merged.inbounds, diags);
    // The dns outbound's rules may name geosite lists.
    let mut outbounds = outbound::build_outbounds(
        &merged.outbounds,
        &merged.damage,
        &std::cell::RefCell::new(geo_load::GeoLoader::new(assets::process_asset_dirs())),
        diags,
    );

    // Every tag a rule may name: all merged outbounds (also those whose build failed: their
    // error is already reported) and the default one. `merged.damage` covers the rest.
    let mut outbound_tags: HashSet<String> = merged
        .outbounds
        .iter()
        .filter_map(|o| o.raw.tag.clone())
        .collect();
    if merged.outbounds.is_empty() && !merged.damage.has_outbounds() {
        outbounds.push(default_outbound());
        outbound_tags.insert(DEFAULT_OUTBOUND_TAG.to_owned());
    }
    let api = api::build_api(merged.api.as_ref(), diags);
    // Xray's older API form routes an inbound to the API's tag as if it were an outbound.
    if let Some(tag) = api.as_ref().and_then(|a| a.tag.clone()) {
        outbound_tags.insert(tag);
    }
    let inbound_tags: HashSet<String> = merged
        .inbounds
        .iter()
        .filter_map(|i| i.raw.tag.clone())
        .collect();

    let dns = dns::build_dns(
        merged.dns.as_ref(),
        &std::cell::RefCell::new(geo_load::GeoLoader::new(assets::process_asset_dirs())),
        diags,
    );
    let routing = routing::build_routing(
        merged.routing.as_ref(),
        &outbound_tags,
        &inbound_tags,
        &merged.damage,
        geo_load::GeoLoader::new(assets::process_asset_dirs()),
        diags,
    );
    let policy = policy::build_policy(merged.policy.as_ref(), diags);
    let metrics = metrics::build_metrics(merged.metrics.as_ref(), diags);
    Plan {
        log,
        inbounds,
        outbounds,
        routing,
        policy,
        dns,
        api,
        metrics,
    }
}

fn default_outbound() -> OutboundPlan {
    OutboundPlan {
        tag: DEFAULT_OUTBOUND_TAG.to_owned(),
        protocol: OutboundProtocol::Freedom(FreedomOutbound {
            domain_strategy: FreedomDomainStrategy::AsIs,
            redirect: None,
        }),
        stream: StreamPlan::default(),
        via: None,
        mux: None,
    }
}

fn error_count(diags: &[Diagnostic]) -> usize {
    diags
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .count()
}

/// `userLevel`: a level number, 0 when absent.
fn user_level(value: Option<Int>, loc: &Loc, diags: &mut Vec<Diagnostic>) -> u32 {
    match value {
        None => 0,
        Some(v) => v.get::<u32>().unwrap_or_else(|| {
            diags.push(loc.error(out_of_range(v, LEVEL)));
            0
        }),
    }
}

/// The lowercase form of an optional enum-like string; Xray compares these case-insensitively.
fn lower(value: Option<&str>) -> Option<String> {
    value
        .map(|v| v.trim().to_ascii_lowercase())
        .filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_api;
#[cfg(test)]
mod tests_dns;
#[cfg(test)]
mod tests_metrics;

#[cfg(test)]
mod tests_trojan;
#[cfg(test)]
mod tests_vless;

#[cfg(test)]
mod tests_kcptun;
#[cfg(test)]
mod tests_mkcp;
#[cfg(test)]
mod tests_mux;
#[cfg(test)]
mod tests_reality;
#[cfg(test)]
mod tests_shadowsocks;
#[cfg(test)]
mod tests_sniffing;
#[cfg(test)]
mod tests_udp2raw;
#[cfg(test)]
mod tests_udpspeeder;
#[cfg(test)]
mod tests_vmess;
