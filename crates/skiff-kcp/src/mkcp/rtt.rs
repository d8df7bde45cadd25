//! Round-trip estimate and retransmission timeout, as V2Ray's `RoundTripInfo`.

use super::time::before;

/// The longest RTO V2Ray computes (10 s × 5/4); a peer's advertised RTO is held to it too.
const MAX_RTO: u32 = 12_500;

#[derive(Debug)]
pub(super) struct RoundTrip {
    variation: u32,
    srtt: u32,
    rto: u32,
    min_rtt: u32,
    updated: u32,
}

impl RoundTrip {
    pub(super) fn new(tti: u32, now: u32) -> RoundTrip {
        RoundTrip {
            variation: 0,
            srtt: 0,
            rto: 100,
            min_rtt: tti,
            updated: now,
        }
    }

    pub(super) fn timeout(&self) -> u32 {
        self.rto
    }

    pub(super) fn update(&mut self, rtt: u32, now: u32) {
        if rtt > 0x7fff_ffff {
            return;
        }
        if self.srtt == 0 {
            self.srtt = rtt;
            self.variation = rtt / 2;
        } else {
            let delta = rtt.abs_diff(self.srtt);
            self.variation = (3 * self.variation + delta) / 4;
            self.srtt = (7 * self.srtt + rtt) / 8;
            if self.srtt < self.min_rtt {
                self.srtt = self.min_rtt;
            }
        }
        let rto = if self.min_rtt < 4 * self.variation {
            self.srtt + 4 * self.variation
        } else {
            self.srtt + self.variation
        };
        self.rto = rto.min(10_000) * 5 / 4;
        self.updated = now;
    }

    /// The peer's RTO from a ping, taken when our own estimate is older than 3 s.
    pub(super) fn update_peer(&mut self, rto: u32, now: u32) {
        if before(now, self.updated.wrapping_add(3000)) {
            return;
        }
        self.updated = now;
        self.rto = rto.clamp(self.min_rtt.max(10), MAX_RTO);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_v2ray_arithmetic() {
        let mut r = RoundTrip::new(50, 0);
        assert_eq!(r.timeout(), 100);
        r.update(20, 1);
        // srtt 20, variation 10: min_rtt 50 ≥ 40, so rto = (20 + 10) × 5/4.
        assert_eq!(r.timeout(), 37);
        r.update(20, 2);
        // srtt clamps to min_rtt: 50; variation (30+0)/4 = 7; rto = 57 × 5/4.
        assert_eq!(r.timeout(), 71);
        r.update_peer(500, 2000);
        assert_eq!(r.timeout(), 71, "own estimate is fresh");
        r.update_peer(500, 3002);
        assert_eq!(r.timeout(), 500);
        r.update_peer(u32::MAX, 7000);
        assert_eq!(r.timeout(), MAX_RTO);
    }
}
