//! WebSocket (RFC 6455) as the Xray / v2ray `ws` transport uses it.
//!
//! Wire format: [`frame`] (header codec), [`mask`] (payload masking), [`decoder`] (streaming
//! frame decoder yielding data / ping / pong / close). Handshake: [`handshake`] (HTTP/1.1
//! upgrade, both sides) with [`early_data`] (0-RTT conventions) and [`mod@accept`] (the key hash).
//! Async layer: [`accept()`] / [`connect()`] and the [`WsStream`] data stream.

pub mod accept;
pub mod decoder;
pub mod early_data;
mod error;
pub mod frame;
pub mod handshake;
mod io;
mod layer;
pub mod mask;
mod stream;

pub use decoder::{Event, FrameDecoder, Role};
pub use error::WsError;
pub use frame::{FrameHeader, Opcode, encode_frame, encode_header, parse_header};
pub use io::{WsAccepted, WsClientOptions, WsServerOptions, accept, connect, refuse};
pub use mask::apply_mask;
pub use stream::{MAX_FRAME_PAYLOAD, WsStream};
