//! Fuzz entry points. Each must return normally for every input; a panic is a bug.

use crate::tls::peek_client_hello;

/// REALITY's server: ClientHello reassembly, parsing and authentication; the target's
/// ServerHello.
pub use crate::reality::server::fuzz_reality;
use crate::ws::early_data::{self, EarlyDataCarrier};
use crate::ws::handshake::{ServerOptions, parse_request, parse_response};
use crate::ws::{FrameDecoder, Role, parse_header};

/// Drives the handshake parsers (server: Xray and v2fly path-suffix options; client response)
/// and the frame decoder on both sides, whole and split at a data-chosen point.
pub fn fuzz_ws(data: &[u8]) {
    let mut xray = ServerOptions::xray("/ws");
    xray.host = Some("example.com".into());
    let _ = parse_request(data, &xray);
    let suffix = ServerOptions {
        path: "/p".into(),
        host: None,
        early_data: Some(EarlyDataCarrier::PathSuffix),
    };
    let _ = parse_request(data, &suffix);
    let _ = parse_response(data, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    let _ = early_data::decode_lenient(data);
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = early_data::split_xray_ed(s);
    }
    let _ = parse_header(data, 1 << 20);

    let split = data.first().map_or(0, |&b| usize::from(b)).min(data.len());
    for role in [Role::Server, Role::Client] {
        for cap in [125, 1 << 20] {
            let mut dec = FrameDecoder::new(role, cap);
            let mut buf = data.to_vec();
            let (a, b) = buf.split_at_mut(split);
            if drain(&mut dec, a) {
                drain(&mut dec, b);
            }
        }
    }
}

/// Feeds `input` completely; false on a protocol error.
fn drain(dec: &mut FrameDecoder, input: &mut [u8]) -> bool {
    let mut pos = 0;
    while pos < input.len() {
        match dec.decode(&mut input[pos..]) {
            Ok(d) => {
                assert!(d.consumed > 0, "decoder made no progress");
                pos += d.consumed;
            }
            Err(_) => return false,
        }
    }
    true
}

/// Drives the ClientHello peek on every prefix length class that matters.
pub fn fuzz_client_hello(data: &[u8]) {
    let _ = peek_client_hello(data);
    if let Some(cut) = data.len().checked_sub(1) {
        let _ = peek_client_hello(&data[..cut]);
    }
}

/// Drives the HTTP header's request judge (whole, and on a data-chosen prefix, which must not
/// contradict the whole) and the client's skip of the response head.
pub fn fuzz_http_header(data: &[u8]) {
    use crate::Parsed;
    use crate::http_header::head::{MAX_HEAD_LEN, judge_request, skip_response};
    let paths = ["/".to_owned(), "/a".to_owned()];
    let whole = judge_request(data, &paths);
    if let Ok(Parsed::Complete((), n)) = whole {
        assert!(
            n <= data.len() && n <= MAX_HEAD_LEN,
            "head longer than the input"
        );
    }
    let cut = data
        .first()
        .map_or(0, |&b| usize::from(b) * 37)
        .min(data.len());
    match judge_request(&data[..cut], &paths) {
        Ok(Parsed::Complete((), n)) => assert_eq!(whole, Ok(Parsed::Complete((), n))),
        Err(_) => assert!(whole.is_err(), "a refused prefix was accepted whole"),
        Ok(Parsed::Incomplete) => {}
    }
    if let Ok(Parsed::Complete((), n)) = skip_response(data) {
        assert!(n <= data.len() && n <= MAX_HEAD_LEN);
    }
}

/// The TLS 1.3 client's view of a server: `data` as a run of handshake messages (every
/// parser over every message), and as a leaf certificate's DER (REALITY's two facts).
pub fn fuzz_tls13_server_flight(data: &[u8]) {
    crate::tls13_client::messages::parse_any(data);
    let _ = crate::tls13_client::messages::parse_server_hello(data);
    let _ = crate::tls13_client::certificate::leaf_facts(data);
}

