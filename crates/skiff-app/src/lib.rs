//! The running instance: listeners, the per-connection data path (handshake → route →
//! outbound → relay), UDP sessions, access log and graceful shutdown.

pub mod access_log;
mod api;
mod code_pages;
mod dispatch;
mod fallback;
mod handlers;
mod inbound;
mod inbound_listing;
mod kcp_params;
mod memory;
pub mod metrics;
mod mux;
mod outbound_kcptun;
mod outbounds;
mod reality_target;
mod reload;
mod routed_packets;
mod shared;
mod sniffing;
mod stream_settings;
mod tunnel;
mod udp;
mod udp2raw;
mod udp2raw_layer;
mod udp_stream;
mod udpspeeder;
mod users;
mod xhttp;

pub mod instance;
pub mod limits;
pub mod router;
mod routing_api;

pub use instance::{BoundListener, MAX_CONNECTIONS, Running};
pub use reload::ReloadSummary;
pub use udp::MAX_UDP_SESSIONS;
