//! Byte-exact tests of every message, built by hand from RFC 1928, RFC 1929 and the SOCKS4(a)
//! description, plus "every split point is incomplete" for each valid message.

use std::io;
use std::net::SocketAddr;

use skiff_core::Address;

use crate::socks::codec::*;

fn ip(s: &str) -> Address {
    Address::Ip(s.parse().unwrap())
}

/// Every strict prefix of `msg` parses as Incomplete; the whole message is complete with
/// exactly its length, also with trailing bytes after it.
fn assert_incremental(msg: &[u8], parse: impl Fn(&[u8]) -> Result<Option<usize>, SocksError>) {
    for cut in 0..msg.len() {
        assert_eq!(
            parse(&msg[..cut]),
            Ok(None),
            "prefix of {cut} bytes of {msg:02x?}"
        );
    }
    assert_eq!(parse(msg), Ok(Some(msg.len())));
    let mut longer = msg.to_vec();
    longer.extend_from_slice(b"early payload");
    assert_eq!(parse(&longer), Ok(Some(msg.len())));
}

fn len<T>(r: Result<Parsed<T>, SocksError>) -> Result<Option<usize>, SocksError> {
    r.map(|p| p.complete().map(|(_, n)| n))
}

#[test]
fn socks_greeting() {
    let msg = [0x05, 0x02, 0x00, 0x02];
    let (g, n) = parse_greeting(&msg).unwrap().complete().unwrap();
    assert_eq!(n, 4);
    assert_eq!(g.methods, &[0x00, 0x02]);
    assert!(g.offers(METHOD_USER_PASS) && !g.offers(0x01));
    assert_incremental(&msg, |b| len(parse_greeting(b)));

    // NMETHODS = 0 is parsed (and later refused by negotiation).
    let (g, n) = parse_greeting(&[0x05, 0x00]).unwrap().complete().unwrap();
    assert_eq!((g.methods.len(), n), (0, 2));

    let mut out = Vec::new();
    encode_greeting(&[0x00, 0x02], &mut out).unwrap();
    assert_eq!(out, msg);
}

#[test]
fn socks_greeting_bad_version_is_refused_at_once() {
    assert_eq!(parse_greeting(&[0x04]), Err(SocksError::BadVersion(4)));
    assert_eq!(
        parse_greeting(b"GET / HTTP/1.1"),
        Err(SocksError::BadVersion(b'G'))
    );
    assert_eq!(parse_greeting(&[]), Ok(Parsed::Incomplete));
}

#[test]
fn socks_method_selection_and_auth_status() {
    assert_eq!(encode_method_selection(METHOD_NO_AUTH), [0x05, 0x00]);
    assert_eq!(encode_method_selection(METHOD_USER_PASS), [0x05, 0x02]);
    assert_eq!(encode_method_selection(METHOD_NO_ACCEPTABLE), [0x05, 0xFF]);
    assert_eq!(encode_auth_status(true), [0x01, 0x00]);
    assert_eq!(encode_auth_status(false), [0x01, 0x01]);
}

#[test]
fn socks_user_pass() {
    let msg = [0x01, 0x04, b'u', b's', b'e', b'r', 0x03, b'p', b'w', b'd'];
    let (up, n) = parse_user_pass(&msg).unwrap().complete().unwrap();
    assert_eq!(
        (up.username, up.password, n),
        (&b"user"[..], &b"pwd"[..], 10)
    );
    assert_incremental(&msg, |b| len(parse_user_pass(b)));

    let mut out = Vec::new();
    encode_user_pass(b"user", b"pwd", &mut out).unwrap();
    assert_eq!(out, msg);

    // Empty fields parse; wrong sub-negotiation version does not.
    let (up, _) = parse_user_pass(&[0x01, 0x00, 0x00])
        .unwrap()
        .complete()
        .unwrap();
    assert!(up.username.is_empty() && up.password.is_empty());
    assert_eq!(
        parse_user_pass(&[0x05, 0x01]),
        Err(SocksError::BadAuthVersion(5))
    );

    // Longest legal message: 255 + 255.
    let mut long = Vec::new();
    encode_user_pass(&[b'u'; 255], &[b'p'; 255], &mut long).unwrap();
    assert_eq!(long.len(), 513);
    assert_eq!(len(parse_user_pass(&long)), Ok(Some(513)));
    assert!(encode_user_pass(&[b'u'; 256], b"", &mut Vec::new()).is_err());
}

