//! The fuzz target's body (see [`super::fuzz_parse_all`]).

use skiff_core::Address;

use super::cipher::Step;
use super::codec::{Decoder, Encoder};
use super::udp2022::{PeerKey, Receiver, identify};
use super::{Method, address, header, udp};

const TS: u64 = 1_700_000_000;

/// Decodes `wire` fed in pieces of `piece` bytes; returns the payload or None on error.
fn decode_in_pieces(
    method: Method,
    key: &[u8],
    salt: &[u8],
    wire: &[u8],
    piece: usize,
) -> Option<Vec<u8>> {
    let mut dec = Decoder::client(method, key, salt);
    let mut buf: Vec<u8> = Vec::new();
    let mut got = Vec::new();
    for part in wire.chunks(piece.max(1)) {
        buf.extend_from_slice(part);
        loop {
            match dec.decode(&mut buf, TS).ok()? {
                Step::NeedMore(_) => break,
                Step::Consumed { consumed, plain } => {
                    assert!(consumed > 0 && consumed <= buf.len());
                    if let Some(r) = plain {
                        got.extend_from_slice(buf.get(r)?);
                    }
                    buf.drain(..consumed);
                }
            }
        }
    }
    Some(got)
}

pub(super) fn fuzz(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let method = Method::ALL[usize::from(selector) % Method::ALL.len()];
    let key: Vec<u8> = (0..method.key_len() as u8).collect();
    let salt: Vec<u8> = (1..=method.salt_len() as u8).collect();

    // Arbitrary bytes as a server's direction: whole and byte by byte agree.
    let whole = decode_in_pieces(method, &key, &salt, rest, rest.len());
    let split = decode_in_pieces(method, &key, &salt, rest, 1);
    if let (Some(a), Some(b)) = (&whole, &split) {
        assert_eq!(a, b);
    }

    // The same bytes as payload: encoded by a server, decoded back exactly.
    let mut enc = Encoder::server(method, &key, salt.clone(), &salt);
    let mut wire = Vec::new();
    let mut left = rest;
    while !left.is_empty() {
        let mut out = vec![0u8; enc.max_output(left.len())];
        let (c, n) = enc.encode(left, &mut out, TS);
        assert!(c > 0);
        wire.extend_from_slice(&out[..n]);
        left = &left[c..];
    }
    let piece = usize::from(selector) + 1;
    assert_eq!(
        decode_in_pieces(method, &key, &salt, &wire, piece).as_deref(),
        Some(rest)
    );

    // Parsers and packet openers on the raw bytes.
    let _ = address::parse(rest);
    let _ = header::parse_request_variable(rest);
    let _ = header::parse_request_fixed(rest, TS);
    let _ = header::parse_response_fixed(rest, &salt, TS);
    let mut packet = rest.to_vec();
    if let Ok((addr, range)) = udp::open_packet(method, &key, &mut packet) {
        assert!(range.end <= packet.len());
        let _ = address::encoded_len(&addr);
    }
    if method.is_2022() {
        let peer = PeerKey::new(method, &key);
        for identity in [false, true] {
            let mut packet = rest.to_vec();
            if let Ok(id) = identify(&peer, identity, &mut packet) {
                let mut receiver = Receiver::new(method, &key, id.session_id);
                for from_client in [true, false] {
                    if let Ok(opened) = receiver.open(&id, &mut packet, from_client, TS) {
                        assert!(opened.payload.end <= packet.len());
                    }
                }
            }
        }
    }
    // A client's first bytes for a target made of the input.
    if let Ok(name) = std::str::from_utf8(rest)
        && let Ok(mut enc) = Encoder::client(
            method,
            &key,
            &[],
            salt.clone(),
            &Address::Domain(name.to_owned(), 1),
            1,
        )
    {
        let mut out = vec![0u8; enc.max_output(0)];
        let (_, n) = enc.encode(&[], &mut out, TS);
        assert!(n > 0);
    }
}
