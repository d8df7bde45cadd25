//! Glue between `--link` and the runner: bring the emulated link up and say where each hop
//! lives (A and B in one namespace, C and D in the other).

use std::sync::Arc;

use crate::link::{self, Link, LinkSpec};
use crate::runner::Place;
use crate::traffic::Enter;

/// The link `spec` describes, parsed (its `cc=` feeds the run's choice, see
/// [`crate::fair_cc::choose`]).
pub fn parse(spec: &str) -> Result<LinkSpec, String> {
    spec.parse().map_err(|e| format!("--link: {e}"))
}

/// Brings the link up with both namespaces defaulting to `cc`, the run's algorithm.
pub fn setup(mut spec: LinkSpec, cc: &str) -> Result<Link, String> {
    spec.cc = Some(cc.to_string());
    Link::up(&spec).map_err(|e| format!("--link: {e}"))
}

pub fn place(link: &Link) -> Place {
    let enter = |ns: String| -> Enter { Arc::new(move || link::netns::enter(&ns)) };
    Place {
        ns_b: Some(link.ns_b().to_string()),
        ns_c: Some(link.ns_c().to_string()),
        c_ip: link.addr_c(),
        link: true,
        tcp_congestion: Some(link.cc().to_string()),
        enter_b: Some(enter(link.ns_b().to_string())),
        enter_c: Some(enter(link.ns_c().to_string())),
    }
}

/// True once SIGINT/SIGTERM arrived during a lossy-link run.
pub fn interrupted() -> bool {
    link::netns::interrupted()
}
