//! When a UDP session or datagram stream last moved a datagram: one atomic shared by both
//! directions, read by the idle timeouts. Cheaper than resetting a timer per datagram.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// Milliseconds since the session started, at its last datagram.
pub struct Activity {
    start: Instant,
    last_ms: AtomicU64,
}

impl Default for Activity {
    fn default() -> Activity {
        Activity::new()
    }
}

impl Activity {
    pub fn new() -> Activity {
        Activity {
            start: Instant::now(),
            last_ms: AtomicU64::new(0),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    pub fn touch(&self) {
        self.last_ms.store(self.now_ms(), Ordering::Relaxed);
    }

    /// How long since the last datagram.
    pub fn idle_for(&self) -> Duration {
        Duration::from_millis(
            self.now_ms()
                .saturating_sub(self.last_ms.load(Ordering::Relaxed)),
        )
    }

    /// Resolves once nothing moved for `limit`.
    pub async fn idle(&self, limit: Duration) {
        loop {
            let last = Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
            let deadline = self.start + last + limit;
            if Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep_until(deadline).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn idle_waits_for_quiet_since_the_last_touch() {
        let a = Activity::new();
        tokio::time::sleep(Duration::from_millis(30)).await;
        a.touch();
        assert!(a.idle_for() < Duration::from_millis(30));
        let started = Instant::now();
        a.idle(Duration::from_millis(100)).await;
        // Never earlier than the limit after the last touch (later is fine on a busy machine).
        assert!(started.elapsed() >= Duration::from_millis(90));
        assert!(a.idle_for() >= Duration::from_millis(100));
    }
}
