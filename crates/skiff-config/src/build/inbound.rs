//! Inbounds: listen address, ports, tag uniqueness and the parts around the protocol.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use skiff_core::Cidr;

use super::fallback_loops;
use super::unique_tags::UniqueTags;
use super::{error_count, lower, protocols, routing, stream};
use crate::diag::Diagnostic;
use crate::plan::{
    DomainEntry, DomainSet, InboundPlan, InboundProtocol, SniffProtocol, SniffingPlan,
    StreamNetwork, StreamPlan,
};
use crate::raw::Item;
use crate::raw::bounds::{RawAllocate, RawInbound, RawSniffing};
use crate::source::Loc;

pub fn build_inbounds(items: &[Item<RawInbound>], diags: &mut Vec<Diagnostic>) -> Vec<InboundPlan> {
    let mut tags = UniqueTags::new("inbound");
    let mut built = Vec::new();
    for item in items {
        tags.check(item.raw.tag.as_deref(), &item.loc, diags);
        if let Some(plan) = build_inbound(item, diags) {
            built.push((&item.loc, plan));
        }
    }
    let located: Vec<(&Loc, &InboundPlan)> = built.iter().map(|(loc, plan)| (*loc, plan)).collect();
    fallback_loops::check(&located, diags);
    built.into_iter().map(|(_, plan)| plan).collect()
}

fn build_inbound(item: &Item<RawInbound>, diags: &mut Vec<Diagnostic>) -> Option<InboundPlan> {
    let (raw, loc) = (&item.raw, &item.loc);
    let errors_before = error_count(diags);
    let listen = listen_address(raw.listen.as_deref(), &loc.key("listen"), diags);
    let ports = match &raw.port {
        None => {
            diags.push(
                loc.key("port")
                    .error("missing `port`: an inbound needs a port to listen on"),
            );
            Vec::new()
        }
        Some(spec) => spec.ranges(false).unwrap_or_else(|e| {
            diags.push(loc.key("port").error(e));
            Vec::new()
        }),
    };
    let stream = stream::build_stream(
        raw.stream_settings.as_ref(),
        &loc.key("streamSettings"),
        stream::Side::Inbound,
        diags,
    );
    let sniffing = sniffing(raw.sniffing.as_ref(), &loc.key("sniffing"), diags);
    if let Some(allocate) = &raw.allocate {
        check_allocate(allocate, &loc.key("allocate"), diags);
    }
    let protocol =
        protocols::inbound_protocol(raw.protocol.as_deref(), raw.settings.as_ref(), loc, diags);
    if let Some(protocol) = &protocol
        && !protocol.fallbacks().is_empty()
        && stream.network != StreamNetwork::Tcp
    {
        // Fallbacks hand on the raw bytes of a TCP connection, with TLS (name and alpn then
        // select) or without (Xray's layout behind a TLS-terminating HAProxy or nginx).
        diags.push(
            loc.key("settings")
                .key("fallbacks")
                .error("fallbacks need a raw TCP inbound (streamSettings network \"tcp\"/\"raw\")"),
        );
    }
    if let Some(InboundProtocol::Vless(v)) = &protocol
        && v.clients.iter().any(|c| c.flow.is_vision())
        && !stream.is_raw_tls()
    {
        diags.push(loc.key("streamSettings").error(
            "XTLS Vision (flow \"xtls-rprx-vision\") needs raw TCP with TLS or REALITY: set network \"tcp\" and security \"tls\" or \"reality\"",
        ));
    }
    if let Some(InboundProtocol::Shadowsocks(ss)) = &protocol
        && ss.network.udp
        && stream != StreamPlan::default()
    {
        diags.push(loc.key("streamSettings").warning(
            "applies to Shadowsocks over TCP only: its UDP is plain UDP on the same port",
        ));
    }
    let udp_too = match &protocol {
        Some(InboundProtocol::Shadowsocks(ss)) => ss.network.udp,
        Some(InboundProtocol::Tunnel(t)) => t.network.udp,
        _ => false,
    };
    if udp_too && stream.network.is_udp() {
        diags.push(loc.key("streamSettings").key("network").error(
            "mKCP listens on the inbound's UDP port, which this inbound's own UDP (`network` with \"udp\") also needs: use separate inbounds",
        ));
    }
    if let Some(InboundProtocol::Udpspeeder(_)) = &protocol
        && !stream.only_udp2raw()
    {
        diags.push(loc.key("streamSettings").error(
            "udpspeeder brings its own transport (FEC over UDP): streamSettings do not apply, except udp2rawSettings",
        ));
    }
    if stream.udp2raw.is_some() {
        stream::check_udp2raw_layer(
            &stream,
            matches!(
                protocol,
                Some(InboundProtocol::Udpspeeder(_) | InboundProtocol::Kcptun(_))
            ),
            &loc.key("streamSettings"),
            diags,
        );
    }
    if let Some(InboundProtocol::Udp2raw(_)) = &protocol
        && stream != StreamPlan::default()
    {
        diags.push(
            loc.key("streamSettings").error(
                "udp2raw brings its own transport (raw packets): streamSettings do not apply",
            ),
        );
    }
    if let Some(InboundProtocol::Kcptun(_)) = &protocol
        && !stream.only_udp2raw()
    {
        diags.push(loc.key("streamSettings").error(
            "kcptun brings its own transport (KCP over UDP): streamSettings do not apply, except udp2rawSettings",
        ));
    }
    if error_count(diags) > errors_before {
        return None;
    }
    Some(InboundPlan {
        tag: raw.tag.clone().unwrap_or_default(),
        listen,
        ports,
        protocol: protocol?,
        stream,
        sniffing,
    })
}

