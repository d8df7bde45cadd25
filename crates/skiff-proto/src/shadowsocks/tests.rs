//! The codecs against the vectors of shadowsocks.md, and round trips split every way.

use proptest::prelude::*;
use skiff_core::Address;
use skiff_crypto::TAG_LEN;

use super::cipher::{ChunkDecoder, LENGTH_BLOCK, Step};
use super::codec::{Decoder, Encoder, session_cipher};
use super::header;
use super::method::key_from_password;
use super::udp2022::{PeerKey, Receiver, Sender, identify};
use super::*;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn seq(from: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| from.wrapping_add(i as u8)).collect()
}

const TS: u64 = 1_700_000_000;

/// §1.4: aes-128-gcm, password `test`, salt 00..0f, example.com:80 + a GET request.
#[test]
fn aead_2017_tcp_vector() {
    let method = Method::Aes128Gcm;
    let key = key_from_password(method, "test").unwrap();
    let target = Address::Domain("example.com".into(), 80);
    let mut enc = Encoder::client(method, &key, &[], seq(0, 16), &target, 1).unwrap();
    let mut out = vec![0u8; enc.max_output(64)];
    let (consumed, written) = enc.encode(b"GET / HTTP/1.1\r\n\r\n", &mut out, 0);
    assert_eq!(consumed, 18);
    let want = hex(concat!(
        "000102030405060708090a0b0c0d0e0fc47dd0e6861a17ad3f81bb1ef607565126b5",
        "6777e8764c1de50dd58d912b2cadd541749c8f5e308dd5734568fbbcff5ec50d6b99",
        "bfd8bed98c3f60be6b6631c63bc9bd"
    ));
    assert_eq!(out[..written], want[..]);

    // The server side opens it: salt, then chunks.
    let mut wire = want.clone();
    let cipher = session_cipher(method, &key, &wire[..16]);
    let mut chunks = ChunkDecoder::new(cipher, method.max_payload());
    let Step::Consumed {
        consumed,
        plain: Some(range),
    } = chunks.decode(&mut wire[16..]).unwrap()
    else {
        panic!("not one whole chunk");
    };
    assert_eq!(consumed, wire.len() - 16);
    let plain = &wire[16 + range.start..16 + range.end];
    assert_eq!(&plain[..15], &address::to_vec(&target).unwrap()[..]);
    assert_eq!(&plain[15..], b"GET / HTTP/1.1\r\n\r\n");
}

/// §1.5: one UDP packet to 1.2.3.4:53.
#[test]
fn aead_2017_udp_vector() {
    let method = Method::Aes128Gcm;
    let key = key_from_password(method, "test").unwrap();
    let target = Address::Ip("1.2.3.4:53".parse().unwrap());
    let mut out = [0u8; 64];
    let n = udp::seal_packet(method, &key, &seq(0, 16), &target, b"dns", &mut out).unwrap();
    let want = hex(concat!(
        "000102030405060708090a0b0c0d0e0f",
        "c55d8205c7271d9c9af2",
        "bfff29e81a9f19fe9557b1546b9c0e2a"
    ));
    assert_eq!(out[..n], want[..]);
    let mut packet = want.clone();
    let (from, range) = udp::open_packet(method, &key, &mut packet).unwrap();
    assert_eq!((from, &packet[range]), (target, &b"dns"[..]));
    // A flipped bit fails; so does the wrong key.
    let mut bad = want.clone();
    bad[20] ^= 1;
    assert_eq!(udp::open_packet(method, &key, &mut bad), Err(SsError::Auth));
    let other = key_from_password(method, "other").unwrap();
    let mut packet = want.clone();
    let mut scratch = [0u8; 64];
    let keys: [(Method, &[u8]); 2] = [(method, &other), (method, &key)];
    let (user, from, _) = udp::open_packet_any(&keys, &mut packet, &mut scratch).unwrap();
    assert_eq!(
        (user, from),
        (1, Address::Ip("1.2.3.4:53".parse().unwrap()))
    );
}

