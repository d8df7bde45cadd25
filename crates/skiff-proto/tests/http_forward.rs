//! The HTTP proxy inbound end to end over loopback: a real client socket, `serve`, a test
//! `Connector`, and a tiny HTTP/1.1 origin written here.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use skiff_core::{
    Accepted, Address, BoxFuture, BoxStream, ConnectOutcome, Connector, ProxyStream, Reply,
};
use skiff_proto::http::{
    BodyFramer, BodyKind, HttpServerConfig, Parse, ProxyResponse, parse_response, serve,
    write_connect_reply,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

const TIMEOUT: Duration = Duration::from_secs(10);

/// What the origin saw.
#[derive(Default)]
struct OriginLog {
    connections: AtomicUsize,
    /// Raw request heads, in arrival order.
    heads: Mutex<Vec<String>>,
    /// Request bodies (de-chunked), in arrival order.
    bodies: Mutex<Vec<Vec<u8>>>,
}

/// A minimal HTTP/1.1 origin: persistent connections, Content-Length or chunked request
/// bodies, and a few routes:
/// - `/chunked`: chunked response with a trailer;
/// - `/echo`: the request body back with Content-Length;
/// - `/close`: a response and then a close;
/// - `/hangup`: closes without answering;
/// - `/drop`: answers as if persistent, then closes anyway (an origin's idle timeout);
/// - anything else: `hello` with Content-Length (no body for HEAD).
async fn start_origin() -> (SocketAddr, Arc<OriginLog>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let log = Arc::new(OriginLog::default());
    let log2 = log.clone();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            log2.connections.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(origin_connection(stream, log2.clone()));
        }
    });
    (addr, log)
}

async fn origin_connection(mut stream: TcpStream, log: Arc<OriginLog>) -> io::Result<()> {
    let mut buf = Vec::new();
    loop {
        // Read one head with httparse directly, independent of the proxy's parser.
        let (head_len, method, path, expect_continue, framing) = loop {
            let mut slots = [httparse::EMPTY_HEADER; 64];
            let mut req = httparse::Request::new(&mut slots);
            if let httparse::Status::Complete(n) = req.parse(&buf).unwrap() {
                let get = |name: &str| {
                    req.headers
                        .iter()
                        .find(|h| h.name.eq_ignore_ascii_case(name))
                        .map(|h| String::from_utf8_lossy(h.value).into_owned())
                };
                let framing = if get("transfer-encoding").is_some() {
                    BodyKind::Chunked
                } else {
                    BodyKind::Length(get("content-length").map_or(0, |v| v.parse().unwrap()))
                };
                let expect = get("expect").is_some_and(|v| v.eq_ignore_ascii_case("100-continue"));
                break (
                    n,
                    req.method.unwrap().to_owned(),
                    req.path.unwrap().to_owned(),
                    expect,
                    framing,
                );
            }
            let mut chunk = [0u8; 4096];
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        log.heads
            .lock()
            .unwrap()
            .push(String::from_utf8_lossy(&buf[..head_len]).into_owned());
        buf.drain(..head_len);

        if path == "/hangup" {
            return Ok(());
        }
        if expect_continue {
            stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await?;
        }
        let body = read_body(&mut stream, &mut buf, framing).await?;
        log.bodies.lock().unwrap().push(body.clone());

        let response: Vec<u8> = match path.as_str() {
            "/chunked" => {
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n\
                           5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nX-Sum: 12\r\n\r\n"
                    .to_vec()
            }
            "/echo" => {
                let mut r = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len())
                    .into_bytes();
                r.extend_from_slice(&body);
                r
            }
            "/drop" => b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec(),
            "/close" => {
                b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 3\r\n\r\nbye".to_vec()
            }
            _ if method == "HEAD" => b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n".to_vec(),
            _ => b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nKeep-Alive: timeout=5\r\n\r\nhello"
                .to_vec(),
        };
        stream.write_all(&response).await?;
        if path == "/close" || path == "/drop" {
            return Ok(());
        }
    }
}

