//! Upgrade handshake: server parsing/decisions, early data (spec §1.3), client side, round trips.

use proptest::prelude::*;
use skiff_transport::Parsed;
use skiff_transport::ws::early_data::{self, ClientEarlyData, EarlyDataCarrier};
use skiff_transport::ws::handshake::{
    ClientRequest, HandshakeError, MAX_HEAD_LEN, Rejection, ServerOptions, ServerRequest,
    build_request, parse_request, parse_response,
};

const RFC_REQUEST: &str = "GET /chat HTTP/1.1\r\nHost: server.example.com\r\nUpgrade: websocket\r\n\
Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nOrigin: http://example.com\r\n\
Sec-WebSocket-Protocol: chat, superchat\r\nSec-WebSocket-Version: 13\r\n\r\n";

fn request_with(path: &str, extra: &str) -> String {
    format!(
        "GET {path} HTTP/1.1\r\nHost: example.com\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\n\
Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n"
    )
}

fn complete<T>(p: Result<Parsed<T>, HandshakeError>) -> (T, usize) {
    p.unwrap().complete().expect("complete")
}

fn upgrade(req: &str, opts: &ServerOptions) -> skiff_transport::ws::handshake::Upgrade {
    match complete(parse_request(req.as_bytes(), opts)).0 {
        ServerRequest::Upgrade(u) => u,
        other => panic!("not an upgrade: {other:?}"),
    }
}

fn rejection(req: &str, opts: &ServerOptions) -> Rejection {
    match complete(parse_request(req.as_bytes(), opts)).0 {
        ServerRequest::NotWebSocket { reason, .. } => reason,
        ServerRequest::Upgrade(u) => panic!("accepted: {u:?}"),
    }
}

#[test]
fn rfc6455_request_and_response() {
    let opts = ServerOptions {
        path: "/chat".into(),
        host: Some("server.example.com".into()),
        early_data: None,
    };
    let u = upgrade(RFC_REQUEST, &opts);
    assert_eq!(u.request.path, "/chat");
    assert_eq!(u.request.host(), Some("server.example.com"));
    assert_eq!(u.request.header("origin"), Some(&b"http://example.com"[..]));
    assert_eq!(u.request.headers.len(), 7);
    assert!(u.early_data.is_empty());
    assert_eq!(u.echo_protocol, None);
    let resp = String::from_utf8(u.response()).unwrap();
    assert_eq!(
        resp,
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n"
    );
}

#[test]
fn spec_live_early_data_vector() {
    let value = "ALgxOB1jJE1TrU-M2kizCBEAAU7oAX8AAAFlYXJseS1kYXRhIQ";
    let req = request_with("/ws", &format!("Sec-WebSocket-Protocol: {value}\r\n"));
    let u = upgrade(&req, &ServerOptions::xray("/ws"));
    assert!(u.early_data.ends_with(b"early-data!"));
    assert_eq!(u.early_data.len(), 26 + 11); // VLESS header to an IPv4 target + payload
    assert_eq!(u.echo_protocol.as_deref(), Some(value));
    let resp = String::from_utf8(u.response()).unwrap();
    assert!(resp.contains(&format!("\r\nSec-WebSocket-Protocol: {value}\r\n")));
}

#[test]
fn early_data_std_alphabet_and_padding_are_tolerated() {
    let req = request_with("/ws", "Sec-WebSocket-Protocol: +/+/Zg==\r\n");
    let u = upgrade(&req, &ServerOptions::xray("/ws"));
    assert_eq!(u.early_data, [0xfb, 0xff, 0xbf, b'f']);
    // The value is echoed as received.
    assert_eq!(u.echo_protocol.as_deref(), Some("+/+/Zg=="));
}

#[test]
fn undecodable_protocol_is_ignored_not_echoed() {
    let req = request_with("/ws", "Sec-WebSocket-Protocol: chat, superchat\r\n");
    let u = upgrade(&req, &ServerOptions::xray("/ws"));
    assert!(u.early_data.is_empty());
    assert_eq!(u.echo_protocol, None);
    assert!(
        !String::from_utf8(u.response())
            .unwrap()
            .contains("Sec-WebSocket-Protocol")
    );
}

