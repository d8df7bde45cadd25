//! Async WebSocket layer over real loopback TCP: bulk transfer, half-close, early data in both
//! conventions, fallback replay, ping/pong and close.

use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use skiff_core::BoxStream;
use skiff_transport::ws::accept::accept_key;
use skiff_transport::ws::decoder::Decoded;
use skiff_transport::ws::early_data;
use skiff_transport::ws::{
    Event, FrameDecoder, Opcode, Role, WsAccepted, WsClientOptions, WsServerOptions, accept,
    connect, encode_frame,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::timeout;

const T: Duration = Duration::from_secs(60);

async fn tcp_pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let (c, s) = tokio::join!(TcpStream::connect(addr), l.accept());
    (c.unwrap(), s.unwrap().0)
}

fn server_opts(path: &str, header: Option<&str>) -> WsServerOptions {
    WsServerOptions {
        path: path.into(),
        host: None,
        early_data_header: header.map(Into::into),
    }
}

fn client_opts(path: &str, header: Option<&str>) -> WsClientOptions {
    WsClientOptions {
        path: path.into(),
        host: "example.com".into(),
        headers: vec![("User-Agent".into(), "skiff-test".into())],
        early_data_header: header.map(Into::into),
    }
}

fn upgraded(a: WsAccepted) -> (BoxStream, String) {
    match a {
        WsAccepted::Upgraded { stream, path } => (stream, path),
        other => panic!("expected an upgrade, got {other:?}"),
    }
}

/// Connected client and server data streams (handshake without early data).
async fn ws_pair(path: &str) -> (BoxStream, BoxStream) {
    let (c, s) = tcp_pair().await;
    let sopts = server_opts(path, None);
    let copts = client_opts(path, None);
    let (c, s) = timeout(T, async {
        tokio::join!(connect(Box::new(c), &copts), accept(Box::new(s), &sopts))
    })
    .await
    .unwrap();
    (c.unwrap(), upgraded(s.unwrap()).0)
}

fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Writes `data` in chunks of varying size, then shuts down.
async fn send_all<W: AsyncWrite + Unpin>(mut w: W, data: &[u8]) {
    let sizes = [1usize, 7, 1000, 65536, 100_000, 16_384, 3];
    let mut pos = 0;
    let mut i = 0;
    while pos < data.len() {
        let n = sizes[i % sizes.len()].min(data.len() - pos);
        w.write_all(&data[pos..pos + n]).await.unwrap();
        pos += n;
        i += 1;
    }
    w.shutdown().await.unwrap();
}

/// Reads to EOF; returns (length, SHA-256).
async fn hash_all<R: AsyncRead + Unpin>(r: R) -> (usize, [u8; 32]) {
    hash_all_in(r, 50_000).await
}

/// Reads to EOF in reads of at most `chunk` bytes; returns (length, SHA-256).
async fn hash_all_in<R: AsyncRead + Unpin>(mut r: R, chunk: usize) -> (usize, [u8; 32]) {
    let mut h = Sha256::new();
    let mut buf = vec![0u8; chunk];
    let mut total = 0;
    loop {
        let n = r.read(&mut buf).await.unwrap();
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        total += n;
    }
    (total, h.finalize().into())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ws_bulk_16mib_each_way_at_once() {
    let (client, server) = ws_pair("/bulk").await;
    let up = pattern(16 << 20, 1);
    let down = pattern(16 << 20, 2);
    let up_hash: [u8; 32] = Sha256::digest(&up).into();
    let down_hash: [u8; 32] = Sha256::digest(&down).into();
    let (cr, cw) = tokio::io::split(client);
    let (sr, sw) = tokio::io::split(server);
    let start = Instant::now();
    // WebSocket has no half-close, so each side reads exactly what the other sends.
    let (_, _, got_up, got_down) = timeout(T, async {
        tokio::join!(
            send_all(cw, &up),
            send_all(sw, &down),
            hash_all(sr.take(16 << 20)),
            hash_all(cr.take(16 << 20))
        )
    })
    .await
    .expect("bulk transfer timed out");
    let secs = start.elapsed().as_secs_f64();
    assert_eq!(got_up, (up.len(), up_hash));
    assert_eq!(got_down, (down.len(), down_hash));
    eprintln!(
        "16 MiB each way in {secs:.3} s: {:.1} MiB/s per direction",
        16.0 / secs
    );
}

/// Big frames are read header first, then their payload straight into the reader's buffer;
/// readers with small buffers take a payload in many pieces, each unmasked at its offset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ws_big_frames_reach_small_and_odd_sized_reads_intact() {
    for chunk in [1usize, 997, 70_000] {
        let (client, server) = ws_pair("/odd").await;
        let up = pattern(2 << 20, 3);
        let down = pattern(2 << 20, 4);
        let (cr, cw) = tokio::io::split(client);
        let (sr, sw) = tokio::io::split(server);
        let (_, _, got_up, got_down) = timeout(T, async {
            tokio::join!(
                send_all(cw, &up),
                send_all(sw, &down),
                hash_all_in(sr.take(2 << 20), chunk),
                hash_all_in(cr.take(2 << 20), chunk)
            )
        })
        .await
        .expect("transfer timed out");
        assert_eq!(
            got_up,
            (up.len(), Sha256::digest(&up).into()),
            "up, reads of {chunk}"
        );
        assert_eq!(
            got_down,
            (down.len(), Sha256::digest(&down).into()),
            "down, reads of {chunk}"
        );
    }
}

