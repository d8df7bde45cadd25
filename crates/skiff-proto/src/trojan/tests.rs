//! Byte-exact vectors from trojan.md §1/§2 and property tests for the Trojan codecs.

use std::net::SocketAddr;

use proptest::prelude::*;
use skiff_core::Address;

use super::codec::*;
use super::udp::PacketDecoder;

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn ip(s: &str) -> Address {
    Address::Ip(s.parse::<SocketAddr>().unwrap())
}

/// trojan.md §1: CONNECT 127.0.0.1:20200 with password `password` (live).
const LIVE_REQUEST: &str = "64363364633931396532303164376263346338323536333064326366323566646339336434623266306434363730366432393033386430310d0a01017f0000014ee80d0a";
/// trojan.md §2: two replies from 127.0.0.1:20201, payloads `u1`, `u22` (live).
const LIVE_PACKETS: &str = "017f0000014ee900020d0a7531 017f0000014ee900030d0a753232";

fn live_request() -> Request {
    Request {
        hash: PasswordHash::of("password"),
        command: Command::Connect,
        destination: ip("127.0.0.1:20200"),
    }
}

#[test]
fn password_hashes_match_the_spec() {
    assert_eq!(
        PasswordHash::of("password").as_bytes(),
        b"d63dc919e201d7bc4c825630d2cf25fdc93d4b2f0d46706d29038d01"
    );
    assert_eq!(
        PasswordHash::of("test").as_bytes(),
        b"90a3ed9e32b2aaf4c61c410eb925426119e1a9dc53d4286ade99a809"
    );
    assert_eq!(PasswordHash::of("test"), PasswordHash::of("test"));
    assert_ne!(PasswordHash::of("test"), PasswordHash::of("test "));
    // Debug never shows the whole hash.
    assert_eq!(
        format!("{:?}", PasswordHash::of("password")),
        "PasswordHash(d63dc919…)"
    );
}

#[test]
fn live_request_encodes_and_parses_at_every_prefix() {
    let wire = hex(LIVE_REQUEST);
    let mut out = vec![0xaa];
    encode_request(&live_request(), &mut out).unwrap();
    assert_eq!(out[1..], wire[..]);
    let mut with_payload = wire.clone();
    with_payload.extend_from_slice(b"hello trojan");
    assert_eq!(
        parse_request(&with_payload).unwrap(),
        Parsed::Complete((live_request(), wire.len()))
    );
    for cut in 0..wire.len() {
        assert_eq!(
            parse_request(&wire[..cut]).unwrap(),
            Parsed::Incomplete,
            "{cut}"
        );
    }
    assert_eq!(
        parse_request_hash(&wire[..AUTH_LEN]).unwrap(),
        Parsed::Complete(PasswordHash::of("password"))
    );
    assert_eq!(
        parse_request_hash(&wire[..HASH_LEN + 1]).unwrap(),
        Parsed::Incomplete
    );
}

#[test]
fn live_packets_encode_and_decode_split_anywhere() {
    let wire = hex(LIVE_PACKETS);
    let from = ip("127.0.0.1:20201");
    let mut out = Vec::new();
    encode_packet(&from, b"u1", &mut out).unwrap();
    encode_packet(&from, b"u22", &mut out).unwrap();
    assert_eq!(out, wire);
    for split in 0..=wire.len() {
        let mut decoder = PacketDecoder::new();
        let mut got = Vec::new();
        for part in [&wire[..split], &wire[split..]] {
            decoder.feed(part);
            while let Some((address, payload)) = decoder.next_packet().unwrap() {
                got.push((address, payload.to_vec()));
            }
        }
        assert_eq!(
            got,
            vec![
                (from.clone(), b"u1".to_vec()),
                (from.clone(), b"u22".to_vec())
            ],
            "split {split}"
        );
        assert_eq!(decoder.buffered(), 0);
    }
    let head = parse_packet(&wire).unwrap().complete().unwrap();
    assert_eq!(head.address, from);
    assert_eq!(&wire[head.payload], b"u1");
    assert_eq!(head.len, 13);
}

