//! Trojan (trojan.md): the request header and the UDP packet framing as sans-IO codecs, with
//! the async inbound handshake ([`server`]), the outbound stream ([`client`]) and datagrams
//! over a UDP ASSOCIATE stream ([`packet`]) on top.

pub mod client;
pub mod codec;
mod inbound;
mod outbound;
pub mod packet;
pub mod server;
pub mod udp;

#[cfg(test)]
mod tests;

pub use codec::{
    AUTH_LEN, Command, HASH_LEN, PasswordHash, Request, TrojanError, encode_packet, encode_request,
    parse_packet, parse_request, parse_request_hash,
};
pub use outbound::TrojanOutbound;
pub use packet::{TrojanPacketReader, TrojanPacketStream, TrojanPacketWriter};
pub use server::{TrojanAccept, TrojanServer, TrojanUser, accept};
pub use udp::PacketDecoder;
