//! Sans-IO KCP packet layer, byte-compatible with kcp-go 5.6 as used by kcptun 20210922.
//!
//! Datagrams in, datagrams out: [`KcpSession`] owns one KCP conversation together with its
//! Reed-Solomon FEC state and its packet cipher. No sockets, no clocks, no threads: the caller
//! passes the time in milliseconds (any wrapping u32 epoch) and moves the bytes.
//!
//! Driving one session (a UDP socket and a timer around it):
//! ```no_run
//! # use skiff_kcp::{KcpConfig, KcpSession};
//! # fn socket_recv() -> Option<Vec<u8>> { None }
//! # fn socket_send(_: &[u8]) {}
//! # let now = 0u32;
//! let mut s = KcpSession::new(0x1234, &KcpConfig::kcptun_default(true))?;
//! let mut out = Vec::new();
//! let mut buf = [0u8; 16384];
//! // on a datagram:      s.handle_datagram(&d, now)
//! // on app bytes:       let taken = s.send(bytes);   // 0 = window full, wait for acks
//! // then, and whenever now >= s.next_update_ms(now):
//! s.update(now);
//! while s.poll_datagram(&mut out) { socket_send(&out) }
//! while s.recv(&mut buf) > 0 { /* deliver */ }
//! # Ok::<(), skiff_kcp::KcpError>(())
//! ```
//! Internals, one idea per file: `segment` (24-byte header), `arq` (the control block),
//! `gf` + `fec` (Reed-Solomon shards), `crypt` (nonce, CRC, xor table, key derivation, and
//! kcptun's choice of cipher and key bytes), `session` (the composition), `config` (kcptun's
//! names and defaults). Every cipher of kcptun's `--crypt` list comes from `skiff-crypto`.

mod arq;
mod config;
mod crypt;
mod error;
mod fec;
#[doc(hidden)]
pub mod fuzz;
mod gf;
/// V2Ray's mKCP (`network: "kcp"`), a different protocol from kcp-go's KCP above.
pub mod mkcp;
mod segment;
mod session;
/// kcptun's stream layers above KCP: snappy framing and smux.
pub mod smux;
pub mod snappy_frame;

pub use config::{Crypt, KcpConfig};
pub use crypt::derive_key;
pub use error::KcpError;
pub use session::{KcpSession, KcpStats, peek_conv};