/// gRPC messages and the Hunk/MultiHunk protobuf in them: any bytes, whole and cut into
/// data-chosen chunks, must decode to the same items (or fail alike), never more data than
/// came in, and never a panic.
pub fn fuzz_grpc(data: &[u8]) {
    use crate::grpc::codec::{MessageDecoder, decode_hunks};
    use bytes::Bytes;

    fn run(data: &[u8], cuts: &[usize], multi: bool, limit: usize) -> Result<Vec<Bytes>, ()> {
        let mut decoder = MessageDecoder::new(limit);
        let mut items = Vec::new();
        let mut at = 0;
        for &end in cuts.iter().chain(std::iter::once(&data.len())) {
            let end = end.clamp(at, data.len());
            decoder.push(Bytes::copy_from_slice(&data[at..end]));
            at = end;
            while let Some(message) = decoder.next_message().map_err(|_| ())? {
                assert!(message.len() <= limit, "message over the limit");
                decode_hunks(message, multi, &mut items).map_err(|_| ())?;
            }
        }
        Ok(items)
    }

    let step = data.first().map_or(1, |&b| usize::from(b % 16) + 1);
    let cuts: Vec<usize> = (0..data.len()).step_by(step).collect();
    for multi in [false, true] {
        for limit in [16, 1 << 20] {
            let whole = run(data, &[], multi, limit);
            let split = run(data, &cuts, multi, limit);
            assert_eq!(whole, split, "decoding depends on how the bytes were cut");
            if let Ok(items) = whole {
                let total: usize = items.iter().map(Bytes::len).sum();
                assert!(total <= data.len(), "more data out than in");
            }
        }
    }
}

/// XHTTP's request side: the HTTP/1.1 head parser, the request decision (path, session id,
/// sequence number, padding) under every mode, the chunked body decoder (whole and split at a
/// data-chosen point), and the upload reassembly fed sequence numbers from the input.
pub fn fuzz_xhttp(data: &[u8]) {
    use bytes::{Bytes, BytesMut};

    use crate::xhttp::Mode;
    use crate::xhttp::chunked::ChunkedDecoder;
    use crate::xhttp::h1::parse_request;
    use crate::xhttp::reorder::Reorder;
    use crate::xhttp::request::{RequestParts, RequestRules, Route, route};

    if let Ok(Some((head, n))) = parse_request(data) {
        assert!(n <= data.len());
        for mode in [Mode::Auto, Mode::PacketUp, Mode::StreamUp, Mode::StreamOne] {
            let rules = RequestRules {
                path: "/x/".into(),
                host: Some("h".into()),
                padding: (1, 1000),
                mode,
            };
            let parts = RequestParts {
                method: &head.method,
                target: &head.target,
                host: head.header("host"),
                referer: head.header("referer"),
            };
            if let Ok(Route::Packet { session, seq }) = route(&parts, &rules) {
                assert!(head.target.contains(&format!("{session}/{seq}")));
            }
        }
        let _ = head.body_kind();
    }
    if let Ok(s) = std::str::from_utf8(data) {
        let rules = RequestRules {
            path: "/".into(),
            host: None,
            padding: (0, u32::MAX),
            mode: Mode::Auto,
        };
        let (target, referer) = s.split_once('\n').unwrap_or((s, ""));
        let _ = route(
            &RequestParts {
                method: "POST",
                target,
                host: None,
                referer: Some(referer),
            },
            &rules,
        );
        if let Some(seq) = crate::xhttp::request::parse_seq(target) {
            assert_eq!(seq.to_string().parse::<u64>().ok(), Some(seq));
        }
    }
    let cut = data.first().map_or(0, |&b| usize::from(b)).min(data.len());
    let mut whole = Vec::new();
    let mut d = ChunkedDecoder::new();
    let mut input = BytesMut::from(data);
    while let Ok(Some(piece)) = d.decode(&mut input, 4096) {
        whole.extend_from_slice(&piece);
    }
    let mut split = Vec::new();
    let mut d = ChunkedDecoder::new();
    let mut input = BytesMut::from(&data[..cut]);
    let mut ok = true;
    for part in [&data[cut..], &[][..]] {
        loop {
            match d.decode(&mut input, 7) {
                Ok(Some(piece)) => split.extend_from_slice(&piece),
                Ok(None) => break,
                Err(_) => {
                    ok = false;
                    break;
                }
            }
        }
        if !ok {
            break;
        }
        input.extend_from_slice(part);
    }
    if ok {
        assert!(whole.starts_with(&split) || split.starts_with(&whole));
    }
    let window = usize::from(data.get(1).copied().unwrap_or(1)).max(1);
    let mut r = Reorder::new(window);
    for pair in data.chunks(3) {
        let seq = u64::from(pair[0]) | (u64::from(*pair.get(1).unwrap_or(&0)) << 8);
        let _ = r.push(seq, Bytes::new());
        assert!(r.buffered() <= window);
        if pair.get(2).is_some_and(|b| b & 1 == 0) {
            let _ = r.pop();
        }
    }
}
