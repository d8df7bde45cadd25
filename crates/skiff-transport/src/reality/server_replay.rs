//! The ClientHello randoms of recent authenticated REALITY handshakes. REALITY itself keeps
//! none, so a captured ClientHello replayed within `maxTimeDiff` gets REALITY's handshake
//! again (with a certificate the prober cannot check, but a handshake that is not the
//! target's). Here a random seen before makes the connection the target's: the prober sees
//! the site's own answer to the replayed hello.
//!
//! Bounded: the last [`CAPACITY`] randoms (2 MiB at most); an older replay is not caught.

use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;

/// How many randoms are remembered.
pub const CAPACITY: usize = 65_536;

#[derive(Default)]
pub(crate) struct ReplayCache {
    inner: Mutex<Seen>,
}

#[derive(Default)]
struct Seen {
    set: HashSet<[u8; 32]>,
    order: VecDeque<[u8; 32]>,
}

impl ReplayCache {
    /// True the first time `random` is offered; false for a replay.
    pub(crate) fn first_sight(&self, random: &[u8; 32]) -> bool {
        let mut seen = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if !seen.set.insert(*random) {
            return false;
        }
        seen.order.push_back(*random);
        if seen.order.len() > CAPACITY
            && let Some(oldest) = seen.order.pop_front()
        {
            seen.set.remove(&oldest);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_random_passes_once_and_memory_is_bounded() {
        let cache = ReplayCache::default();
        assert!(cache.first_sight(&[1; 32]));
        assert!(!cache.first_sight(&[1; 32]));
        for i in 0..CAPACITY as u32 + 10 {
            let mut r = [0u8; 32];
            r[..4].copy_from_slice(&i.to_be_bytes());
            r[4] = 9;
            cache.first_sight(&r);
        }
        let seen = cache.inner.lock().unwrap();
        assert_eq!(seen.set.len(), CAPACITY);
        assert_eq!(seen.order.len(), CAPACITY);
    }
}
