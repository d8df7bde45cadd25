//! What a WebSocket listener answers to an HTTP request it does not upgrade, as Xray's does:
//! its listener is Go's net/http with a handler that answers 404 to a wrong path or host and
//! lets the upgrader answer 400 to anything else at the right path. A prober that sends a
//! plain request therefore gets an ordinary Go web server's answer, keep-alive included;
//! silence or a different status would set Skiff apart. The bytes below were recorded from
//! Xray 26.7 (crates/skiff/tests/probe_close_xray.rs compares them live).

use std::time::SystemTime;

use super::server::{HttpRequest, ServerOptions, host_matches};
use super::{find, has_token};
use crate::ws::early_data::EarlyDataCarrier;

/// Go's limit on a request body it reads and discards to keep a connection alive.
const MAX_DISCARDED_BODY: u64 = 256 * 1024;

/// The answer to one request, and what becomes of the connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub response: Vec<u8>,
    /// Close after the response (else wait for the next request).
    pub close: bool,
    /// Request body bytes after the head to skip before the next request.
    pub body: u64,
}

/// The answer to a complete request head that was not upgraded.
pub fn refuse_request(request: &HttpRequest, opts: &ServerOptions, now: SystemTime) -> Refusal {
    let http10 = request.version == 0;
    if !http10 && request.header("host").is_none() {
        return bad_request("400 Bad Request: missing required Host header");
    }
    let chunked = has_token(&request.headers, "transfer-encoding", "chunked");
    let body = content_length(request).unwrap_or(0);
    let close = if http10 {
        !has_token(&request.headers, "connection", "keep-alive")
    } else {
        has_token(&request.headers, "connection", "close")
    } || chunked
        || body > MAX_DISCARDED_BODY;
    let head = request.method == "HEAD";
    let date = skiff_core::time::http_date(now);
    let version = if http10 { "HTTP/1.0" } else { "HTTP/1.1" };
    let connection = if close && !http10 {
        "Connection: close\r\n"
    } else {
        ""
    };
    let path_ok = match &opts.early_data {
        Some(EarlyDataCarrier::PathSuffix) => request.path.starts_with(opts.path.as_str()),
        _ => request.path == opts.path,
    };
    let host_ok = opts
        .host
        .as_deref()
        .is_none_or(|want| host_matches(request.host(), want));
    let response = if !path_ok || !host_ok {
        let length = if head { "" } else { "Content-Length: 0\r\n" };
        format!("{version} 404 Not Found\r\nDate: {date}\r\n{length}{connection}\r\n")
    } else {
        let body = if head { "" } else { "Bad Request\n" };
        format!(
            "{version} 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n\
             Sec-Websocket-Version: 13\r\nX-Content-Type-Options: nosniff\r\nDate: {date}\r\n\
             Content-Length: 12\r\n{connection}\r\n{body}"
        )
    };
    Refusal {
        response: response.into_bytes(),
        close,
        body,
    }
}

/// The answer to bytes that are not an HTTP/1.x request head (or a head too large): Go's
/// plain 400, then the connection closes.
pub fn refuse_malformed() -> Refusal {
    bad_request("400 Bad Request")
}

fn bad_request(status: &str) -> Refusal {
    Refusal {
        response: format!(
            "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n{status}"
        )
        .into_bytes(),
        close: true,
        body: 0,
    }
}

fn content_length(request: &HttpRequest) -> Option<u64> {
    let value = find(&request.headers, "content-length")?;
    std::str::from_utf8(value).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;
    use crate::Parsed;
    use crate::ws::handshake::{ServerRequest, parse_request};

    fn answer(head: &str) -> Refusal {
        let opts = ServerOptions::xray("/ws");
        let now = UNIX_EPOCH + Duration::from_secs(1_795_242_136);
        match parse_request(head.as_bytes(), &opts) {
            Ok(Parsed::Complete(ServerRequest::NotWebSocket { request, .. }, _)) => {
                refuse_request(&request, &opts, now)
            }
            Err(_) => refuse_malformed(),
            other => panic!("not a refused request: {other:?}"),
        }
    }

    fn text(r: &Refusal) -> String {
        String::from_utf8(r.response.clone()).unwrap()
    }

    const DATE: &str = "Date: Sat, 21 Nov 2026 06:22:16 GMT";

    #[test]
    fn wrong_path_is_a_404_that_keeps_the_connection() {
        let r = answer("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
        assert_eq!(
            text(&r),
            format!("HTTP/1.1 404 Not Found\r\n{DATE}\r\nContent-Length: 0\r\n\r\n")
        );
        assert!(!r.close);
        let head = answer("HEAD / HTTP/1.1\r\nHost: localhost\r\n\r\n");
        assert_eq!(
            text(&head),
            format!("HTTP/1.1 404 Not Found\r\n{DATE}\r\n\r\n")
        );
    }

    #[test]
    fn the_right_path_without_a_valid_upgrade_is_the_upgrader_s_400() {
        for head in [
            "GET /ws HTTP/1.1\r\nHost: localhost\r\n\r\n",
            "POST /ws HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n",
            "GET /ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\r\n",
        ] {
            let r = answer(head);
            assert_eq!(
                text(&r),
                format!(
                    "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nSec-Websocket-Version: 13\r\nX-Content-Type-Options: nosniff\r\n{DATE}\r\nContent-Length: 12\r\n\r\nBad Request\n"
                ),
                "{head:?}"
            );
            assert!(!r.close);
        }
    }

    #[test]
    fn closing_requests_and_broken_ones_close() {
        let r = answer("GET / HTTP/1.0\r\n\r\n");
        assert_eq!(
            text(&r),
            format!("HTTP/1.0 404 Not Found\r\n{DATE}\r\nContent-Length: 0\r\n\r\n")
        );
        assert!(r.close);
        let r = answer("GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        assert!(text(&r).ends_with("Content-Length: 0\r\nConnection: close\r\n\r\n"));
        assert!(r.close);
        let r = answer("GET / HTTP/1.1\r\n\r\n");
        assert_eq!(
            text(&r),
            "HTTP/1.1 400 Bad Request: missing required Host header\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n400 Bad Request: missing required Host header"
        );
        let r = answer("hello\r\n\r\n");
        assert_eq!(
            text(&r),
            "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n400 Bad Request"
        );
        assert!(r.close);
    }

    #[test]
    fn a_body_is_skipped_before_the_next_request() {
        let r = answer("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n");
        assert_eq!(r.body, 5);
        assert!(!r.close);
        let big = answer("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 999999\r\n\r\n");
        assert!(big.close);
    }
}