/// A server's 64 KiB frame has a 10-byte header, and the client reads up to 14 (a masked
/// header's most) after a big frame, so 4 payload bytes come along with each header. Those
/// must go to the caller together with the rest of the frame, not in a 4-byte read of their
/// own: a relay turns every read into a send.
#[tokio::test]
async fn ws_client_hands_over_a_big_frame_in_one_read_not_its_first_bytes_alone() {
    // A Unix socket pair holds all three frames at once, so how the client splits its reads
    // does not depend on timing.
    let (c, s) = tokio::net::UnixStream::pair().unwrap();
    let (copts, sopts) = (client_opts("/big", None), server_opts("/big", None));
    let (client, server) = timeout(T, async {
        tokio::join!(connect(Box::new(c), &copts), accept(Box::new(s), &sopts))
    })
    .await
    .unwrap();
    let (mut client, mut server) = (client.unwrap(), upgraded(server.unwrap()).0);
    let down = pattern(3 * 65536, 5);
    for frame in down.chunks(65536) {
        server.write_all(frame).await.unwrap();
    }
    server.flush().await.unwrap();
    let mut buf = vec![0u8; 65536];
    let mut got = Vec::new();
    let mut sizes = Vec::new();
    while got.len() < down.len() {
        let n = timeout(T, client.read(&mut buf)).await.unwrap().unwrap();
        assert!(n > 0, "EOF after {} bytes", got.len());
        sizes.push(n);
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(got, down);
    // The first frame may take two reads (the first read fills a 64 KiB buffer that also
    // holds the header); every later frame is one whole read.
    assert!(
        sizes.iter().skip(2).all(|&n| n == 65536),
        "read sizes: {sizes:?}"
    );
}

#[tokio::test]
async fn ws_client_shutdown_flushes_without_closing_then_server_close_ends_both() {
    let (mut client, mut server) = ws_pair("/h").await;
    timeout(T, async {
        client.write_all(b"request").await.unwrap();
        // WebSocket has no half-close (Xray/v2ray servers drop everything on a Close): the
        // client's shutdown only flushes while the server may still send.
        client.shutdown().await.unwrap();
        let mut got = [0u8; 7];
        server.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"request");
        let reply = pattern(1 << 20, 9);
        let (_, read) = tokio::join!(
            async {
                server.write_all(&reply).await.unwrap();
                // The server's shutdown flushes too; dropping it ends the connection (the
                // relay drops a stream once both directions are done or idle).
                server.shutdown().await.unwrap();
                drop(server);
            },
            async {
                let mut v = Vec::new();
                client.read_to_end(&mut v).await.unwrap();
                v
            }
        );
        assert_eq!(read, reply);
        client.shutdown().await.unwrap();
        // Reads after EOF stay at EOF; writes after shutdown fail.
        assert_eq!(client.read(&mut [0u8; 8]).await.unwrap(), 0);
        assert!(client.write(b"x").await.is_err());
    })
    .await
    .unwrap();
}

