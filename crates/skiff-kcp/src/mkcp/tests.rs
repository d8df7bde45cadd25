//! Two sessions over a simulated link (loss, reordering through per-tick batches), and
//! property tests of the codecs.

use super::*;
use proptest::prelude::*;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut r = Rng(seed | 1);
    (0..len).map(|_| (r.next() >> 32) as u8).collect()
}

struct End {
    session: MkcpSession,
    format: PacketFormat,
    to_send: Vec<u8>,
    sent: usize,
    got: Vec<u8>,
}

impl End {
    fn new(conv: u16, config: &MkcpConfig, payload: Vec<u8>) -> End {
        let format = PacketFormat::new(config.header, config.seed.as_deref());
        End {
            session: MkcpSession::new(conv, config, format.writer(7), 0),
            format,
            to_send: payload,
            sent: 0,
            got: Vec::new(),
        }
    }

    fn pump_app(&mut self) {
        if self.sent < self.to_send.len()
            && let Ok(n) = self.session.send(&self.to_send[self.sent..])
        {
            self.sent += n;
        }
        let mut buf = [0u8; 4096];
        loop {
            let n = self.session.recv(&mut buf);
            if n == 0 {
                break;
            }
            self.got.extend_from_slice(&buf[..n]);
        }
    }

    fn output(&mut self, now: u32) -> Vec<Vec<u8>> {
        self.session.update(now);
        let mut packets = Vec::new();
        let mut out = Vec::new();
        while self.session.poll_datagram(&mut out) {
            assert!(out.len() <= 1350, "packet of {} bytes", out.len());
            packets.push(out.clone());
        }
        packets
    }

    fn input(&mut self, mut packet: Vec<u8>, now: u32) {
        let plain = self
            .format
            .open(&mut packet)
            .expect("our own format")
            .to_vec();
        self.session.input(&plain, now);
    }
}

/// Runs both ends with `loss` percent of packets dropped until both sent and received
/// everything; returns the simulated milliseconds it took.
fn transfer(config: &MkcpConfig, up: usize, down: usize, loss: u64, seed: u64) -> (End, End, u32) {
    let mut a = End::new(0x1234, config, pattern(seed, up));
    let mut b = End::new(0x1234, config, pattern(seed + 1, down));
    let mut rng = Rng(seed ^ 0x9e37_79b9_7f4a_7c15);
    let mut now = 0u32;
    for _ in 0..200_000 {
        a.pump_app();
        b.pump_app();
        let from_a = a.output(now);
        let from_b = b.output(now);
        now += 5;
        for p in from_a {
            if rng.next() % 100 >= loss {
                b.input(p, now);
            }
        }
        for p in from_b {
            if rng.next() % 100 >= loss {
                a.input(p, now);
            }
        }
        if a.got.len() == down
            && b.got.len() == up
            && a.session.unacked() == 0
            && b.session.unacked() == 0
        {
            return (a, b, now);
        }
    }
    panic!(
        "transfer stalled: a got {}/{down}, b got {}/{up}",
        a.got.len(),
        b.got.len()
    );
}

#[test]
fn bulk_both_ways_on_a_clean_link() {
    let config = MkcpConfig::default();
    let (a, b, _) = transfer(&config, 3 << 20, 2 << 20, 0, 1);
    assert_eq!(b.got, pattern(1, 3 << 20));
    assert_eq!(a.got, pattern(2, 2 << 20));
}

#[test]
fn bulk_survives_loss_with_every_format() {
    for (i, header) in HeaderKind::NAMES.iter().enumerate() {
        let config = MkcpConfig {
            header: HeaderKind::parse(header).unwrap(),
            seed: (i % 2 == 1).then(|| "seed".to_string()),
            congestion: i % 3 == 0,
            ..MkcpConfig::default()
        };
        let (a, b, _) = transfer(&config, 300_000, 200_000, 15, 10 + i as u64);
        assert_eq!(b.got, pattern(10 + i as u64, 300_000), "{header}");
        assert_eq!(a.got, pattern(11 + i as u64, 200_000), "{header}");
    }
}

