use proptest::prelude::*;

use super::*;
use crate::http_header::defaults;

const DATE: &str = "Wed, 25 Nov 2026 15:03:39 GMT";

fn paths() -> Vec<String> {
    vec!["/a".into(), "/b".into()]
}

fn judge(head: &[u8]) -> Result<Parsed<()>, Refusal> {
    judge_request(head, &paths())
}

fn default_request() -> RequestTemplate {
    RequestTemplate {
        method: "GET".into(),
        version: "1.1".into(),
        paths: paths(),
        headers: defaults::request_headers(),
    }
}

#[test]
fn canned_answers_are_xrays_bytes() {
    // Captured from Xray 26.7.28 (a request for /wrong, then a garbage line).
    assert_eq!(
        Refusal::NotFound.answer(DATE),
        b"HTTP/1.1 404 Not Found\r\nConnection: close\r\nCache-Control: private\r\nContent-Length: 0\r\nDate: Wed, 25 Nov 2026 15:03:39 GMT\r\n\r\n"
    );
    assert_eq!(
        Refusal::TooLong.answer(DATE),
        b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\nCache-Control: private\r\nContent-Length: 0\r\nDate: Wed, 25 Nov 2026 15:03:39 GMT\r\n\r\n"
    );
}

#[test]
fn heads_from_templates() {
    let req = RequestTemplate {
        method: "POST".into(),
        version: "1.0".into(),
        paths: vec!["/x".into(), "/y".into()],
        headers: vec![
            ("A".into(), vec!["1".into(), "2".into()]),
            ("B".into(), vec![]),
        ],
    };
    assert_eq!(req.head(|_| 1), b"POST /y HTTP/1.0\r\nA: 2\r\nB: \r\n\r\n");
    let resp = ResponseTemplate {
        version: "1.1".into(),
        status: "200".into(),
        reason: "OK".into(),
        headers: defaults::response_headers(),
    };
    assert_eq!(
        resp.head(DATE, |_| 0),
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\nPragma: no-cache\r\nCache-Control: private\r\nDate: {DATE}\r\n\r\n"
        )
        .as_bytes()
    );
    // A configured Date is kept and not doubled.
    let dated = ResponseTemplate {
        headers: vec![("date".into(), vec!["x".into()])],
        ..resp
    };
    assert_eq!(
        dated.head(DATE, |_| 0),
        b"HTTP/1.1 200 OK\r\ndate: x\r\n\r\n"
    );
}

#[test]
fn requests_are_judged_as_xray_judges_them() {
    let ok = b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nrest";
    assert_eq!(judge(ok), Ok(Parsed::Complete((), ok.len() - 4)));
    for accepted in [
        &b"GET /b?q=1 HTTP/1.1\r\n\r\n"[..],
        b"PUT /%61 HTTP/1.0\r\nX:  y \r\n folded\r\n\r\n",
        b"GET http://h.example/a?x HTTP/1.1\r\n\r\n",
        b"GET /a HTTP/2.0\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
        b"GET /a HTTP/1.1\n: empty name skipped\r\n\r\n",
    ] {
        assert!(
            matches!(judge(accepted), Ok(Parsed::Complete(..))),
            "{}",
            String::from_utf8_lossy(accepted)
        );
    }
    assert_eq!(
        judge(b"GET /wrong HTTP/1.1\r\n\r\n"),
        Err(Refusal::NotFound)
    );
    assert_eq!(judge(b"GET /A HTTP/1.1\r\n\r\n"), Err(Refusal::NotFound));
    assert_eq!(
        judge(b"GET http://h HTTP/1.1\r\n\r\n"),
        Err(Refusal::NotFound)
    );
    for bad in [
        &b"garbage line here\r\nmore\r\n"[..],
        b"GET /a HTTP/9\r\n\r\n",
        b"GET /%zz HTTP/1.1\r\n\r\n",
        b"GET a HTTP/1.1\r\n\r\n",
        b"G(T /a HTTP/1.1\r\n\r\n",
        b"GET /a HTTP/1.1\r\n folded first\r\n\r\n",
        b"GET /a HTTP/1.1\r\nno colon\r\n\r\n",
        b"GET /a HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
        b"GET /a HTTP/1.1\r\nContent-Length: x\r\n\r\n",
        b"GET /a HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
    ] {
        assert!(
            matches!(judge(bad), Err(Refusal::BadRequest(_))),
            "{}",
            String::from_utf8_lossy(bad)
        );
    }
    // Incomplete but fine so far; a bad complete line is refused before the head ends.
    assert_eq!(
        judge(b"GET /a HTTP/1.1\r\nHost: x\r\n"),
        Ok(Parsed::Incomplete)
    );
    assert_eq!(judge(b"GET /a HT"), Ok(Parsed::Incomplete));
    assert!(matches!(
        judge(b"garbage line\r\n"),
        Err(Refusal::BadRequest(_))
    ));
    let mut long = b"GET /a HTTP/1.1\r\nX: ".to_vec();
    long.resize(MAX_HEAD_LEN, b'a');
    assert_eq!(judge(&long), Err(Refusal::TooLong));
}

