//! VLESS (vless.md): request/response headers, user ids and the UDP packet framing, as
//! sans-IO codecs, with the async inbound handshake ([`server`]), the outbound stream
//! ([`client`]) and datagrams over a UDP stream ([`packet`]) on top.

pub mod client;
pub mod codec;
mod inbound;
mod outbound;
pub mod packet;
pub mod server;
pub mod udp;
pub mod user;
pub mod vision;

#[cfg(test)]
mod tests;

pub use codec::{
    Command, FLOW_VISION, Parsed, RESPONSE_HEADER, Request, VlessError, encode_request,
    parse_request, parse_request_user, parse_response_header,
};
pub use outbound::{Flow, VlessOutbound};
pub use packet::{VlessPacketReader, VlessPacketStream, VlessPacketWriter};
pub use server::{VlessAccept, VlessServer, VlessUser, accept};
pub use udp::{PacketDecoder, UdpError, encode_packet};
pub use user::{UserId, UserIdError, find_user};