#[test]
fn v2fly_custom_header_is_decoded_but_not_echoed() {
    let opts = ServerOptions {
        path: "/ws".into(),
        host: None,
        early_data: Some(EarlyDataCarrier::Header("X-Early".into())),
    };
    let req = request_with("/ws", "x-early: aGVsbG8\r\n");
    let u = upgrade(&req, &opts);
    assert_eq!(u.early_data, b"hello");
    assert_eq!(u.echo_protocol, None);
}

#[test]
fn v2fly_path_suffix_early_data() {
    let opts = ServerOptions {
        path: "/ws".into(),
        host: None,
        early_data: Some(EarlyDataCarrier::PathSuffix),
    };
    let u = upgrade(&request_with("/wsaGVsbG8", ""), &opts);
    assert_eq!(u.early_data, b"hello");
    let u = upgrade(&request_with("/ws", ""), &opts);
    assert!(u.early_data.is_empty());
    assert_eq!(
        rejection(&request_with("/ws!!", ""), &opts),
        Rejection::PathMismatch
    );
    assert_eq!(
        rejection(&request_with("/x", ""), &opts),
        Rejection::PathMismatch
    );
}

#[test]
fn path_is_exact_and_query_is_ignored() {
    assert_eq!(ServerOptions::xray("/ws?ed=2048").path, "/ws");
    let opts = ServerOptions::xray("ws");
    assert_eq!(opts.path, "/ws");
    let u = upgrade(&request_with("/ws?ed=2048&x=1", ""), &opts);
    assert_eq!(u.request.query.as_deref(), Some("ed=2048&x=1"));
    assert_eq!(
        rejection(&request_with("/ws/", ""), &opts),
        Rejection::PathMismatch
    );
    assert_eq!(
        rejection(&request_with("/w", ""), &opts),
        Rejection::PathMismatch
    );
    assert_eq!(Rejection::PathMismatch.status(), 404);
}

#[test]
fn host_check() {
    let mut opts = ServerOptions::xray("/ws");
    opts.host = Some("EXAMPLE.com".into());
    upgrade(&request_with("/ws", ""), &opts);
    let with_port = request_with("/ws", "").replace("Host: example.com", "Host: example.com:8443");
    upgrade(&with_port, &opts);
    let other = request_with("/ws", "").replace("Host: example.com", "Host: evil.com");
    assert_eq!(rejection(&other, &opts), Rejection::HostMismatch);
}

#[test]
fn non_websocket_requests_are_a_distinct_result() {
    let opts = ServerOptions::xray("/ws");
    let plain = "GET /ws HTTP/1.1\r\nHost: example.com\r\n\r\n";
    assert_eq!(rejection(plain, &opts), Rejection::NoUpgradeHeader);
    assert!(Rejection::NoUpgradeHeader.is_plain_http());
    let post = request_with("/ws", "").replacen("GET", "POST", 1);
    assert_eq!(rejection(&post, &opts), Rejection::NotGet);
    let no_conn = request_with("/ws", "").replace("keep-alive, Upgrade", "keep-alive");
    assert_eq!(rejection(&no_conn, &opts), Rejection::NoConnectionUpgrade);
    let v12 = request_with("/ws", "").replace("Version: 13", "Version: 12");
    assert_eq!(rejection(&v12, &opts), Rejection::UnsupportedVersion);
    let bad_key = request_with("/ws", "").replace("dGhlIHNhbXBsZSBub25jZQ==", "c2hvcnQ=");
    assert_eq!(rejection(&bad_key, &opts), Rejection::BadKey);
    let two_keys = request_with("/ws", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n");
    assert_eq!(rejection(&two_keys, &opts), Rejection::BadKey);
    let http10 = request_with("/ws", "").replace("HTTP/1.1", "HTTP/1.0");
    assert_eq!(rejection(&http10, &opts), Rejection::NotHttp11);
    // The whole request is available for the fallback.
    match complete(parse_request(plain.as_bytes(), &opts)).0 {
        ServerRequest::NotWebSocket { request, .. } => {
            assert_eq!(request.method, "GET");
            assert_eq!(request.host(), Some("example.com"));
        }
        ServerRequest::Upgrade(_) => unreachable!(),
    }
}

#[test]
fn garbage_and_limits() {
    let opts = ServerOptions::xray("/ws");
    assert!(matches!(
        parse_request(b"\x16\x03\x01\x00\x10garbage\r\n\r\n", &opts),
        Err(HandshakeError::Malformed(_))
    ));
    assert_eq!(parse_request(b"GET /ws HT", &opts), Ok(Parsed::Incomplete));
    let mut huge = b"GET /ws HTTP/1.1\r\nX: ".to_vec();
    huge.resize(MAX_HEAD_LEN + 10, b'a');
    assert_eq!(parse_request(&huge, &opts), Err(HandshakeError::TooLarge));
    let many: String = (0..65).map(|i| format!("X-{i}: v\r\n")).collect();
    let req = request_with("/ws", &many);
    assert_eq!(
        parse_request(req.as_bytes(), &opts),
        Err(HandshakeError::TooManyHeaders)
    );
}

#[test]
fn pipelined_frames_are_not_consumed() {
    let mut bytes = request_with("/ws", "").into_bytes();
    let head = bytes.len();
    bytes.extend_from_slice(&[0x82, 0x80, 1, 2, 3, 4]);
    let (_, n) = complete(parse_request(&bytes, &ServerOptions::xray("/ws")));
    assert_eq!(n, head);
    // Every strict prefix of the head is incomplete.
    for cut in 0..head {
        assert_eq!(
            parse_request(&bytes[..cut], &ServerOptions::xray("/ws")),
            Ok(Parsed::Incomplete),
            "cut {cut}"
        );
    }
}

fn client_req<'a>(
    headers: &'a [(&'a str, &'a str)],
    early: Option<(&'a EarlyDataCarrier, &'a [u8])>,
) -> ClientRequest<'a> {
    ClientRequest {
        path: "/chat",
        host: "server.example.com",
        headers,
        key: *b"the sample nonce",
        early_data: early,
    }
}