#[test]
fn the_client_skips_any_head() {
    let mut answer = Refusal::NotFound.answer(DATE);
    let n = answer.len();
    answer.extend_from_slice(b"data");
    assert_eq!(skip_response(&answer), Ok(Parsed::Complete((), n)));
    assert_eq!(skip_response(&answer[..10]), Ok(Parsed::Incomplete));
    assert!(skip_response(&vec![b'a'; MAX_HEAD_LEN]).is_err());
}

proptest! {
    /// Any head the client builds from the default template is accepted whole, with what
    /// follows left for the stream, however the bytes are split across reads.
    #[test]
    fn built_requests_are_accepted(seed in any::<u64>(), tail in proptest::collection::vec(any::<u8>(), 0..64), cut in any::<usize>()) {
        let mut s = seed;
        let head = default_request().head(|n| { s = s.wrapping_mul(6364136223846793005).wrapping_add(1); (s >> 33) as usize % n });
        let mut wire = head.clone();
        wire.extend_from_slice(&tail);
        let cut = cut % wire.len();
        let early = judge(&wire[..cut]);
        prop_assert!(matches!(early, Ok(Parsed::Incomplete)) || cut >= head.len(), "{early:?}");
        prop_assert_eq!(judge(&wire), Ok(Parsed::Complete((), head.len())));
    }

    /// Arbitrary bytes: the verdict never panics, a completion lies within the input and the
    /// limit, and a verdict on a prefix is never contradicted by more bytes (a refusal stays
    /// a refusal, a completion keeps its length).
    #[test]
    fn verdicts_are_bounded_and_stable(data in proptest::collection::vec(any::<u8>(), 0..600), cut in any::<usize>()) {
        let cut = if data.is_empty() { 0 } else { cut % data.len() };
        let whole = judge(&data);
        if let Ok(Parsed::Complete((), n)) = whole {
            prop_assert!(n <= data.len() && n <= MAX_HEAD_LEN);
        }
        match judge(&data[..cut]) {
            Ok(Parsed::Complete((), n)) => prop_assert_eq!(whole, Ok(Parsed::Complete((), n))),
            Err(_) => prop_assert!(whole.is_err(), "{whole:?}"),
            Ok(Parsed::Incomplete) => {}
        }
    }

    /// Mutating a valid head anywhere still gives a bounded, panic-free verdict.
    #[test]
    fn mutated_heads(pos in any::<usize>(), byte in any::<u8>()) {
        let mut head = default_request().head(|_| 0);
        let pos = pos % head.len();
        head[pos] = byte;
        let _ = judge(&head);
        let _ = skip_response(&head);
    }
}
