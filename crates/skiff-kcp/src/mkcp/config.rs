//! V2Ray's `kcpSettings` tuning and the window sizes it derives from them
//! (transport/internet/kcp/config.go in V2Ray 4.34).

use super::header::HeaderKind;

/// Largest window (in segments) any setting can produce: bounds memory per connection.
const MAX_WINDOW: u32 = 32_768;

#[derive(Clone, PartialEq, Eq)]
pub struct MkcpConfig {
    /// Largest UDP payload, 576..=1460 (default 1350).
    pub mtu: u32,
    /// Update interval in ms, 10..=100 (default 50).
    pub tti: u32,
    /// MB/s this side may send (default 5).
    pub uplink_capacity: u32,
    /// MB/s this side may receive (default 20).
    pub downlink_capacity: u32,
    /// Shrink the window on loss (default off).
    pub congestion: bool,
    /// Bytes (default 2 MiB).
    pub read_buffer: u32,
    /// Bytes (default 2 MiB): how much unacknowledged data one connection may hold.
    pub write_buffer: u32,
    pub header: HeaderKind,
    /// AES-128-GCM seed; None = V2Ray's simple authenticator.
    pub seed: Option<String>,
}

impl Default for MkcpConfig {
    fn default() -> MkcpConfig {
        MkcpConfig {
            mtu: 1350,
            tti: 50,
            uplink_capacity: 5,
            downlink_capacity: 20,
            congestion: false,
            read_buffer: 2 * 1024 * 1024,
            write_buffer: 2 * 1024 * 1024,
            header: HeaderKind::None,
            seed: None,
        }
    }
}

/// Never prints the seed.
impl std::fmt::Debug for MkcpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MkcpConfig")
            .field("mtu", &self.mtu)
            .field("tti", &self.tti)
            .field("uplink_capacity", &self.uplink_capacity)
            .field("downlink_capacity", &self.downlink_capacity)
            .field("congestion", &self.congestion)
            .field("read_buffer", &self.read_buffer)
            .field("write_buffer", &self.write_buffer)
            .field("header", &self.header)
            .field("seed", &self.seed.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl MkcpConfig {
    fn mtu(&self) -> u32 {
        self.mtu.clamp(576, 1460)
    }

    pub fn tti_ms(&self) -> u32 {
        self.tti.clamp(10, 100)
    }

    fn in_flight(&self, capacity_mb: u32) -> u32 {
        let per_tick = u64::from(capacity_mb) * 1024 * 1024
            / u64::from(self.mtu())
            / u64::from(1000 / self.tti_ms());
        (per_tick as u32).clamp(8, MAX_WINDOW)
    }

    /// Segments sent per update before the peer's window applies (V2Ray
    /// `GetSendingInFlightSize`): 194 with the defaults.
    pub fn sending_in_flight(&self) -> u32 {
        self.in_flight(self.uplink_capacity)
    }

    /// Segments the receiver holds ahead of the reader (`GetReceivingInFlightSize`): 776.
    pub fn receiving_window(&self) -> u32 {
        self.in_flight(self.downlink_capacity)
    }

    /// Unacknowledged segments the sender keeps (`GetSendingBufferSize`): 1553.
    pub fn sending_buffer(&self) -> u32 {
        (self.write_buffer / self.mtu()).clamp(8, MAX_WINDOW)
    }

    /// Bytes of data in one segment when the packet adds `overhead` bytes (header and seal)
    /// to its segments: the packet stays within the MTU.
    pub fn mss(&self, overhead: usize) -> usize {
        (self.mtu() as usize)
            .saturating_sub(overhead + super::segment::DATA_OVERHEAD)
            .max(64)
    }

    pub fn max_packet(&self) -> usize {
        self.mtu() as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v2ray_defaults() {
        let c = MkcpConfig::default();
        assert_eq!(c.sending_in_flight(), 194);
        assert_eq!(c.receiving_window(), 776);
        assert_eq!(c.sending_buffer(), 1553);
        // The simple authenticator adds 6 bytes.
        assert_eq!(c.mss(6), 1326);
        let tiny = MkcpConfig {
            uplink_capacity: 0,
            ..MkcpConfig::default()
        };
        assert_eq!(tiny.sending_in_flight(), 8);
    }
}