#[test]
fn socks_request_ipv4() {
    // CONNECT 192.168.1.1:80
    let msg = [0x05, 0x01, 0x00, 0x01, 192, 168, 1, 1, 0x00, 0x50];
    let (req, n) = parse_request(&msg).unwrap().complete().unwrap();
    assert_eq!(n, msg.len());
    assert_eq!(
        req,
        Request {
            command: Command::Connect,
            address: ip("192.168.1.1:80")
        }
    );
    assert_incremental(&msg, |b| len(parse_request(b)));
    let mut out = Vec::new();
    encode_request(Command::Connect, &req.address, &mut out).unwrap();
    assert_eq!(out, msg);
}

#[test]
fn socks_request_ipv6() {
    // UDP ASSOCIATE [2001:db8::1]:443
    let mut msg = vec![0x05, 0x03, 0x00, 0x04];
    msg.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    msg.extend_from_slice(&[0x01, 0xbb]);
    let (req, _) = parse_request(&msg).unwrap().complete().unwrap();
    assert_eq!(req.command, Command::UdpAssociate);
    assert_eq!(req.address, ip("[2001:db8::1]:443"));
    assert_incremental(&msg, |b| len(parse_request(b)));
    let mut out = Vec::new();
    encode_request(req.command, &req.address, &mut out).unwrap();
    assert_eq!(out, msg);
}

#[test]
fn socks_request_domain() {
    // BIND example.com:443
    let mut msg = vec![0x05, 0x02, 0x00, 0x03, 11];
    msg.extend_from_slice(b"example.com");
    msg.extend_from_slice(&[0x01, 0xbb]);
    let (req, _) = parse_request(&msg).unwrap().complete().unwrap();
    assert_eq!(req.command, Command::Bind);
    assert_eq!(req.address, Address::Domain("example.com".into(), 443));
    assert_incremental(&msg, |b| len(parse_request(b)));
    let mut out = Vec::new();
    encode_request(req.command, &req.address, &mut out).unwrap();
    assert_eq!(out, msg);
}

#[test]
fn socks_request_domain_that_is_an_ip_literal_becomes_an_ip() {
    let mut msg = vec![0x05, 0x01, 0x00, 0x03, 7];
    msg.extend_from_slice(b"1.2.3.4");
    msg.extend_from_slice(&[0, 80]);
    let (req, _) = parse_request(&msg).unwrap().complete().unwrap();
    assert_eq!(req.address, ip("1.2.3.4:80"));

    let mut msg = vec![0x05, 0x01, 0x00, 0x03, 3];
    msg.extend_from_slice(b"::1");
    msg.extend_from_slice(&[0, 80]);
    let (req, _) = parse_request(&msg).unwrap().complete().unwrap();
    assert_eq!(req.address, ip("[::1]:80"));
}

#[test]
fn socks_request_errors() {
    assert_eq!(parse_request(&[0x04, 0x01]), Err(SocksError::BadVersion(4)));
    assert_eq!(
        parse_request(&[0x05, 0x09]),
        Err(SocksError::UnsupportedCommand(9))
    );
    assert_eq!(
        parse_request(&[0x05, 0x01, 0x00, 0x02]),
        Err(SocksError::BadAddressType(2))
    );
    assert_eq!(
        parse_request(&[0x05, 0x01, 0x00, 0x03, 0x00]),
        Err(SocksError::EmptyDomain)
    );
    assert_eq!(
        parse_request(&[0x05, 0x01, 0x00, 0x03, 0x02, 0xff, 0xfe]),
        Err(SocksError::DomainNotUtf8)
    );
    // Errors are reported as early as the offending byte, before the message is complete.
    assert_eq!(parse_request(&[0x05, 0x01, 0x00]), Ok(Parsed::Incomplete));
}