/// Reads a request body; returns the payload (chunk framing removed, for easy asserts).
async fn read_body(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    kind: BodyKind,
) -> io::Result<Vec<u8>> {
    let mut framer = BodyFramer::new(kind);
    let mut raw = Vec::new();
    loop {
        let n = framer.feed(buf).unwrap();
        raw.extend_from_slice(&buf[..n]);
        buf.drain(..n);
        if framer.is_complete() {
            break;
        }
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Ok(if kind == BodyKind::Chunked {
        dechunk(&raw)
    } else {
        raw
    })
}

/// Strips chunked framing from a complete, valid chunked body.
fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let line_end = raw.windows(2).position(|w| w == b"\r\n").unwrap();
        let size_text = std::str::from_utf8(&raw[..line_end]).unwrap();
        let size = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16).unwrap();
        raw = &raw[line_end + 2..];
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&raw[..size]);
        raw = &raw[size + 2..];
    }
}

/// Dials the origin whatever the destination, recording what it was asked for.
struct LoopConnector {
    origin: SocketAddr,
    asked: Mutex<Vec<Address>>,
}

impl Connector for LoopConnector {
    fn connect<'a>(
        &'a self,
        destination: &'a Address,
        _user: Option<&'a str>,
    ) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(async move {
            self.asked.lock().unwrap().push(destination.clone());
            if destination.domain() == Some("unreachable.test") {
                return Err(io::Error::new(io::ErrorKind::ConnectionRefused, "refused"));
            }
            let stream = TcpStream::connect(self.origin).await?;
            Ok(Box::new(stream) as BoxStream)
        })
    }
}

struct Harness {
    client: TcpStream,
    server: JoinHandle<io::Result<Accepted>>,
    connector: Arc<LoopConnector>,
    origin: Arc<OriginLog>,
    buf: Vec<u8>,
}

async fn harness(config: HttpServerConfig) -> Harness {
    let (origin_addr, origin) = start_origin().await;
    let connector = Arc::new(LoopConnector {
        origin: origin_addr,
        asked: Mutex::new(Vec::new()),
    });
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    let (accepted, _) = listener.accept().await.unwrap();
    let conn = connector.clone();
    let server = tokio::spawn(async move { serve(accepted, &config, &*conn).await });
    Harness {
        client,
        server,
        connector,
        origin,
        buf: Vec::new(),
    }
}

impl Harness {
    async fn send(&mut self, bytes: &[u8]) {
        self.client.write_all(bytes).await.unwrap();
    }

    /// Reads one response; returns its head and raw body bytes.
    async fn response(&mut self, head_request: bool) -> (ProxyResponse, Vec<u8>) {
        tokio::time::timeout(TIMEOUT, async {
            let resp = loop {
                if let Parse::Complete(resp) = parse_response(&self.buf, head_request).unwrap() {
                    break resp;
                }
                self.fill().await;
            };
            let head = String::from_utf8_lossy(&self.buf[..resp.head_len]).into_owned();
            assert!(!head.to_ascii_lowercase().contains("skiff"), "{head}");
            self.buf.drain(..resp.head_len);
            let mut framer = BodyFramer::new(resp.body);
            let mut body = Vec::new();
            loop {
                let n = framer.feed(&self.buf).unwrap();
                body.extend_from_slice(&self.buf[..n]);
                self.buf.drain(..n);
                if framer.is_complete() {
                    break;
                }
                if !self.fill().await {
                    framer.finish_eof().unwrap();
                    break;
                }
            }
            (resp, body)
        })
        .await
        .expect("response timed out")
    }

    async fn fill(&mut self) -> bool {
        let mut chunk = [0u8; 4096];
        let n = self.client.read(&mut chunk).await.unwrap();
        self.buf.extend_from_slice(&chunk[..n]);
        n > 0
    }

    /// Closes the client's sending side (ending the server's lingering close) and waits.
    async fn finish(mut self) -> io::Result<Accepted> {
        let _ = self.client.shutdown().await;
        tokio::time::timeout(TIMEOUT, self.server)
            .await
            .expect("serve did not end")
            .unwrap()
    }

    fn head(&self, i: usize) -> String {
        self.origin.heads.lock().unwrap()[i].clone()
    }
}

fn header<'a>(resp: &'a ProxyResponse, name: &str) -> Option<&'a [u8]> {
    resp.headers
        .iter()
        .find(|h| h.is(name))
        .map(|h| h.value.as_slice())
}