/// Peeks (without consuming) the request head the client sent.
async fn peek_head(s: &TcpStream) -> String {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = s.peek(&mut buf).await.unwrap();
        let text = String::from_utf8_lossy(&buf[..n]).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            return text[..end + 4].to_owned();
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Runs a deferred (early data) client against `accept`; returns the request head as sent
/// and the path `accept` reported. The first write is `first`, followed by `rest`; the server
/// checks it gets exactly those bytes, answers, and sees the client's close.
async fn early_data_round(
    cpath: &str,
    cheader: Option<&str>,
    sheader: Option<&str>,
    first: &[u8],
    rest: &[u8],
) -> (String, Vec<u8>) {
    let (c, s) = tcp_pair().await;
    let mut want = first.to_vec();
    want.extend_from_slice(rest);
    let sopts = server_opts("/ws", sheader);
    let server = tokio::spawn(async move {
        let head = peek_head(&s).await;
        let (mut server, path) = upgraded(accept(Box::new(s), &sopts).await.unwrap());
        let mut got = vec![0u8; want.len()];
        server.read_exact(&mut got).await.unwrap();
        assert_eq!(got, want);
        server.write_all(b"pong!").await.unwrap();
        server.shutdown().await.unwrap();
        drop(server);
        (head, path.into_bytes())
    });
    // Deferred: connect returns without any server involvement.
    let mut client = timeout(
        Duration::from_secs(5),
        connect(Box::new(c), &client_opts(cpath, cheader)),
    )
    .await
    .expect("deferred connect must not wait for the server")
    .unwrap();
    timeout(T, async {
        let n = client.write(first).await.unwrap();
        assert!(n > 0);
        client.write_all(&first[n..]).await.unwrap();
        client.write_all(rest).await.unwrap();
        client.flush().await.unwrap();
        let mut back = [0u8; 5];
        client.read_exact(&mut back).await.unwrap();
        assert_eq!(&back, b"pong!");
        let mut tail = Vec::new();
        client.read_to_end(&mut tail).await.unwrap();
        assert!(tail.is_empty());
        client.shutdown().await.unwrap();
    })
    .await
    .unwrap();
    timeout(T, server).await.unwrap().unwrap()
}

#[tokio::test]
async fn ws_early_data_xray_sec_websocket_protocol() {
    let first = b"VLESS header and first payload";
    let (head, path) = early_data_round("/ws?ed=2048", None, None, first, b" then frames").await;
    assert!(head.starts_with("GET /ws HTTP/1.1\r\n"), "{head}");
    let line = format!("Sec-WebSocket-Protocol: {}\r\n", early_data::encode(first));
    assert!(head.contains(&line), "{head}");
    assert_eq!(path, b"/ws");
}

#[tokio::test]
async fn ws_early_data_xray_oversized_first_write_goes_in_frames() {
    let first = pattern(100, 5);
    let (head, _) = early_data_round("/ws?ed=16", None, None, &first, b"more").await;
    assert!(head.starts_with("GET /ws HTTP/1.1\r\n"), "{head}");
    assert!(!head.contains("Sec-WebSocket-Protocol"), "{head}");
}

#[tokio::test]
async fn ws_early_data_v2fly_path_suffix() {
    let first = pattern(40, 6);
    let (head, path) = early_data_round("/ws?ed=2048", Some(""), Some(""), &first, b"rest").await;
    let target = format!("GET /ws{} HTTP/1.1\r\n", early_data::encode(&first));
    assert!(head.starts_with(&target), "{head}");
    assert!(!head.contains("Sec-WebSocket-Protocol"), "{head}");
    assert!(path.starts_with(b"/ws") && path.len() > 3);
}

#[tokio::test]
async fn ws_early_data_v2fly_splits_oversized_first_write() {
    // v2fly: the first N bytes ride in the handshake, the rest follows in frames.
    let first = pattern(20, 7);
    let (head, _) = early_data_round("/ws?ed=8", Some(""), Some(""), &first, b"").await;
    let target = format!("GET /ws{} HTTP/1.1\r\n", early_data::encode(&first[..8]));
    assert!(head.starts_with(&target), "{head}");
}

#[tokio::test]
async fn ws_early_data_v2fly_header_to_xray_server() {
    let first = b"abc";
    let (head, _) = early_data_round(
        "/ws?ed=64",
        Some("Sec-WebSocket-Protocol"),
        None,
        first,
        b"def",
    )
    .await;
    assert!(head.contains(&format!(
        "Sec-WebSocket-Protocol: {}\r\n",
        early_data::encode(first)
    )));
}

#[tokio::test]
async fn ws_deferred_client_handshakes_on_shutdown_and_read_waits_for_write() {
    let (c, s) = tcp_pair().await;
    let mut client = connect(Box::new(c), &client_opts("/ws?ed=100", None))
        .await
        .unwrap();
    // A read before any write waits (nothing is sent yet).
    let mut one = [0u8; 1];
    assert!(
        timeout(Duration::from_millis(100), client.read(&mut one))
            .await
            .is_err(),
        "read must wait for the first write"
    );
    let server = tokio::spawn(async move {
        let (mut server, _) = upgraded(
            accept(Box::new(s), &server_opts("/ws", None))
                .await
                .unwrap(),
        );
        // The client shut down without sending anything: no data, and once it is gone, EOF.
        let mut v = Vec::new();
        let _ = server.read_to_end(&mut v).await;
        v
    });
    // The shutdown sends the deferred handshake (and, WebSocket having no half-close, no Close).
    timeout(T, client.shutdown()).await.unwrap().unwrap();
    drop(client);
    assert!(timeout(T, server).await.unwrap().unwrap().is_empty());
}

/// Reads the client's request and collects the raw bytes that follow it.
async fn read_head(s: &mut TcpStream) -> (String, Vec<u8>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = s.read(&mut chunk).await.unwrap();
        assert!(n > 0, "EOF in head");
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            return (String::from_utf8(buf).unwrap(), rest);
        }
    }
}

