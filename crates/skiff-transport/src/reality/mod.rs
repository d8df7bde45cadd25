//! REALITY (Xray's `security: "reality"`).

pub mod client;
pub mod client_spider;
