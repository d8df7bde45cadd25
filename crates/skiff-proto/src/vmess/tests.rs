//! VMess codec tests: the spec's vectors byte for byte (vmess.md §2.4, §3, §4.6), the user
//! lookup and replay filters, client ↔ server in process for every security and option, and
//! property tests.

use std::net::SocketAddr;

use proptest::prelude::*;
use skiff_core::{Address, BoxStream};
use skiff_crypto::hash::{Shake128Stream, fnv1a32};
use skiff_crypto::vmess::{AuthIdOpener, AuthIdSealer, kdf16};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

use super::auth_id::{open_auth_id, seal_auth_id};
use super::chunk::{
    BodyCipher, BodyFormat, ChunkOpener, ChunkSealer, MAX_PACKET_PAYLOAD, Opened, chacha_key,
};
use super::client::{RequestRandom, Security, VmessClient};
use super::instruction::{
    Command, Instruction, encode_instruction, options, parse_instruction, security,
};
use super::keys::cmd_key;
use super::request::RequestOpener;
use super::response::{open_response, plain_response_header, response_keys, seal_response};
use super::users::{AuthFailure, VmessServer, VmessUser};
use super::{VmessAccept, VmessError, accept};
use crate::datagram;
use crate::user_id::UserId;
use skiff_core::wire::Parsed;

const UUID: &str = "b831381d-6324-4d53-ad4f-8cda48b30811";

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn arr16(s: &str) -> [u8; 16] {
    hex(s).try_into().unwrap()
}

fn seq16(from: u8) -> [u8; 16] {
    std::array::from_fn(|i| from + i as u8)
}

fn vector_instruction() -> Instruction {
    Instruction {
        version: 1,
        body_iv: seq16(0),
        body_key: seq16(0x10),
        response_auth: 0x42,
        options: 0x0d,
        security: 3,
        command: Command::Tcp,
        destination: Some(Address::Domain("example.com".into(), 443)),
    }
}

const VECTOR_INSTRUCTION: &str = "01 000102030405060708090a0b0c0d0e0f 101112131415161718191a1b1c1d1e1f 42 0d 03 00 01 01bb 02 0b 6578616d706c652e636f6d 45fb07ef";
const VECTOR_REQUEST: &str = "4774fe5cc901ea4f81f2159909767a36 b43e446e1ce2e5f0b3e7b0b41f709503fb3b a1a2a3a4a5a6a7a8 e6ccc2228cbc5f8eb8e1295d6ab0a415cc527b41fc0c147ae3ad24a6119f901945f5dba7e0f994c447ad1b9f548ebce9436e2c4a4fa0a1ba344f399a9798f4bfa8df6c0213eb77dedb";

#[test]
fn cmd_key_and_checksum_vectors() {
    let id = UserId::parse(UUID).unwrap();
    assert_eq!(
        cmd_key(id.as_bytes()),
        arr16("b50d916ac0cec067981af8e5f38a758f")
    );
    assert_eq!(fnv1a32(b"hello"), 0x4f9f_2cab);
}

#[test]
fn auth_id_vector_seals_and_opens() {
    let key = arr16("b50d916ac0cec067981af8e5f38a758f");
    let id = seal_auth_id(
        &AuthIdSealer::for_cmd_key(&key),
        1_700_000_000,
        [1, 2, 3, 4],
    );
    assert_eq!(id, arr16("4774fe5cc901ea4f81f2159909767a36"));
    assert_eq!(
        open_auth_id(&AuthIdOpener::for_cmd_key(&key), &id),
        Some(1_700_000_000)
    );
    let other = AuthIdOpener::for_cmd_key(&[0; 16]);
    assert_eq!(open_auth_id(&other, &id), None);
}

#[test]
fn instruction_vector() {
    let mut out = Vec::new();
    encode_instruction(&vector_instruction(), &[], &mut out).unwrap();
    assert_eq!(out, hex(VECTOR_INSTRUCTION));
    assert_eq!(out.len(), 57);
    let (parsed, len) = parse_instruction(&out).unwrap();
    assert_eq!((parsed, len), (vector_instruction(), 57));
    // Trailing bytes are ignored; a flipped bit fails the checksum.
    out.push(0xee);
    assert_eq!(parse_instruction(&out).unwrap().1, 57);
    out[20] ^= 1;
    assert_eq!(parse_instruction(&out), Err(VmessError::BadChecksum));
}

