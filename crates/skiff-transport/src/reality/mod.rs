//! REALITY (github.com/XTLS/REALITY, as Xray uses it): TLS 1.3 whose clients authenticate
//! inside the ClientHello, and whose server relays everyone else to a real site.
//!
//! * [`auth`]: the shared key and the sealed session ID.
//! * [`server`]: the server (`server_parse` reads the hellos, `server_cert` makes the
//!   temporary certificate, `server_padding` gives its handshake records the target's
//!   lengths, `server_forward` relays to the target, `server_replay` remembers recent
//!   hellos); `server_layer` makes it a [`skiff_core::ServerLayer`].
//! * [`client`]: the client (a [`skiff_core::ClientLayer`] over our own TLS 1.3 handshake,
//!   `crate::tls13_client`); `client_spider` crawls the real site when the server is not
//!   REALITY's.

pub mod auth;
pub mod client;
pub mod client_spider;
pub mod server;
mod server_cert;
mod server_forward;
mod server_layer;
mod server_padding;
pub mod server_parse;
mod server_replay;

pub use server::{RealityServer, RealityServerOptions, TargetDialer};
