//! udp2raw's wire format, sans-IO: what the real `udp2raw` (wangyu-/udp2raw, commit e42f0e5)
//! puts on the wire, as pure functions over byte slices.
//!
//! Layers, inside out:
//! - [`key`]: the keys udp2raw derives from `-k PASSWORD` (one shared MD5 key, and per-direction
//!   cipher/HMAC keys from PBKDF2-SHA256 + HKDF-SHA256).
//! - [`cipher`] and [`auth`]: `--cipher-mode` and `--auth-mode`; [`codec`] chains them the way
//!   udp2raw does (MAC-then-encrypt, except encrypt-then-MAC for `hmac_sha1`).
//! - [`packet`]: the plaintext inside: "bare" handshake packets and "safer" heartbeat/data
//!   packets with connection ids, an anti-replay sequence number and conversation ids.
//! - [`replay`]: the receiver's anti-replay window.
//! - [`gro`]: the `--fix-gro` length-prefixed framing.
//! - [`headers`]: the outer IPv4/IPv6 + fake TCP, UDP or ICMP echo headers, with checksums;
//!   [`faketcp`]: how udp2raw moves seq/ack numbers along.
//!
//! Everything but [`io`] is sans-IO; [`io`] holds the raw sockets, the firewall rules and the
//! tunnel state machine (Linux only). Every decoder returns an [`Error`] on bad input, never panics, and
//! allocates at most a small multiple of its input.

pub mod auth;
pub mod cipher;
pub mod codec;
pub mod faketcp;
pub mod gro;
pub mod headers;
pub mod io;
pub mod key;
pub mod packet;
pub mod replay;

pub use auth::AuthMode;
pub use cipher::CipherMode;
pub use codec::Codec;
pub use key::{Keys, Role, cli_password};
pub use packet::{Packet, SaferKind};
pub use replay::ReplayWindow;

/// udp2raw refuses to encrypt a plaintext, or decrypt a ciphertext, longer than this (its
/// `max_data_len`).
pub const MAX_DATA_LEN: usize = 1800;

/// Why bytes were refused. Each costs only the packet at hand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// Input longer than udp2raw accepts (`MAX_DATA_LEN` for the crypto layer).
    TooLong {
        what: &'static str,
        len: usize,
        max: usize,
    },
    /// Input shorter than the smallest valid one.
    Truncated {
        what: &'static str,
        len: usize,
        need: usize,
    },
    /// The authentication tag (or checksum-like hash) did not match: wrong key, wrong mode or
    /// a corrupted packet.
    AuthFailed(AuthMode),
    /// AES-128-CBC ciphertext whose length is not a multiple of 16.
    CbcLength(usize),
    /// AES-128-CBC padding byte out of range after decryption.
    BadPadding(u8),
    /// A field holds a value udp2raw never sends.
    Malformed(&'static str),
    /// A header checksum did not verify.
    Checksum(&'static str),
    /// A packet not of the expected kind (IP version, protocol, ICMP type, ...).
    Unexpected(&'static str),
    /// The anti-replay window refused the sequence number (seen before, or too old).
    Replay(u64),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::TooLong { what, len, max } => {
                write!(
                    f,
                    "udp2raw {what} of {len} bytes is longer than the {max} allowed"
                )
            }
            Error::Truncated { what, len, need } => {
                write!(
                    f,
                    "udp2raw {what} truncated: {len} bytes, at least {need} needed"
                )
            }
            Error::AuthFailed(mode) => write!(
                f,
                "udp2raw packet failed its {} check (wrong key, wrong mode or corrupted)",
                mode.name()
            ),
            Error::CbcLength(len) => {
                write!(
                    f,
                    "udp2raw aes128cbc ciphertext of {len} bytes is not a multiple of 16"
                )
            }
            Error::BadPadding(b) => write!(f, "udp2raw aes128cbc padding byte {b} is over 16"),
            Error::Malformed(what) => write!(f, "udp2raw packet malformed: {what}"),
            Error::Checksum(what) => write!(f, "udp2raw packet: bad {what} checksum"),
            Error::Unexpected(what) => write!(f, "not a udp2raw packet: {what}"),
            Error::Replay(seq) => {
                write!(f, "udp2raw packet with sequence {seq} refused as a replay")
            }
        }
    }
}

impl std::error::Error for Error {}

pub(crate) fn truncated(what: &'static str, len: usize, need: usize) -> Error {
    Error::Truncated { what, len, need }
}
