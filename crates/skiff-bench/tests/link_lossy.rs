//! The bench's lossy row, delay=100ms,loss=9%, measured without a proxy (needs root and
//! /dev/net/tun; skipped otherwise): what a ping sees, and how long a 20 MiB download takes
//! with cubic and with bbr. These are the baselines the proxy rows are read against.

use std::io;
use std::time::Duration;

use skiff_bench::link::{self, Link, LinkSpec};

const ROW: &str = "delay=100ms,loss=9%";

#[test]
fn link_lossy_row_baseline() {
    if let Err(why) = link::check_support() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs as root with /dev/net/tun: {why}"
        );
        println!("skipped: {why}");
        return;
    }
    let spec: LinkSpec = ROW.parse().expect("spec");
    let lossy = Link::up(&spec).expect("link up");

    let ping = link::udp_ping(
        &lossy,
        200,
        Duration::from_millis(20),
        Duration::from_secs(1),
    )
    .expect("udp ping");
    println!("{ROW}: ping {ping}");
    let median = ping.median().expect("some probe came back");
    assert!(
        median >= Duration::from_millis(185) && median <= Duration::from_millis(215),
        "median RTT {median:?}"
    );
    // `loss` is the round trip's, as the reports' ping showed it.
    assert!((0.03..=0.16).contains(&ping.loss()), "loss {}", ping.loss());

    downloads(&lossy, Duration::from_secs(20));
}

/// The full 20 MiB downloads, however long they take (cubic needs minutes at 9% loss with
/// wire-sized packets): `cargo test -p skiff-bench --test link_lossy -- --ignored --nocapture`.
#[test]
#[ignore = "takes minutes; run by hand for the report"]
fn link_lossy_full_downloads() {
    if let Err(why) = link::check_support() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs as root with /dev/net/tun: {why}"
        );
        println!("skipped: {why}");
        return;
    }
    let spec: LinkSpec = ROW.parse().expect("spec");
    let lossy = Link::up(&spec).expect("link up");
    downloads(&lossy, Duration::from_secs(1800));
}

/// 20 MiB from C to B with cubic, then bbr, each bounded by `limit`; reports the time or how far
/// it got. Only a failure that is not the link's doing (no connection at all) fails the test.
fn downloads(lossy: &Link, limit: Duration) {
    const BYTES: u64 = 20 << 20;
    for congestion in ["cubic", "bbr"] {
        let before = lossy.counters().c_to_b;
        let transfer = link::TcpTransfer {
            direction: link::TransferDirection::Download,
            bytes: BYTES,
            congestion: Some(congestion.to_string()),
            timeout: limit,
        };
        match link::tcp_transfer(lossy, &transfer) {
            Ok(took) => {
                let mbit = BYTES as f64 * 8.0 / took.as_secs_f64() / 1e6;
                println!("{ROW}: 20 MiB download with {congestion}: {took:.2?} ({mbit:.2} Mbit/s)");
            }
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => panic!("{congestion}: {e}"),
            // Not finishing within the limit is a result about the congestion control.
            Err(e) => {
                println!("{ROW}: 20 MiB download with {congestion}: not within {limit:?}: {e}")
            }
        }
        let after = lossy.counters().c_to_b;
        let arrived = after.bytes_forwarded - before.bytes_forwarded;
        println!(
            "  c->b: {} packets in, {} lost, {} tail-dropped, {:.1} MiB forwarded",
            after.packets_in - before.packets_in,
            after.dropped_loss - before.dropped_loss,
            after.dropped_queue - before.dropped_queue,
            arrived as f64 / (1 << 20) as f64
        );
    }
}