/// `listen`: an IP address, 0.0.0.0 when absent. Xray also takes a Unix socket path (`/...`
/// or abstract `@...`), which skiff does not support yet.
fn listen_address(listen: Option<&str>, loc: &Loc, diags: &mut Vec<Diagnostic>) -> IpAddr {
    let any = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
    let Some(text) = listen.map(str::trim).filter(|t| !t.is_empty()) else {
        return any;
    };
    if text.starts_with('/') || text.starts_with('@') {
        diags.push(loc.error(format!(
            "listening on a Unix socket (`{text}`) is not supported by this version of skiff yet"
        )));
        return any;
    }
    let bare = text
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .unwrap_or(text);
    bare.parse().unwrap_or_else(|_| {
        diags.push(loc.error(format!(
            "`{text}` is not an IP address (listen takes an IP such as 127.0.0.1 or ::)"
        )));
        any
    })
}

/// `sniffing`: None unless enabled. `destOverride` names as Xray spells them (`https` and
/// `ssl` are `tls`); `fakedns` needs a fake-IP pool skiff does not have, so it is dropped with
/// a warning, and an error when nothing else is left to sniff for.
fn sniffing(
    raw: Option<&RawSniffing>,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<SniffingPlan> {
    let raw = raw?;
    if !raw.enabled.unwrap_or(false) {
        return None;
    }
    let mut plan = SniffingPlan {
        metadata_only: raw.metadata_only.unwrap_or(false),
        route_only: raw.route_only.unwrap_or(false),
        ..SniffingPlan::default()
    };
    let overrides = raw.dest_override.as_deref().unwrap_or_default();
    let mut fakedns = None;
    for (i, name) in overrides.iter().enumerate() {
        let protocol = match name.to_ascii_lowercase().as_str() {
            "http" => SniffProtocol::Http,
            "tls" | "https" | "ssl" => SniffProtocol::Tls,
            "quic" => SniffProtocol::Quic,
            "fakedns" | "fakedns+others" => {
                fakedns = Some(i);
                continue;
            }
            _ => {
                diags.push(loc.key("destOverride").index(i).error(format!(
                    "unknown sniffing protocol `{name}` (expected http, tls, quic or fakedns)"
                )));
                continue;
            }
        };
        if !plan.dest_override.contains(&protocol) {
            plan.dest_override.push(protocol);
        }
    }
    if let Some(i) = fakedns {
        let at = loc.key("destOverride").index(i);
        if plan.dest_override.is_empty() {
            diags.push(at.error(
                "`fakedns` needs a fake-IP pool (the `fakedns` section), which skiff does not have; with nothing else in destOverride, sniffing would do nothing",
            ));
        } else {
            diags.push(at.warning(
                "`fakedns` needs a fake-IP pool, which skiff does not have: ignored (the other sniffers still run)",
            ));
        }
    }
    if plan.metadata_only {
        diags.push(loc.key("metadataOnly").warning(
            "metadataOnly: no content is read, and skiff has no metadata sniffer (fakedns), so nothing is sniffed",
        ));
    }
    let mut excluded = Vec::new();
    for (i, text) in raw.domains_excluded.iter().flatten().enumerate() {
        let at = loc.key("domainsExcluded").index(i);
        match routing::domain_entry(text) {
            Ok(DomainEntry::Custom(domain)) => excluded.push(domain),
            Ok(DomainEntry::Geosite { .. }) => diags.push(at.error(
                "geosite lists in domainsExcluded are not supported by this version of skiff yet; list the domains",
            )),
            Err(e) => diags.push(at.error(e)),
        }
    }
    if !excluded.is_empty() {
        match DomainSet::new(excluded) {
            Ok(set) => plan.domains_excluded = Some(Arc::new(set)),
            Err(e) => diags.push(loc.key("domainsExcluded").error(e)),
        }
    }
    for (i, text) in raw.ips_excluded.iter().flatten().enumerate() {
        match Cidr::parse(text.trim()) {
            Ok(cidr) => plan.ips_excluded.push(cidr),
            Err(e) => diags.push(loc.key("ipsExcluded").index(i).error(e)),
        }
    }
    Some(plan)
}

/// Only Xray's default strategy exists: every port is listened on all the time.
fn check_allocate(allocate: &RawAllocate, loc: &Loc, diags: &mut Vec<Diagnostic>) {
    match lower(allocate.strategy.as_deref()).as_deref() {
        None | Some("always") => {}
        Some(other) => diags.push(loc.key("strategy").error(format!(
            "allocate strategy `{other}` is not supported by this version of skiff yet (only \"always\")"
        ))),
    }
}
