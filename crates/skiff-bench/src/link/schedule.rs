//! The link's queue and clock arithmetic, free of I/O: time is whatever the caller says it is
//! (nanoseconds since any fixed start), so delay, rate, loss and tail drop are testable with a
//! fake clock and the forwarder only adds reads, writes and sleeps around it.

use std::collections::VecDeque;

use super::spec::LinkSpec;

/// What became of an offered packet. Refused packets are handed back so their buffer can be
/// reused.
#[derive(Debug, PartialEq, Eq)]
pub enum Offer<T> {
    /// Held; it comes out of [`Scheduler::pop_due`] at its release time.
    Queued,
    /// Dropped by the random loss.
    Lost(T),
    /// Dropped because the link already held `queue_packets` packets (tail drop).
    QueueFull(T),
}

/// xorshift64*: a few ns per draw and statistically plenty for Bernoulli loss; we need no
/// cryptographic quality and no `rand` dependency.
#[derive(Clone, Debug)]
pub struct XorShift(u64);

impl XorShift {
    pub fn new(seed: u64) -> Self {
        // The state must never be zero (it would stay zero); mix the seed so close seeds (two
        // directions started in the same nanosecond) still give unrelated streams.
        let mut s = seed ^ 0x9E37_79B9_7F4A_7C15;
        s = (s ^ (s >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        s = (s ^ (s >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        s ^= s >> 31;
        XorShift(if s == 0 { 1 } else { s })
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [0, 1): the top 53 bits make every f64 step equally likely.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// One direction of the link: a FIFO of packets, each with the time it may leave.
///
/// A packet offered at `now` is first subject to loss, then to the queue limit, then released at
/// `max(now + delay, previous release) + len*8/rate`: it waits for the packets before it to be
/// serialised onto the bottleneck, takes its own transmission time, and travels `delay`. With a
/// constant delay the release times never decrease, so a FIFO is the whole priority queue.
#[derive(Debug)]
pub struct Scheduler<T> {
    delay_ns: u64,
    loss: f64,
    rate_bps: Option<u64>,
    capacity: usize,
    rng: XorShift,
    queue: VecDeque<(u64, T)>,
    last_release: u64,
}

impl<T> Scheduler<T> {
    pub fn new(spec: &LinkSpec, seed: u64) -> Self {
        Scheduler {
            delay_ns: u64::try_from(spec.delay.as_nanos()).unwrap_or(u64::MAX / 4),
            loss: spec.loss_each_way(),
            rate_bps: spec.rate_bps.filter(|&r| r > 0),
            capacity: spec.queue_packets.max(1),
            rng: XorShift::new(seed),
            queue: VecDeque::new(),
            last_release: 0,
        }
    }

    /// Time a packet of `len` bytes occupies the bottleneck, rounded up so a stream of packets
    /// never beats the rate.
    pub fn transmission_ns(&self, len: usize) -> u64 {
        match self.rate_bps {
            None => 0,
            Some(rate) => {
                let bits = len as u128 * 8 * 1_000_000_000;
                bits.div_ceil(rate as u128).min(u64::MAX as u128 / 4) as u64
            }
        }
    }

    /// A packet of `len` bytes arrives at `now_ns` (which must not go backwards).
    pub fn offer(&mut self, now_ns: u64, len: usize, packet: T) -> Offer<T> {
        // Loss first, as a lossy wire would: a lost packet takes no queue space. `loss == 0`
        // skips the draw so a clean link is exactly clean.
        if self.loss > 0.0 && self.rng.next_f64() < self.loss {
            return Offer::Lost(packet);
        }
        if self.queue.len() >= self.capacity {
            return Offer::QueueFull(packet);
        }
        // No earlier than the packet ahead of us (FIFO, and it still occupies the bottleneck);
        // on an idle link that is in the past and only the propagation delay counts.
        let start = now_ns.saturating_add(self.delay_ns).max(self.last_release);
        let release = start.saturating_add(self.transmission_ns(len));
        self.last_release = release;
        self.queue.push_back((release, packet));
        Offer::Queued
    }

    /// When the head packet may leave, if any packet is held.
    pub fn next_release(&self) -> Option<u64> {
        self.queue.front().map(|&(t, _)| t)
    }

    /// The head packet, if its release time has come by `now_ns`.
    pub fn pop_due(&mut self, now_ns: u64) -> Option<T> {
        match self.queue.front() {
            Some(&(t, _)) if t <= now_ns => self.queue.pop_front().map(|(_, p)| p),
            _ => None,
        }
    }

    /// Packets held (in flight or waiting for the rate).
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn spec(text: &str) -> LinkSpec {
        text.parse().unwrap()
    }

    /// Runs the scheduler to completion on a fake clock, returning (packet id, release time).
    fn drain(s: &mut Scheduler<u32>) -> Vec<(u32, u64)> {
        let mut out = Vec::new();
        while let Some(t) = s.next_release() {
            // Asking a hair early must give nothing; at the release time, the packet.
            assert_eq!(s.pop_due(t - 1), None);
            out.push((s.pop_due(t).unwrap(), t));
        }
        out
    }

    #[test]
    fn delay_only_keeps_spacing() {
        let mut s = Scheduler::new(&spec("delay=100ms"), 1);
        for (i, at) in [0u64, 3, 3, 40].iter().enumerate() {
            assert_eq!(s.offer(at * MS + 1, 1500, i as u32), Offer::Queued);
        }
        assert_eq!(
            drain(&mut s),
            vec![
                (0, 100 * MS + 1),
                (1, 103 * MS + 1),
                (2, 103 * MS + 1),
                (3, 140 * MS + 1)
            ]
        );
    }

    #[test]
    fn rate_serialises_back_to_back_packets() {
        // 1500 B at 12 Mbit/s = 1 ms each.
        let mut s = Scheduler::new(&spec("delay=10ms,rate=12mbit"), 1);
        assert_eq!(s.transmission_ns(1500), MS);
        for i in 0..3 {
            s.offer(0, 1500, i);
        }
        // A packet arriving after the burst has drained finds the bottleneck idle again.
        let out = drain(&mut s);
        assert_eq!(out, vec![(0, 11 * MS), (1, 12 * MS), (2, 13 * MS)]);
        s.offer(50 * MS, 1500, 3);
        assert_eq!(drain(&mut s), vec![(3, 61 * MS)]);
    }

    #[test]
    fn rate_holds_sustained_throughput() {
        // Offer 10 Mbit/s worth into a 5 Mbit/s link for a second: at most 5 Mbit leaves by t=1s
        // plus the delay, and what's queued beyond the limit is tail-dropped.
        let mut s = Scheduler::new(&spec("delay=20ms,rate=5mbit,queue=100"), 7);
        let (mut queued, mut full) = (0, 0);
        let mut released_bits = 0u64;
        for i in 0..1000u64 {
            let now = i * MS; // 1250 B every ms = 10 Mbit/s
            while s.pop_due(now).is_some() {
                released_bits += 1250 * 8;
            }
            match s.offer(now, 1250, i as u32) {
                Offer::Queued => queued += 1,
                Offer::QueueFull(_) => full += 1,
                Offer::Lost(_) => unreachable!("no loss configured"),
            }
        }
        assert!(released_bits <= 5_000_000, "{released_bits}");
        assert!(released_bits >= 4_800_000, "{released_bits}");
        assert!(full > 0 && queued + full == 1000);
        assert_eq!(s.len(), 100);
    }

    #[test]
    fn tail_drop_at_queue_limit() {
        let mut s = Scheduler::new(&spec("delay=50ms,queue=3"), 1);
        for i in 0..3 {
            assert_eq!(s.offer(0, 100, i), Offer::Queued);
        }
        // The fourth is refused and handed back; the queue is untouched.
        assert_eq!(s.offer(1, 100, 3), Offer::QueueFull(3));
        assert_eq!(s.len(), 3);
        // Once one leaves there is room again.
        assert_eq!(s.pop_due(50 * MS), Some(0));
        assert_eq!(s.offer(50 * MS, 100, 4), Offer::Queued);
        assert_eq!(
            drain(&mut s).iter().map(|p| p.0).collect::<Vec<_>>(),
            vec![1, 2, 4]
        );
    }

    #[test]
    fn loss_ratio_matches() {
        for (loss, seed) in [(0.09, 1), (0.5, 2), (0.01, 3)] {
            let spec = spec(&format!("loss={loss}"));
            // `loss` is the round trip's; one direction drops loss_each_way of its packets.
            let each = spec.loss_each_way();
            let mut s = Scheduler::new(&spec, seed);
            let n = 200_000;
            let mut lost = 0;
            for i in 0..n {
                match s.offer(i, 100, ()) {
                    Offer::Lost(()) => lost += 1,
                    Offer::Queued => assert_eq!(s.pop_due(i), Some(())),
                    Offer::QueueFull(()) => unreachable!(),
                }
            }
            let ratio = lost as f64 / n as f64;
            // 200k draws: the standard error is below 0.0012, so 0.005 is > 4 sigma.
            assert!(
                (ratio - each).abs() < 0.005,
                "loss {loss} ({each} each way): {ratio}"
            );
        }
    }

    #[test]
    fn clean_and_black_hole() {
        let mut clean = Scheduler::new(&spec("delay=0ms"), 1);
        for i in 0..10_000 {
            assert_eq!(clean.offer(i, 1, i as u32), Offer::Queued);
            assert_eq!(clean.pop_due(i), Some(i as u32));
        }
        let mut hole = Scheduler::new(&spec("loss=100%"), 1);
        for i in 0..10_000 {
            assert_eq!(hole.offer(i, 1, i as u32), Offer::Lost(i as u32));
        }
        assert!(hole.is_empty());
    }

    #[test]
    fn prng_streams_differ_and_spread() {
        let a: Vec<u64> = (0..4)
            .scan(XorShift::new(1), |r, _| Some(r.next_u64()))
            .collect();
        let b: Vec<u64> = (0..4)
            .scan(XorShift::new(2), |r, _| Some(r.next_u64()))
            .collect();
        assert_ne!(a, b);
        let mut r = XorShift::new(0);
        let mean = (0..100_000).map(|_| r.next_f64()).sum::<f64>() / 100_000.0;
        assert!((mean - 0.5).abs() < 0.01, "{mean}");
    }
}
