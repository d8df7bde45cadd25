//! Xray's gRPC transport ("gun"): each tunnel is one bidirectional-streaming gRPC call over
//! HTTP/2, its bytes carried as `Hunk` (or `MultiHunk`) messages. A client keeps one HTTP/2
//! connection per server and opens a call per dial; a server takes every call to the
//! service's paths as a tunnel ([`skiff_core::MultiplexServer`]).
//!
//! * [`names`]: `serviceName` → the two request paths, Xray's custom-path form included.
//! * [`codec`]: gRPC message framing and the Hunk protobuf, sans-IO.
//! * [`stream`]: one call as a byte stream.
//! * [`server`], [`client`]: the two sides over the `h2` crate; [`keepalive`]: PINGs.

pub mod client;
pub mod codec;
pub mod keepalive;
pub mod names;
pub mod server;
pub mod stream;
pub mod user_agent;

use std::io;

pub use client::{GrpcClientOptions, GrpcDialer};
pub use keepalive::Keepalive;
pub use server::GrpcServer;

/// HTTP/2 receive windows: how much a peer may send before we read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Windows {
    pub stream: u32,
    pub connection: u32,
}

impl Windows {
    /// Per call 4 MiB and per connection 16 MiB unless `initial_windows_size` says otherwise:
    /// one loopback or long-path call runs at full speed, and a peer can make us hold no
    /// more than the connection window unread. (gRPC-go starts at 64 KiB and grows its
    /// windows up to 16 MiB by measuring; h2 windows are fixed, so they start large.)
    pub fn new(initial_windows_size: u32) -> Self {
        const STREAM: u32 = 4 << 20;
        const CONNECTION: u32 = 16 << 20;
        match initial_windows_size {
            // gRPC-go ignores a window under HTTP/2's default.
            size if size >= 65_535 => Windows {
                stream: size,
                connection: size.max(CONNECTION),
            },
            _ => Windows {
                stream: STREAM,
                connection: CONNECTION,
            },
        }
    }
}

fn h2_io_error(e: h2::Error) -> io::Error {
    if e.is_io() {
        return e
            .into_io()
            .unwrap_or_else(|| io::Error::other("HTTP/2 I/O error"));
    }
    io::Error::new(io::ErrorKind::InvalidData, e)
}