#[tokio::test]
async fn keep_alive_chunked_then_post_on_one_connection() {
    let config = HttpServerConfig {
        accounts: vec![("u".into(), "p".into())],
        allow_transparent: false,
    };
    let mut h = harness(config).await;

    // 1: GET with a chunked response (extension and trailer relayed verbatim).
    h.send(
        b"GET http://origin.test:8080/chunked HTTP/1.1\r\nHost: origin.test:8080\r\n\
          Proxy-Authorization: Basic dTpw\r\nProxy-Connection: keep-alive\r\nAccept: */*\r\n\r\n",
    )
    .await;
    let (resp, body) = h.response(false).await;
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, BodyKind::Chunked);
    assert!(resp.keep_alive);
    assert_eq!(
        body,
        b"5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nX-Sum: 12\r\n\r\n"
    );
    assert_eq!(header(&resp, "trailer"), Some(&b"X-Sum"[..]));

    // 2: POST with a Content-Length body, split across writes.
    h.send(
        b"POST http://origin.test:8080/echo HTTP/1.1\r\nHost: origin.test:8080\r\n\
          Proxy-Authorization: Basic dTpw\r\nContent-Length: 11\r\n\r\nhello",
    )
    .await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    h.send(b"=world").await;
    let (resp, body) = h.response(false).await;
    assert_eq!(resp.status, 200);
    assert_eq!(body, b"hello=world");

    // 3: HEAD: the length fields come back, no body.
    h.send(b"HEAD http://origin.test:8080/x HTTP/1.1\r\nProxy-Authorization: Basic dTpw\r\n\r\n")
        .await;
    let (resp, body) = h.response(true).await;
    assert_eq!(header(&resp, "content-length"), Some(&b"5"[..]));
    assert!(body.is_empty());

    h.client.shutdown().await.unwrap();
    assert!(matches!(h.finish_ref().await, Ok(Accepted::Done)));
}

impl Harness {
    /// `finish` without consuming, so asserts on the logs can follow.
    async fn finish_ref(&mut self) -> io::Result<Accepted> {
        tokio::time::timeout(TIMEOUT, &mut self.server)
            .await
            .expect("serve did not end")
            .unwrap()
    }
}

#[tokio::test]
async fn forwarded_heads_are_rewritten_and_upstream_is_reused() {
    let config = HttpServerConfig {
        accounts: vec![("u".into(), "p".into())],
        allow_transparent: false,
    };
    let mut h = harness(config).await;
    for path in ["/a?x=1", "/b"] {
        let req = format!(
            "GET http://origin.test:8080{path} HTTP/1.1\r\nHost: wrong.test\r\n\
             Proxy-Authorization: Basic dTpw\r\nProxy-Connection: keep-alive\r\n\
             Connection: keep-alive, X-Hop\r\nX-Hop: secret\r\nX-End: kept\r\n\r\n"
        );
        h.send(req.as_bytes()).await;
        let (resp, body) = h.response(false).await;
        assert_eq!((resp.status, body.as_slice()), (200, &b"hello"[..]));
        // The origin's hop-by-hop Keep-Alive does not reach the client.
        assert_eq!(header(&resp, "keep-alive"), None);
    }
    h.client.shutdown().await.unwrap();
    assert!(matches!(h.finish_ref().await, Ok(Accepted::Done)));

    assert_eq!(
        h.origin.connections.load(Ordering::SeqCst),
        1,
        "upstream reused"
    );
    assert_eq!(
        *h.connector.asked.lock().unwrap(),
        vec![Address::Domain("origin.test".into(), 8080)]
    );
    let first = h.head(0);
    assert!(
        first.starts_with("GET /a?x=1 HTTP/1.1\r\nHost: origin.test:8080\r\n"),
        "{first}"
    );
    for head in [h.head(0), h.head(1)] {
        let lower = head.to_ascii_lowercase();
        assert!(!lower.contains("proxy-authorization"), "{head}");
        assert!(!lower.contains("proxy-connection"), "{head}");
        assert!(!lower.contains("x-hop"), "{head}");
        assert!(!lower.contains("wrong.test"), "{head}");
        assert!(lower.contains("x-end: kept"), "{head}");
    }
}

