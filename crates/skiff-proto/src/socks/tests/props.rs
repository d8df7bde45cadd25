//! Property tests: no input panics a parser, and encoding then parsing gives back the value.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use proptest::prelude::*;
use skiff_core::Address;

use crate::socks::codec::*;
use crate::socks::udp::{encode_datagram_header, parse_datagram};

/// Domains as a SOCKS client may send them: any UTF-8 of 1..=255 bytes that is not an IP
/// literal (those are mapped to `Address::Ip`, tested separately).
fn domain() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9][a-z0-9.-]{0,62}",
        any::<String>(),
        "[a-zA-Z0-9-]{63}(\\.[a-zA-Z0-9-]{63}){3}", // 255 bytes
    ]
    .prop_filter("1..=255 bytes, not an IP literal", |d| {
        (1..=255).contains(&d.len()) && d.parse::<IpAddr>().is_err()
    })
}

fn address() -> impl Strategy<Value = Address> {
    prop_oneof![
        (any::<[u8; 4]>(), any::<u16>())
            .prop_map(|(ip, port)| Address::Ip(SocketAddr::new(Ipv4Addr::from(ip).into(), port))),
        (any::<[u8; 16]>(), any::<u16>())
            .prop_map(|(ip, port)| Address::Ip(SocketAddr::new(Ipv6Addr::from(ip).into(), port))),
        (domain(), any::<u16>()).prop_map(|(d, port)| Address::Domain(d, port)),
    ]
}

fn command() -> impl Strategy<Value = Command> {
    prop_oneof![
        Just(Command::Connect),
        Just(Command::Bind),
        Just(Command::UdpAssociate)
    ]
}

/// Bytes that start like one of the messages, so the parsers get past their first check.
fn message_like() -> impl Strategy<Value = Vec<u8>> {
    let head = prop_oneof![
        Just(vec![]),
        Just(vec![5]),
        Just(vec![5, 1, 0]),
        Just(vec![5, 1, 0, 3]),
        Just(vec![4, 1]),
        Just(vec![4, 1, 0, 80, 0, 0, 0, 1]),
        Just(vec![1]),
        Just(vec![0, 0, 0]),
        Just(vec![0, 0, 0, 3]),
    ];
    (head, proptest::collection::vec(any::<u8>(), 0..600)).prop_map(|(mut h, tail)| {
        h.extend(tail);
        h
    })
}

/// A valid message of each kind with one byte replaced: deep coverage of the error paths.
fn mutated_valid() -> impl Strategy<Value = Vec<u8>> {
    (command(), address(), any::<usize>(), any::<u8>(), 0u8..3).prop_map(
        |(cmd, addr, at, byte, kind)| {
            let mut msg = Vec::new();
            let _ = match kind {
                0 => encode_request(cmd, &addr, &mut msg),
                1 => encode_udp_header(&addr, &mut msg),
                _ => encode_socks4_request(Command::Connect, &addr, b"id", &mut msg),
            };
            if !msg.is_empty() {
                let at = at % msg.len();
                msg[at] = byte;
            }
            msg
        },
    )
}

proptest! {
    #[test]
    fn socks_parsers_never_panic_on_mutated_messages(data in mutated_valid()) {
        fuzz_parse_all(&data);
        let _ = parse_datagram(&data);
    }

    #[test]
    fn socks_parsers_never_panic(data in message_like()) {
        // fuzz_parse_all also checks the prefix and re-encoding invariants.
        fuzz_parse_all(&data);
        let _ = parse_datagram(&data);
    }

    #[test]
    fn socks_parsers_never_panic_on_any_bytes(data in proptest::collection::vec(any::<u8>(), 0..1024)) {
        fuzz_parse_all(&data);
        let _ = parse_datagram(&data);
    }

    #[test]
    fn socks_request_round_trips(cmd in command(), addr in address(), trailing in proptest::collection::vec(any::<u8>(), 0..8)) {
        let mut msg = Vec::new();
        encode_request(cmd, &addr, &mut msg).unwrap();
        let len = msg.len();
        msg.extend_from_slice(&trailing);
        let expected = Request { command: cmd, address: addr };
        prop_assert_eq!(parse_request(&msg), Ok(Parsed::Complete(expected, len)));
        for cut in 0..len {
            prop_assert_eq!(parse_request(&msg[..cut]), Ok(Parsed::Incomplete));
        }
    }

    #[test]
    fn socks_udp_header_round_trips(addr in address(), payload in proptest::collection::vec(any::<u8>(), 0..64)) {
        let mut datagram = Vec::new();
        encode_datagram_header(&addr, &mut datagram).unwrap();
        datagram.extend_from_slice(&payload);
        let (got, got_payload) = parse_datagram(&datagram).unwrap();
        prop_assert_eq!(got, addr);
        prop_assert_eq!(got_payload, &payload[..]);
    }

    #[test]
    fn socks4_request_round_trips(
        connect in any::<bool>(),
        addr in address(),
        user_id in proptest::collection::vec(1u8..=255, 0..=255),
    ) {
        // SOCKS4a carries a domain NUL-terminated: no NUL inside.
        prop_assume!(addr.domain().is_none_or(|d| !d.contains('\0')));
        let cmd = if connect { Command::Connect } else { Command::Bind };
        let mut msg = Vec::new();
        encode_socks4_request(cmd, &addr, &user_id, &mut msg).unwrap();
        let (req, len) = parse_socks4_request(&msg).unwrap().complete().unwrap();
        prop_assert_eq!(len, msg.len());
        prop_assert_eq!(req.command, cmd);
        prop_assert_eq!(req.address, addr);
        prop_assert_eq!(req.user_id, &user_id[..]);
    }

    #[test]
    fn socks_user_pass_round_trips(
        user in proptest::collection::vec(any::<u8>(), 0..=255),
        pass in proptest::collection::vec(any::<u8>(), 0..=255),
    ) {
        let mut msg = Vec::new();
        encode_user_pass(&user, &pass, &mut msg).unwrap();
        let (up, len) = parse_user_pass(&msg).unwrap().complete().unwrap();
        prop_assert_eq!(len, msg.len());
        prop_assert_eq!(up.username, &user[..]);
        prop_assert_eq!(up.password, &pass[..]);
    }

    #[test]
    fn socks_ip_literal_domains_become_ips(ip in any::<IpAddr>(), port in any::<u16>()) {
        let as_domain = Address::Domain(ip.to_string(), port);
        let mut msg = Vec::new();
        encode_request(Command::Connect, &as_domain, &mut msg).unwrap();
        let (req, _) = parse_request(&msg).unwrap().complete().unwrap();
        prop_assert_eq!(req.address, Address::Ip(SocketAddr::new(ip, port)));
    }
}
