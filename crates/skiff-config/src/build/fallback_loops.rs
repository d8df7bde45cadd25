//! Fallback loops: a fallback (or a tunnel) whose destination is one of this config's own
//! listeners hands a visitor back to an inbound; when that leads round to the inbound it came
//! from, one probe becomes connections without end. Such a cycle is an error at the fallback
//! entry that closes it. Only what the config says is followed: literal loopback addresses
//! (127.0.0.1, ::1, localhost, or the inbound's own listen address) and ports; a loop through
//! other names or machines is left to the run-time guard, which closes a connection that our
//! own fallback brings back to an inbound it already passed.

use std::net::IpAddr;

use crate::diag::Diagnostic;
use crate::plan::{FallbackDest, InboundPlan, InboundProtocol, StreamNetwork};
use crate::source::Loc;

/// One way out of an inbound to a listener address: (host as written, port, where it is said).
struct Exit {
    host: Option<String>,
    port: u16,
    loc: Loc,
}

/// Reports every fallback entry that closes a loop. `inbounds` are the built inbounds with
/// the location of each (`inbounds[i]`).
pub fn check(inbounds: &[(&Loc, &InboundPlan)], diags: &mut Vec<Diagnostic>) {
    let exits: Vec<Vec<Exit>> = inbounds
        .iter()
        .map(|(loc, plan)| exits(loc, plan))
        .collect();
    // Which inbounds an exit lands on.
    let lands = |exit: &Exit| -> Vec<usize> {
        inbounds
            .iter()
            .enumerate()
            .filter(|(_, (_, plan))| listens_at(plan, exit.host.as_deref(), exit.port))
            .map(|(i, _)| i)
            .collect()
    };
    for (start, (_, plan)) in inbounds.iter().enumerate() {
        if plan.protocol.fallbacks().is_empty() {
            continue;
        }
        for exit in &exits[start] {
            let first_hops = lands(exit);
            // Breadth-first from where this exit lands, bounded by the number of inbounds.
            let mut seen = vec![false; inbounds.len()];
            let mut queue: Vec<(usize, Vec<usize>)> =
                first_hops.into_iter().map(|i| (i, vec![i])).collect();
            let mut found: Option<Vec<usize>> = None;
            while let Some((at, path)) = queue.pop() {
                if at == start {
                    found = Some(path);
                    break;
                }
                if std::mem::replace(&mut seen[at], true) {
                    continue;
                }
                for next_exit in &exits[at] {
                    for next in lands(next_exit) {
                        let mut longer = path.clone();
                        longer.push(next);
                        queue.push((next, longer));
                    }
                }
            }
            let Some(path) = found else { continue };
            let message = if path.len() == 1 {
                "this fallback leads back to its own inbound's listener: a visitor that is not a valid client would loop until the server runs out of connections".to_owned()
            } else {
                let via: Vec<String> = path[..path.len() - 1]
                    .iter()
                    .map(|&i| describe(inbounds[i].0, inbounds[i].1))
                    .collect();
                format!(
                    "this fallback leads back to its own inbound through {}: a visitor that is not a valid client would loop until the server runs out of connections",
                    via.join(" and then ")
                )
            };
            diags.push(exit.loc.error(message));
        }
    }
}

/// The listener addresses an inbound hands connections on to: its fallbacks' TCP
/// destinations, or a tunnel's fixed destination.
fn exits(loc: &Loc, plan: &InboundPlan) -> Vec<Exit> {
    let mut out = Vec::new();
    for (i, fallback) in plan.protocol.fallbacks().iter().enumerate() {
        let loc = loc.key("settings").key("fallbacks").index(i).key("dest");
        match &fallback.dest {
            FallbackDest::Port(port) => out.push(Exit {
                host: None,
                port: *port,
                loc,
            }),
            FallbackDest::Addr(host, port) => out.push(Exit {
                host: Some(host.clone()),
                port: *port,
                loc,
            }),
            FallbackDest::Unix(_) | FallbackDest::AbstractUnix(_) => {}
        }
    }
    if let InboundProtocol::Tunnel(tunnel) = &plan.protocol
        && tunnel.network.tcp
        && let Some(address) = &tunnel.address
    {
        out.push(Exit {
            host: Some(address.clone()),
            port: tunnel.port,
            loc: loc.key("settings").key("address"),
        });
    }
    out
}

