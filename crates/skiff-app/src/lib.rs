//! The running instance: listeners, the per-connection data path (handshake → route →
//! outbound → relay), UDP sessions, access log and graceful shutdown.

mod access_log;
mod activity;
mod dial;
mod dispatch;
mod fallback;
mod inbound;
mod kcp_params;
mod memory;
mod outbound_kcptun;
mod outbound_shadowsocks;
mod outbound_trojan;
mod outbound_vless;
mod outbound_vmess;
mod outbounds;
mod shared;
mod sniffing;
mod ss_udp;
mod stack;
mod trojan_udp;
mod tunnel;
mod udp;
mod udp_links;
mod udp_stream;

pub mod instance;
pub mod limits;
pub mod router;

pub use instance::{BoundListener, MAX_CONNECTIONS, Running};
pub use udp::MAX_UDP_SESSIONS;
