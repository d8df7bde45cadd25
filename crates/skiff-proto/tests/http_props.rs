//! Property tests of the HTTP proxy codecs: no input panics them, and chunked framing finds
//! exactly the end its encoder produced, however the bytes are split.

use proptest::prelude::*;
use skiff_proto::http::body::encode_chunked;
use skiff_proto::http::{
    BodyFramer, BodyKind, Parse, fuzz_parse_all, parse_request, parse_response,
};

/// Inputs that look like HTTP heads, so the parsers get past the first byte.
fn heady() -> impl Strategy<Value = Vec<u8>> {
    let starts = prop::sample::select(vec![
        &b"GET http://example.com/ HTTP/1.1\r\n"[..],
        b"CONNECT example.com:443 HTTP/1.1\r\n",
        b"POST /x HTTP/1.1\r\nHost: a\r\n",
        b"HTTP/1.1 200 OK\r\n",
        b"HTTP/1.0 100 Continue\r\n\r\nHTTP/1.0 204 No\r\n",
        b"",
    ]);
    let pieces = prop::collection::vec(
        prop::sample::select(vec![
            &b"Content-Length: 5\r\n"[..],
            b"Transfer-Encoding: chunked\r\n",
            b"Transfer-Encoding: gzip, chunked\r\n",
            b"Connection: close, X\r\n",
            b"Proxy-Authorization: Basic dTpw\r\n",
            b"Proxy-Authorization: Basic ====\r\n",
            b"Host: [::1]:80\r\n",
            b"X: y\r\n",
            b"\r\n",
            b"\n",
            b"0\r\n\r\n",
            b"5;a=b\r\nhello\r\n",
            b":",
            b" ",
            b"\xff",
        ]),
        0..12,
    );
    (starts, pieces, prop::collection::vec(any::<u8>(), 0..16)).prop_map(|(s, ps, tail)| {
        let mut out = s.to_vec();
        for p in ps {
            out.extend_from_slice(p);
        }
        out.extend_from_slice(&tail);
        out
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..512)) {
        fuzz_parse_all(&data);
    }

    #[test]
    fn head_like_bytes_never_panic(data in heady()) {
        fuzz_parse_all(&data);
    }

    #[test]
    fn request_prefixes_are_incomplete_or_errors(data in heady(), cut in any::<prop::sample::Index>()) {
        // If the whole input parses, every strict prefix of the head is Incomplete.
        if let Ok(Parse::Complete(req)) = parse_request(&data, true) {
            let cut = cut.index(req.head_len);
            prop_assert!(matches!(parse_request(&data[..cut], true), Ok(Parse::Incomplete) | Err(_)));
        }
        if let Ok(Parse::Complete(resp)) = parse_response(&data, false) {
            let cut = cut.index(resp.head_len);
            prop_assert!(matches!(parse_response(&data[..cut], false), Ok(Parse::Incomplete) | Err(_)));
        }
    }

    #[test]
    fn chunked_encode_then_frame_finds_the_end(
        body in prop::collection::vec(any::<u8>(), 0..2048),
        sizes in prop::collection::vec(1usize..300, 0..16),
        trailers in prop::collection::vec(("[A-Za-z][A-Za-z0-9-]{0,8}", "[ -~]{0,16}"), 0..3),
        after in prop::collection::vec(any::<u8>(), 0..64),
        splits in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
    ) {
        let trailers: Vec<(&str, &str)> =
            trailers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        let encoded = encode_chunked(&body, &sizes, &trailers);
        let mut stream = encoded.clone();
        stream.extend_from_slice(&after);

        let mut cuts: Vec<usize> = splits.iter().map(|i| i.index(stream.len() + 1)).collect();
        cuts.push(0);
        cuts.push(stream.len());
        cuts.sort_unstable();
        let mut framer = BodyFramer::new(BodyKind::Chunked);
        let mut used = 0;
        for pair in cuts.windows(2) {
            let piece = &stream[pair[0]..pair[1]];
            let n = framer.feed(piece).unwrap();
            used += n;
            if framer.is_complete() {
                break;
            }
            prop_assert_eq!(n, piece.len());
        }
        prop_assert!(framer.is_complete());
        prop_assert_eq!(used, encoded.len());
    }

    #[test]
    fn content_length_framing_is_exact(
        len in 0u64..4096,
        data in prop::collection::vec(any::<u8>(), 0..8192),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut framer = BodyFramer::new(BodyKind::Length(len));
        let cut = cut.index(data.len() + 1);
        let a = framer.feed(&data[..cut]).unwrap();
        let b = framer.feed(&data[a..]).unwrap();
        let expected = (len as usize).min(data.len());
        prop_assert_eq!(a + b, expected);
        prop_assert_eq!(framer.is_complete(), data.len() as u64 >= len);
    }
}