#[test]
fn client_request_bytes() {
    let mut out = Vec::new();
    let accept = build_request(
        &client_req(&[("User-Agent", "x"), ("Host", "ignored")], None),
        &mut out,
    )
    .unwrap();
    assert_eq!(accept, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "GET /chat HTTP/1.1\r\nHost: server.example.com\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nUser-Agent: x\r\n\r\n"
    );
}

#[test]
fn client_early_data_header_spec_vector() {
    let vless = [
        0x00, 0xb8, 0x31, 0x38, 0x1d, 0x63, 0x24, 0x4d, 0x53, 0xad, 0x4f, 0x8c, 0xda, 0x48, 0xb3,
        0x08, 0x11, 0x00, 0x01, 0x01, 0xbb, 0x02, 0x0b, b'e', b'x', b'a', b'm', b'p', b'l', b'e',
        b'.', b'c', b'o', b'm',
    ];
    let (path, ed) = early_data::split_xray_ed("/ws?ed=2048");
    let policy = ClientEarlyData::xray(ed.unwrap());
    let (early, rest) = policy.split(&vless);
    assert!(rest.is_empty());
    let mut req = client_req(&[], Some((&policy.carrier, early)));
    req.path = &path;
    let mut out = Vec::new();
    build_request(&req, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.starts_with("GET /ws HTTP/1.1\r\n"));
    assert!(text.contains(
        "\r\nSec-WebSocket-Protocol: ALgxOB1jJE1TrU-M2kizCBEAAQG7AgtleGFtcGxlLmNvbQ\r\n"
    ));
}

#[test]
fn client_path_suffix_early_data() {
    let carrier = EarlyDataCarrier::PathSuffix;
    let mut out = Vec::new();
    build_request(&client_req(&[], Some((&carrier, b"hello"))), &mut out).unwrap();
    assert!(out.starts_with(b"GET /chataGVsbG8 HTTP/1.1\r\n"));
}

#[test]
fn client_rejects_injection() {
    let mut out = Vec::new();
    let mut r = client_req(&[("X", "a\r\nEvil: 1")], None);
    assert!(build_request(&r, &mut out).is_err());
    r.headers = &[];
    r.host = "a\r\nb";
    assert!(build_request(&r, &mut out).is_err());
    r.host = "h";
    r.path = "/a b";
    assert!(build_request(&r, &mut out).is_err());
}