#[test]
fn socks_request_encoding_refuses_bad_domains() {
    let mut out = Vec::new();
    let long = Address::Domain("a".repeat(256), 1);
    assert_eq!(
        encode_request(Command::Connect, &long, &mut out),
        Err(SocksError::DomainTooLong)
    );
    let empty = Address::Domain(String::new(), 1);
    assert_eq!(
        encode_request(Command::Connect, &empty, &mut out),
        Err(SocksError::EmptyDomain)
    );
    assert!(out.is_empty(), "nothing appended on error");
    let max = Address::Domain("a".repeat(255), 1);
    encode_request(Command::Connect, &max, &mut out).unwrap();
    assert_eq!(out.len(), 4 + 1 + 255 + 2);
    assert_eq!(
        parse_request(&out).unwrap().complete().unwrap().0.address,
        max
    );
}

#[test]
fn socks_reply() {
    let mut out = Vec::new();
    encode_reply(
        ReplyCode::Succeeded,
        "10.0.0.1:1080".parse().unwrap(),
        &mut out,
    );
    assert_eq!(out, [0x05, 0x00, 0x00, 0x01, 10, 0, 0, 1, 0x04, 0x38]);

    out.clear();
    encode_reply(
        ReplyCode::ConnectionRefused,
        "0.0.0.0:0".parse().unwrap(),
        &mut out,
    );
    assert_eq!(out, [0x05, 0x05, 0x00, 0x01, 0, 0, 0, 0, 0, 0]);

    out.clear();
    encode_reply(ReplyCode::Succeeded, "[::1]:53".parse().unwrap(), &mut out);
    let mut want = vec![0x05, 0x00, 0x00, 0x04];
    want.extend_from_slice(&[0; 15]);
    want.extend_from_slice(&[1, 0, 53]);
    assert_eq!(out, want);
}

#[test]
fn socks_reply_codes_for_io_errors() {
    let code = |kind| ReplyCode::for_io_error(&io::Error::from(kind)) as u8;
    assert_eq!(code(io::ErrorKind::ConnectionRefused), 0x05);
    assert_eq!(code(io::ErrorKind::HostUnreachable), 0x04);
    assert_eq!(code(io::ErrorKind::NetworkUnreachable), 0x03);
    assert_eq!(code(io::ErrorKind::TimedOut), 0x04);
    assert_eq!(code(io::ErrorKind::PermissionDenied), 0x02);
    assert_eq!(code(io::ErrorKind::Other), 0x01);
    assert_eq!(code(io::ErrorKind::ConnectionReset), 0x01);
    // From the OS, as a real connect reports it.
    let refused = io::Error::from_raw_os_error(111); // ECONNREFUSED on Linux
    if cfg!(target_os = "linux") {
        assert_eq!(
            ReplyCode::for_io_error(&refused),
            ReplyCode::ConnectionRefused
        );
    }
}

#[test]
fn socks4_request() {
    // The SOCKS4 description's example: CONNECT 66.102.7.99:80 as user "Fred".
    let msg = [
        0x04, 0x01, 0x00, 0x50, 66, 102, 7, 99, b'F', b'r', b'e', b'd', 0x00,
    ];
    let (req, n) = parse_socks4_request(&msg).unwrap().complete().unwrap();
    assert_eq!(n, msg.len());
    assert_eq!(req.command, Command::Connect);
    assert_eq!(req.address, ip("66.102.7.99:80"));
    assert_eq!(req.user_id, b"Fred");
    assert_incremental(&msg, |b| len(parse_socks4_request(b)));
    let mut out = Vec::new();
    encode_socks4_request(req.command, &req.address, req.user_id, &mut out).unwrap();
    assert_eq!(out, msg);

    // Empty user id.
    let msg = [0x04, 0x02, 0x1f, 0x90, 127, 0, 0, 1, 0x00];
    let (req, _) = parse_socks4_request(&msg).unwrap().complete().unwrap();
    assert_eq!((req.command, req.user_id), (Command::Bind, &b""[..]));
    assert_eq!(req.address, ip("127.0.0.1:8080"));
}

