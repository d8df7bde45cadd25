//! `metrics`: Xray's metrics object. Skiff serves it on `listen` (Prometheus text on
//! `/metrics`, Xray's expvar JSON on `/debug/vars`); Xray's other form, an inbound routed to
//! the outbound tag `tag`, is not served yet.

use std::net::SocketAddr;

use crate::diag::Diagnostic;
use crate::plan::MetricsPlan;
use crate::raw::Item;
use crate::raw::top::RawMetrics;

pub fn build_metrics(
    item: Option<&Item<RawMetrics>>,
    diags: &mut Vec<Diagnostic>,
) -> Option<MetricsPlan> {
    let Item { loc, raw } = item?;
    let tag = raw.tag.as_deref().map(str::trim).filter(|t| !t.is_empty());
    let listen = raw
        .listen
        .as_deref()
        .map(str::trim)
        .filter(|l| !l.is_empty());
    let Some(text) = listen else {
        match tag {
            Some(_) => diags.push(loc.key("tag").error(
                "metrics served through a routed inbound (`tag` without `listen`) is not supported by this version of skiff yet: set `listen` (e.g. 127.0.0.1:11111)",
            )),
            None => diags.push(loc.error(
                "metrics needs `listen` (where it serves, e.g. 127.0.0.1:11111)",
            )),
        }
        return None;
    };
    let listen = match text.parse::<SocketAddr>() {
        Ok(addr) => addr,
        Err(_) => {
            diags.push(loc.key("listen").error(format!(
                "`{text}` is not an IP address and port (e.g. 127.0.0.1:11111)"
            )));
            return None;
        }
    };
    if tag.is_some() {
        diags.push(loc.key("tag").warning(
            "the metrics tag is not routable in this version of skiff: metrics are served on `listen` only",
        ));
    }
    Some(MetricsPlan { listen })
}
