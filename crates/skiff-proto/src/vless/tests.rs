//! Byte-exact vectors from vless.md §2.2/§3 and property tests for the VLESS codecs.

use std::net::SocketAddr;

use proptest::prelude::*;
use skiff_core::Address;

use super::codec::*;
use super::udp::{PacketDecoder, encode_packet};
use crate::user_id::UserId;

const UUID: [u8; 16] = [
    0xb8, 0x31, 0x38, 0x1d, 0x63, 0x24, 0x4d, 0x53, 0xad, 0x4f, 0x8c, 0xda, 0x48, 0xb3, 0x08, 0x11,
];

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn request(flow: Option<&str>, command: Command, destination: Option<Address>) -> Request {
    Request {
        version: VERSION,
        user: UUID,
        flow: flow.map(str::to_owned),
        command,
        destination,
    }
}

fn ip(s: &str) -> Option<Address> {
    Some(Address::Ip(s.parse::<SocketAddr>().unwrap()))
}

/// Every vector of vless.md §2.2: (wire bytes, request).
fn vectors() -> Vec<(Vec<u8>, Request)> {
    vec![
        (
            hex("00 b831381d63244d53ad4f8cda48b30811 00 01 4ee8 01 7f000001"),
            request(None, Command::Tcp, ip("127.0.0.1:20200")),
        ),
        (
            hex("00 b831381d63244d53ad4f8cda48b30811 00 01 01bb 02 0b 6578616d706c652e636f6d"),
            request(
                None,
                Command::Tcp,
                Some(Address::Domain("example.com".into(), 443)),
            ),
        ),
        (
            hex(
                "00 b831381d63244d53ad4f8cda48b30811 12 0a10 78746c732d727072782d766973696f6e 01 4f4c 01 7f000001",
            ),
            request(Some(FLOW_VISION), Command::Tcp, ip("127.0.0.1:20300")),
        ),
        (
            hex("00 b831381d63244d53ad4f8cda48b30811 00 03"),
            request(None, Command::Mux, None),
        ),
    ]
}

#[test]
fn spec_vectors_encode_byte_exact() {
    for (wire, req) in vectors() {
        let mut out = vec![0xaa]; // appends, does not overwrite
        encode_request(&req, &mut out).unwrap();
        assert_eq!(out[1..], wire[..], "{req:?}");
    }
}

#[test]
fn spec_vectors_parse_with_payload_and_at_every_prefix() {
    for (wire, req) in vectors() {
        let mut with_payload = wire.clone();
        with_payload.extend_from_slice(b"GET / HTTP/1.1\r\n");
        assert_eq!(
            parse_request(&with_payload).unwrap(),
            Parsed::Complete((req.clone(), wire.len()))
        );
        for cut in 0..wire.len() {
            assert_eq!(
                parse_request(&wire[..cut]).unwrap(),
                Parsed::Incomplete,
                "prefix {cut}"
            );
        }
        assert_eq!(parse_request_user(&wire).unwrap(), Parsed::Complete(UUID));
    }
    assert_eq!(
        UserId::parse("b831381d-6324-4d53-ad4f-8cda48b30811")
            .unwrap()
            .as_bytes(),
        &UUID
    );
}

#[test]
fn response_header() {
    assert_eq!(RESPONSE_HEADER, [0, 0]);
    // vless.md §3 live: `00 00` + "hello vless".
    let live = hex("0000 68656c6c6f20766c657373");
    assert_eq!(parse_response_header(&live).unwrap(), Parsed::Complete(2));
    assert_eq!(parse_response_header(&[]).unwrap(), Parsed::Incomplete);
    assert_eq!(parse_response_header(&[0]).unwrap(), Parsed::Incomplete);
    assert_eq!(
        parse_response_header(&[1, 0]),
        Err(VlessError::BadVersion(1))
    );
    // Addons present (never sent today) are skipped.
    let with_addons = hex("00 04 0a02 6869 ff");
    assert_eq!(
        parse_response_header(&with_addons).unwrap(),
        Parsed::Complete(6)
    );
    assert_eq!(
        parse_response_header(&with_addons[..5]).unwrap(),
        Parsed::Incomplete
    );
    assert!(matches!(
        parse_response_header(&hex("00 02 0a05")),
        Err(VlessError::BadAddons(_))
    ));
}