fn vector_client() -> VmessClient {
    VmessClient::new(
        &UserId::parse(UUID).unwrap(),
        Security::Aes128Gcm,
        false,
        false,
    )
}

fn vector_random() -> RequestRandom {
    RequestRandom {
        body_iv: seq16(0),
        body_key: seq16(0x10),
        response_auth: 0x42,
        padding: Vec::new(),
        auth_salt: [1, 2, 3, 4],
        nonce: hex("a1a2a3a4a5a6a7a8").try_into().unwrap(),
    }
}

#[test]
fn sealed_request_vector_and_its_opening() {
    let client = vector_client();
    let random = vector_random();
    let ins = client.instruction(
        &Address::Domain("example.com".into(), 443),
        Command::Tcp,
        &random,
    );
    assert_eq!(ins, vector_instruction());
    let mut wire = Vec::new();
    client
        .seal(&ins, &random, 1_700_000_000, &mut wire)
        .unwrap();
    assert_eq!(wire, hex(VECTOR_REQUEST));
    assert_eq!(wire.len(), 115);

    let key = arr16("b50d916ac0cec067981af8e5f38a758f");
    // Byte by byte: Incomplete until the last byte, the length opened once.
    let mut opener = RequestOpener::new(key);
    for n in 0..wire.len() {
        let mut part = wire[..n].to_vec();
        assert_eq!(opener.open(&mut part), Ok(Parsed::Incomplete), "at {n}");
    }
    let mut whole = wire.clone();
    whole.extend_from_slice(b"payload");
    assert_eq!(
        opener.open(&mut whole),
        Ok(Parsed::Complete((vector_instruction(), 115)))
    );
    // Tampering anywhere after the auth ID fails authentication.
    for at in [16, 40, 50, 114] {
        let mut bad = wire.clone();
        bad[at] ^= 0x80;
        assert_eq!(
            RequestOpener::new(key).open(&mut bad),
            Err(VmessError::HeaderAuth),
            "flip at {at}"
        );
    }
}

#[test]
fn response_vector() {
    let (key, iv) = response_keys(&seq16(0x10), &seq16(0));
    assert_eq!(key, arr16("fc2e2c73072bfa2bda03ff9307472deb"));
    assert_eq!(iv, arr16("be45cb2605bf36bebde684841a28f0fd"));
    let mut wire = Vec::new();
    seal_response(&key, &iv, &plain_response_header(0x42), &mut wire);
    assert_eq!(
        wire,
        hex("9bdfb1639712b6a6348d0087b8d1af379ecf 70afb5ebb377066e79586918c758b5afc6888061")
    );
    for n in 0..wire.len() {
        let mut part = wire[..n].to_vec();
        assert_eq!(
            open_response(&key, &iv, 0x42, &mut part),
            Ok(Parsed::Incomplete)
        );
    }
    let mut whole = wire.clone();
    assert_eq!(
        open_response(&key, &iv, 0x42, &mut whole),
        Ok(Parsed::Complete(38))
    );
    let mut whole = wire.clone();
    assert_eq!(
        open_response(&key, &iv, 0x41, &mut whole),
        Err(VmessError::ResponseMismatch {
            expected: 0x41,
            got: 0x42
        })
    );
    let mut bad = wire.clone();
    bad[30] ^= 1;
    assert_eq!(
        open_response(&key, &iv, 0x42, &mut bad),
        Err(VmessError::ResponseAuth)
    );
}

fn format(cipher: BodyCipher, masking: bool, padding: bool) -> BodyFormat {
    BodyFormat {
        cipher,
        chunked: true,
        masking,
        padding,
        auth_length: false,
        packet: false,
    }
}

fn seal_one(format: BodyFormat, payload: &[u8]) -> Vec<u8> {
    let (k, iv) = (seq16(0x10), seq16(0));
    let mut sealer = ChunkSealer::new(format, &k, &iv, &k, &iv);
    let mut out = Vec::new();
    sealer.seal(payload, &mut out).unwrap();
    out
}

