//! Replay protection (shadowsocks.md §2.4, §2.5): the pool of request salts a server saw in
//! the last 60 s, and the sliding window over UDP packet ids.

use std::collections::HashSet;
use std::time::{Duration, Instant};

/// How long a salt stays in the pool: twice the timestamp tolerance, so a request whose
/// timestamp still passes can never find its salt forgotten.
pub const SALT_TTL: Duration = Duration::from_secs(60);

/// Salts remembered at most (both generations together). A pool this full means more than
/// ~1 700 authenticated connections a second for a minute; beyond it the older generation is
/// dropped early, so memory stays bounded (about 5 MiB) at the price of a shorter window.
pub const MAX_SALTS: usize = 1 << 17;

/// Request salts seen recently: an exact set in two generations. Salts go into the current
/// one; when it is older than [`SALT_TTL`] it becomes the previous one and the old previous
/// one is dropped, so every salt is remembered for at least `SALT_TTL` and at most twice that.
#[derive(Debug)]
pub struct SaltFilter {
    current: HashSet<[u8; 32]>,
    previous: HashSet<[u8; 32]>,
    started: Option<Instant>,
    ttl: Duration,
    capacity: usize,
}

impl Default for SaltFilter {
    fn default() -> Self {
        SaltFilter::new(SALT_TTL, MAX_SALTS)
    }
}

impl SaltFilter {
    pub fn new(ttl: Duration, capacity: usize) -> SaltFilter {
        SaltFilter {
            current: HashSet::new(),
            previous: HashSet::new(),
            started: None,
            ttl,
            capacity: capacity.max(2),
        }
    }

    /// Records `salt` (up to 32 bytes) seen at `now`; false when it was seen within the
    /// window (a replay), in which case nothing changes.
    pub fn check_and_insert(&mut self, salt: &[u8], now: Instant) -> bool {
        let mut key = [0u8; 32];
        let n = salt.len().min(32);
        key[..n].copy_from_slice(&salt[..n]);
        self.rotate(now);
        if self.current.contains(&key) || self.previous.contains(&key) {
            return false;
        }
        if self.current.len() >= self.capacity / 2 {
            self.previous = std::mem::take(&mut self.current);
            self.started = Some(now);
        }
        self.current.insert(key);
        true
    }

    /// Salts remembered now.
    pub fn len(&self) -> usize {
        self.current.len() + self.previous.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn rotate(&mut self, now: Instant) {
        let started = *self.started.get_or_insert(now);
        let age = now.saturating_duration_since(started);
        if age >= 2 * self.ttl {
            self.current = HashSet::new();
            self.previous = HashSet::new();
            self.started = Some(now);
        } else if age >= self.ttl {
            self.previous = std::mem::take(&mut self.current);
            // The new generation starts when the old one ended, keeping each one TTL long.
            self.started = Some(started + self.ttl);
        }
        if self.previous.is_empty() && self.previous.capacity() > 0 {
            self.previous = HashSet::new();
        }
    }
}

/// Packet ids of one UDP session: accepts each id once, within a window behind the highest
/// seen (as WireGuard and shadowsocks-rust do). Check first, then `record` after the packet
/// was fully validated.
#[derive(Clone, Debug, Default)]
pub struct PacketWindow {
    /// Highest id recorded + 1 (0: none yet).
    next: u64,
    /// Bit i of the ring: id `next - 1 - i` was seen (for i < WINDOW).
    bits: [u64; WORDS],
}

const WORDS: usize = 16;
/// How far behind the newest id a late packet may still arrive.
pub const WINDOW: u64 = (WORDS * 64) as u64;

impl PacketWindow {
    /// Whether `id` may be accepted (new, and not too old).
    pub fn check(&self, id: u64) -> bool {
        if id >= self.next {
            return id != u64::MAX;
        }
        let behind = self.next - 1 - id;
        behind < WINDOW && !self.bit(behind)
    }

