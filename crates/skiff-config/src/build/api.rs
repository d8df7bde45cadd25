//! `api`: Xray's gRPC API. Reached on `listen` directly, or (Xray's older form) through an
//! inbound whose connections a routing rule sends to the outbound tag `tag`.

use std::net::SocketAddr;

use crate::diag::Diagnostic;
use crate::plan::ApiPlan;
use crate::raw::Item;
use crate::raw::top::RawApi;

/// The services skiff serves, by the names `api.services` uses.
pub const API_SERVICES: &[&str] = &[
    "StatsService",
    "LoggerService",
    "HandlerService",
    "RoutingService",
];

/// Services Xray has that skiff does not serve yet: listed with a warning (panels list them
/// all), and their calls are answered "unimplemented".
const NOT_YET: &[&str] = &["ObservatoryService", "ReflectionService"];

pub fn build_api(item: Option<&Item<RawApi>>, diags: &mut Vec<Diagnostic>) -> Option<ApiPlan> {
    let Item { loc, raw } = item?;
    let tag = raw.tag.clone().filter(|t| !t.trim().is_empty());
    let listen = match raw
        .listen
        .as_deref()
        .map(str::trim)
        .filter(|l| !l.is_empty())
    {
        None => None,
        Some(text) => match text.parse::<SocketAddr>() {
            Ok(addr) => Some(addr),
            Err(_) => {
                diags.push(loc.key("listen").error(format!(
                    "`{text}` is not an IP address and port (e.g. 127.0.0.1:10085)"
                )));
                return None;
            }
        },
    };
    if tag.is_none() && listen.is_none() {
        diags.push(loc.error(
            "the API needs `listen` (where it serves) or `tag` (the outbound a routing rule sends an inbound's connections to)",
        ));
        return None;
    }
    let mut services = Vec::new();
    for (i, name) in raw.services.iter().flatten().enumerate() {
        let sloc = loc.key("services").index(i);
        if API_SERVICES.contains(&name.as_str()) {
            services.push(name.clone());
        } else if NOT_YET.contains(&name.as_str()) {
            diags.push(sloc.warning(format!(
                "{name} is not served by this version of skiff yet: its calls answer \"unimplemented\""
            )));
        } else {
            diags.push(sloc.error(format!(
                "unknown API service `{name}` (skiff serves {})",
                API_SERVICES.join(", ")
            )));
        }
    }
    Some(ApiPlan {
        tag,
        listen,
        services,
    })
}