#[test]
fn not_trojan_is_refused_early() {
    // HTTP and TLS ClientHellos as a fallback-enabled server sees them: no CRLF at byte 56.
    let get =
        b"GET / HTTP/1.1\r\nHost: example.com\r\nUser-Agent: curl/7.88.1\r\nAccept: */*\r\n\r\n";
    assert_eq!(parse_request_hash(get), Err(TrojanError::NoHashDelimiter));
    assert_eq!(parse_request(get), Err(TrojanError::NoHashDelimiter));
    assert_eq!(
        parse_request_hash(&[0x16; 57]),
        Err(TrojanError::NoHashDelimiter)
    );
    assert_eq!(parse_request_hash(&[b'a'; 56]).unwrap(), Parsed::Incomplete);
    let mut cr_only = vec![b'a'; 56];
    cr_only.extend_from_slice(b"\rX");
    assert_eq!(
        parse_request_hash(&cr_only),
        Err(TrojanError::NoHashDelimiter)
    );
}

#[test]
fn bad_requests() {
    let good = hex(LIVE_REQUEST);
    let mut bad = good.clone();
    bad[58] = 0x02;
    assert_eq!(parse_request(&bad), Err(TrojanError::UnknownCommand(2)));
    bad[58] = 0x7f; // trojan-go's mux
    assert_eq!(parse_request(&bad), Err(TrojanError::UnknownCommand(0x7f)));
    let mut bad = good.clone();
    bad[59] = 0x02;
    assert_eq!(parse_request(&bad), Err(TrojanError::BadAddressType(2)));
    let mut bad = good.clone();
    let last = bad.len() - 1;
    bad[last] = b'x';
    assert_eq!(parse_request(&bad), Err(TrojanError::MissingCrlf));

    let domain = |name: &[u8]| {
        let mut wire = good[..59].to_vec();
        wire.extend_from_slice(&[0x03, name.len() as u8]);
        wire.extend_from_slice(name);
        wire.extend_from_slice(&[0x01, 0xbb, 0x0d, 0x0a]);
        parse_request(&wire).map(|p| p.complete().unwrap().0.destination)
    };
    assert_eq!(
        domain(b"example.com"),
        Ok(Address::Domain("example.com".into(), 443))
    );
    assert_eq!(domain(b"1.2.3.4"), Ok(ip("1.2.3.4:443")));
    assert_eq!(domain(b"[::1]"), Ok(ip("[::1]:443")));
    assert_eq!(domain(b""), Err(TrojanError::BadDomain));
    assert_eq!(domain(b"a b"), Err(TrojanError::BadDomain));
    assert_eq!(domain(&[0xc3, 0xa9]), Err(TrojanError::BadDomain));
    // A bad name is refused before its port arrives.
    let mut early = good[..59].to_vec();
    early.extend_from_slice(&[0x03, 3]);
    early.extend_from_slice(b"a/b");
    assert_eq!(parse_request(&early), Err(TrojanError::BadDomain));

    // UDP ASSOCIATE to 0.0.0.0:0 (what trojan-gfw's client usually sends), IPv6 destination.
    let mut wire = good[..58].to_vec();
    wire.extend_from_slice(&hex("03 01 00000000 0000 0d0a"));
    let (req, len) = parse_request(&wire).unwrap().complete().unwrap();
    assert_eq!(
        (req.command, req.destination, len),
        (Command::UdpAssociate, ip("0.0.0.0:0"), wire.len())
    );
    let mut wire = good[..58].to_vec();
    wire.extend_from_slice(&hex("01 04 20010db8000000000000000000000001 0035 0d0a"));
    let (req, _) = parse_request(&wire).unwrap().complete().unwrap();
    assert_eq!(req.destination, ip("[2001:db8::1]:53"));
}

#[test]
fn encode_refusals_append_nothing() {
    let mut out = vec![1, 2];
    let bad = Request {
        destination: Address::Domain("a b".into(), 1),
        ..live_request()
    };
    assert_eq!(encode_request(&bad, &mut out), Err(TrojanError::BadDomain));
    assert_eq!(
        encode_packet(&Address::Domain(String::new(), 1), b"x", &mut out),
        Err(TrojanError::BadDomain)
    );
    assert_eq!(
        encode_packet(&ip("1.1.1.1:1"), &vec![0; MAX_PACKET_LEN + 1], &mut out),
        Err(TrojanError::PacketTooLong(MAX_PACKET_LEN + 1))
    );
    assert_eq!(out, [1, 2]);
    encode_packet(&ip("1.1.1.1:1"), &vec![7; MAX_PACKET_LEN], &mut out).unwrap();
    assert_eq!(out.len(), 2 + 7 + 2 + 2 + MAX_PACKET_LEN);
}

