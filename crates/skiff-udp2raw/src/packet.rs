//! The plaintext inside every udp2raw packet (what [`crate::Codec`] encrypts).
//!
//! Two shapes, told apart by byte 16:
//!
//! **bare** (the handshake, before ids are agreed; no anti-replay):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | random "iv" (host byte order in udp2raw; random anyway) |
//! | 8 | 8 | random "padding" |
//! | 16 | 1 | `'b'` |
//! | 17 | n | payload: for a handshake, three big-endian u32: sender id, receiver id (0 until known), sender's `const_id` |
//!
//! **safer** (after the handshake: heartbeats and data):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | sender's id (BE) |
//! | 4 | 4 | receiver's id (BE) |
//! | 8 | 8 | anti-replay sequence number (BE), random start, +1 per packet |
//! | 16 | 1 | `'h'` heartbeat or `'d'` data |
//! | 17 | 1 | "roller": the sender's counter of heartbeats received, a liveness hint |
//! | 18 | n | heartbeat: filler (1200 zero bytes by default, `--hb-len`); data: conversation id (BE u32) then the UDP datagram |
//!
//! The client picks a non-zero random id, sends handshake1 `(my_id, 0, const_id)`; the server
//! answers `(its id, client id, its const_id)`; the client confirms with
//! `(my_id, server id, const_id)`; from then on both send safer packets. A conversation id
//! names one UDP flow (the client's local source address) multiplexed over the tunnel.

use crate::{Error, truncated};

/// Byte 16 of a bare packet.
pub const BARE: u8 = b'b';
/// Byte 16 of a heartbeat.
pub const HEARTBEAT: u8 = b'h';
/// Byte 16 of a data packet.
pub const DATA: u8 = b'd';
/// Length of a bare packet's header (iv, padding, marker).
pub const BARE_HEADER: usize = 17;
/// Length of a safer packet's header (ids, sequence, type, roller).
pub const SAFER_HEADER: usize = 18;
/// Heartbeat filler length udp2raw sends by default (`--hb-len`).
pub const DEFAULT_HB_LEN: usize = 1200;

/// A decoded plaintext, borrowing from the buffer it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Packet<'a> {
    /// A handshake-phase packet.
    Bare { nonce: [u8; 16], payload: &'a [u8] },
    /// A heartbeat or data packet of an established connection.
    Safer {
        sender_id: u32,
        receiver_id: u32,
        seq: u64,
        roller: u8,
        kind: SaferKind<'a>,
    },
}

/// What a safer packet carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SaferKind<'a> {
    Heartbeat(&'a [u8]),
    Data { conv: u32, payload: &'a [u8] },
}

/// The three ids of a handshake (a bare packet's payload).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handshake {
    pub sender_id: u32,
    /// 0 in the client's first handshake.
    pub receiver_id: u32,
    /// The sender's per-process random id, so a server can tell a reconnecting client.
    pub const_id: u32,
}

impl Handshake {
    pub const LEN: usize = 12;

    /// udp2raw reads the first 12 bytes and ignores any more.
    pub fn parse(payload: &[u8]) -> Result<Handshake, Error> {
        if payload.len() < Self::LEN {
            return Err(truncated("handshake", payload.len(), Self::LEN));
        }
        Ok(Handshake {
            sender_id: be32(&payload[0..4]),
            receiver_id: be32(&payload[4..8]),
            const_id: be32(&payload[8..12]),
        })
    }

    pub fn to_bytes(self) -> [u8; 12] {
        let mut b = [0u8; 12];
        b[0..4].copy_from_slice(&self.sender_id.to_be_bytes());
        b[4..8].copy_from_slice(&self.receiver_id.to_be_bytes());
        b[8..12].copy_from_slice(&self.const_id.to_be_bytes());
        b
    }
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes(b.try_into().expect("4 bytes"))
}

