//! The emulated link measured end to end (needs root and /dev/net/tun, as in CI; skipped
//! otherwise): delay and loss as a ping sees them, the clean link's TCP throughput, which
//! bounds what any proxy row can reach across it, and the validation the bench's figures rest
//! on: at 100 ms each way no round trip under 200 ms and the median within 2 ms of it and 600 Mbit/s carried
//! whole, and the loss applied within a quarter point of the setting each way (half a point
//! round trip) over 100 000 datagrams.
//!
//! One test function, so the two parts never share the CPU with each other.

use std::path::Path;
use std::time::{Duration, Instant};

use skiff_bench::link::{self, Link, LinkSpec, TcpTransfer, TransferDirection};

fn up(spec: &str) -> Link {
    let spec: LinkSpec = spec.parse().expect("spec");
    Link::up(&spec).unwrap_or_else(|e| panic!("link {spec}: {e}"))
}

#[test]
fn link_delay_loss_and_clean_throughput() {
    if let Err(why) = link::check_support() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs as root with /dev/net/tun: {why}"
        );
        println!("skipped: {why}");
        return;
    }
    let started = Instant::now();

    // 300 probes 20 ms apart through 50 ms each way and 10% round-trip loss.
    let lossy = up("delay=50ms,loss=10%");
    let names = [lossy.ns_b().to_string(), lossy.ns_c().to_string()];
    // A child started with command_in sees namespace b's side of the link, and only that.
    let ip = ["/usr/sbin/ip", "/sbin/ip"]
        .into_iter()
        .find(|p| Path::new(p).exists());
    if let Some(ip) = ip {
        let out = lossy
            .command_in_b(ip)
            .args(["-o", "-4", "addr", "show"])
            .output()
            .expect("ip in namespace b");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("10.213.0.1/30"), "{text}");
        assert!(!text.contains("10.213.0.2"), "{text}");
    }
    let ping = link::udp_ping(
        &lossy,
        300,
        Duration::from_millis(20),
        Duration::from_secs(1),
    )
    .expect("udp ping");
    println!("delay=50ms,loss=10%: {ping}");
    println!("  counters: {:?}", lossy.counters());
    let counters = lossy.counters();
    drop(lossy);
    for name in &names {
        assert!(
            !Path::new("/var/run/netns").join(name).exists(),
            "namespace {name} left behind"
        );
    }
    let median = ping.median().expect("some probe came back");
    assert!(
        median >= Duration::from_millis(85) && median <= Duration::from_millis(115),
        "median RTT {median:?}, expected 100 ms ± 15 ms"
    );
    // Round trip: 1 - 0.9² = 19%; 300 probes leave a standard error of about 2.3%.
    assert!(
        (0.04..=0.17).contains(&ping.loss()),
        "round-trip loss {}",
        ping.loss()
    );
    let one_way = counters.b_to_c.dropped_loss as f64 / counters.b_to_c.packets_in as f64;
    assert!((0.01..=0.11).contains(&one_way), "b->c loss {one_way}");
    assert_eq!(
        counters.b_to_c.dropped_queue + counters.c_to_b.dropped_queue,
        0
    );

    // 64 MiB from B to C over a clean link with 10 ms each way.
    let clean = up("delay=10ms");
    let bytes = 64u64 << 20;
    let took = link::tcp_transfer(
        &clean,
        &TcpTransfer {
            direction: TransferDirection::Upload,
            bytes,
            congestion: None,
            timeout: Duration::from_secs(30),
        },
    )
    .expect("clean TCP transfer");
    let mbit = bytes as f64 * 8.0 / took.as_secs_f64() / 1e6;
    println!("delay=10ms clean: 64 MiB B->C in {took:?} = {mbit:.0} Mbit/s");
    println!("  counters: {:?}", clean.counters());
    drop(clean);
    // The goal is 500 Mbit/s; CI machines vary, so the gate leaves margin.
    assert!(mbit >= 300.0, "{mbit:.0} Mbit/s over the clean link");

    // The reports' delay: 100 ms each way. Every probe's round trip is the delay twice plus
    // the forwarding, which must stay under 1 ms each way.
    // The queue holds three times what 600 Mbit/s puts in flight over 100 ms (5 400 packets):
    // a sender that was descheduled catches up in a burst, and the default 10 000 once
    // tail-dropped 5 480 of such a burst on a loaded runner. That is the link behaving as
    // set, not losing what it read; this part measures the forwarding.
    let far = up("delay=100ms,queue=30000");
    let ping = link::udp_ping(&far, 50, Duration::from_millis(10), Duration::from_secs(1))
        .expect("udp ping");
    println!("delay=100ms: {ping}");
    // What the link carries across 100 ms each way, without TCP's windows in the way (its
    // default buffers hold less than 500 Mbit/s × 200 ms): 60 000 datagrams of 1 400 bytes
    // sent at 600 Mbit/s must all arrive, at the rate sent.
    let blast = udp_blast(&far, 60_000, 1400, Duration::from_nanos(18_667));
    let counters = far.counters();
    println!("  counters: {counters:?}");
    drop(far);
    // What the link read it forwarded, every datagram: that is the emulator's part. What the
    // kernel dropped in front of it (the sender outrunning a descheduled forwarder on a busy
    // 2-core runner) is the machine's part; its queue is deep enough that it stays a trace.
    let entered = counters.b_to_c.packets_in - ping.sent as u64;
    assert_eq!(
        counters.b_to_c.forwarded, counters.b_to_c.packets_in,
        "the clean link dropped what it read"
    );
    assert!(
        blast.sent as u64 - entered <= blast.sent as u64 / 1000,
        "{} of {} datagrams never reached the link",
        blast.sent as u64 - entered,
        blast.sent
    );
    let mbit = blast.received as f64 * 1400.0 * 8.0 / blast.span.as_secs_f64() / 1e6;
    println!(
        "delay=100ms clean: {} of {} datagrams of 1400 B arrived at {mbit:.0} Mbit/s",
        blast.received, blast.sent
    );
    assert_eq!(
        blast.received as u64, entered,
        "a clean link loses nothing it carries"
    );
    assert!(mbit >= 500.0, "{mbit:.0} Mbit/s across 100 ms each way");
    assert_eq!(ping.received, ping.sent, "a clean link loses nothing");
    // Never early, and the median within 1 ms each way of the setting. The slowest probe is
    // not the link's: on a loaded 2-core runner a probe that lands while the forwarder or the
    // echo is off the CPU waits for its turn (CI once saw 209 ms beside a 200.4 ms median).
    let (min, median) = (ping.min().unwrap(), ping.median().unwrap());
    assert!(
        min >= Duration::from_millis(200) && median <= Duration::from_millis(202),
        "round trips from {min:?}, median {median:?}: expected 200 ms to 202 ms"
    );

    // The loss applied, one way, against the setting: 9 % round trip is 4.61 % each way.
    // 100 000 datagrams leave a standard error of 0.07 points, so 0.25 points one way
    // (0.5 round trip) is over three of them.
    let lossy = up("delay=1ms,loss=9%");
    let Blast { sent, received, .. } = udp_blast(&lossy, 100_000, 8, Duration::from_micros(20));
    let counters = lossy.counters();
    drop(lossy);
    let seen = 1.0 - received as f64 / sent as f64;
    let applied = counters.b_to_c.dropped_loss as f64 / counters.b_to_c.packets_in as f64;
    let expected = 1.0 - (1.0f64 - 0.09).sqrt();
    println!(
        "loss=9%: {sent} sent, {received} received: {:.3} % seen one way, {:.3} % applied, {:.3} % set",
        seen * 100.0,
        applied * 100.0,
        expected * 100.0
    );
    assert_eq!(
        counters.b_to_c.dropped_queue, 0,
        "the blast overran the queue"
    );
    assert!(
        (seen - expected).abs() <= 0.0025,
        "one-way loss {:.3} %, set {:.3} %",
        seen * 100.0,
        expected * 100.0
    );
    assert!(
        started.elapsed() < Duration::from_secs(90),
        "took {:?}",
        started.elapsed()
    );
}