#[test]
fn chunk_vectors() {
    let mut shake = Shake128Stream::new(&seq16(0));
    let first: Vec<u16> = (0..4).map(|_| shake.next_u16()).collect();
    assert_eq!(first, [0x9848, 0x1946, 0xde85, 0xc670]);
    assert_eq!(
        chacha_key(&seq16(0x10)).to_vec(),
        hex("1bf42e241816ba29ff5f307bb1bc1d168b39e04ece3e33ab822442d7e6cefd5f")
    );
    assert_eq!(
        kdf16(&seq16(0x10), &[b"auth_len"]),
        arr16("49d3958e625ef844be78bb41a9df9743")
    );
    assert_eq!(
        seal_one(format(BodyCipher::Aes128Gcm, true, false), b"hello"),
        hex("985d c76e58df1d1b6686ac14fce9bcc0f768b9c8beb10f")
    );
    assert_eq!(
        seal_one(format(BodyCipher::ChaCha20Poly1305, true, false), b"hello"),
        hex("985d 8aa8b3dd9185f30769fd06639baa587ae610a3c4d5")
    );
    // M+P: PadLen 8 drawn first, then the length mask 0x1946; the padding itself is random.
    let padded = seal_one(format(BodyCipher::Aes128Gcm, true, true), b"hello");
    assert_eq!(padded.len(), 2 + 21 + 8);
    assert_eq!(
        padded[..23],
        hex("195b c76e58df1d1b6686ac14fce9bcc0f768b9c8beb10f")[..]
    );
}

/// Seals `payloads` and the end mark with `format`, then opens the wire fed in `step`-byte
/// pieces; returns the payloads read.
fn roundtrip(format: BodyFormat, payloads: &[Vec<u8>], step: usize) -> Vec<Vec<u8>> {
    let (k, iv, rk, riv) = (seq16(1), seq16(2), seq16(3), seq16(4));
    let mut sealer = ChunkSealer::new(format, &k, &iv, &rk, &riv);
    let mut wire = Vec::new();
    for p in payloads {
        sealer.seal(p, &mut wire).unwrap();
    }
    sealer.seal_end(&mut wire);
    let mut opener = ChunkOpener::new(format, &k, &iv, &rk, &riv);
    let mut buf = Vec::new();
    let mut fed = 0;
    let mut got = Vec::new();
    loop {
        match opener.open(&mut buf).unwrap() {
            Opened::Payload {
                start,
                end,
                consumed,
            } => {
                got.push(buf[start..end].to_vec());
                buf.drain(..consumed);
            }
            Opened::End { consumed } => {
                assert_eq!(consumed, buf.len());
                assert_eq!(fed, wire.len());
                return got;
            }
            Opened::NeedMore(_) if fed == wire.len() => {
                // Unframed (`zero`) has no end mark: the transport's end is the end.
                assert!(!format.chunked);
                return got;
            }
            Opened::NeedMore(n) => {
                assert!(n > buf.len());
                let take = step.min(wire.len() - fed).max(1);
                buf.extend_from_slice(&wire[fed..fed + take]);
                fed += take;
            }
        }
    }
}

fn all_formats() -> Vec<BodyFormat> {
    let mut out = Vec::new();
    for cipher in [
        BodyCipher::Aes128Gcm,
        BodyCipher::ChaCha20Poly1305,
        BodyCipher::None,
    ] {
        for (masking, padding) in [(false, false), (true, false), (true, true)] {
            for auth_length in [false, true] {
                for packet in [false, true] {
                    if auth_length && cipher == BodyCipher::None {
                        continue;
                    }
                    out.push(BodyFormat {
                        cipher,
                        chunked: true,
                        masking,
                        padding,
                        auth_length,
                        packet,
                    });
                }
            }
        }
    }
    out
}