impl<'a> Packet<'a> {
    /// Decodes a decrypted plaintext.
    pub fn parse(plain: &'a [u8]) -> Result<Packet<'a>, Error> {
        if plain.len() < BARE_HEADER {
            return Err(truncated("inner packet", plain.len(), BARE_HEADER));
        }
        match plain[16] {
            BARE => Ok(Packet::Bare {
                nonce: plain[..16].try_into().expect("16 bytes"),
                payload: &plain[BARE_HEADER..],
            }),
            t @ (HEARTBEAT | DATA) => {
                if plain.len() < SAFER_HEADER {
                    return Err(truncated("safer packet", plain.len(), SAFER_HEADER));
                }
                let body = &plain[SAFER_HEADER..];
                let kind = if t == HEARTBEAT {
                    SaferKind::Heartbeat(body)
                } else {
                    if body.len() < 4 {
                        return Err(truncated("data packet", plain.len(), SAFER_HEADER + 4));
                    }
                    SaferKind::Data {
                        conv: be32(&body[..4]),
                        payload: &body[4..],
                    }
                };
                Ok(Packet::Safer {
                    sender_id: be32(&plain[0..4]),
                    receiver_id: be32(&plain[4..8]),
                    seq: u64::from_be_bytes(plain[8..16].try_into().expect("8 bytes")),
                    roller: plain[17],
                    kind,
                })
            }
            _ => Err(Error::Unexpected(
                "inner packet type is not 'b', 'h' or 'd'",
            )),
        }
    }

    /// Appends the plaintext encoding to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Packet::Bare { nonce, payload } => {
                out.extend_from_slice(nonce);
                out.push(BARE);
                out.extend_from_slice(payload);
            }
            Packet::Safer {
                sender_id,
                receiver_id,
                seq,
                roller,
                kind,
            } => {
                out.extend_from_slice(&sender_id.to_be_bytes());
                out.extend_from_slice(&receiver_id.to_be_bytes());
                out.extend_from_slice(&seq.to_be_bytes());
                match kind {
                    SaferKind::Heartbeat(filler) => {
                        out.push(HEARTBEAT);
                        out.push(*roller);
                        out.extend_from_slice(filler);
                    }
                    SaferKind::Data { conv, payload } => {
                        out.push(DATA);
                        out.push(*roller);
                        out.extend_from_slice(&conv.to_be_bytes());
                        out.extend_from_slice(payload);
                    }
                }
            }
        }
    }

    /// The encoding as a new buffer.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::new();
        self.encode(&mut v);
        v
    }

    /// The handshake ids of a bare packet.
    pub fn handshake(&self) -> Option<Handshake> {
        match self {
            Packet::Bare { payload, .. } => Handshake::parse(payload).ok(),
            Packet::Safer { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_and_safer_round_trip() {
        let hs = Handshake {
            sender_id: 0x11223344,
            receiver_id: 0,
            const_id: 0xdeadbeef,
        };
        let bytes = hs.to_bytes();
        let p = Packet::Bare {
            nonce: [9; 16],
            payload: &bytes,
        };
        let v = p.to_vec();
        assert_eq!(v.len(), 29);
        assert_eq!(Packet::parse(&v).unwrap(), p);
        assert_eq!(p.handshake(), Some(hs));

        let p = Packet::Safer {
            sender_id: 1,
            receiver_id: 2,
            seq: 3,
            roller: 4,
            kind: SaferKind::Data {
                conv: 5,
                payload: b"hi",
            },
        };
        let v = p.to_vec();
        assert_eq!(
            v,
            [
                0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 3, b'd', 4, 0, 0, 0, 5, b'h', b'i'
            ]
        );
        assert_eq!(Packet::parse(&v).unwrap(), p);
    }

    #[test]
    fn short_or_unknown_is_an_error() {
        assert!(Packet::parse(&[0; 16]).is_err());
        assert!(Packet::parse(&[b'd'; 17]).is_err());
        assert!(Packet::parse(&[b'd'; 21]).is_err());
        assert!(Packet::parse(&[b'x'; 40]).is_err());
    }
}
