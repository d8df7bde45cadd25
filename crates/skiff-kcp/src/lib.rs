//! Sans-IO KCP packet layer, byte-compatible with kcp-go 5.6 as used by kcptun 20210922.
//!
//! Datagrams in, datagrams out: [`KcpSession`] owns one KCP conversation together with its
//! Reed-Solomon FEC state and its packet cipher. No sockets, no clocks, no threads: the caller
//! passes the time in milliseconds and moves the bytes.

mod arq;
mod config;
mod crypt;
mod error;
mod fec;
#[doc(hidden)]
pub mod fuzz;
mod gf;
mod segment;
mod session;
/// kcptun's stream layers above KCP: snappy framing and smux.
pub mod smux;
pub mod snappy_frame;

pub use config::{Crypt, KcpConfig};
pub use crypt::derive_key;
pub use error::KcpError;
pub use session::{KcpSession, KcpStats, peek_conv};