/// §2.2: 2022-blake3-aes-128-gcm request, PSK 00..0f, salt 10..1f, example.com:443, `hello`.
#[test]
fn tcp_2022_request_vector_and_server_checks() {
    let method = Method::Blake3Aes128Gcm;
    let psk = seq(0, 16);
    let target = Address::Domain("example.com".into(), 443);
    let mut enc = Encoder::client(method, &psk, &[], seq(0x10, 16), &target, 5).unwrap();
    let mut out = vec![0u8; enc.max_output(64)];
    let (consumed, written) = enc.encode(b"hello", &mut out, TS);
    assert_eq!(consumed, 5);
    let want = hex(concat!(
        "101112131415161718191a1b1c1d1e1f",
        "f62b42ac395d4aead07a65d09471860919e806ee8ea58821dd5f47",
        "e19e0c3dc0253175322489f04f22537d6f54e5b97792368df2feae5fe02982aee765edb35a70"
    ));
    assert_eq!(out[..written], want[..]);

    let mut wire = want.clone();
    let (salt, rest) = wire.split_at_mut(16);
    let mut cipher = session_cipher(method, &psk, salt);
    let (fixed, var) = rest.split_at_mut(header::REQUEST_FIXED_LEN + TAG_LEN);
    let plain = cipher.open(fixed).unwrap();
    assert_eq!(header::parse_request_fixed(plain, TS + 30), Ok(22));
    assert!(matches!(
        header::parse_request_fixed(plain, TS + 31),
        Err(SsError::Timestamp { .. })
    ));
    let plain = cipher.open(var).unwrap();
    let (addr, at) = header::parse_request_variable(plain).unwrap();
    assert_eq!((addr, &plain[at..]), (target, &b"hello"[..]));
}

#[test]
fn variable_header_needs_payload_or_padding() {
    let target = address::to_vec(&Address::Ip("1.2.3.4:5".parse().unwrap())).unwrap();
    let mut bare = target.clone();
    bare.extend_from_slice(&[0, 0]);
    assert_eq!(
        header::parse_request_variable(&bare),
        Err(SsError::BadPadding)
    );
    let mut padded = target.clone();
    padded.extend_from_slice(&[0, 3, 0, 0, 0]);
    assert!(header::parse_request_variable(&padded).is_ok());
    let mut short = target.clone();
    short.extend_from_slice(&[0, 9, 0, 0]);
    assert_eq!(
        header::parse_request_variable(&short),
        Err(SsError::BadPadding)
    );
    // A 2022 client without payload pads (1..=900 bytes), and a server accepts that.
    let method = Method::Blake3ChaCha20Poly1305;
    let psk = seq(3, 32);
    let mut enc = Encoder::client(
        method,
        &psk,
        &[],
        seq(0, 32),
        &Address::Ip("1.2.3.4:5".parse().unwrap()),
        123,
    )
    .unwrap();
    let mut out = vec![0u8; enc.max_output(0)];
    let (_, written) = enc.encode(&[], &mut out, TS);
    let wire = &mut out[..written];
    let (salt, rest) = wire.split_at_mut(32);
    let mut cipher = session_cipher(method, &psk, salt);
    let (fixed, var) = rest.split_at_mut(header::REQUEST_FIXED_LEN + TAG_LEN);
    let len = header::parse_request_fixed(cipher.open(fixed).unwrap(), TS).unwrap();
    assert_eq!(len, 7 + 2 + 123);
    let plain = cipher.open(var).unwrap();
    let (_, at) = header::parse_request_variable(plain).unwrap();
    assert_eq!(at, plain.len());
}

/// §2.5: AES UDP packet of session 0102030405060708, packet id 1.
#[test]
fn udp_2022_aes_vector() {
    let method = Method::Blake3Aes128Gcm;
    let psk = seq(0, 16);
    let target = Address::Ip("1.2.3.4:53".parse().unwrap());
    let mut sender = Sender::client(method, &psk, &[], 0x0102_0304_0506_0708);
    let mut out = [0u8; 128];
    sender
        .seal_request(TS, 0, &target, b"dns", &mut out)
        .unwrap();
    let n = sender
        .seal_request(TS, 0, &target, b"dns", &mut out)
        .unwrap();
    let want = hex(concat!(
        "cf91ad9eddf9ce645b515e2382d1c8cc",
        "b6fe3ffcfbe0522b29bf8cc204e5c08cee4a0e3d815f70dff77e8dcebabaa65d844f45ed96"
    ));
    assert_eq!(out[..n], want[..]);

    let peer = PeerKey::new(method, &psk);
    let mut packet = want.clone();
    let id = identify(&peer, false, &mut packet).unwrap();
    assert_eq!((id.session_id, id.packet_id), (0x0102_0304_0506_0708, 1));
    let mut receiver = Receiver::new(method, &psk, id.session_id);
    let opened = receiver.open(&id, &mut packet, true, TS).unwrap();
    assert_eq!(opened.address, target);
    assert_eq!(&packet[opened.payload], b"dns");
    // The same packet again is a replay.
    let mut again = want.clone();
    let id = identify(&peer, false, &mut again).unwrap();
    assert_eq!(
        receiver.open(&id, &mut again, true, TS),
        Err(SsError::Replay)
    );
}

