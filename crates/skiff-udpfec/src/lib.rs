//! A UDP FEC tunnel wire-compatible with UDPspeeder v2 (`speederv2`), sans-IO.
//!
//! Layers, outside in: `cook` (checksum, obscure padding, XOR key), `header` (the FEC shard
//! header), `encoder`/`decoder` (speederv2's modes 0 and 1 over `rs`, its Reed–Solomon
//! code on `gf256`), and `session`, which ties them together for one peer with the
//! conversation ids that let many UDP flows share a tunnel. `params` holds speederv2's knobs.

pub mod cook;
pub mod decoder;
pub mod encoder;
pub mod gf256;
pub mod header;
pub mod params;
pub mod rs;
pub mod session;

pub use cook::CookOptions;
pub use decoder::{DEFAULT_DECODE_CAPACITY, FecDecoder};
pub use encoder::FecEncoder;
pub use params::{FecMode, FecParams};
pub use session::{FecSession, MAX_DATAGRAM};

/// Why a datagram was refused. Each costs only that datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    Truncated(&'static str),
    Checksum,
    Malformed(&'static str),
    TooLarge(usize),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Truncated(what) => write!(f, "udpspeeder packet truncated: {what}"),
            Error::Checksum => {
                f.write_str("udpspeeder packet failed its checksum (wrong key or corrupted)")
            }
            Error::Malformed(what) => write!(f, "udpspeeder packet malformed: {what}"),
            Error::TooLarge(len) => write!(f, "udpspeeder packet of {len} bytes is too large"),
        }
    }
}

impl std::error::Error for Error {}