#[test]
fn addons_skip_unknown_fields() {
    // field 2 (Seed, bytes), field 3 varint (multi-byte), field 4 fixed64, field 5 fixed32,
    // then field 1; a second field 1 wins.
    let addons = hex(
        "12 03 010203  18 ac02  21 0102030405060708  2d 01020304  0a 03 616263  \
         f8ffffff0f 01",
    );
    assert_eq!(parse_addons(&addons).unwrap(), Some("abc".into()));
    let twice = hex("0a 01 61 0a 01 62");
    assert_eq!(parse_addons(&twice).unwrap(), Some("b".into()));
    // Field 1 with a varint wire type is an unknown field, skipped.
    assert_eq!(parse_addons(&hex("08 05")).unwrap(), None);
    // Empty flow is the default value.
    assert_eq!(parse_addons(&hex("0a 00")).unwrap(), None);
    assert_eq!(parse_addons(&[]).unwrap(), None);

    // In a full request.
    let mut wire = vec![0];
    wire.extend_from_slice(&UUID);
    wire.push(addons.len() as u8);
    wire.extend_from_slice(&addons);
    wire.extend_from_slice(&hex("01 0050 01 0a000001"));
    let (req, len) = parse_request(&wire).unwrap().complete().unwrap();
    assert_eq!(len, wire.len());
    assert_eq!(req.flow.as_deref(), Some("abc"));
    assert_eq!(req.destination, ip("10.0.0.1:80"));

    for (bad, why) in [
        ("0a 05 6162", "truncated length-delimited"),
        ("18", "truncated varint"),
        ("18 ff", "truncated varint"),
        ("21 0102", "truncated fixed64"),
        ("2d 01", "truncated fixed32"),
        ("0b", "group start"),
        ("0c", "group end"),
        ("0e", "wire type 6"),
        ("02 00", "field 0"),
        ("18 ffffffffffffffffff02", "varint overflow"),
        ("18 ffffffffffffffffffff01", "11-byte varint"),
    ] {
        assert!(
            matches!(parse_addons(&hex(bad)), Err(VlessError::BadAddons(_))),
            "{why}"
        );
    }
    assert_eq!(parse_addons(&hex("0a 01 ff")), Err(VlessError::BadFlow));
    // Maximal valid 10-byte varint.
    assert_eq!(parse_addons(&hex("18 ffffffffffffffffff01")).unwrap(), None);
}

#[test]
fn bad_requests() {
    let good = vectors()[0].0.clone();
    // Bad version is reported from the first byte on (fallback trigger).
    assert_eq!(parse_request(&[1]), Err(VlessError::BadVersion(1)));
    assert_eq!(parse_request_user(&[5]), Err(VlessError::BadVersion(5)));
    assert_eq!(parse_request(&[]).unwrap(), Parsed::Incomplete);
    assert_eq!(parse_request_user(&good[..16]).unwrap(), Parsed::Incomplete);
    // TLS ClientHello / HTTP as seen by a fallback-enabled server.
    assert_eq!(
        parse_request(b"\x16\x03\x01\x02\x00"),
        Err(VlessError::BadVersion(0x16))
    );
    assert_eq!(parse_request(b"GET /"), Err(VlessError::BadVersion(b'G')));

    let mut bad = good.clone();
    bad[18] = 0x05;
    assert_eq!(parse_request(&bad), Err(VlessError::UnknownCommand(5)));
    bad[18] = 0x00;
    assert_eq!(parse_request(&bad), Err(VlessError::UnknownCommand(0)));
    let mut bad = good.clone();
    bad[21] = 0x04;
    assert_eq!(parse_request(&bad), Err(VlessError::BadAddressType(4)));

    let domain = |name: &[u8]| {
        let mut wire = vec![0];
        wire.extend_from_slice(&UUID);
        wire.extend_from_slice(&[0, 1, 0, 80, 2, name.len() as u8]);
        wire.extend_from_slice(name);
        parse_request(&wire).map(|p| p.complete().unwrap().0.destination.unwrap())
    };
    assert_eq!(domain(b""), Err(VlessError::BadDomain));
    assert_eq!(domain(b"exa mple.com"), Err(VlessError::BadDomain));
    assert_eq!(domain(b"a\0b"), Err(VlessError::BadDomain));
    assert_eq!(domain(b"[foo]"), Err(VlessError::BadDomain));
    assert_eq!(domain(b"x/y"), Err(VlessError::BadDomain));
    assert_eq!(domain(&[0xc3, 0xa9]), Err(VlessError::BadDomain));
    assert_eq!(
        domain(b"a-b_c.D9"),
        Ok(Address::Domain("a-b_c.D9".into(), 80))
    );
    assert_eq!(
        domain(&[b'a'; 255]),
        Ok(Address::Domain("a".repeat(255), 80))
    );
    // IP-looking domains become IPs; digits that are not an IP stay a domain.
    assert_eq!(domain(b"1.2.3.4"), Ok(ip("1.2.3.4:80").unwrap()));
    assert_eq!(domain(b"[::1]"), Ok(ip("[::1]:80").unwrap()));
    assert_eq!(domain(b"2001:db8::1"), Ok(ip("[2001:db8::1]:80").unwrap()));
    assert_eq!(
        domain(b"1password.com"),
        Ok(Address::Domain("1password.com".into(), 80))
    );
    // An IP that does not start with a digit or `[` is not converted, and `:` is refused.
    assert_eq!(domain(b"::1"), Err(VlessError::BadDomain));

    // IPv6 destination.
    let mut wire = vec![0];
    wire.extend_from_slice(&UUID);
    wire.extend_from_slice(&hex("00 02 0035 03 20010db8000000000000000000000001"));
    let (req, len) = parse_request(&wire).unwrap().complete().unwrap();
    assert_eq!(len, wire.len());
    assert_eq!(req.command, Command::Udp);
    assert_eq!(req.destination, ip("[2001:db8::1]:53"));

    // Reverse carries no address.
    let mut wire = vec![0];
    wire.extend_from_slice(&UUID);
    wire.extend_from_slice(&[0, 4, 0xff]);
    assert_eq!(
        parse_request(&wire).unwrap(),
        Parsed::Complete((request(None, Command::Reverse, None), 19))
    );
}

