//! VMess with AEAD headers (vmess.md), as sans-IO codecs with async adapters on top:
//!
//! * [`keys`], [`auth_id`]: what a user id turns into; the auth ID that opens a request;
//! * [`instruction`]: the plaintext request header; [`request`]: how it is sealed;
//! * [`response`]: the sealed response header;
//! * [`chunk`]: the body, chunk by chunk (aes-128-gcm, chacha20-poly1305, none, zero; options
//!   S, M, P, A), sealed and opened in place;
//! * [`replay`], [`users`]: the server's user lookup and replay filters;
//! * [`server`], [`client`]: the handshakes; [`stream`] (TCP) and [`packet`] (UDP) the
//!   connection afterwards, over the buffer-owning halves in `halves`.
//!
//! Only AEAD authentication exists here: the legacy MD5 scheme (alterId > 0) is gone from
//! Xray and refused by the config.

pub mod auth_id;
pub mod chunk;
pub mod client;
pub mod error;
mod halves;
mod inbound;
pub mod instruction;
pub mod keys;
mod outbound;
pub mod packet;
pub mod replay;
pub mod request;
pub mod response;
pub mod server;
pub mod stream;
pub mod users;

#[cfg(test)]
mod tests;

mod fuzz;

pub use client::{Security, VmessClient};
pub use error::VmessError;
pub use fuzz::fuzz_parse_all;
pub use instruction::Command;
pub use outbound::VmessOutbound;
pub use packet::{VmessPacketReader, VmessPacketWriter};
pub use server::{VmessAccept, accept};
pub use stream::VmessStream;
pub use users::{VmessServer, VmessUser};
