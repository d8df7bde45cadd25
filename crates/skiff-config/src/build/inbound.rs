//! Inbounds: listen address, ports, tag uniqueness and the parts around the protocol.

use std::net::{IpAddr, Ipv4Addr};

use super::fallback_loops;
use super::unique_tags::UniqueTags;
use super::{error_count, lower, protocols, stream};
use crate::diag::Diagnostic;
use crate::plan::{InboundPlan, InboundProtocol, StreamNetwork, StreamPlan};
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
            "XTLS Vision (flow \"xtls-rprx-vision\") needs raw TCP with TLS: set network \"tcp\" and security \"tls\"",
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
    if let Some(InboundProtocol::Kcptun(_)) = &protocol
        && stream != StreamPlan::default()
    {
        diags.push(
            loc.key("streamSettings").error(
                "kcptun brings its own transport (KCP over UDP): streamSettings do not apply",
            ),
        );
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

/// Sniffing is accepted so Xray configs load, but skiff does not inspect traffic yet: say so.
fn sniffing(raw: Option<&RawSniffing>, loc: &Loc, diags: &mut Vec<Diagnostic>) -> bool {
    let enabled = raw.and_then(|s| s.enabled).unwrap_or(false);
    if enabled {
        diags.push(loc.key("enabled").warning(
            "sniffing is accepted but not performed yet: destinations stay as the client sent them",
        ));
    }
    enabled
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