#[test]
fn decoder_stops_at_a_bad_packet() {
    let mut decoder = PacketDecoder::new();
    decoder.feed(&hex("017f0000014ee900020d0a7531 09"));
    assert!(decoder.next_packet().unwrap().is_some());
    assert_eq!(decoder.next_packet(), Err(TrojanError::BadAddressType(9)));
    decoder.feed(&hex("017f0000014ee900020d0a7531"));
    assert_eq!(decoder.next_packet(), Err(TrojanError::BadAddressType(9)));
    assert_eq!(decoder.buffered(), 0);
    let mut decoder = PacketDecoder::new();
    decoder.feed(&hex("017f0000014ee90002 0d0b"));
    assert_eq!(decoder.next_packet(), Err(TrojanError::MissingCrlf));
}

#[test]
fn fuzz_entry_point_accepts_vectors() {
    fuzz_parse_all(&hex(LIVE_REQUEST));
    fuzz_parse_all(&hex(LIVE_PACKETS));
    fuzz_parse_all(&[]);
}

fn arb_domain() -> impl Strategy<Value = String> {
    // Starts with a letter so it is never taken for an IP.
    "[a-zA-Z][a-zA-Z0-9._-]{0,254}"
}

fn arb_address() -> impl Strategy<Value = Address> {
    prop_oneof![
        (any::<std::net::IpAddr>(), any::<u16>())
            .prop_map(|(ip, port)| Address::Ip(SocketAddr::new(ip, port))),
        (arb_domain(), any::<u16>()).prop_map(|(d, p)| Address::Domain(d, p)),
    ]
}

fn arb_request() -> impl Strategy<Value = Request> {
    (
        "\\PC{0,40}",
        prop_oneof![Just(Command::Connect), Just(Command::UdpAssociate)],
        arb_address(),
    )
        .prop_map(|(password, command, destination)| Request {
            hash: PasswordHash::of(&password),
            command,
            destination,
        })
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..600)) {
        fuzz_parse_all(&data);
    }

    #[test]
    fn arbitrary_tails_after_a_valid_hash_never_panic(
        tail in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let mut data = PasswordHash::of("password").as_bytes().to_vec();
        data.extend_from_slice(&CRLF);
        data.extend_from_slice(&tail);
        fuzz_parse_all(&data);
    }

    #[test]
    fn request_roundtrip(req in arb_request(), payload in proptest::collection::vec(any::<u8>(), 0..16)) {
        let mut wire = Vec::new();
        encode_request(&req, &mut wire).unwrap();
        let header_len = wire.len();
        prop_assert!(header_len <= MAX_REQUEST_HEADER_LEN);
        wire.extend_from_slice(&payload);
        prop_assert_eq!(parse_request(&wire).unwrap(), Parsed::Complete((req, header_len)));
        for cut in 0..header_len {
            prop_assert_eq!(parse_request(&wire[..cut]).unwrap(), Parsed::Incomplete);
        }
    }

    #[test]
    fn packet_roundtrip(
        packets in proptest::collection::vec(
            (arb_address(), proptest::collection::vec(any::<u8>(), 0..300)), 0..8),
        chunk in 1usize..64,
    ) {
        let mut wire = Vec::new();
        for (address, payload) in &packets {
            encode_packet(address, payload, &mut wire).unwrap();
        }
        let mut decoder = PacketDecoder::new();
        let mut got = Vec::new();
        for part in wire.chunks(chunk) {
            decoder.feed(part);
            while let Some((address, payload)) = decoder.next_packet().unwrap() {
                got.push((address, payload.to_vec()));
            }
        }
        prop_assert_eq!(got, packets);
        prop_assert_eq!(decoder.buffered(), 0);
    }
}