#[test]
fn every_format_round_trips_a_maximal_packet() {
    let big = vec![0xa5u8; MAX_PACKET_PAYLOAD];
    for format in all_formats() {
        let got = roundtrip(format, &[big.clone(), b"x".to_vec()], 40_000);
        assert_eq!(got, [big.clone(), b"x".to_vec()], "{format:?}");
    }
    let mut sealer = ChunkSealer::new(all_formats()[0], &[0; 16], &[0; 16], &[0; 16], &[0; 16]);
    let mut out = Vec::new();
    assert_eq!(
        sealer.seal(&vec![0; MAX_PACKET_PAYLOAD + 1], &mut out),
        Err(VmessError::ChunkLength(MAX_PACKET_PAYLOAD + 1))
    );
    assert!(out.is_empty());
}

#[test]
fn tampered_chunks_fail_and_stay_failed() {
    let f = format(BodyCipher::Aes128Gcm, true, true);
    let (k, iv) = (seq16(1), seq16(2));
    let mut sealer = ChunkSealer::new(f, &k, &iv, &k, &iv);
    let mut wire = Vec::new();
    sealer.seal(b"one", &mut wire).unwrap();
    wire[4] ^= 1;
    let mut opener = ChunkOpener::new(f, &k, &iv, &k, &iv);
    assert_eq!(opener.open(&mut wire.clone()), Err(VmessError::ChunkAuth));
    assert_eq!(opener.open(&mut []), Err(VmessError::ChunkAuth));
}

fn server_with(ids: &[[u8; 16]]) -> VmessServer {
    let users: Vec<VmessUser> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| VmessUser {
            id: UserId::from_bytes(*id),
            email: Some(format!("u{i}")),
            level: i as u32,
        })
        .collect();
    VmessServer::new(&users)
}

#[test]
fn authentication_finds_the_user_and_refuses_replays_and_stale_ids() {
    let ids: Vec<[u8; 16]> = (0..50u8).map(|i| [i; 16]).collect();
    let server = server_with(&ids);
    let now = 1_700_000_000;
    let auth_for = |user: usize, ts: i64, salt: u8| {
        let cipher = AuthIdSealer::for_cmd_key(&cmd_key(&ids[user]));
        seal_auth_id(&cipher, ts, [salt; 4])
    };
    assert_eq!(server.authenticate(&auth_for(37, now, 1), now), Ok(37));
    assert_eq!(
        server.authenticate(&auth_for(37, now, 1), now + 5),
        Err(AuthFailure::Replayed)
    );
    assert_eq!(server.authenticate(&auth_for(0, now + 120, 2), now), Ok(0));
    assert_eq!(server.authenticate(&auth_for(1, now - 120, 2), now), Ok(1));
    assert_eq!(
        server.authenticate(&auth_for(2, now - 121, 2), now),
        Err(AuthFailure::BadTime)
    );
    // Negative (or past-2106) timestamps fail the cheap pre-check: refused as unknown.
    assert_eq!(
        server.authenticate(&auth_for(2, -5, 2), now),
        Err(AuthFailure::UnknownUser)
    );
    assert_eq!(
        server.authenticate(&[0x55; 16], now),
        Err(AuthFailure::UnknownUser)
    );
    // An auth ID stamped 120 s ahead stays refused until its timestamp leaves the window.
    let ahead = auth_for(3, now + 120, 3);
    assert_eq!(server.authenticate(&ahead, now), Ok(3));
    assert_eq!(
        server.authenticate(&ahead, now + 239),
        Err(AuthFailure::Replayed)
    );
    assert_eq!(
        server.authenticate(&ahead, now + 241),
        Err(AuthFailure::BadTime)
    );
    assert!(server.fresh_session(3, &[1; 16], &[2; 16], now));
    assert!(!server.fresh_session(3, &[1; 16], &[2; 16], now + 100));
    assert!(server.fresh_session(4, &[1; 16], &[2; 16], now + 100));
    let drain = server.drain_size();
    assert!((54..54 + 3266 + 64).contains(&drain));
}

// ---------------------------------------------------------------------------------------
// Client ↔ server in process.

fn pair() -> (BoxStream, BoxStream) {
    let (a, b) = UnixStream::pair().unwrap();
    (Box::new(a), Box::new(b))
}

