//! The running instance: listeners, the per-connection data path (handshake → route →
//! outbound → relay), UDP sessions, access log and graceful shutdown.

mod access_log;
mod dispatch;
mod fallback;
mod inbound;
mod memory;
mod outbound_shadowsocks;
mod outbound_trojan;
mod outbound_vless;
mod outbounds;
mod shared;
mod ss_udp;
mod stack;
mod trojan_udp;
mod tunnel;
mod udp;
mod vless_udp;

pub mod instance;
pub mod limits;
pub mod router;

pub use instance::{BoundListener, MAX_CONNECTIONS, Running};
pub use udp::MAX_UDP_SESSIONS;