/// Whether a TCP connection to `host` (None: Xray's bare-port form, 127.0.0.1) and `port`
/// reaches `plan`'s listener, judged from the literal text only.
fn listens_at(plan: &InboundPlan, host: Option<&str>, port: u16) -> bool {
    let on_port = plan
        .ports
        .iter()
        .any(|range| range.first <= port && port <= range.last);
    let tcp = !matches!(
        plan.protocol,
        InboundProtocol::Kcptun(_) | InboundProtocol::Udpspeeder(_) | InboundProtocol::Udp2raw(_)
    ) && matches!(
        plan.stream.network,
        StreamNetwork::Tcp
            | StreamNetwork::HttpHeader(_)
            | StreamNetwork::Ws(_)
            | StreamNetwork::HttpUpgrade(_)
            | StreamNetwork::Xhttp(_)
    );
    if !on_port || !tcp {
        return false;
    }
    let host = host.unwrap_or("127.0.0.1");
    let ip = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
        .ok();
    let localhost = host.eq_ignore_ascii_case("localhost");
    match plan.listen {
        // `::` takes IPv4 too (as Go's listeners do); 0.0.0.0 only IPv4.
        IpAddr::V6(listen) if listen.is_unspecified() => {
            localhost || ip.is_some_and(|ip| ip.is_loopback())
        }
        IpAddr::V4(listen) if listen.is_unspecified() => {
            localhost || matches!(ip, Some(IpAddr::V4(v4)) if v4.is_loopback())
        }
        listen => ip == Some(listen) || (localhost && listen.is_loopback()),
    }
}

fn describe(loc: &Loc, plan: &InboundPlan) -> String {
    if plan.tag.is_empty() {
        format!("the inbound at {}", loc.position())
    } else {
        format!("inbound `{}`", plan.tag)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests_vless::{UUID, has_error, ok};

    fn vless(tag: &str, listen: &str, port: u16, dest: &str) -> String {
        format!(
            r#"{{"tag": "{tag}", "listen": "{listen}", "port": {port}, "protocol": "vless",
                "settings": {{"clients": [{{"id": "{UUID}"}}], "decryption": "none",
                              "fallbacks": [{{"dest": {dest}}}]}}}}"#
        )
    }

    fn config(inbounds: &[String]) -> String {
        format!(r#"{{"inbounds": [{}]}}"#, inbounds.join(","))
    }

    #[test]
    fn a_fallback_to_its_own_port_is_a_loop() {
        has_error(
            &config(&[vless("a", "127.0.0.1", 8443, "8443")]),
            "inbounds[0].settings.fallbacks[0].dest",
            "leads back to its own inbound's listener",
        );
        has_error(
            &config(&[vless("a", "0.0.0.0", 8443, r#""localhost:8443""#)]),
            "inbounds[0].settings.fallbacks[0].dest",
            "leads back",
        );
    }

    #[test]
    fn a_loop_through_another_inbound_names_it() {
        has_error(
            &config(&[
                vless("a", "127.0.0.1", 8443, "9443"),
                vless("b", "::", 9443, r#""127.0.0.1:8443""#),
            ]),
            "inbounds[0].settings.fallbacks[0].dest",
            "through inbound `b`",
        );
        // Through a tunnel that forwards back.
        has_error(
            &format!(
                r#"{{"inbounds": [{}, {{"tag": "t", "listen": "127.0.0.1", "port": 9000,
                     "protocol": "dokodemo-door",
                     "settings": {{"address": "127.0.0.1", "port": 8443}}}}]}}"#,
                vless("a", "127.0.0.1", 8443, "9000")
            ),
            "inbounds[0].settings.fallbacks[0].dest",
            "through inbound `t`",
        );
    }

    #[test]
    fn chains_that_end_elsewhere_are_fine() {
        // VLESS → Trojan-like second inbound → a web server: Xray's "all-in-one" layout.
        ok(&config(&[
            vless("a", "0.0.0.0", 8443, "9443"),
            vless("b", "127.0.0.1", 9443, "80"),
        ]));
        // Another address than the listener's.
        ok(&config(&[vless(
            "a",
            "127.0.0.1",
            8443,
            r#""127.0.0.2:8443""#,
        )]));
    }
}