#[test]
fn encode_refusals_append_nothing() {
    let mut out = Vec::new();
    let cases = [
        (
            request(None, Command::Tcp, None),
            VlessError::MissingDestination,
        ),
        (
            request(None, Command::Mux, ip("1.1.1.1:1")),
            VlessError::UnexpectedDestination,
        ),
        (
            request(
                None,
                Command::Tcp,
                Some(Address::Domain("a".repeat(256), 1)),
            ),
            VlessError::BadDomain,
        ),
        (
            request(None, Command::Tcp, Some(Address::Domain(String::new(), 1))),
            VlessError::BadDomain,
        ),
        (
            request(None, Command::Tcp, Some(Address::Domain("a b".into(), 1))),
            VlessError::BadDomain,
        ),
        (
            request(Some(&"f".repeat(MAX_FLOW_LEN + 1)), Command::Mux, None),
            VlessError::BadFlow,
        ),
        (
            Request {
                version: 1,
                ..request(None, Command::Mux, None)
            },
            VlessError::BadVersion(1),
        ),
    ];
    for (req, err) in cases {
        assert_eq!(encode_request(&req, &mut out), Err(err));
        assert!(out.is_empty());
    }
    // Longest flow: 252 bytes, addons length 255 with a 2-byte varint.
    let long = "f".repeat(MAX_FLOW_LEN);
    encode_request(&request(Some(&long), Command::Mux, None), &mut out).unwrap();
    assert_eq!(out[17], 255);
    assert_eq!(&out[18..21], &[0x0a, 0xfc, 0x01]);
    let (req, len) = parse_request(&out).unwrap().complete().unwrap();
    assert_eq!(req.flow, Some(long));
    assert_eq!(len, out.len());
    // Empty flow is written as no addons.
    out.clear();
    encode_request(&request(Some(""), Command::Mux, None), &mut out).unwrap();
    assert_eq!(out, hex("00 b831381d63244d53ad4f8cda48b30811 00 03"));
}

#[test]
fn fuzz_entry_points_accept_vectors() {
    for (wire, _) in vectors() {
        fuzz_parse_all(&wire);
    }
    fuzz_parse_all(&hex("00077564702d6f6e65000a7564702d74776f2d7878"));
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
    let flow = prop_oneof![
        Just(None),
        Just(Some(FLOW_VISION.to_owned())),
        "\\PC{1,60}".prop_filter_map("fits", |s: String| {
            (s.len() <= MAX_FLOW_LEN).then_some(Some(s))
        }),
    ];
    let command_dest = prop_oneof![
        arb_address().prop_map(|a| (Command::Tcp, Some(a))),
        arb_address().prop_map(|a| (Command::Udp, Some(a))),
        Just((Command::Mux, None)),
        Just((Command::Reverse, None)),
    ];
    (any::<[u8; 16]>(), flow, command_dest).prop_map(|(user, flow, (command, destination))| {
        Request {
            version: VERSION,
            user,
            flow,
            command,
            destination,
        }
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
    fn arbitrary_requests_after_valid_prefix_never_panic(
        tail in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let mut data = vec![0];
        data.extend_from_slice(&UUID);
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
    fn udp_roundtrip(
        packets in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 0..8),
        chunk in 1usize..64,
    ) {
        let mut wire = Vec::new();
        for p in &packets {
            encode_packet(p, &mut wire).unwrap();
        }
        let mut decoder = PacketDecoder::new();
        let mut got = Vec::new();
        for part in wire.chunks(chunk) {
            decoder.feed(part);
            while let Some(p) = decoder.next_packet().unwrap() {
                got.push(p.to_vec());
            }
        }
        prop_assert_eq!(got, packets);
        prop_assert_eq!(decoder.buffered(), 0);
    }
}
