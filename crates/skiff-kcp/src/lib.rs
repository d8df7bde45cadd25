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
//! `gf` + `fec` (Reed-Solomon shards), `crypt` (nonce, CRC, CFB, salsa20, xor, tea/xtea, key
//! derivation) with `blowfish`, `twofish` and `sm4` beside it, `session` (the composition),
//! `config` (kcptun's names and defaults). AES comes from aws-lc-rs.
//! kcptun's `cast5` and `3des` are not implemented ([`Crypt::parse`] says so).

#[cfg(target_arch = "x86_64")]
mod aes_cfb;
mod arq;
mod blowfish;
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
mod sm4;
/// kcptun's stream layers above KCP: snappy framing and smux.
pub mod smux;
pub mod snappy_frame;
mod twofish;

pub use config::{Crypt, KcpConfig};
pub use crypt::derive_key;
pub use error::KcpError;
pub use session::{KcpSession, KcpStats, peek_conv};
