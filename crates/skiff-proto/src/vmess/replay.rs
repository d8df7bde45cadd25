//! A time-bounded set of values seen recently: VMess servers refuse an auth ID seen before
//! (vmess.md §2.1) and a (user, body key, body IV) seen before (§2.3).
//!
//! Two generations of hash sets, swapped every `interval` seconds: a value stays known for at
//! least `interval` and at most twice that. With a ±120 s timestamp window an auth ID is
//! acceptable for 240 s of server time, so the auth-ID filter uses a 240 s interval; a replay
//! later than that fails the timestamp check instead. (Xray keeps auth IDs for 120 to 240 s,
//! which leaves a replay gap for clients whose clock runs ahead.)
//!
//! Memory is bounded: a generation holds at most `cap` values. Only values of authenticated
//! requests are inserted (an auth ID must decrypt under a user's key first), so filling it
//! takes a user's key; when full, new requests are refused ("fail closed") until the next
//! swap, and [`Check::Full`] says so for the log.

use std::collections::HashSet;
use std::hash::Hash;

/// The outcome of [`ReplayFilter::check`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// Not seen in the window; now recorded.
    Fresh,
    /// Seen in the window: a replay.
    Seen,
    /// Not seen, but the filter is full: refused.
    Full,
}

#[derive(Debug)]
pub struct ReplayFilter<T> {
    current: HashSet<T>,
    previous: HashSet<T>,
    /// When `current` started (seconds, the caller's clock).
    since: i64,
    interval: i64,
    cap: usize,
}

impl<T: Hash + Eq> ReplayFilter<T> {
    /// Values are kept at least `interval` seconds; each generation holds at most `cap`.
    pub fn new(interval: i64, cap: usize) -> ReplayFilter<T> {
        ReplayFilter {
            current: HashSet::new(),
            previous: HashSet::new(),
            since: i64::MIN,
            interval: interval.max(1),
            cap,
        }
    }

    /// Records `value` at time `now` (seconds) unless it was seen within the window.
    pub fn check(&mut self, value: T, now: i64) -> Check {
        if self.since == i64::MIN {
            self.since = now;
        }
        let age = now.saturating_sub(self.since);
        if age >= self.interval {
            // A clock that jumped back leaves the sets alone (longer memory, never shorter).
            self.previous = if age >= 2 * self.interval {
                HashSet::new()
            } else {
                std::mem::take(&mut self.current)
            };
            self.current = HashSet::new();
            self.since = now;
        }
        if self.previous.contains(&value) || self.current.contains(&value) {
            return Check::Seen;
        }
        if self.current.len() >= self.cap {
            return Check::Full;
        }
        self.current.insert(value);
        Check::Fresh
    }

    /// Values currently remembered.
    pub fn len(&self) -> usize {
        self.current.len() + self.previous.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_for_at_least_the_interval_and_forgets_after_two() {
        let mut f = ReplayFilter::new(240, 10);
        assert_eq!(f.check(1, 1000), Check::Fresh);
        assert_eq!(f.check(1, 1000), Check::Seen);
        assert_eq!(f.check(2, 1239), Check::Fresh);
        // Swap at 1240: 1 and 2 move to the previous generation and are still known.
        assert_eq!(f.check(1, 1240), Check::Seen);
        assert_eq!(f.check(2, 1479), Check::Seen);
        // Second swap at 1480: what was recorded before 1240 is gone, 2 (1239) as well.
        assert_eq!(f.check(3, 1480), Check::Fresh);
        assert_eq!(f.check(1, 1480), Check::Fresh);
        // A long silence clears everything.
        assert_eq!(f.check(4, 5000), Check::Fresh);
        assert_eq!(f.check(3, 5000), Check::Fresh);
        assert_eq!(f.len(), 2);
    }

    #[test]
    fn clock_going_back_keeps_memory() {
        let mut f = ReplayFilter::new(10, 10);
        assert_eq!(f.check(1, 100), Check::Fresh);
        assert_eq!(f.check(1, 50), Check::Seen);
        assert_eq!(f.check(2, 50), Check::Fresh);
    }

    #[test]
    fn refuses_when_full() {
        let mut f = ReplayFilter::new(10, 2);
        assert_eq!(f.check(1, 0), Check::Fresh);
        assert_eq!(f.check(2, 0), Check::Fresh);
        assert_eq!(f.check(3, 0), Check::Full);
        assert_eq!(f.check(1, 0), Check::Seen);
        // After a swap there is room again; the old values are still known.
        assert_eq!(f.check(3, 10), Check::Fresh);
        assert_eq!(f.check(2, 10), Check::Seen);
    }
}