async fn assert_replays(a: WsAccepted, want_path: Option<&str>, sent: &[u8]) {
    let WsAccepted::NotWebSocket { mut stream, path } = a else {
        panic!("expected NotWebSocket, got {a:?}");
    };
    assert_eq!(path.as_deref(), want_path);
    let mut got = vec![0u8; sent.len()];
    timeout(T, stream.read_exact(&mut got))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got, sent);
    // The fallback can answer on the same stream.
    stream
        .write_all(b"HTTP/1.1 404 Not Found\r\n\r\n")
        .await
        .unwrap();
}

#[tokio::test]
async fn ws_plain_http_get_is_not_websocket_and_replays() {
    let (mut c, s) = tcp_pair().await;
    let req = b"GET /index.html HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n";
    c.write_all(req).await.unwrap();
    let a = timeout(T, accept(Box::new(s), &server_opts("/ws", None)))
        .await
        .unwrap()
        .unwrap();
    assert_replays(a, Some("/index.html"), req).await;
    let mut resp = [0u8; 12];
    c.read_exact(&mut resp).await.unwrap();
    assert_eq!(&resp, b"HTTP/1.1 404");
}

#[tokio::test]
async fn ws_wrong_path_upgrade_is_not_websocket_and_replays() {
    let (mut c, s) = tcp_pair().await;
    let req = b"GET /other?x=1 HTTP/1.1\r\nHost: example.com\r\nUpgrade: websocket\r\n\
Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n\
\x82\x85trailing";
    c.write_all(req).await.unwrap();
    let a = timeout(T, accept(Box::new(s), &server_opts("/ws", None)))
        .await
        .unwrap()
        .unwrap();
    assert_replays(a, Some("/other?x=1"), req).await;
}

#[tokio::test]
async fn ws_non_http_bytes_are_not_websocket_and_replay() {
    let (mut c, s) = tcp_pair().await;
    let hello = [0x16u8, 0x03, 0x01, 0x00, 0x05, 1, 2, 3, 4, 5];
    c.write_all(&hello).await.unwrap();
    let a = timeout(T, accept(Box::new(s), &server_opts("/ws", None)))
        .await
        .unwrap()
        .unwrap();
    assert_replays(a, None, &hello).await;
}

