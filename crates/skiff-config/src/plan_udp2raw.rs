//! The `udp2raw` protocol's plan: a udp2raw server as an inbound (raw packets in on the
//! inbound's address and port, UDP to `target` out, like `udp2raw -s -l … -r …`) and a client
//! as an outbound (UDP routed to it goes as raw packets to the server, like `udp2raw -c`).

pub use skiff_udp2raw::headers::RawMode;
pub use skiff_udp2raw::{AuthMode, CipherMode};

/// udp2raw's flags under Xray-style camelCase keys; both sides share them, and so does
/// `streamSettings.udp2rawSettings` (the layer under a UDP transport).
#[derive(Clone, PartialEq, Eq)]
pub struct Udp2rawTuning {
    /// `key` (udp2raw's `-k`: its first whitespace-delimited word).
    pub key: Vec<u8>,
    pub raw_mode: RawMode,
    pub cipher: CipherMode,
    pub auth: AuthMode,
    /// `seqMode` (0..=4, udp2raw's default 3).
    pub seq_mode: u8,
    pub fix_gro: bool,
    /// `autoRule` (`-a`): add (and remove) the firewall rules that keep the kernel quiet.
    pub auto_rule: bool,
}

impl std::fmt::Debug for Udp2rawTuning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Udp2rawTuning")
            .field("key", &"…")
            .field("raw_mode", &self.raw_mode)
            .field("cipher", &self.cipher)
            .field("auth", &self.auth)
            .field("seq_mode", &self.seq_mode)
            .field("fix_gro", &self.fix_gro)
            .field("auto_rule", &self.auto_rule)
            .finish()
    }
}

/// Inbound (server): every conversation's datagrams go to `target` (either family). The
/// inbound's `listen` address decides the tunnel's family: IPv6 for an IPv6 address (`::`
/// included), IPv4 otherwise.
#[derive(Clone, Debug)]
pub struct Udp2rawInbound {
    pub target_host: String,
    pub target_port: u16,
    pub tuning: Udp2rawTuning,
}

/// Outbound (client): the server at `address:port` (an IPv4 or IPv6 address, brackets
/// already stripped; the tunnel runs over that family).
#[derive(Clone, Debug)]
pub struct Udp2rawOutbound {
    pub address: String,
    pub port: u16,
    pub tuning: Udp2rawTuning,
}