#[tokio::test]
async fn pipelined_requests_and_new_destination() {
    let mut h = harness(HttpServerConfig::default()).await;
    // Two requests in one write, the second with a chunked body, then a third to another
    // destination, which needs a second upstream connection.
    h.send(
        b"GET http://127.0.0.1/one HTTP/1.1\r\n\r\n\
          POST http://127.0.0.1/echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n\
          3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n\
          GET http://[::1]:81/two HTTP/1.1\r\nConnection: close\r\n\r\n",
    )
    .await;
    let (_, body) = h.response(false).await;
    assert_eq!(body, b"hello");
    let (_, body) = h.response(false).await;
    assert_eq!(body, b"abcde");
    let (resp, body) = h.response(false).await;
    assert_eq!(body, b"hello");
    assert!(!resp.keep_alive, "client asked to close");
    assert!(matches!(h.finish_ref().await, Ok(Accepted::Done)));
    assert_eq!(h.origin.bodies.lock().unwrap()[1], b"abcde");
    assert_eq!(h.origin.connections.load(Ordering::SeqCst), 2);
    assert_eq!(
        *h.connector.asked.lock().unwrap(),
        vec![
            Address::Ip("127.0.0.1:80".parse().unwrap()),
            Address::Ip("[::1]:81".parse().unwrap())
        ]
    );
    assert!(h.head(2).contains("Host: [::1]:81\r\n"));
    assert!(h.head(2).contains("Connection: close\r\n"));
}

#[tokio::test]
async fn expect_continue_is_relayed() {
    let mut h = harness(HttpServerConfig::default()).await;
    h.send(
        b"PUT http://origin.test/echo HTTP/1.1\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n",
    )
    .await;
    // The interim response arrives before the client sends the body.
    let (interim, _) = h.response(false).await;
    assert_eq!(interim.status, 100);
    h.send(b"data").await;
    let (resp, body) = h.response(false).await;
    assert_eq!((resp.status, body.as_slice()), (200, &b"data"[..]));
    h.client.shutdown().await.unwrap();
    assert!(matches!(h.finish_ref().await, Ok(Accepted::Done)));
}

#[tokio::test]
async fn origin_closing_ends_the_session() {
    let mut h = harness(HttpServerConfig::default()).await;
    h.send(b"GET http://origin.test/close HTTP/1.1\r\n\r\n")
        .await;
    let (resp, body) = h.response(false).await;
    assert_eq!(body, b"bye");
    assert!(!resp.keep_alive);
    assert_eq!(header(&resp, "connection"), Some(&b"close"[..]));
    assert!(matches!(h.finish_ref().await, Ok(Accepted::Done)));
}

#[tokio::test]
async fn transparent_origin_form() {
    let config = HttpServerConfig {
        accounts: vec![],
        allow_transparent: true,
    };
    let mut h = harness(config).await;
    h.send(b"GET /t HTTP/1.1\r\nHost: Origin.Test:8081\r\nConnection: close\r\n\r\n")
        .await;
    let (resp, _) = h.response(false).await;
    assert_eq!(resp.status, 200);
    assert!(matches!(h.finish_ref().await, Ok(Accepted::Done)));
    assert_eq!(
        *h.connector.asked.lock().unwrap(),
        vec![Address::Domain("origin.test".into(), 8081)]
    );
    assert!(
        h.head(0)
            .starts_with("GET /t HTTP/1.1\r\nHost: Origin.Test:8081\r\n")
    );
}

#[tokio::test]
async fn errors_are_answered() {
    // Missing credentials → 407, then an error.
    let config = HttpServerConfig {
        accounts: vec![("u".into(), "p".into())],
        allow_transparent: false,
    };
    let mut h = harness(config.clone()).await;
    h.send(b"GET http://origin.test/ HTTP/1.1\r\n\r\n").await;
    let (resp, _) = h.response(false).await;
    assert_eq!(resp.status, 407);
    assert_eq!(
        header(&resp, "proxy-authenticate"),
        Some(&b"Basic realm=\"proxy\""[..])
    );
    let err = h.finish().await.err().unwrap();
    assert_eq!(err.kind(), io::ErrorKind::PermissionDenied);

    // Wrong password, on a later request of a persistent connection.
    let mut h = harness(config).await;
    h.send(b"GET http://origin.test/ HTTP/1.1\r\nProxy-Authorization: Basic dTpw\r\n\r\n")
        .await;
    assert_eq!(h.response(false).await.0.status, 200);
    h.send(b"GET http://origin.test/ HTTP/1.1\r\nProxy-Authorization: Basic dTpx\r\n\r\n")
        .await;
    assert_eq!(h.response(false).await.0.status, 407);
    assert!(h.finish().await.is_err());

    // Origin-form without transparent mode, and garbage → 400.
    for bad in [
        &b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"[..],
        b"\x16\x03\x01\x00\x10\r\n\r\n",
    ] {
        let mut h = harness(HttpServerConfig::default()).await;
        h.send(bad).await;
        assert_eq!(h.response(false).await.0.status, 400);
        assert!(h.finish().await.is_err());
    }

    // Oversized head → 431.
    let mut h = harness(HttpServerConfig::default()).await;
    let mut big = b"GET http://origin.test/ HTTP/1.1\r\nX: ".to_vec();
    big.resize(20_000, b'a');
    h.send(&big).await;
    assert_eq!(h.response(false).await.0.status, 431);
    assert!(h.finish().await.is_err());

    // Unreachable destination → 502.
    let mut h = harness(HttpServerConfig::default()).await;
    h.send(b"GET http://unreachable.test/ HTTP/1.1\r\n\r\n")
        .await;
    assert_eq!(h.response(false).await.0.status, 502);
    assert_eq!(
        h.finish().await.err().unwrap().kind(),
        io::ErrorKind::ConnectionRefused
    );

    // Origin hangs up without a response → 502.
    let mut h = harness(HttpServerConfig::default()).await;
    h.send(b"GET http://origin.test/hangup HTTP/1.1\r\n\r\n")
        .await;
    assert_eq!(h.response(false).await.0.status, 502);
    assert!(h.finish().await.is_err());

    // A client that connects and leaves without a request.
    let mut h = harness(HttpServerConfig::default()).await;
    h.client.shutdown().await.unwrap();
    assert!(h.finish_ref().await.is_err());
}