#[test]
fn client_validates_response() {
    let accept = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";
    let ok = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: WebSocket\r\nConnection: upgrade\r\n\
Sec-WebSocket-Accept: {accept}\r\nSec-WebSocket-Protocol: AAEC\r\n\r\n\x02\x00"
    );
    let (resp, n) = complete(parse_response(ok.as_bytes(), accept));
    assert_eq!(n, ok.len() - 2);
    assert_eq!(resp.protocol.as_deref(), Some("AAEC"));
    assert_eq!(
        parse_response(ok.as_bytes(), "wrong"),
        Err(HandshakeError::BadAccept)
    );
    assert_eq!(
        parse_response(b"HTTP/1.1 404 Not Found\r\n\r\n", accept),
        Err(HandshakeError::BadStatus(404))
    );
    assert_eq!(
        parse_response(b"HTTP/1.1 101 OK\r\nConnection: upgrade\r\n\r\n", accept),
        Err(HandshakeError::MissingUpgrade)
    );
    assert_eq!(
        parse_response(&ok.as_bytes()[..30], accept),
        Ok(Parsed::Incomplete)
    );
}

fn header_value() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 ;,./=-]{0,20}".prop_map(|s| s.trim().to_owned())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn request_round_trip(
        path in "/[a-zA-Z0-9/_.-]{0,20}",
        host in "[a-z0-9.-]{1,20}",
        key in any::<[u8; 16]>(),
        early in proptest::collection::vec(any::<u8>(), 0..200),
        extra in proptest::collection::vec(("X-[A-Za-z]{1,8}", header_value()), 0..5),
    ) {
        let carrier = EarlyDataCarrier::xray();
        let headers: Vec<(&str, &str)> = extra.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        let req = ClientRequest {
            path: &path,
            host: &host,
            headers: &headers,
            key,
            early_data: Some((&carrier, &early)),
        };
        let mut wire = Vec::new();
        let accept = build_request(&req, &mut wire).unwrap();
        let mut opts = ServerOptions::xray(&path);
        opts.host = Some(host.clone());
        let (parsed, n) = complete(parse_request(&wire, &opts));
        prop_assert_eq!(n, wire.len());
        let ServerRequest::Upgrade(u) = parsed else { panic!("rejected: {parsed:?}") };
        prop_assert_eq!(&u.request.path, &path);
        prop_assert_eq!(u.request.host(), Some(host.as_str()));
        prop_assert_eq!(&u.early_data, &early);
        prop_assert_eq!(u.echo_protocol.is_some(), !early.is_empty());
        for (name, value) in &extra {
            prop_assert!(u.request.headers.iter().any(|h| &h.name == name && h.value == value.as_bytes()));
        }
        let resp = u.response();
        let (r, m) = complete(parse_response(&resp, &accept));
        prop_assert_eq!(m, resp.len());
        prop_assert_eq!(r.protocol, u.echo_protocol);
    }

    #[test]
    fn path_suffix_round_trip(early in proptest::collection::vec(any::<u8>(), 0..100), max in 0usize..120) {
        let policy = ClientEarlyData::v2fly(max, "");
        let (now, _later) = policy.split(&early);
        let req = ClientRequest { path: "/v2", host: "h", headers: &[], key: [7; 16], early_data: Some((&policy.carrier, now)) };
        let mut wire = Vec::new();
        build_request(&req, &mut wire).unwrap();
        let opts = ServerOptions { path: "/v2".into(), host: None, early_data: Some(EarlyDataCarrier::PathSuffix) };
        let ServerRequest::Upgrade(u) = complete(parse_request(&wire, &opts)).0 else { panic!() };
        prop_assert_eq!(&u.early_data[..], now);
    }

    #[test]
    fn http_like_bytes_never_panic(
        parts in proptest::collection::vec(prop_oneof![
            Just("GET /ws HTTP/1.1\r\n".to_string()),
            Just("HTTP/1.1 101 x\r\n".to_string()),
            Just("Upgrade: websocket\r\n".to_string()),
            Just("Connection: upgrade\r\n".to_string()),
            Just("Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n".to_string()),
            Just("Sec-WebSocket-Version: 13\r\n".to_string()),
            Just("Sec-WebSocket-Protocol: ".to_string()),
            Just("\r\n".to_string()),
            "[ -~]{0,12}",
        ], 0..12),
    ) {
        let s: String = parts.concat();
        skiff_transport::fuzz::fuzz_ws(s.as_bytes());
    }
}
