//! TLS inspection for fallbacks (no cryptography).

pub mod client_hello;

pub use client_hello::{ClientHelloInfo, MAX_CLIENT_HELLO_LEN, Peek, peek_client_hello};
