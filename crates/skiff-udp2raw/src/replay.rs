//! udp2raw's anti-replay window (as in IPsec/OpenVPN): the highest sequence number seen, and
//! which of the 4000 numbers below it have been seen. A number equal to the highest, older
//! than the window, or already seen is refused. The highest starts at 0, so sequence number 0
//! is always refused (udp2raw starts its send counter at a random u64 / 10).
//! Under `--auth-mode none` (or `--disable-anti-replay`) udp2raw accepts everything.

use crate::Error;

/// The window size udp2raw uses.
pub const WINDOW: u64 = 4000;

/// The receive-side window of one connection.
#[derive(Clone)]
pub struct ReplayWindow {
    max_seen: u64,
    seen: Box<[bool; WINDOW as usize]>,
    enabled: bool,
}

impl std::fmt::Debug for ReplayWindow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplayWindow")
            .field("max_seen", &self.max_seen)
            .field("enabled", &self.enabled)
            .finish()
    }
}

impl Default for ReplayWindow {
    fn default() -> Self {
        ReplayWindow::new(true)
    }
}

impl ReplayWindow {
    /// A fresh window; `enabled: false` accepts every number, as udp2raw does under
    /// `--auth-mode none`.
    pub fn new(enabled: bool) -> ReplayWindow {
        ReplayWindow {
            max_seen: 0,
            seen: Box::new([false; WINDOW as usize]),
            enabled,
        }
    }

    /// Forgets the highest number (udp2raw's `re_init`, on a new handshake). Like udp2raw it
    /// keeps the slots; they are cleared as the new numbers move past them.
    pub fn reset(&mut self) {
        self.max_seen = 0;
    }

    fn slot(seq: u64) -> usize {
        (seq % WINDOW) as usize
    }

    /// Accepts `seq` (and remembers it) or refuses it as a replay.
    pub fn check(&mut self, seq: u64) -> Result<(), Error> {
        if !self.enabled {
            return Ok(());
        }
        if seq == self.max_seen {
            return Err(Error::Replay(seq));
        }
        if seq > self.max_seen {
            if seq - self.max_seen >= WINDOW {
                self.seen.fill(false);
            } else {
                for s in self.max_seen + 1..seq {
                    self.seen[Self::slot(s)] = false;
                }
            }
            self.seen[Self::slot(seq)] = true;
            self.max_seen = seq;
            return Ok(());
        }
        if self.max_seen - seq >= WINDOW || self.seen[Self::slot(seq)] {
            return Err(Error::Replay(seq));
        }
        self.seen[Self::slot(seq)] = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_semantics() {
        let mut w = ReplayWindow::default();
        assert!(w.check(0).is_err(), "0 equals the initial highest");
        assert!(w.check(10).is_ok());
        assert!(w.check(10).is_err());
        assert!(w.check(5).is_ok());
        assert!(w.check(5).is_err());
        assert!(w.check(10 + WINDOW).is_ok());
        assert!(w.check(10).is_err(), "fell out of the window");
        assert!(w.check(11).is_ok());
        assert!(w.check(u64::MAX).is_ok());
        assert!(w.check(u64::MAX).is_err());
        let mut off = ReplayWindow::new(false);
        assert!(off.check(0).is_ok() && off.check(0).is_ok());
    }
}
