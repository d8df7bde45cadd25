//! One `/metrics` scrape's work at 10 000 users (the "< 1 ms at 10 000 users"): the
//! Prometheus text of 20 000 user counters (uplink and downlink) plus a few inbound and
//! outbound ones, rendered from the counter lines the endpoint keeps between scrapes (and,
//! separately, the first scrape after a counter was created, which makes them again).
//! The live connection gauges are read from the registry inside the measured work, with 1 000
//! of the users connected now (2 connections each). `/debug/vars` (Xray's expvar JSON) is
//! measured beside it. Reading /proc/self for RSS and open descriptors is not included (two
//! small reads per scrape).

use skiff_app::metrics::{Gauges, TrafficLines, render_debug_vars, render_prometheus};
use skiff_core::stats::Stats;

const USERS: usize = 10_000;
const CONNECTED_USERS: usize = 1_000;

/// 2 connections for each of the first CONNECTED_USERS users, and every user seen once (an
/// entry each in the live table).
fn live_connections(stats: &Stats) -> Vec<skiff_core::live_connections::LiveGuard> {
    let inbound = stats.live().inbound("vless-in");
    let mut guards = Vec::new();
    for i in 0..USERS {
        let email = format!("user{i}@example.com");
        let guard = stats.live().enter_user(&email);
        if i < CONNECTED_USERS {
            guards.extend([guard, stats.live().enter_user(&email), inbound.enter()]);
        }
    }
    guards
}

fn registry() -> std::sync::Arc<Stats> {
    let stats = Stats::new();
    for i in 0..USERS {
        for direction in ["uplink", "downlink"] {
            stats
                .counter(&format!(
                    "user>>>user{i}@example.com>>>traffic>>>{direction}"
                ))
                .add(1_000_000_007 * i as u64);
        }
    }
    for kind in ["inbound", "outbound"] {
        for tag in ["vless-in", "trojan-in", "direct", "block"] {
            for direction in ["uplink", "downlink"] {
                stats
                    .counter(&format!("{kind}>>>{tag}>>>traffic>>>{direction}"))
                    .add(123_456_789_012);
            }
        }
    }
    stats
}

fn main() {
    divan::main();
}

#[divan::bench]
fn prometheus_text_10k_users(bencher: divan::Bencher) {
    let stats = registry();
    let _connected = live_connections(&stats);
    let mut gauges = Gauges {
        open_connections: 1234,
        accepted_connections: 98765,
        spliced_bytes: 1 << 40,
        copied_bytes: 1 << 30,
        resident_memory_bytes: Some(50 << 20),
        open_fds: Some(2000),
        online_users: Vec::new(),
        handshake_failures: skiff_core::HandshakeFailures::default().read().to_vec(),
        ..Gauges::default()
    };
    // As the endpoint keeps them between scrapes: made at the first, reused after.
    let mut traffic = TrafficLines::default();
    traffic.refresh(&stats);
    bencher.bench_local(|| {
        traffic.refresh(&stats);
        gauges.inbound_connections = stats.live().inbounds();
        gauges.user_connections = stats.live().users_connected();
        render_prometheus(&traffic, &gauges).len()
    });
}

/// The first scrape after a counter was created (a new user's first traffic): the lines are
/// made again, names split and escaped.
#[divan::bench]
fn prometheus_text_10k_users_after_a_new_counter(bencher: divan::Bencher) {
    let stats = registry();
    let gauges = Gauges::default();
    let mut traffic = TrafficLines::default();
    let mut n = 0u64;
    bencher.bench_local(|| {
        n += 1;
        stats.counter(&format!("user>>>new{n}@example.com>>>traffic>>>uplink"));
        traffic.refresh(&stats);
        render_prometheus(&traffic, &gauges).len()
    });
}

#[divan::bench]
fn debug_vars_json_10k_users(bencher: divan::Bencher) {
    let stats = registry();
    bencher.bench(|| {
        stats
            .visit(|counters| render_debug_vars(counters, &[]))
            .len()
    });
}