fn destination() -> Address {
    Address::Ip(SocketAddr::from(([127, 0, 0, 1], 5000)))
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Client and server exchange `len` bytes each way at once (written in uneven pieces), then
/// each side half-closes; both must read exactly the other's bytes and a clean end.
async fn exchange(security: Security, auth_length: bool, len: usize) {
    let id = [9u8; 16];
    let server = server_with(&[[1; 16], id]);
    let client = VmessClient::new(&UserId::from_bytes(id), security, auth_length, false);
    let (c, s) = pair();
    let client_side = async {
        let mut stream = client.connect(c, &destination(), Command::Tcp).unwrap();
        let up = pattern(1, len);
        let (mut rd, mut wr) = tokio::io::split(&mut stream);
        let write = async {
            for piece in up.chunks(7919) {
                wr.write_all(piece).await.unwrap();
            }
            wr.shutdown().await.unwrap();
        };
        let read = async {
            let mut got = Vec::new();
            rd.read_to_end(&mut got).await.unwrap();
            got
        };
        let ((), got) = tokio::join!(write, read);
        assert_eq!(got, pattern(2, len), "{security:?}: downlink");
    };
    let server_side = async {
        let accepted = accept(s, &server, true).await.unwrap();
        let VmessAccept::Stream {
            destination: dest,
            mut stream,
            user,
            level,
        } = accepted
        else {
            panic!("not a stream");
        };
        assert_eq!(
            (dest, user.as_deref(), level),
            (destination(), Some("u1"), 1)
        );
        let down = pattern(2, len);
        let (mut rd, mut wr) = tokio::io::split(&mut stream);
        let write = async {
            for piece in down.chunks(65_536) {
                wr.write_all(piece).await.unwrap();
            }
            wr.shutdown().await.unwrap();
        };
        let read = async {
            let mut got = Vec::new();
            rd.read_to_end(&mut got).await.unwrap();
            got
        };
        let ((), got) = tokio::join!(write, read);
        assert_eq!(got, pattern(1, len), "{security:?}: uplink");
    };
    tokio::join!(client_side, server_side);
}

#[tokio::test]
async fn client_and_server_exchange_with_every_security() {
    for security in [
        Security::Aes128Gcm,
        Security::ChaCha20Poly1305,
        Security::None,
        Security::Zero,
        Security::Auto,
    ] {
        exchange(security, false, 300_000).await;
        exchange(security, false, 0).await;
    }
    exchange(Security::Aes128Gcm, true, 100_000).await;
    exchange(Security::ChaCha20Poly1305, true, 100_000).await;
}

/// Both directions hold a buffer only while data moves: after a burst is written, flushed,
/// read, and the transport has nothing more, neither side holds one.
#[tokio::test]
async fn buffers_are_given_back_when_idle() {
    let id = [9u8; 16];
    let server = server_with(&[id]);
    let client = VmessClient::new(&UserId::from_bytes(id), Security::Aes128Gcm, false, false);
    let (c, s) = pair();
    let mut client_stream = client.connect(c, &destination(), Command::Tcp).unwrap();
    assert_eq!(client_stream.buffer_capacity(), (0, 0));
    client_stream.write_all(&pattern(1, 100_000)).await.unwrap();
    assert!(
        client_stream.buffer_capacity().1 > 0,
        "a burst holds the write buffer"
    );
    client_stream.flush().await.unwrap();
    assert_eq!(
        client_stream.buffer_capacity().1,
        0,
        "flushed: write buffer given back"
    );
    let Ok(VmessAccept::Stream { mut stream, .. }) = accept(s, &server, true).await else {
        panic!("no stream");
    };
    let mut got = vec![0u8; 100_000];
    stream.read_exact(&mut got).await.unwrap();
    assert_eq!(got, pattern(1, 100_000));
    // One more read finds the transport empty: the read buffer goes back.
    let mut one = [0u8; 1];
    let idle = tokio::time::timeout(std::time::Duration::from_millis(50), stream.read(&mut one));
    assert!(idle.await.is_err());
    assert_eq!(
        stream.buffer_capacity().0,
        0,
        "idle: read buffer given back"
    );
}

/// A relay moves 64 KiB at a time: one such write is sealed whole into one transport write
/// (not 64 880 bytes and then a tiny rest), and a reader with a 64 KiB buffer gets close to
/// 64 KiB per read when the transport has it (not half).
#[tokio::test]
async fn a_relay_sized_write_and_read_each_take_one_call() {
    let id = [9u8; 16];
    let server = server_with(&[id]);
    let client = VmessClient::new(&UserId::from_bytes(id), Security::Aes128Gcm, false, false);
    let (c, s) = pair();
    let mut client_stream = client.connect(c, &destination(), Command::Tcp).unwrap();
    let data = pattern(3, 2 * 65_536);
    for half in data.chunks(65_536) {
        assert_eq!(client_stream.write(half).await.unwrap(), 65_536);
    }
    client_stream.flush().await.unwrap();
    let Ok(VmessAccept::Stream { mut stream, .. }) = accept(s, &server, true).await else {
        panic!("no stream");
    };
    let mut buf = vec![0u8; 65_536];
    let mut got = Vec::new();
    let mut sizes = Vec::new();
    while got.len() < data.len() {
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0);
        sizes.push(n);
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(got, data);
    // The first read also holds the request header; after it, whole 64 KiB reads of chunks.
    assert!(sizes.len() <= 3, "read sizes: {sizes:?}");
}

/// The client's header leaves alone once the application has not written for 100 ms, so a
/// server that speaks first is reached.
#[tokio::test]
async fn client_header_leaves_alone_when_the_server_speaks_first() {
    let id = [9u8; 16];
    let server = server_with(&[id]);
    let client = VmessClient::new(&UserId::from_bytes(id), Security::Aes128Gcm, false, false);
    let (c, s) = pair();
    let server_side = async {
        let Ok(VmessAccept::Stream { mut stream, .. }) = accept(s, &server, true).await else {
            panic!("no stream");
        };
        stream.write_all(b"220 hello").await.unwrap();
        stream.flush().await.unwrap();
        let mut buf = [0u8; 4];
        stream.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"quit");
    };
    let client_side = async {
        let mut stream = client.connect(c, &destination(), Command::Tcp).unwrap();
        let mut buf = [0u8; 9];
        stream.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"220 hello");
        stream.write_all(b"quit").await.unwrap();
        stream.flush().await.unwrap();
    };
    tokio::time::timeout(std::time::Duration::from_secs(10), async {
        tokio::join!(server_side, client_side)
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn udp_datagrams_are_single_chunks_both_ways() {
    for security in [Security::Aes128Gcm, Security::None, Security::Zero] {
        let id = [9u8; 16];
        let server = server_with(&[id]);
        let client = VmessClient::new(&UserId::from_bytes(id), security, false, false);
        let (c, s) = pair();
        let sizes = [1usize, 1400, 2046, 9000, MAX_PACKET_PAYLOAD];
        let client_side = async {
            let stream = client.connect(c, &destination(), Command::Udp).unwrap();
            let (mut rx, mut tx) = stream.into_packets();
            for (i, &n) in sizes.iter().enumerate() {
                datagram::send(&mut tx, &pattern(i as u8, n)).await.unwrap();
                // Empty datagrams are skipped, never an end mark.
                datagram::send(&mut tx, b"").await.unwrap();
            }
            for (i, &n) in sizes.iter().enumerate() {
                let got = datagram::recv(&mut rx).await.unwrap().unwrap();
                assert_eq!(got, pattern(i as u8 ^ 0x80, n), "{security:?}");
            }
            datagram::shutdown(&mut tx).await.unwrap();
            assert!(datagram::recv(&mut rx).await.unwrap().is_none());
        };
        let server_side = async {
            let Ok(VmessAccept::Udp {
                mut reader,
                mut writer,
                ..
            }) = accept(s, &server, true).await
            else {
                panic!("not UDP");
            };
            let mut i = 0u8;
            while let Some(p) = datagram::recv(&mut reader).await.unwrap() {
                assert_eq!(p, pattern(i, p.len()));
                let reply: Vec<u8> = pattern(i ^ 0x80, p.len());
                datagram::send(&mut writer, &reply).await.unwrap();
                i += 1;
            }
            assert_eq!(usize::from(i), sizes.len());
            datagram::shutdown(&mut writer).await.unwrap();
        };
        tokio::join!(client_side, server_side);
    }
}

/// Replayed header bytes and strangers get nothing back: the server reads its drain budget
/// (raw TCP) and closes, or closes at once without draining.
#[tokio::test]
async fn replays_and_strangers_are_drained_and_closed_silently() {
    let id = [9u8; 16];
    let server = server_with(&[id]);
    let client = VmessClient::new(&UserId::from_bytes(id), Security::Aes128Gcm, false, false);
    let mut wire = Vec::new();
    let random = RequestRandom::fresh();
    let ins = client.instruction(&destination(), Command::Tcp, &random);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    client.seal(&ins, &random, now, &mut wire).unwrap();
    for (attempt, bytes) in [(0, wire.clone()), (1, wire.clone()), (2, vec![0x5a; 4000])] {
        let (mut c, s) = UnixStream::pair().unwrap();
        c.write_all(&bytes).await.unwrap();
        // Enough extra bytes to satisfy any drain budget.
        c.write_all(&[0u8; 4000]).await.unwrap();
        c.shutdown().await.unwrap();
        let result = accept(Box::new(s) as BoxStream, &server, true).await;
        match (attempt, result) {
            (0, Ok(VmessAccept::Stream { .. })) => {}
            (1 | 2, Err(e)) => {
                assert_eq!(e.kind(), std::io::ErrorKind::InvalidData, "{e}");
                // The server closed with our extra bytes unread: a reset, or an end.
                let mut rest = Vec::new();
                match c.read_to_end(&mut rest).await {
                    Ok(_) => {}
                    Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset),
                }
                assert!(rest.is_empty(), "the server wrote {rest:?}");
            }
            (n, Ok(_)) => panic!("attempt {n} accepted"),
            (n, Err(e)) => panic!("attempt {n} refused: {e}"),
        }
    }
    // An inbound that refuses insecure encryption refuses `none` after the header.
    let strict = server_with(&[id]).refuse_insecure(true);
    let plain = VmessClient::new(&UserId::from_bytes(id), Security::None, false, false);
    let (c, s) = pair();
    let _client = plain.connect(c, &destination(), Command::Tcp).unwrap();
    let (mut client, s2) = (_client, s);
    client.write_all(b"x").await.unwrap();
    client.flush().await.unwrap();
    let refused = accept(s2, &strict, true).await;
    assert!(refused.is_err_and(|e| e.to_string().contains("insecure")));

    // Without drain (TLS/WebSocket below), a stranger is refused after its 16 bytes.
    let (mut c, s) = UnixStream::pair().unwrap();
    c.write_all(&[0x5a; 16]).await.unwrap();
    let refused = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        accept(Box::new(s) as BoxStream, &server, false),
    )
    .await
    .expect("refused at once");
    assert!(refused.is_err());
}

