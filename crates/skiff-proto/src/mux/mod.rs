//! Mux.Cool (transports.md §5): the frame codec, and the one use Skiff serves today, a UDP
//! session per connection as Xray clients send it (XUDP).

pub mod frame;
pub mod udp;

pub use frame::{Frame, MuxError, fuzz_parse_all, parse_frame};
pub use udp::{MuxUdp, accept_udp};
