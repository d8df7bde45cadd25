//! VLESS (vless.md): request/response headers, user ids and the UDP packet framing, as
//! sans-IO codecs.

pub mod codec;
pub mod udp;
pub mod user;

#[cfg(test)]
mod tests;

pub use codec::{
    Command, FLOW_VISION, Parsed, RESPONSE_HEADER, Request, VlessError, encode_request,
    parse_request, parse_request_user, parse_response_header,
};
pub use udp::{PacketDecoder, UdpError, encode_packet};
pub use user::{UserId, UserIdError, find_user};