// ---------------------------------------------------------------------------------------
// Properties.

fn arb_address() -> impl Strategy<Value = Address> {
    prop_oneof![
        (any::<[u8; 4]>(), any::<u16>())
            .prop_map(|(ip, port)| Address::Ip(SocketAddr::from((ip, port)))),
        (any::<[u8; 16]>(), any::<u16>())
            .prop_map(|(ip, port)| Address::Ip(SocketAddr::from((ip, port)))),
        ("[a-z][a-z0-9-]{0,20}(\\.[a-z]{2,5}){0,3}", any::<u16>())
            .prop_map(|(name, port)| Address::Domain(name, port)),
    ]
}

fn arb_instruction() -> impl Strategy<Value = (Instruction, Vec<u8>)> {
    (
        any::<u8>(),
        any::<[u8; 16]>(),
        any::<[u8; 16]>(),
        any::<u8>(),
        any::<u8>(),
        0u8..16,
        prop_oneof![Just(Command::Tcp), Just(Command::Udp), Just(Command::Mux)],
        arb_address(),
        proptest::collection::vec(any::<u8>(), 0..16),
    )
        .prop_map(
            |(version, body_iv, body_key, response_auth, options, security, command, dest, pad)| {
                let ins = Instruction {
                    version,
                    body_iv,
                    body_key,
                    response_auth,
                    options,
                    security,
                    command,
                    destination: (command != Command::Mux).then_some(dest),
                };
                (ins, pad)
            },
        )
}