#[test]
fn a_slow_reader_holds_the_sender_to_its_window() {
    let config = MkcpConfig::default();
    let mut a = End::new(1, &config, pattern(3, 4 << 20));
    let mut b = End::new(1, &config, Vec::new());
    let mut now = 0;
    for _ in 0..2000 {
        a.pump_app();
        for p in a.output(now) {
            b.input(p, now);
        }
        for p in b.output(now) {
            a.input(p, now);
        }
        now += 10;
    }
    // b never read: the sender stopped at its buffer, nothing was lost.
    assert!(a.sent < 4 << 20);
    assert!(a.session.unacked() <= config.sending_buffer() as usize + 1);
    b.pump_app();
    for _ in 0..20_000 {
        if b.got.len() == 4 << 20 {
            break;
        }
        a.pump_app();
        b.pump_app();
        for p in a.output(now) {
            b.input(p, now);
        }
        for p in b.output(now) {
            a.input(p, now);
        }
        now += 10;
    }
    assert_eq!(b.got, pattern(3, 4 << 20));
}

/// Steps both sessions with no app traffic until `done` or `limit` simulated ms.
fn run_until(
    a: &mut End,
    b: &mut End,
    now: &mut u32,
    limit: u32,
    done: impl Fn(&End, &End) -> bool,
) {
    let end = *now + limit;
    while *now < end && !done(a, b) {
        a.pump_app();
        b.pump_app();
        for p in a.output(*now) {
            b.input(p, *now);
        }
        for p in b.output(*now) {
            a.input(p, *now);
        }
        *now += 10;
    }
}

#[test]
fn close_delivers_queued_data_then_both_terminate() {
    let config = MkcpConfig::default();
    let mut a = End::new(9, &config, pattern(5, 100_000));
    let mut b = End::new(9, &config, Vec::new());
    a.pump_app();
    assert_eq!(a.sent, 100_000);
    a.session.close(0);
    assert_eq!(a.session.send(b"x"), Err(Closed));
    let mut now = 0;
    run_until(&mut a, &mut b, &mut now, 60_000, |a, b| {
        a.session.is_terminated() && b.session.is_terminated()
    });
    assert_eq!(b.got, pattern(5, 100_000));
    assert!(b.session.read_finished());
    // b never closed itself; it still terminates within the protocol's timers.
    assert!(a.session.is_terminated(), "{:?}", a.session.state());
    assert!(b.session.is_terminated(), "{:?}", b.session.state());
}

#[test]
fn closing_both_sides_ends_quickly() {
    let config = MkcpConfig::default();
    let mut a = End::new(9, &config, b"ping".to_vec());
    let mut b = End::new(9, &config, b"pong".to_vec());
    let mut now = 0;
    run_until(&mut a, &mut b, &mut now, 5_000, |a, b| {
        a.got.len() == 4 && b.got.len() == 4
    });
    a.session.close(now);
    run_until(&mut a, &mut b, &mut now, 1_000, |_, b| {
        b.session.state() != State::Active
    });
    b.session.close(now);
    let start = now;
    run_until(&mut a, &mut b, &mut now, 60_000, |a, b| {
        a.session.is_terminated() && b.session.is_terminated()
    });
    assert!(a.session.is_terminated() && b.session.is_terminated());
    assert!(
        now - start <= 10_000,
        "took {} ms of simulated time",
        now - start
    );
}

#[test]
fn a_silent_peer_is_given_up() {
    let config = MkcpConfig::default();
    let mut a = End::new(2, &config, b"hello".to_vec());
    a.pump_app();
    let mut now = 0;
    while now < 120_000 && !a.session.is_terminated() {
        let _ = a.output(now);
        now = a.session.next_update_ms(now).max(now + 1);
    }
    assert!(a.session.is_terminated(), "{:?}", a.session.state());
}

