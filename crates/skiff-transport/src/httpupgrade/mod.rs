//! HTTPUpgrade (Xray's `httpupgrade` network): one HTTP/1.1 request with `Connection:
//! Upgrade` and `Upgrade: websocket`, a bare `101` back, then the raw stream — no WebSocket
//! framing. [`handshake`] is the sans-IO head codec; [`layer`] the client and server layers.
//!
//! Xray's conventions, kept here: a request that is not an upgrade for this inbound (wrong
//! path or host, other headers, not HTTP) is closed without a byte of answer; `?ed=N` in the
//! client's path means "do not wait for the 101 before sending" (the request and the first
//! bytes leave together), not a header carrying data as in the `ws` network.

pub mod handshake;
mod layer;

pub use layer::{HttpUpgradeClient, HttpUpgradeServer};