proptest! {
    #[test]
    fn instruction_encode_then_parse_is_identity((ins, pad) in arb_instruction()) {
        let mut out = Vec::new();
        encode_instruction(&ins, &pad, &mut out).unwrap();
        let (parsed, len) = parse_instruction(&out).unwrap();
        prop_assert_eq!(parsed, ins);
        prop_assert_eq!(len, out.len());
    }

    #[test]
    fn sealed_requests_open_to_the_same_instruction(
        (ins, pad) in arb_instruction(),
        salt in any::<[u8; 4]>(),
        nonce in any::<[u8; 8]>(),
    ) {
        let client = vector_client();
        let random = RequestRandom { padding: pad, auth_salt: salt, nonce, ..vector_random() };
        let mut wire = Vec::new();
        client.seal(&ins, &random, 1_700_000_000, &mut wire).unwrap();
        let mut opener = RequestOpener::new(cmd_key(UserId::parse(UUID).unwrap().as_bytes()));
        let len = wire.len();
        prop_assert_eq!(opener.open(&mut wire), Ok(Parsed::Complete((ins, len))));
    }

    #[test]
    fn chunks_round_trip_in_every_format(
        which in 0usize..30,
        payloads in proptest::collection::vec(
            proptest::collection::vec(any::<u8>(), 1..3000), 0..8),
        step in 1usize..5000,
    ) {
        let formats = all_formats();
        let format = formats[which % formats.len()];
        prop_assert_eq!(roundtrip(format, &payloads, step), payloads);
    }

    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..600)) {
        super::fuzz_parse_all(&data);
        let _ = parse_instruction(&data);
        let mut copy = data.clone();
        let _ = RequestOpener::new([3; 16]).open(&mut copy);
        let f = BodyFormat::of_request(&Instruction {
            options: options::CHUNK_STREAM | options::CHUNK_MASKING | options::AUTHENTICATED_LENGTH,
            security: security::CHACHA20_POLY1305,
            ..vector_instruction()
        }).unwrap();
        let mut opener = ChunkOpener::new(f, &[1; 16], &[2; 16], &[1; 16], &[2; 16]);
        let mut copy = data.clone();
        let _ = opener.open(&mut copy);
    }
}

