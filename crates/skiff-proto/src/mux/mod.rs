//! Mux.Cool (transports.md §5): the frame codec (`frame.rs`, sans-IO) and one connection's
//! driver, server or client end (`session.rs`): TCP sub-connections and UDP ones (XUDP); an
//! outbound's `mux` setting (`client.rs`).

pub mod client;
pub mod frame;
pub mod session;

pub use client::{MuxOutbound, MuxSettings, Udp443};
pub use frame::{Frame, MuxError, fuzz_parse_all, parse_frame};
pub use session::{
    Incoming, Limits, MUX_COOL_DOMAIN, MUX_COOL_PORT, MuxClient, SubDatagramRecv, SubDatagramSend,
    SubStream, is_mux_cool, serve,
};