fn udp_2022_round_trip(method: Method, identity: bool) {
    let key_len = method.key_len();
    let upsk = seq(0x40, key_len);
    let ipsk = seq(0x80, key_len);
    let ids: Vec<Vec<u8>> = if identity { vec![ipsk.clone()] } else { vec![] };
    let server_key = if identity { &ipsk } else { &upsk };
    let target = Address::Domain("example.com".into(), 53);
    let mut client = Sender::client(method, &upsk, &ids, 77);
    let mut out = [0u8; 256];
    let n = client
        .seal_request(TS, 10, &target, b"query", &mut out)
        .unwrap();
    let mut packet = out[..n].to_vec();
    let id = identify(&PeerKey::new(method, server_key), identity, &mut packet).unwrap();
    assert_eq!(id.session_id, 77);
    if identity {
        assert_eq!(
            id.user_hash,
            Some(skiff_crypto::shadowsocks::psk_hash_2022(&upsk))
        );
    }
    let mut from_client = Receiver::new(method, &upsk, 77);
    let opened = from_client.open(&id, &mut packet, true, TS).unwrap();
    assert_eq!(
        (opened.address, &packet[opened.payload]),
        (target.clone(), &b"query"[..])
    );

    // The answer, under the server's own session and the user key.
    let mut server = Sender::server(method, &upsk, 99);
    let n = server
        .seal_response(TS, 77, &target, b"answer", &mut out)
        .unwrap();
    let mut packet = out[..n].to_vec();
    let id = identify(&PeerKey::new(method, &upsk), false, &mut packet).unwrap();
    let mut from_server = Receiver::new(method, &upsk, id.session_id);
    let opened = from_server.open(&id, &mut packet, false, TS - 29).unwrap();
    assert_eq!(opened.client_session_id, Some(77));
    assert_eq!(&packet[opened.payload], b"answer");
    // A request is not a response.
    let n = client.seal_request(TS, 0, &target, b"x", &mut out).unwrap();
    let mut packet = out[..n].to_vec();
    let id = identify(&PeerKey::new(method, server_key), identity, &mut packet).unwrap();
    let mut wrong = Receiver::new(method, &upsk, 77);
    assert_eq!(
        wrong.open(&id, &mut packet, false, TS),
        Err(SsError::BadType(0))
    );
}

#[test]
fn udp_2022_round_trips() {
    udp_2022_round_trip(Method::Blake3Aes128Gcm, false);
    udp_2022_round_trip(Method::Blake3Aes256Gcm, false);
    udp_2022_round_trip(Method::Blake3ChaCha20Poly1305, false);
    udp_2022_round_trip(Method::Blake3Aes128Gcm, true);
    udp_2022_round_trip(Method::Blake3Aes256Gcm, true);
}

/// A server's direction fed to a client's decoder in the given pieces; returns the payload.
fn server_to_client(method: Method, payload: &[u8], cuts: &[usize], writes: &[usize]) -> Vec<u8> {
    let key = seq(9, method.key_len());
    let request_salt = seq(1, method.salt_len());
    let mut enc = Encoder::server(method, &key, seq(2, method.salt_len()), &request_salt);
    let mut wire = Vec::new();
    let mut at = 0;
    for &w in writes.iter().chain(std::iter::once(&payload.len())) {
        let end = w.min(payload.len()).max(at);
        let mut part = &payload[at..end];
        while !part.is_empty() {
            let mut out = vec![0u8; enc.max_output(part.len())];
            let (c, n) = enc.encode(part, &mut out, TS);
            assert!(c > 0);
            wire.extend_from_slice(&out[..n]);
            part = &part[c..];
        }
        at = end;
    }
    let mut dec = Decoder::client(method, &key, &request_salt);
    let mut got = Vec::new();
    let mut buf: Vec<u8> = Vec::new();
    let mut fed = 0;
    for &cut in cuts.iter().chain(std::iter::once(&wire.len())) {
        let cut = cut.min(wire.len()).max(fed);
        buf.extend_from_slice(&wire[fed..cut]);
        fed = cut;
        loop {
            match dec.decode(&mut buf, TS).unwrap() {
                Step::NeedMore(_) => break,
                Step::Consumed { consumed, plain } => {
                    if let Some(r) = plain {
                        got.extend_from_slice(&buf[r]);
                    }
                    buf.drain(..consumed);
                }
            }
        }
    }
    assert!(buf.is_empty() && dec.at_boundary());
    got
}