#[tokio::test]
async fn connect_hands_over_the_stream() {
    let config = HttpServerConfig {
        accounts: vec![("u".into(), "p".into())],
        allow_transparent: false,
    };
    let mut h = harness(config).await;
    h.send(b"CONNECT origin.test:443 HTTP/1.1\r\nProxy-Authorization: Basic dTpw\r\n\r\nearly")
        .await;
    let accepted = h.finish_ref().await.unwrap();
    let Accepted::Stream {
        destination,
        mut stream,
        reply,
        user,
        ..
    } = accepted
    else {
        panic!("expected a stream");
    };
    assert_eq!(destination, Address::Domain("origin.test".into(), 443));
    assert_eq!(reply, Reply::HttpConnect);
    assert_eq!(user.as_deref(), Some("u"));
    write_connect_reply(&mut stream, ConnectOutcome::Connected { bound: None })
        .await
        .unwrap();
    let mut early = [0u8; 5];
    stream.read_exact(&mut early).await.unwrap();
    assert_eq!(&early, b"early");
    let mut reply = vec![0u8; 39];
    h.client.read_exact(&mut reply).await.unwrap();
    assert_eq!(reply, b"HTTP/1.1 200 Connection established\r\n\r\n");
    // The tunnel is the raw socket underneath.
    assert!(stream.raw_tcp().is_some());
    stream.write_all(b"pong").await.unwrap();
    let mut pong = [0u8; 4];
    h.client.read_exact(&mut pong).await.unwrap();
    assert_eq!(&pong, b"pong");
}

#[tokio::test]
async fn connect_reply_failures() {
    let mut out = Vec::new();
    let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
    write_connect_reply(&mut out, ConnectOutcome::Failed(&refused))
        .await
        .unwrap();
    assert!(out.starts_with(b"HTTP/1.1 502 Bad Gateway\r\n"));
    let mut out = Vec::new();
    let slow = io::Error::from(io::ErrorKind::TimedOut);
    write_connect_reply(&mut out, ConnectOutcome::Failed(&slow))
        .await
        .unwrap();
    assert!(out.starts_with(b"HTTP/1.1 504 Gateway Timeout\r\n"));
}

#[tokio::test]
async fn stale_upstream_is_replaced() {
    let mut h = harness(HttpServerConfig::default()).await;
    for pause in [true, false, true] {
        h.send(b"GET http://origin.test/drop HTTP/1.1\r\n\r\n")
            .await;
        let (resp, body) = h.response(false).await;
        assert_eq!((resp.status, body.as_slice()), (200, &b"ok"[..]));
        assert!(resp.keep_alive, "the client connection persists");
        if pause {
            // Let the origin's FIN arrive, so the liveness probe sees it; without the pause
            // the request may hit the dead connection and be replayed instead.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    h.send(b"GET http://origin.test/ HTTP/1.1\r\nConnection: close\r\n\r\n")
        .await;
    assert_eq!(h.response(false).await.1, b"hello");
    let origin = h.origin.clone();
    assert!(matches!(h.finish().await, Ok(Accepted::Done)));
    assert_eq!(origin.connections.load(Ordering::SeqCst), 4);
    assert_eq!(origin.heads.lock().unwrap().len(), 4);
}