#[test]
fn request_options_are_validated() {
    let with = |options: u8, security: u8, command: Command| {
        BodyFormat::of_request(&Instruction {
            options,
            security,
            command,
            ..vector_instruction()
        })
    };
    assert!(with(options::CHUNK_STREAM, 0, Command::Tcp).is_err());
    assert!(with(options::CHUNK_STREAM, 2, Command::Tcp).is_err());
    assert!(with(options::CHUNK_STREAM, 6, Command::Tcp).is_err());
    assert_eq!(
        with(options::GLOBAL_PADDING, 3, Command::Tcp),
        Err(VmessError::BadOptions("global padding needs chunk masking"))
    );
    assert!(with(0, security::NONE, Command::Udp).is_err());
    let zero = with(0, security::NONE, Command::Tcp).unwrap();
    assert!(!zero.chunked);
    // AEAD ciphers are chunked whatever S says; A is ignored with `none`.
    assert!(with(0, 3, Command::Tcp).unwrap().chunked);
    let none_a = with(
        options::CHUNK_STREAM | options::AUTHENTICATED_LENGTH,
        security::NONE,
        Command::Tcp,
    )
    .unwrap();
    assert!(!none_a.auth_length);
}

/// Prints what a failed lookup costs (every user tried): `cargo test -p skiff-proto
/// vmess_lookup_cost -- --ignored --nocapture`. Never asserts a timing.
#[test]
#[ignore]
fn vmess_lookup_cost() {
    let ids: Vec<[u8; 16]> = (0..2000u32)
        .map(|i| {
            let mut id = [0u8; 16];
            id[..4].copy_from_slice(&i.to_le_bytes());
            id
        })
        .collect();
    let server = server_with(&ids);
    let start = std::time::Instant::now();
    for _ in 0..200 {
        assert!(server.authenticate(&[0x55; 16], 0).is_err());
    }
    let each = start.elapsed() / 200;
    eprintln!(
        "{} users: {each:?} per failed lookup, {:?} per user",
        ids.len(),
        each / 2000
    );
}