#[test]
fn socks4a_request() {
    let mut msg = vec![
        0x04, 0x01, 0x00, 0x50, 0, 0, 0, 1, b'F', b'r', b'e', b'd', 0x00,
    ];
    msg.extend_from_slice(b"example.com\0");
    let (req, n) = parse_socks4_request(&msg).unwrap().complete().unwrap();
    assert_eq!(n, msg.len());
    assert_eq!(req.address, Address::Domain("example.com".into(), 80));
    assert_eq!(req.user_id, b"Fred");
    assert_incremental(&msg, |b| len(parse_socks4_request(b)));
    let mut out = Vec::new();
    encode_socks4_request(req.command, &req.address, req.user_id, &mut out).unwrap();
    assert_eq!(out, msg);

    // Any 0.0.0.x with x != 0 means 4a; 0.0.0.0 does not.
    let msg = [0x04, 0x01, 0x00, 0x50, 0, 0, 0, 0xff, 0x00, b'a', 0x00];
    let (req, _) = parse_socks4_request(&msg).unwrap().complete().unwrap();
    assert_eq!(req.address, Address::Domain("a".into(), 80));
    let msg = [0x04, 0x01, 0x00, 0x50, 0, 0, 0, 0, 0x00];
    let (req, _) = parse_socks4_request(&msg).unwrap().complete().unwrap();
    assert_eq!(req.address, ip("0.0.0.0:80"));
}

#[test]
fn socks4_errors() {
    assert_eq!(
        parse_socks4_request(&[0x05]),
        Err(SocksError::BadVersion(5))
    );
    assert_eq!(
        parse_socks4_request(&[0x04, 0x03]),
        Err(SocksError::UnsupportedCommand(3))
    );
    // An empty 4a domain, or a non-UTF-8 one.
    let msg = [0x04, 0x01, 0x00, 0x50, 0, 0, 0, 1, 0x00, 0x00];
    assert_eq!(parse_socks4_request(&msg), Err(SocksError::EmptyDomain));
    let msg = [0x04, 0x01, 0x00, 0x50, 0, 0, 0, 1, 0x00, 0xff, 0x00];
    assert_eq!(parse_socks4_request(&msg), Err(SocksError::DomainNotUtf8));
}

#[test]
fn socks4_fields_are_capped() {
    let mut msg = vec![0x04, 0x01, 0x00, 0x50, 1, 2, 3, 4];
    msg.extend_from_slice(&[b'x'; 255]);
    assert_eq!(parse_socks4_request(&msg), Ok(Parsed::Incomplete));
    msg.push(b'x');
    assert_eq!(parse_socks4_request(&msg), Err(SocksError::FieldTooLong));

    // Both fields at the cap: 520 bytes, the largest message we accept.
    let mut msg = vec![0x04, 0x01, 0x00, 0x50, 0, 0, 0, 1];
    msg.extend_from_slice(&[b'u'; 255]);
    msg.push(0);
    msg.extend_from_slice(&[b'd'; 255]);
    assert_eq!(parse_socks4_request(&msg), Ok(Parsed::Incomplete));
    let mut too_long = msg.clone();
    too_long.push(b'd');
    assert_eq!(
        parse_socks4_request(&too_long),
        Err(SocksError::FieldTooLong)
    );
    msg.push(0);
    assert_eq!(len(parse_socks4_request(&msg)), Ok(Some(520)));
}