proptest! {
    #[test]
    fn server_direction_round_trips_split_anywhere(
        m in 0usize..7,
        payload in proptest::collection::vec(any::<u8>(), 1..70_000),
        cuts in proptest::collection::vec(0usize..80_000, 0..6),
        writes in proptest::collection::vec(0usize..70_000, 0..4),
    ) {
        let method = Method::ALL[m];
        let mut cuts = cuts;
        cuts.sort_unstable();
        let mut writes = writes;
        writes.sort_unstable();
        prop_assert_eq!(server_to_client(method, &payload, &cuts, &writes), payload);
    }

    #[test]
    fn decoders_never_panic_on_garbage(
        m in 0usize..7,
        garbage in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let method = Method::ALL[m];
        let key = seq(0, method.key_len());
        let mut dec = Decoder::client(method, &key, &seq(1, method.salt_len()));
        let mut buf = garbage.clone();
        let _ = dec.decode(&mut buf, TS);
        let mut buf = garbage.clone();
        let _ = udp::open_packet(method, &key, &mut buf);
        let _ = header::parse_request_variable(&garbage);
        let _ = address::parse(&garbage);
    }
}

#[test]
fn chunk_lengths_over_the_limit_are_refused() {
    let method = Method::Aes256Gcm;
    let key = seq(0, 32);
    let mut sealer = session_cipher(method, &key, &[5; 32]);
    let mut block = [0u8; LENGTH_BLOCK];
    block[..2].copy_from_slice(&0x4000u16.to_be_bytes());
    sealer.seal(&mut block);
    let mut chunks =
        ChunkDecoder::new(session_cipher(method, &key, &[5; 32]), method.max_payload());
    assert_eq!(chunks.decode(&mut block), Err(SsError::BadLength(0x4000)));
}

#[test]
fn response_must_name_our_request() {
    let method = Method::Blake3Aes256Gcm;
    let key = seq(0, 32);
    let mut enc = Encoder::server(method, &key, seq(1, 32), &seq(2, 32));
    let mut out = vec![0u8; enc.max_output(10)];
    let (_, n) = enc.encode(b"0123456789", &mut out, TS);
    let mut other = Decoder::client(method, &key, &seq(3, 32));
    assert_eq!(
        other.decode(&mut out[..n].to_vec(), TS),
        Err(SsError::WrongRequest)
    );
    let mut stale = Decoder::client(method, &key, &seq(2, 32));
    assert!(matches!(
        stale.decode(&mut out[..n].to_vec(), TS + 31),
        Err(SsError::Timestamp { .. })
    ));
}

#[test]
fn aead_2017_users_come_and_go_at_run_time() {
    use super::server::{ServerUser, ShadowsocksServer};
    let user = |method: Method, email: &str| ServerUser {
        method,
        key: vec![7; method.key_len()],
        email: Some(email.into()),
        level: 0,
    };
    let server = ShadowsocksServer::new(vec![user(Method::Aes256Gcm, "a@x")], None);
    server
        .add_user_2017(user(Method::ChaCha20Poly1305, "b@x"))
        .unwrap();
    assert_eq!(server.users().len(), 2);
    // Emails name users case-insensitively; a 2022 user does not fit; nor a short key.
    for refused in [
        user(Method::Aes128Gcm, "B@X"),
        user(Method::Blake3Aes128Gcm, "c@x"),
        ServerUser {
            key: vec![1; 3],
            ..user(Method::Aes128Gcm, "d@x")
        },
    ] {
        assert!(server.add_user_2017(refused).is_err());
    }
    server.remove_user("b@x").unwrap();
    assert_eq!(server.users().len(), 1);
    // A 2022 server takes no AEAD-2017 user.
    let psk = ShadowsocksServer::new(vec![user(Method::Blake3Aes128Gcm, "z@x")], None);
    assert!(psk.add_user_2017(user(Method::Aes128Gcm, "y@x")).is_err());
}
