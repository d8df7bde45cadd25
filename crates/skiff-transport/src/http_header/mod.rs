//! Xray's HTTP header obfuscation on raw TCP (`tcpSettings`/`rawSettings` `header.type:
//! "http"`): the client's first bytes follow an HTTP request head built from a template, the
//! server's first bytes follow a response head; after that the raw stream. Under TLS the heads
//! travel inside it, as in Xray (its TCP hub wraps TLS first, then the header).
//! [`head`] is the sans-IO codec; [`layer`]'s client and server are the stack's layers.
//!
//! Xray's conventions, kept here: a request for a path not configured is answered `404 Not
//! Found`, one that is not HTTP or too long `400 Bad Request` (its canned answers, with a
//! `Date`), then closed; the client skips the response head without checking it.

pub mod defaults;
pub mod head;
mod layer;

pub use head::{RequestTemplate, ResponseTemplate};
pub use layer::{HttpHeaderClient, HttpHeaderServer};