#[tokio::test]
async fn ws_oversized_head_is_not_websocket_and_replays() {
    let (mut c, s) = tcp_pair().await;
    let mut req = b"GET /ws HTTP/1.1\r\nHost: example.com\r\n".to_vec();
    while req.len() < 17 * 1024 {
        req.extend_from_slice(
            b"X-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n",
        );
    }
    let sent = req.clone();
    let writer = tokio::spawn(async move {
        c.write_all(&sent).await.unwrap();
        c
    });
    let a = timeout(T, accept(Box::new(s), &server_opts("/ws", None)))
        .await
        .unwrap()
        .unwrap();
    // Gave up at the 16 KiB bound; everything (read so far and still to come) replays.
    let WsAccepted::NotWebSocket { mut stream, path } = a else {
        panic!("expected NotWebSocket");
    };
    assert_eq!(path, None);
    let mut got = vec![0u8; req.len()];
    timeout(T, stream.read_exact(&mut got))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got, req);
    drop(writer.await);
}

/// Decodes every event in `bytes` with a decoder for `role`; returns (opcode, payload) pairs.
fn decode_all(dec: &mut FrameDecoder, bytes: &mut [u8]) -> Vec<(Opcode, Vec<u8>)> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        let Decoded { consumed, event } = dec.decode(&mut bytes[pos..]).unwrap();
        pos += consumed;
        match event {
            Some(Event::Data { payload, .. }) => out.push((Opcode::Binary, payload.to_vec())),
            Some(Event::Ping(p)) => out.push((Opcode::Ping, p.to_vec())),
            Some(Event::Pong(p)) => out.push((Opcode::Pong, p.to_vec())),
            Some(Event::Close { code, .. }) => {
                out.push((Opcode::Close, code.unwrap_or(0).to_be_bytes().to_vec()))
            }
            None => {}
        }
    }
    out
}

/// Reads from `s` until `n` events decoded.
async fn read_events(
    s: &mut TcpStream,
    dec: &mut FrameDecoder,
    pre: Vec<u8>,
    n: usize,
) -> Vec<(Opcode, Vec<u8>)> {
    let mut events = {
        let mut pre = pre;
        decode_all(dec, &mut pre)
    };
    let mut chunk = [0u8; 4096];
    while events.len() < n {
        let k = timeout(T, s.read(&mut chunk)).await.unwrap().unwrap();
        assert!(k > 0, "EOF while waiting for frames: {events:?}");
        events.extend(decode_all(dec, &mut chunk[..k]));
    }
    events
}

#[tokio::test]
async fn ws_server_answers_ping_and_close_ends_reads() {
    let (mut raw, s) = tcp_pair().await;
    let req = "GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
    let mut out = req.as_bytes().to_vec();
    let key = Some([1, 2, 3, 4]);
    encode_frame(true, Opcode::Ping, b"are you there", key, &mut out);
    encode_frame(true, Opcode::Binary, b"data", key, &mut out);
    raw.write_all(&out).await.unwrap();
    let (mut server, _) = upgraded(
        timeout(T, accept(Box::new(s), &server_opts("/ws", None)))
            .await
            .unwrap()
            .unwrap(),
    );
    let mut got = [0u8; 4];
    timeout(T, server.read_exact(&mut got))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&got, b"data");
    let (head, rest) = read_head(&mut raw).await;
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    assert!(head.contains("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="));
    let mut dec = FrameDecoder::new(Role::Client, 1 << 20);
    let ev = read_events(&mut raw, &mut dec, rest, 1).await;
    assert_eq!(ev, vec![(Opcode::Pong, b"are you there".to_vec())]);
    // Close from the peer: EOF on our read side; our shutdown echoes the code.
    let mut close = Vec::new();
    encode_frame(true, Opcode::Close, &1001u16.to_be_bytes(), key, &mut close);
    raw.write_all(&close).await.unwrap();
    let mut rest = Vec::new();
    timeout(T, server.read_to_end(&mut rest))
        .await
        .unwrap()
        .unwrap();
    assert!(rest.is_empty());
    server.shutdown().await.unwrap();
    let ev = read_events(&mut raw, &mut dec, Vec::new(), 1).await;
    assert_eq!(ev, vec![(Opcode::Close, 1001u16.to_be_bytes().to_vec())]);
    let mut tail = [0u8; 16];
    assert_eq!(timeout(T, raw.read(&mut tail)).await.unwrap().unwrap(), 0);
}

