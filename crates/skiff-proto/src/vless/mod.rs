//! VLESS (vless.md): request/response headers and the UDP packet framing, as sans-IO codecs
//! (user ids are [`crate::user_id`], shared with VMess), with the async inbound handshake
//! ([`server`]), the outbound stream ([`client`]) and datagrams over a UDP stream
//! ([`packet`]) on top.

pub mod client;
pub mod codec;
mod inbound;
mod outbound;
pub mod packet;
pub mod server;
pub mod udp;
pub mod vision;

#[cfg(test)]
mod tests;

pub use crate::user_id::{UserId, UserIdError, find_user};
pub use codec::{
    Command, FLOW_VISION, Parsed, RESPONSE_HEADER, Request, VlessError, encode_request,
    parse_request, parse_request_user, parse_response_header,
};
pub use outbound::{Flow, VlessOutbound};
pub use packet::{VlessPacketReader, VlessPacketStream, VlessPacketWriter};
pub use server::{VlessAccept, VlessServer, VlessUser, accept};
pub use udp::{PacketDecoder, UdpError, encode_packet};