#[test]
fn v2ray_first_packet_starts_a_connection() {
    // The first packet v2ray 4.34 sent as a client (no header, no seed).
    let hex = "5e2c17e05e1a54ad5f1a54ad5f1b54ad5f1b54ad5f1b54895fa365b142c041fc116d0e70cb25bd78da25bc78d324c378d325ab1dbf49c43dd222a74d";
    let mut packet: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    let format = PacketFormat::new(HeaderKind::None, None);
    let plain = format.open(&mut packet).unwrap().to_vec();
    assert_eq!(first_segment(&plain, 776), Some((0x434d, true)));
    let mut server = MkcpSession::new(0x434d, &MkcpConfig::default(), format.writer(0), 0);
    server.input(&plain, 0);
    let mut buf = [0u8; 64];
    let n = server.recv(&mut buf);
    assert_eq!(&buf[n - 10..n], b"hello mkcp");
    server.update(0);
    let mut out = Vec::new();
    assert!(server.poll_datagram(&mut out));
    let reply = format.open(&mut out).unwrap();
    let (ack, _) = Segment::parse(reply).unwrap();
    assert_eq!(ack.ack_numbers().collect::<Vec<_>>(), [0]);
    match ack {
        Segment::Ack {
            receiving_next,
            receiving_window,
            ..
        } => assert_eq!((receiving_next, receiving_window), (1, 777)),
        other => panic!("{other:?}"),
    }
}

proptest! {
    #[test]
    fn the_fuzz_entry_point_takes_random_input(data in proptest::collection::vec(any::<u8>(), 0..3000)) {
        crate::fuzz::fuzz_mkcp_packets(&data);
    }

    #[test]
    fn random_packets_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..1600),
        header in 0usize..6,
        seeded in any::<bool>(),
    ) {
        let kind = HeaderKind::parse(HeaderKind::NAMES[header]).unwrap();
        let format = PacketFormat::new(kind, seeded.then_some("s"));
        let mut packet = bytes.clone();
        let _ = format.open(&mut packet);
        let _ = first_segment(&bytes, 776);
        let mut s = MkcpSession::new(1, &MkcpConfig::default(), format.writer(0), 0);
        // Raw segments straight into a session, as if the seal had passed them.
        s.input(&bytes, 10);
        s.update(20);
        let mut out = Vec::new();
        while s.poll_datagram(&mut out) {}
        let mut buf = [0u8; 2048];
        let _ = s.recv(&mut buf);
    }

    #[test]
    fn segments_round_trip(
        conv in any::<u16>(), opt in any::<u8>(), a in any::<u32>(), b in any::<u32>(),
        c in any::<u32>(), payload in proptest::collection::vec(any::<u8>(), 0..1400),
        count in 0usize..=128, kind in 0u8..4,
    ) {
        let numbers: Vec<u8> = (0..count as u32).flat_map(|n| (n ^ a).to_be_bytes()).collect();
        let seg = match kind {
            0 => Segment::Data { conv, opt, ts: a, sn: b, sending_next: c, payload: &payload },
            1 => Segment::Ack { conv, opt, receiving_window: a, receiving_next: b, ts: c, numbers: &numbers },
            2 => Segment::Cmd { conv, cmd: Cmd::Terminate, opt, sending_next: a, receiving_next: b, peer_rto: c },
            _ => Segment::Cmd { conv, cmd: Cmd::Ping, opt, sending_next: a, receiving_next: b, peer_rto: c },
        };
        let mut out = Vec::new();
        seg.encode(&mut out);
        prop_assert_eq!(out.len(), seg.encoded_len());
        let (back, rest) = Segment::parse(&out).unwrap();
        prop_assert!(rest.is_empty());
        prop_assert_eq!(back, seg);
    }

    #[test]
    fn packets_round_trip(
        plain in proptest::collection::vec(any::<u8>(), 1..1400),
        header in 0usize..6, seeded in any::<bool>(), random in any::<u16>(),
    ) {
        let kind = HeaderKind::parse(HeaderKind::NAMES[header]).unwrap();
        let format = PacketFormat::new(kind, seeded.then_some("seed"));
        let mut writer = format.writer(random);
        let mut out = Vec::new();
        writer.write(&plain, &mut out);
        prop_assert_eq!(out.len(), plain.len() + format.overhead());
        prop_assert_eq!(format.open(&mut out), Some(&plain[..]));
    }
}