#[tokio::test]
async fn ws_client_answers_ping_masks_frames_and_close_ends_reads() {
    let (c, mut raw) = tcp_pair().await;
    let server = tokio::spawn(async move {
        let (head, rest) = read_head(&mut raw).await;
        assert!(rest.is_empty());
        assert!(head.starts_with("GET /p HTTP/1.1\r\n"), "{head}");
        assert!(head.contains("User-Agent: skiff-test\r\n"));
        let key = head
            .lines()
            .find_map(|l| l.strip_prefix("Sec-WebSocket-Key: "))
            .unwrap()
            .trim()
            .to_owned();
        let mut out = format!(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
Sec-WebSocket-Accept: {}\r\n\r\n",
            accept_key(key.as_bytes())
        )
        .into_bytes();
        // Frames pipelined right behind the 101.
        encode_frame(true, Opcode::Ping, b"hb", None, &mut out);
        encode_frame(true, Opcode::Binary, b"x", None, &mut out);
        raw.write_all(&out).await.unwrap();
        raw
    });
    let mut client = timeout(T, connect(Box::new(c), &client_opts("/p", None)))
        .await
        .unwrap()
        .unwrap();
    let mut raw = timeout(T, server).await.unwrap().unwrap();
    let mut one = [0u8; 1];
    timeout(T, client.read_exact(&mut one))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&one, b"x");
    client.write_all(b"first").await.unwrap();
    client.write_all(b"second").await.unwrap();
    client.flush().await.unwrap();
    // The server-side decoder insists on masked frames; check keys differ per frame.
    let mut dec = FrameDecoder::new(Role::Server, 1 << 20);
    let mut wire = Vec::new();
    let mut chunk = [0u8; 4096];
    let mut events = Vec::new();
    while events.len() < 3 {
        let k = timeout(T, raw.read(&mut chunk)).await.unwrap().unwrap();
        assert!(k > 0);
        wire.extend_from_slice(&chunk[..k]);
        events = decode_all(
            &mut FrameDecoder::new(Role::Server, 1 << 20),
            &mut wire.clone(),
        );
    }
    assert_eq!(
        events,
        vec![
            (Opcode::Pong, b"hb".to_vec()),
            (Opcode::Binary, b"first".to_vec()),
            (Opcode::Binary, b"second".to_vec()),
        ]
    );
    // Mask keys of the two data frames (pong: 2+4+2 bytes, then 2-byte header + key).
    let k1 = &wire[10..14];
    let k2 = &wire[21..25];
    assert_ne!(k1, k2, "fresh mask key per frame");
    let _ = decode_all(&mut dec, &mut wire);
    // Server closes: the client's read side ends.
    let mut close = Vec::new();
    encode_frame(
        true,
        Opcode::Close,
        &1000u16.to_be_bytes(),
        None,
        &mut close,
    );
    raw.write_all(&close).await.unwrap();
    let mut rest = Vec::new();
    timeout(T, client.read_to_end(&mut rest))
        .await
        .unwrap()
        .unwrap();
    assert!(rest.is_empty());
    client.shutdown().await.unwrap();
    let ev = read_events(&mut raw, &mut dec, Vec::new(), 1).await;
    assert_eq!(ev, vec![(Opcode::Close, 1000u16.to_be_bytes().to_vec())]);
}

#[tokio::test]
async fn ws_truncated_frame_is_an_error_and_bad_frames_fail() {
    let (mut raw, s) = tcp_pair().await;
    let req = "GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
    let mut out = req.as_bytes().to_vec();
    encode_frame(
        true,
        Opcode::Binary,
        b"0123456789",
        Some([9, 9, 9, 9]),
        &mut out,
    );
    out.truncate(out.len() - 3);
    raw.write_all(&out).await.unwrap();
    raw.shutdown().await.unwrap();
    let (mut server, _) = upgraded(
        timeout(T, accept(Box::new(s), &server_opts("/ws", None)))
            .await
            .unwrap()
            .unwrap(),
    );
    let mut v = Vec::new();
    let e = timeout(T, server.read_to_end(&mut v))
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof);
    assert_eq!(v, b"0123456");

    // Unmasked client frame: protocol error.
    let (mut raw, s) = tcp_pair().await;
    let mut out = req.as_bytes().to_vec();
    encode_frame(true, Opcode::Binary, b"abc", None, &mut out);
    raw.write_all(&out).await.unwrap();
    let (mut server, _) = upgraded(
        timeout(T, accept(Box::new(s), &server_opts("/ws", None)))
            .await
            .unwrap()
            .unwrap(),
    );
    let e = timeout(T, server.read(&mut [0u8; 8]))
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
}

