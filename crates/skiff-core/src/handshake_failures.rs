//! Why inbound handshakes failed, counted by reason for the metrics endpoint. These are not
//! Xray counters (the API's `statsquery` never lists them): a fixed set of atomics, bumped
//! once per failed connection, never per packet.

use std::sync::atomic::{AtomicU64, Ordering};

/// Why a connection never became a proxied one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandshakeFailure {
    /// The client named no configured user, or failed a protocol's authentication
    /// (VMess auth ID, Shadowsocks AEAD tag).
    BadAuth,
    /// A replayed request (VMess session, Shadowsocks salt).
    Replay,
    /// The handshake did not finish within the policy's `handshake` time.
    Timeout,
    /// Not a valid request (VLESS, Trojan): handed to the inbound's fallback.
    Fallback,
    /// Not a valid request and no fallback applies: closed without a byte of ours.
    Rejected,
    /// Anything else: a TLS failure, a malformed request, the client going away.
    Other,
}

impl HandshakeFailure {
    pub const ALL: [HandshakeFailure; 6] = [
        HandshakeFailure::BadAuth,
        HandshakeFailure::Replay,
        HandshakeFailure::Timeout,
        HandshakeFailure::Fallback,
        HandshakeFailure::Rejected,
        HandshakeFailure::Other,
    ];

    /// The metrics label.
    pub fn name(self) -> &'static str {
        match self {
            HandshakeFailure::BadAuth => "bad_auth",
            HandshakeFailure::Replay => "replay",
            HandshakeFailure::Timeout => "timeout",
            HandshakeFailure::Fallback => "fallback",
            HandshakeFailure::Rejected => "rejected",
            HandshakeFailure::Other => "other",
        }
    }
}

/// One counter per [`HandshakeFailure`].
#[derive(Debug, Default)]
pub struct HandshakeFailures([AtomicU64; 6]);

impl HandshakeFailures {
    pub fn count(&self, reason: HandshakeFailure) {
        self.0[reason as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Every reason with its count, in [`HandshakeFailure::ALL`]'s order.
    pub fn read(&self) -> [(&'static str, u64); 6] {
        HandshakeFailure::ALL.map(|r| (r.name(), self.0[r as usize].load(Ordering::Relaxed)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_reason_has_its_own_counter() {
        let failures = HandshakeFailures::default();
        failures.count(HandshakeFailure::Replay);
        failures.count(HandshakeFailure::Replay);
        failures.count(HandshakeFailure::Other);
        let read = failures.read();
        assert_eq!(read[1], ("replay", 2));
        assert_eq!(read[5], ("other", 1));
        assert_eq!(read.iter().map(|(_, n)| n).sum::<u64>(), 3);
    }
}