struct Blast {
    sent: u32,
    received: u32,
    /// From the first datagram's arrival to the last's.
    span: Duration,
}

/// Sends `count` datagrams of `size` bytes from B to C, one every `every` (in bursts when
/// the sender falls behind), and counts what arrives (a straggler has 1 s after the last).
fn udp_blast(link: &Link, count: u32, size: usize, every: Duration) -> Blast {
    use std::net::UdpSocket;
    let sink = link
        .run_in_c(|| UdpSocket::bind((link.addr_c(), 0)))
        .unwrap()
        .unwrap();
    let to = sink.local_addr().unwrap();
    let source = link
        .run_in_b(|| UdpSocket::bind((link.addr_b(), 0)))
        .unwrap()
        .unwrap();
    sink.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    // Room for a whole blast: the test measures the link, not the receiver's scheduling.
    // SO_RCVBUFFORCE passes net.core.rmem_max (the test runs as root, as the link needs).
    let room: libc::c_int = 128 << 20;
    // SAFETY: a valid socket and a c_int option of the size given.
    let set = unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&sink),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            (&raw const room).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(
        set,
        0,
        "SO_RCVBUFFORCE: {}",
        std::io::Error::last_os_error()
    );
    std::thread::scope(|scope| {
        let receiver = scope.spawn(|| {
            let mut buf = vec![0u8; size.max(64)];
            let mut received = 0u32;
            let mut first = None;
            let mut last = Instant::now();
            while received < count && sink.recv(&mut buf).is_ok() {
                last = Instant::now();
                first.get_or_insert(last);
                received += 1;
            }
            (received, first.map_or(Duration::ZERO, |f| last - f))
        });
        let start = Instant::now();
        let mut datagram = vec![0u8; size];
        for i in 0..count {
            let due = start + every * i;
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            datagram[..4].copy_from_slice(&i.to_le_bytes());
            let _ = source.send_to(&datagram, to);
        }
        let (received, span) = receiver.join().unwrap();
        Blast {
            sent: count,
            received,
            span,
        }
    })
}