#[tokio::test]
async fn ws_client_rejects_bad_accept() {
    let (c, mut raw) = tcp_pair().await;
    let server = tokio::spawn(async move {
        let _ = read_head(&mut raw).await;
        raw.write_all(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: bm9wZQ==\r\n\r\n").await.unwrap();
        raw
    });
    let r = timeout(T, connect(Box::new(c), &client_opts("/p", None)))
        .await
        .unwrap();
    assert_eq!(r.err().unwrap().kind(), std::io::ErrorKind::InvalidData);
    drop(server.await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ws_deferred_split_halves_reader_first_is_woken_by_handshake() {
    let (c, s) = tcp_pair().await;
    let client = connect(Box::new(c), &client_opts("/ws?ed=64", None))
        .await
        .unwrap();
    let (mut cr, mut cw) = tokio::io::split(client);
    // The reader polls first and parks on the deferred handshake.
    let reader = tokio::spawn(async move {
        let mut v = Vec::new();
        cr.read_to_end(&mut v).await.unwrap();
        v
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let server = tokio::spawn(async move {
        let (mut server, _) = upgraded(
            accept(Box::new(s), &server_opts("/ws", None))
                .await
                .unwrap(),
        );
        let mut got = [0u8; 10];
        server.read_exact(&mut got).await.unwrap();
        server.write_all(&got).await.unwrap();
        server.write_all(&pattern(300_000, 3)).await.unwrap();
        server.shutdown().await.unwrap();
        // No half-close on WebSocket: the server ends the connection by dropping it.
        drop(server);
        Vec::<u8>::new()
    });
    timeout(T, async {
        cw.write_all(b"0123456789").await.unwrap();
        let got = reader.await.unwrap();
        assert_eq!(&got[..10], b"0123456789");
        assert_eq!(&got[10..], &pattern(300_000, 3)[..]);
        let _ = cw.shutdown().await;
        assert!(server.await.unwrap().is_empty());
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn ws_large_incoming_frame_streams_and_read_ready() {
    use skiff_core::ProxyStream;
    let (mut raw, s) = tcp_pair().await;
    let req = "GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
    raw.write_all(req.as_bytes()).await.unwrap();
    let (mut server, _) = upgraded(
        timeout(T, accept(Box::new(s), &server_opts("/ws", None)))
            .await
            .unwrap()
            .unwrap(),
    );
    // Nothing buffered: not ready.
    let ready =
        std::future::poll_fn(|cx| std::task::Poll::Ready(server.poll_read_ready(cx).is_ready()))
            .await;
    assert!(!ready);
    let big = pattern(1 << 20, 4);
    let mut frame = Vec::new();
    encode_frame(
        true,
        Opcode::Binary,
        &big,
        Some([0xde, 0xad, 0xbe, 0xef]),
        &mut frame,
    );
    encode_frame(true, Opcode::Binary, b"", Some([1, 1, 1, 1]), &mut frame);
    encode_frame(true, Opcode::Text, b"!", Some([2, 2, 2, 2]), &mut frame);
    let writer = tokio::spawn(async move {
        raw.write_all(&frame).await.unwrap();
        raw.shutdown().await.unwrap();
        raw
    });
    timeout(T, std::future::poll_fn(|cx| server.poll_read_ready(cx)))
        .await
        .unwrap()
        .unwrap();
    let mut got = vec![0u8; 10];
    server.read_exact(&mut got).await.unwrap();
    // Payload still buffered: ready without touching the socket.
    let ready =
        std::future::poll_fn(|cx| std::task::Poll::Ready(server.poll_read_ready(cx).is_ready()))
            .await;
    assert!(ready);
    timeout(T, server.read_to_end(&mut got))
        .await
        .unwrap()
        .unwrap();
    let mut want = big.clone();
    want.push(b'!');
    assert_eq!(got, want);
    drop(writer.await);
}
