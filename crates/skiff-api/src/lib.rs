//! Xray's gRPC API, served over a running Skiff: the services panels (3x-ui, Marzban,
//! Remnawave…) and `xray api` drive a core with, under Xray's package and service names so
//! that their clients need no change. The messages come from our .proto files in `proto/`,
//! written from Xray's published definitions (field numbers are the contract).

pub mod logger_service;
pub mod server;
pub mod stats_service;

/// The generated messages and service traits, by Xray's package names.
pub mod proto {
    pub mod stats {
        tonic::include_proto!("xray.app.stats.command");
    }
    pub mod log {
        tonic::include_proto!("xray.app.log.command");
    }
}
