//! Outbounds: tag uniqueness, protocol, and chaining through `proxySettings.tag` (which must
//! name an outbound and must not loop back, or every connection would recurse forever).

use std::collections::HashMap;

use super::unique_tags::UniqueTags;
use super::{error_count, protocols, stream};
use crate::diag::Diagnostic;
use crate::plan::{OutboundPlan, OutboundProtocol, StreamPlan};
use crate::raw::bounds::RawOutbound;
use crate::raw::{Damage, Item};

pub fn build_outbounds(
    items: &[Item<RawOutbound>],
    damage: &Damage,
    geo: &std::cell::RefCell<super::geo_load::GeoLoader>,
    diags: &mut Vec<Diagnostic>,
) -> Vec<OutboundPlan> {
    let mut tags = UniqueTags::new("outbound");
    let mut plans = Vec::new();
    for item in items {
        tags.check(item.raw.tag.as_deref(), &item.loc, diags);
        if let Some(plan) = build_outbound(item, geo, diags) {
            plans.push(plan);
        }
    }
    check_chains(items, damage, diags);
    plans
}

fn build_outbound(
    item: &Item<RawOutbound>,
    geo: &std::cell::RefCell<super::geo_load::GeoLoader>,
    diags: &mut Vec<Diagnostic>,
) -> Option<OutboundPlan> {
    let (raw, loc) = (&item.raw, &item.loc);
    let before = error_count(diags);
    let stream = stream::build_stream(
        raw.stream_settings.as_ref(),
        &loc.key("streamSettings"),
        stream::Side::Outbound,
        diags,
    );
    let via =
        match &raw.proxy_settings {
            None => None,
            Some(p) => match p.tag.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
                Some(tag) => Some(tag.to_owned()),
                None => {
                    diags.push(loc.key("proxySettings").key("tag").error(
                        "missing `tag`: proxySettings must name the outbound to dial through",
                    ));
                    None
                }
            },
        };
    if raw
        .send_through
        .as_deref()
        .is_some_and(|s| !s.trim().is_empty())
    {
        diags.push(
            loc.key("sendThrough")
                .error("sendThrough is not supported by this version of skiff yet"),
        );
    }
    let protocol = protocols::outbound_protocol(
        raw.protocol.as_deref(),
        raw.settings.as_ref(),
        loc,
        geo,
        diags,
    );
    if let Some(OutboundProtocol::Vless(v)) = &protocol
        && v.flow.is_vision()
        && !stream.is_raw_tls()
    {
        diags.push(loc.key("streamSettings").error(
            "XTLS Vision (flow \"xtls-rprx-vision\") needs raw TCP with TLS or REALITY: set network \"tcp\" and security \"tls\" or \"reality\"",
        ));
    }
    if let Some(OutboundProtocol::Udpspeeder(_)) = &protocol {
        if !stream.only_udp2raw() {
            diags.push(loc.key("streamSettings").error(
                "udpspeeder brings its own transport (FEC over UDP): streamSettings do not apply, except udp2rawSettings",
            ));
        }
        if via.is_some() {
            diags.push(loc.key("proxySettings").error(
                "udpspeeder speaks UDP to its server: it cannot be chained through another outbound",
            ));
        }
    }
    if let Some(OutboundProtocol::Udp2raw(_)) = &protocol {
        if stream != StreamPlan::default() {
            diags.push(loc.key("streamSettings").error(
                "udp2raw brings its own transport (raw packets): streamSettings do not apply",
            ));
        }
        if via.is_some() {
            diags.push(loc.key("proxySettings").error(
                "udp2raw sends raw packets to its server: it cannot be chained through another outbound",
            ));
        }
    }
    if let Some(OutboundProtocol::Kcptun(_)) = &protocol {
        if !stream.only_udp2raw() {
            diags.push(loc.key("streamSettings").error(
                "kcptun brings its own transport (KCP over UDP): streamSettings do not apply, except udp2rawSettings",
            ));
        }
        if via.is_some() {
            diags.push(loc.key("proxySettings").error(
                "kcptun speaks UDP to its server: it cannot be chained through another outbound",
            ));
        }
    }
    if stream.udp2raw.is_some() {
        super::stream::check_udp2raw_layer(
            &stream,
            matches!(
                protocol,
                Some(OutboundProtocol::Udpspeeder(_) | OutboundProtocol::Kcptun(_))
            ),
            &loc.key("streamSettings"),
            diags,
        );
        if via.is_some() {
            diags.push(loc.key("proxySettings").error(
                "udp2rawSettings sends raw packets to the server: it cannot be chained through another outbound",
            ));
        }
    }
    let mux = super::mux::build_mux(raw.mux.as_ref(), protocol.as_ref(), loc, diags);
    if error_count(diags) > before {
        return None;
    }
    Some(OutboundPlan {
        tag: raw.tag.clone().unwrap_or_default(),
        protocol: protocol?,
        stream,
        via,
        mux,
    })
}

/// Every `proxySettings.tag` must name an outbound, and following them must end at an
/// outbound that dials directly. Each member of a cycle gets its own error, showing the loop.
fn check_chains(items: &[Item<RawOutbound>], damage: &Damage, diags: &mut Vec<Diagnostic>) {
    fn via_of(item: &Item<RawOutbound>) -> Option<&str> {
        let tag = item.raw.proxy_settings.as_ref()?.tag.as_deref()?.trim();
        (!tag.is_empty()).then_some(tag)
    }
    // The first outbound with a tag is the one a reference reaches (later duplicates are
    // already errors).
    let mut by_tag: HashMap<&str, &Item<RawOutbound>> = HashMap::new();
    for item in items {
        if let Some(tag) = item.raw.tag.as_deref().filter(|t| !t.is_empty()) {
            by_tag.entry(tag).or_insert(item);
        }
    }
    for item in items {
        let Some(via) = via_of(item) else { continue };
        let loc = item.loc.key("proxySettings").key("tag");
        if !by_tag.contains_key(via) {
            if !damage.may_hide_outbound(via) {
                diags.push(loc.error(format!("no outbound is tagged `{via}`")));
            }
            continue;
        }
        let Some(start) = item.raw.tag.as_deref().filter(|t| !t.is_empty()) else {
            continue;
        };
        let mut chain = vec![start, via];
        let mut current = via;
        // A chain longer than the number of outbounds must have looped.
        for _ in 0..=items.len() {
            if current == start {
                diags.push(loc.error(format!(
                    "proxySettings forms a cycle: {}",
                    chain.join(" → ")
                )));
                break;
            }
            let Some(next) = by_tag.get(current).and_then(|i| via_of(i)) else {
                break;
            };
            if chain.iter().skip(1).any(|&t| t == next) {
                // A loop that does not come back to `start`: reported at its own members.
                break;
            }
            chain.push(next);
            current = next;
        }
    }
}