#[test]
fn socks4_encoding_of_addresses_socks4_cannot_carry() {
    let mut out = Vec::new();
    let v6 = ip("[::1]:80");
    encode_socks4_request(Command::Connect, &v6, b"", &mut out).unwrap();
    assert_eq!(out, b"\x04\x01\x00\x50\x00\x00\x00\x01\x00::1\x00");
    assert_eq!(
        parse_socks4_request(&out)
            .unwrap()
            .complete()
            .unwrap()
            .0
            .address,
        v6
    );

    // 0.0.0.7 on the wire would mean "4a": it goes as text.
    out.clear();
    let odd = ip("0.0.0.7:80");
    encode_socks4_request(Command::Connect, &odd, b"", &mut out).unwrap();
    assert_eq!(
        parse_socks4_request(&out)
            .unwrap()
            .complete()
            .unwrap()
            .0
            .address,
        odd
    );

    let udp = encode_socks4_request(Command::UdpAssociate, &odd, b"", &mut Vec::new());
    assert!(udp.is_err());
    let nul = encode_socks4_request(Command::Connect, &odd, b"a\0b", &mut Vec::new());
    assert!(nul.is_err());
}

#[test]
fn socks4_reply() {
    let bound: SocketAddr = "10.1.2.3:4660".parse().unwrap();
    assert_eq!(
        encode_socks4_reply(true, Some(bound)),
        [0x00, 0x5A, 0x12, 0x34, 10, 1, 2, 3]
    );
    assert_eq!(
        encode_socks4_reply(false, None),
        [0x00, 0x5B, 0, 0, 0, 0, 0, 0]
    );
    let v6: SocketAddr = "[::1]:1".parse().unwrap();
    assert_eq!(
        encode_socks4_reply(true, Some(v6)),
        [0x00, 0x5A, 0, 0, 0, 0, 0, 0]
    );
}

#[test]
fn socks_udp_header() {
    // From 1.2.3.4:53, payload "abc".
    let msg = [
        0x00, 0x00, 0x00, 0x01, 1, 2, 3, 4, 0x00, 0x35, b'a', b'b', b'c',
    ];
    assert_eq!(
        parse_udp_header(&msg),
        Ok(Parsed::Complete(ip("1.2.3.4:53"), 10))
    );
    assert_incremental(&msg[..10], |b| len(parse_udp_header(b)));
    let mut out = Vec::new();
    encode_udp_header(&ip("1.2.3.4:53"), &mut out).unwrap();
    assert_eq!(out, msg[..10]);

    let mut msg = vec![0x00, 0x00, 0x00, 0x03, 3];
    msg.extend_from_slice(b"a.b");
    msg.extend_from_slice(&[0x00, 0x35]);
    assert_eq!(
        parse_udp_header(&msg),
        Ok(Parsed::Complete(
            Address::Domain("a.b".into(), 53),
            msg.len()
        ))
    );
    assert_incremental(&msg, |b| len(parse_udp_header(b)));

    assert_eq!(parse_udp_header(&[0, 0, 2]), Err(SocksError::Fragmented(2)));
    assert_eq!(
        parse_udp_header(&[0, 0, 0, 9]),
        Err(SocksError::BadAddressType(9))
    );
}

#[test]
fn socks_errors_display() {
    assert_eq!(
        SocksError::BadVersion(4).to_string(),
        "unsupported SOCKS version 0x04"
    );
    assert_eq!(
        SocksError::AuthFailed.to_string(),
        "invalid username or password"
    );
    assert_eq!(
        SocksError::UnsupportedCommand(2).to_string(),
        "unsupported SOCKS command 0x02"
    );
    assert!(SocksError::Fragmented(1).to_string().contains("FRAG=1"));
}

#[test]
fn socks_fuzz_entry_accepts_valid_messages() {
    let mut msg = vec![0x04, 0x01, 0x00, 0x50, 0, 0, 0, 1, b'F', 0x00];
    msg.extend_from_slice(b"1.2.3.4\0");
    fuzz_parse_all(&msg);
    fuzz_parse_all(&[0x05, 0x01, 0x00, 0x03, 3, b':', b':', b'1', 0, 80]);
    fuzz_parse_all(&[0x01, 0x00, 0x00]);
    fuzz_parse_all(&[0, 0, 0, 1, 1, 2, 3, 4, 0, 1]);
    fuzz_parse_all(&[]);
}
