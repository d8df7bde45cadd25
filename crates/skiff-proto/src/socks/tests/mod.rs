//! Tests of the SOCKS module (kept under `socks::` so `cargo test socks` selects them).

mod codec;
mod props;
mod server;
