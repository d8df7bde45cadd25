//! Glue between `--link` and the runner: bring the emulated link up and say where each hop
//! lives (A and B in one namespace, C and D in the other).

use std::sync::Arc;

use std::time::Duration;

use crate::link::{self, Link, LinkCounters, LinkSpec, PingStats};
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

/// Probes the link before the rows run (about 1 s plus a round trip): what a ping sees of
/// its delay. None when the probes cannot run (the rows will say why).
pub fn probe(link: &Link) -> Option<PingStats> {
    let wait = link.spec().delay * 2 + Duration::from_secs(1);
    link::udp_ping(link, 100, Duration::from_millis(10), wait).ok()
}

/// What the link did, for the report's header beside what was asked: the round trip the
/// probes saw (twice the one-way `delay`), and the loss the emulator applied over the whole
/// run, per direction and as the round trip the setting names.
pub fn measured(counters: &LinkCounters, ping: Option<&PingStats>) -> String {
    let mut parts = Vec::new();
    if let Some(p) = ping {
        let ms =
            |d: Option<Duration>| d.map_or("-".into(), |d| format!("{:.1}", d.as_secs_f64() * 1e3));
        parts.push(format!(
            "ping RTT min/p50 {}/{} ms of {} probes",
            ms(p.min()),
            ms(p.median()),
            p.received
        ));
    }
    let fraction = |dropped: u64, seen: u64| {
        if seen == 0 {
            0.0
        } else {
            dropped as f64 / seen as f64
        }
    };
    let (bc, cb) = (&counters.b_to_c, &counters.c_to_b);
    let (p_bc, p_cb) = (
        fraction(bc.dropped_loss, bc.packets_in),
        fraction(cb.dropped_loss, cb.packets_in),
    );
    let round_trip = 1.0 - (1.0 - p_bc) * (1.0 - p_cb);
    parts.push(format!(
        "loss applied {:.2} % round trip (B→C {:.2} % of {} packets, C→B {:.2} % of {})",
        round_trip * 100.0,
        p_bc * 100.0,
        bc.packets_in,
        p_cb * 100.0,
        cb.packets_in
    ));
    let queued = bc.dropped_queue + cb.dropped_queue;
    if queued > 0 {
        parts.push(format!("{queued} packets tail-dropped by the queue"));
    }
    format!("measured: {}", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::DirectionCounters;

    #[test]
    fn measured_names_round_trip_and_directions() {
        let dir = |packets_in, dropped_loss, dropped_queue| DirectionCounters {
            packets_in,
            dropped_loss,
            dropped_queue,
            ..DirectionCounters::default()
        };
        let counters = LinkCounters {
            b_to_c: dir(10_000, 500, 0),
            c_to_b: dir(20_000, 800, 3),
        };
        let ping = PingStats {
            sent: 4,
            received: 3,
            rtts: [200_400, 200_900, 201_500]
                .map(Duration::from_micros)
                .to_vec(),
        };
        let text = measured(&counters, Some(&ping));
        assert_eq!(
            text,
            "measured: ping RTT min/p50 200.4/200.9 ms of 3 probes, loss applied 8.80 % round \
             trip (B→C 5.00 % of 10000 packets, C→B 4.00 % of 20000), 3 packets tail-dropped by \
             the queue"
        );
        assert!(!measured(&LinkCounters::default(), None).contains("NaN"));
    }
}
