//! The `udpspeeder` protocol's plan: a UDPspeeder v2 (speederv2) server as an inbound, a
//! client as an outbound. Kept beside `plan.rs` so the shared plan only gains two arms.

pub use skiff_udpfec::{CookOptions, FecParams};

/// Settings both sides share, speederv2's flags under Xray-style camelCase keys.
#[derive(Clone, Debug)]
pub struct UdpspeederTuning {
    /// `fec`, `mode`, `mtu`, `queueLen`, `timeout`, `disableFec`.
    pub params: FecParams,
    /// `key`, `disableObscure`, `disableChecksum` (its Debug hides the key).
    pub cook: CookOptions,
    /// `decodeBuf`: shards the decoder holds per peer (speederv2's `--decode-buf`).
    pub decode_buf: usize,
}

/// Inbound: FEC datagrams in; each conversation's datagrams go to `target` through routing,
/// like `speederv2 -s -r target`.
#[derive(Clone, Debug)]
pub struct UdpspeederInbound {
    pub target_host: String,
    pub target_port: u16,
    pub tuning: UdpspeederTuning,
}

/// Outbound: UDP routed here travels as FEC datagrams to the server at `address:port`, like
/// `speederv2 -c -r address:port`. The destination is not sent: the server's target decides.
#[derive(Clone, Debug)]
pub struct UdpspeederOutbound {
    pub address: String,
    pub port: u16,
    pub tuning: UdpspeederTuning,
}