    /// Marks `id` seen. Call only for ids that passed [`check`](Self::check).
    pub fn record(&mut self, id: u64) {
        if id >= self.next {
            let shift = id + 1 - self.next;
            self.shift(shift);
            self.next = id + 1;
            self.set(0);
        } else {
            let behind = self.next - 1 - id;
            if behind < WINDOW {
                self.set(behind);
            }
        }
    }

    fn bit(&self, i: u64) -> bool {
        self.bits[(i / 64) as usize] & (1 << (i % 64)) != 0
    }

    fn set(&mut self, i: u64) {
        self.bits[(i / 64) as usize] |= 1 << (i % 64);
    }

    /// Ages every recorded id by `n`.
    fn shift(&mut self, n: u64) {
        if n >= WINDOW {
            self.bits = [0; WORDS];
            return;
        }
        let words = (n / 64) as usize;
        let bits = (n % 64) as u32;
        for i in (0..WORDS).rev() {
            let src = i.checked_sub(words);
            let hi = src.map_or(0, |s| self.bits[s]);
            let lo = src
                .and_then(|s| s.checked_sub(1))
                .map_or(0, |s| self.bits[s]);
            self.bits[i] = if bits == 0 {
                hi
            } else {
                (hi << bits) | (lo >> (64 - bits))
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn salts_are_refused_within_the_window_and_forgotten_after() {
        let t0 = Instant::now();
        let mut f = SaltFilter::new(Duration::from_secs(60), 1000);
        assert!(f.check_and_insert(&[1; 16], t0));
        assert!(!f.check_and_insert(&[1; 16], t0));
        assert!(f.check_and_insert(&[2; 32], t0 + Duration::from_secs(30)));
        // Rotated once: both still remembered.
        assert!(!f.check_and_insert(&[1; 16], t0 + Duration::from_secs(61)));
        assert!(!f.check_and_insert(&[2; 32], t0 + Duration::from_secs(119)));
        // Two rotations later the first ones are gone.
        assert!(f.check_and_insert(&[1; 16], t0 + Duration::from_secs(121)));
        assert!(f.check_and_insert(&[2; 32], t0 + Duration::from_secs(400)));
        assert_eq!(f.len(), 1);
    }

    #[test]
    fn salt_pool_stays_bounded() {
        let t0 = Instant::now();
        let mut f = SaltFilter::new(Duration::from_secs(60), 100);
        for i in 0..1000u32 {
            let mut salt = [0u8; 16];
            salt[..4].copy_from_slice(&i.to_le_bytes());
            assert!(f.check_and_insert(&salt, t0));
            assert!(f.len() <= 100);
        }
        // The most recent ones are still refused.
        let mut salt = [0u8; 16];
        salt[..4].copy_from_slice(&999u32.to_le_bytes());
        assert!(!f.check_and_insert(&salt, t0));
    }

    #[test]
    fn packet_window_accepts_each_id_once() {
        let mut w = PacketWindow::default();
        for id in [0, 1, 5, 3, 2, 4, 100, 99, 2000] {
            assert!(w.check(id), "{id}");
            w.record(id);
            assert!(!w.check(id), "{id} twice");
        }
        // Too far behind the newest.
        assert!(!w.check(2000 - WINDOW));
        assert!(w.check(2000 - WINDOW + 1));
        assert!(!w.check(1999 - 1899)); // 100 was seen, and is out of the window anyway
        assert!(w.check(1500));
        w.record(1500);
        assert!(!w.check(1500));
        // Shifts across word boundaries keep the bits.
        let mut w = PacketWindow::default();
        w.record(10);
        w.record(75);
        w.record(200);
        assert!(!w.check(10) && !w.check(75) && !w.check(200));
        assert!(w.check(11) && w.check(74) && w.check(199));
        assert!(!PacketWindow::default().check(u64::MAX));
    }
}
