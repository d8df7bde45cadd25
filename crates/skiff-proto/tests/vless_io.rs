//! The async VLESS adapters over real loopback sockets: `server::accept` ↔ `client::connect`,
//! fallback replay, refused commands, and the UDP packet helpers.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use sha2::{Digest, Sha256};
use skiff_core::{Address, BoxStream, ProxyStream};
use skiff_proto::user_id::UserId;
use skiff_proto::vless::client;
use skiff_proto::vless::codec::{Command, Request, VERSION, encode_request};
use skiff_proto::vless::packet::VlessPacketStream;
use skiff_proto::vless::server::{VlessAccept, VlessServer, VlessUser, accept};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

const UUID: &str = "b831381d-6324-4d53-ad4f-8cda48b30811";
const LIMIT: Duration = Duration::from_secs(60);

fn user() -> UserId {
    UserId::parse(UUID).unwrap()
}

fn server() -> VlessServer {
    VlessServer::new(vec![
        VlessUser {
            id: UserId::parse("someone-else").unwrap(),
            email: Some("other@example".into()),
            vision: false,
        },
        VlessUser {
            id: user(),
            email: Some("me@example".into()),
            vision: false,
        },
    ])
}

fn dest() -> Address {
    Address::Domain("example.com".into(), 443)
}

fn header(
    id: [u8; 16],
    flow: Option<&str>,
    command: Command,
    destination: Option<Address>,
) -> Vec<u8> {
    let mut out = Vec::new();
    encode_request(
        &Request {
            version: VERSION,
            user: id,
            flow: flow.map(str::to_owned),
            command,
            destination,
        },
        &mut out,
    )
    .unwrap();
    out
}

async fn pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let (client, server) = tokio::join!(TcpStream::connect(addr), listener.accept());
    (client.unwrap(), server.unwrap().0)
}

async fn bounded<T>(future: impl Future<Output = T>) -> T {
    tokio::time::timeout(LIMIT, future)
        .await
        .expect("test timed out")
}

/// Deterministic pseudo-random bytes.
fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}

fn sha(data: &[u8]) -> [u8; 32] {
    Sha256::digest(data).into()
}

/// Writes `data` in uneven chunks, then half-closes.
async fn send_all(mut w: impl AsyncWriteExt + Unpin, data: &[u8]) -> io::Result<()> {
    let mut pos = 0;
    let mut step = 1;
    while pos < data.len() {
        let end = (pos + step).min(data.len());
        w.write_all(&data[pos..end]).await?;
        pos = end;
        step = (step * 3 + 7) % 70_000 + 1;
    }
    w.shutdown().await
}

/// Reads to the end, hashing.
async fn hash_all(mut r: impl AsyncReadExt + Unpin) -> io::Result<([u8; 32], usize)> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 37_000];
    let mut total = 0;
    loop {
        let n = r.read(&mut buf).await?;
        if n == 0 {
            return Ok((hasher.finalize().into(), total));
        }
        total += n;
        hasher.update(&buf[..n]);
    }
}

async fn accept_ok(stream: TcpStream) -> VlessAccept {
    accept(stream, &server()).await.expect("accept")
}

fn expect_stream(accepted: VlessAccept) -> (Address, BoxStream, Option<String>) {
    match accepted {
        VlessAccept::Stream {
            destination,
            stream,
            user,
        } => (destination, stream, user),
        VlessAccept::Udp { .. } => panic!("expected Stream, got Udp"),
        VlessAccept::Mux { .. } => panic!("expected Stream, got Mux"),
        VlessAccept::Fallback { .. } => panic!("expected Stream, got Fallback"),
    }
}

fn expect_fallback(accepted: VlessAccept) -> BoxStream {
    match accepted {
        VlessAccept::Fallback { stream } => stream,
        _ => panic!("expected Fallback"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vless_tcp_16_mib_each_way() {
    bounded(async {
        const LEN: usize = 16 << 20;
        let up = pattern(1, LEN);
        let down = pattern(2, LEN);
        let (up_sha, down_sha) = (sha(&up), sha(&down));
        let (c, s) = pair().await;
        let server_task = tokio::spawn(async move {
            let (destination, stream, user) = expect_stream(accept_ok(s).await);
            assert_eq!(destination, dest());
            assert_eq!(user.as_deref(), Some("me@example"));
            // Spliceable for reading now; for writing once the response header is out.
            assert!(stream.raw_tcp_read().is_some());
            let (r, w) = tokio::io::split(stream);
            let (got, sent) = tokio::join!(hash_all(r), send_all(w, &down));
            sent.unwrap();
            got.unwrap()
        });
        let stream = client::connect(Box::new(c), &user(), &dest(), Command::Tcp);
        assert!(stream.raw_tcp().is_none());
        // Halves in separate tasks, as a relay runs them; the reader starts first, so it is
        // the one that sends the request header.
        let (r, w) = tokio::io::split(stream);
        let reader = tokio::spawn(hash_all(r));
        let writer = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            send_all(w, &up).await
        });
        writer.await.unwrap().unwrap();
        assert_eq!(reader.await.unwrap().unwrap(), (down_sha, LEN));
        assert_eq!(server_task.await.unwrap(), (up_sha, LEN));
    })
    .await;
}

#[tokio::test]
async fn vless_client_sends_header_with_first_payload() {
    bounded(async {
        let (c, mut s) = pair().await;
        let mut stream = client::connect(Box::new(c), &user(), &dest(), Command::Tcp);
        stream.write_all(b"first payload").await.unwrap();
        stream.flush().await.unwrap();
        let mut expected = header(*user().as_bytes(), None, Command::Tcp, Some(dest()));
        expected.extend_from_slice(b"first payload");
        let mut got = vec![0u8; expected.len()];
        s.read_exact(&mut got).await.unwrap();
        assert_eq!(got, expected);
        // A response with addons, delivered a byte at a time, is stripped.
        for byte in [0x00, 0x02, 0x10, 0x01, b'o', b'k'] {
            s.write_all(&[byte]).await.unwrap();
            s.flush().await.unwrap();
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        drop(s);
        let mut reply = Vec::new();
        stream.read_to_end(&mut reply).await.unwrap();
        assert_eq!(reply, b"ok");
    })
    .await;
}

#[tokio::test]
async fn vless_client_rejects_bad_response_and_early_close() {
    bounded(async {
        let (c, mut s) = pair().await;
        let mut stream = client::connect(Box::new(c), &user(), &dest(), Command::Tcp);
        stream.write_all(b"x").await.unwrap();
        s.write_all(&[0x01, 0x00, b'y']).await.unwrap();
        let mut buf = [0u8; 8];
        let err = stream.read(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);

        let (c, s) = pair().await;
        let mut stream = client::connect(Box::new(c), &user(), &dest(), Command::Tcp);
        drop(s);
        let err = stream.read(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);

        // A destination the header cannot carry fails on first use.
        let (c, _s) = pair().await;
        let bad = Address::Domain("bad domain".into(), 1);
        let mut stream = client::connect(Box::new(c), &user(), &bad, Command::Tcp);
        let err = stream.write_all(b"z").await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    })
    .await;
}

#[tokio::test]
async fn vless_payload_sent_with_header_is_preserved() {
    bounded(async {
        let (mut c, s) = pair().await;
        let mut wire = header(
            *user().as_bytes(),
            None,
            Command::Tcp,
            Some(Address::Ip("127.0.0.1:20200".parse().unwrap())),
        );
        let payload = pattern(3, 3000);
        wire.extend_from_slice(&payload);
        c.write_all(&wire).await.unwrap();
        c.shutdown().await.unwrap();
        let (destination, stream, user) = expect_stream(accept_ok(s).await);
        assert_eq!(destination, Address::Ip("127.0.0.1:20200".parse().unwrap()));
        assert_eq!(user.as_deref(), Some("me@example"));
        // Payload was read with the header: the stream is Prefixed, still the socket below
        // for reading; its write side becomes the socket once the response header is out.
        assert!(stream.raw_tcp_read().is_some());
        assert!(stream.raw_tcp_write().is_none());
        let (mut r, mut w) = tokio::io::split(stream);
        let mut got = Vec::new();
        r.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, payload);
        w.write_all(b"back").await.unwrap();
        w.shutdown().await.unwrap();
        let mut reply = Vec::new();
        c.read_to_end(&mut reply).await.unwrap();
        assert_eq!(reply, [&[0u8, 0][..], b"back"].concat());
    })
    .await;
}

#[tokio::test]
async fn vless_header_split_over_many_reads() {
    bounded(async {
        let (mut c, s) = pair().await;
        let wire = header(*user().as_bytes(), None, Command::Tcp, Some(dest()));
        let server_task = tokio::spawn(async move { accept_ok(s).await });
        for byte in &wire {
            c.write_all(std::slice::from_ref(byte)).await.unwrap();
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let (destination, mut stream, _) = expect_stream(server_task.await.unwrap());
        assert_eq!(destination, dest());
        assert!(stream.raw_tcp_read().is_some());
        c.write_all(b"after").await.unwrap();
        let mut got = [0u8; 5];
        stream.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"after");
    })
    .await;
}

#[tokio::test]
async fn vless_server_speaks_first() {
    bounded(async {
        let (c, s) = pair().await;
        let server_task = tokio::spawn(async move {
            let (_, mut stream, _) = expect_stream(accept_ok(s).await);
            stream.write_all(b"220 welcome\r\n").await.unwrap();
            stream.flush().await.unwrap();
            let mut got = [0u8; 4];
            stream.read_exact(&mut got).await.unwrap();
            assert_eq!(&got, b"HELO");
            stream.shutdown().await.unwrap();
        });
        let mut stream = client::connect(Box::new(c), &user(), &dest(), Command::Tcp);
        let mut greeting = [0u8; 13];
        stream.read_exact(&mut greeting).await.unwrap();
        assert_eq!(&greeting, b"220 welcome\r\n");
        stream.write_all(b"HELO").await.unwrap();
        stream.flush().await.unwrap();
        let mut rest = Vec::new();
        stream.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty());
        server_task.await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn vless_server_speaks_first_through_poll_read_ready() {
    bounded(async {
        let (c, s) = pair().await;
        let server_task = tokio::spawn(async move {
            let (_, mut stream, _) = expect_stream(accept_ok(s).await);
            stream.write_all(b"hi").await.unwrap();
        });
        let mut stream = client::connect(Box::new(c), &user(), &dest(), Command::Tcp);
        // A relay waits for readability before reading: that alone must send the header.
        std::future::poll_fn(|cx| stream.poll_read_ready(cx))
            .await
            .unwrap();
        let mut got = [0u8; 2];
        stream.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"hi");
        server_task.await.unwrap();
    })
    .await;
}

/// Sends `wire` (then half-closes), expects Fallback and that its stream replays exactly
/// `wire`, and that the client got nothing back.
async fn assert_fallback_replays(wire: &[u8]) {
    let (mut c, s) = pair().await;
    c.write_all(wire).await.unwrap();
    c.shutdown().await.unwrap();
    let stream = expect_fallback(accept_ok(s).await);
    assert!(stream.raw_tcp().is_some());
    let (mut r, w) = tokio::io::split(stream);
    let mut replay = Vec::new();
    r.read_to_end(&mut replay).await.unwrap();
    assert_eq!(replay, wire);
    drop((r, w));
    let mut answer = Vec::new();
    c.read_to_end(&mut answer).await.unwrap();
    assert!(answer.is_empty(), "fallback wrote {answer:?}");
}

#[tokio::test]
async fn vless_fallback_replays_everything() {
    bounded(async {
        // Unknown UUID, with payload, longer than one handshake read.
        let mut wire = header([0x42; 16], None, Command::Tcp, Some(dest()));
        wire.extend_from_slice(&pattern(4, 5000));
        assert_fallback_replays(&wire).await;
        // Bad version.
        let mut wire = header(*user().as_bytes(), None, Command::Tcp, Some(dest()));
        wire[0] = 0x01;
        wire.extend_from_slice(b"payload");
        assert_fallback_replays(&wire).await;
        // An HTTP request (what a prober sends).
        assert_fallback_replays(b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n").await;
        // Random bytes, one starting with the valid version byte.
        let mut random = pattern(5, 2000);
        assert_fallback_replays(&random).await;
        random[0] = 0;
        assert_fallback_replays(&random).await;
        // Too short to name a user.
        assert_fallback_replays(&[0, 1, 2, 3, 4]).await;
        assert_fallback_replays(&[]).await;
    })
    .await;
}

/// Sends `wire`, expects an error from accept and no byte back.
async fn assert_refused(wire: &[u8], kind: io::ErrorKind) {
    let (mut c, s) = pair().await;
    c.write_all(wire).await.unwrap();
    let err = match accept(s, &server()).await {
        Ok(_) => panic!("accepted {wire:02x?}"),
        Err(err) => err,
    };
    assert_eq!(err.kind(), kind, "{err}");
    c.shutdown().await.unwrap();
    let mut answer = Vec::new();
    c.read_to_end(&mut answer).await.unwrap();
    assert!(answer.is_empty(), "refusal wrote {answer:?}");
}

#[tokio::test]
async fn vless_known_user_errors_write_nothing() {
    bounded(async {
        let id = *user().as_bytes();
        // Mux is accepted (its first frame decides, see mux::udp); Reverse is not supported.
        let mux = header(id, None, Command::Mux, None);
        assert_eq!(mux.len(), 19);
        let (mut c, s) = pair().await;
        c.write_all(&mux).await.unwrap();
        assert!(matches!(
            accept(s, &server()).await,
            Ok(VlessAccept::Mux { .. })
        ));
        assert_refused(
            &header(id, None, Command::Reverse, None),
            io::ErrorKind::Unsupported,
        )
        .await;
        // A flow (Vision) for a user whose flow is not Vision.
        assert_refused(
            &header(id, Some("xtls-rprx-vision"), Command::Tcp, Some(dest())),
            io::ErrorKind::InvalidData,
        )
        .await;
        // Malformed after a known user: unknown command, bad address type, bad addons.
        let mut bad = header(id, None, Command::Tcp, Some(dest()));
        bad[18] = 0x07;
        assert_refused(&bad, io::ErrorKind::InvalidData).await;
        let mut bad = header(id, None, Command::Tcp, Some(dest()));
        bad[21] = 0x09;
        assert_refused(&bad, io::ErrorKind::InvalidData).await;
        let mut bad = header(id, None, Command::Tcp, Some(dest()));
        bad[17] = 1; // one addons byte: 0x01 is a truncated protobuf key
        assert_refused(&bad, io::ErrorKind::InvalidData).await;
        // Truncated header from a known user.
        let truncated = &header(id, None, Command::Tcp, Some(dest()))[..25];
        let (mut c, s) = pair().await;
        c.write_all(truncated).await.unwrap();
        c.shutdown().await.unwrap();
        let err = accept(s, &server()).await.err().expect("refused");
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    })
    .await;
}

#[tokio::test]
async fn vless_udp_datagrams_round_trip() {
    bounded(async {
        let destination = Address::Ip("10.0.0.1:53".parse().unwrap());
        let (c, s) = pair().await;
        let expected = destination.clone();
        let server_task = tokio::spawn(async move {
            let (destination, stream, user) = match accept_ok(s).await {
                VlessAccept::Udp {
                    destination,
                    stream,
                    user,
                } => (destination, stream, user),
                _ => panic!("expected Udp"),
            };
            assert_eq!(destination, expected);
            assert_eq!(user.as_deref(), Some("me@example"));
            // Echo every datagram back, from split halves.
            let (mut rx, mut tx) = VlessPacketStream::new(stream).into_split();
            let mut buf = vec![0u8; 2000];
            let mut count = 0;
            loop {
                match rx.recv(&mut buf).await {
                    Ok(n) => {
                        tx.send(&buf[..n]).await.unwrap();
                        count += 1;
                    }
                    Err(err) if err.kind() == io::ErrorKind::UnexpectedEof => break,
                    Err(err) => panic!("{err}"),
                }
            }
            tx.shutdown().await.unwrap();
            count
        });
        let stream = client::connect(Box::new(c), &user(), &destination, Command::Udp);
        let (mut rx, mut tx) = VlessPacketStream::new(stream).into_split();
        let sizes: Vec<usize> = (0..200).map(|i| 1 + (i * 331) % 1400).collect();
        assert!(sizes.contains(&1) && sizes.iter().all(|&n| (1..=1400).contains(&n)));
        let sender = tokio::spawn(async move {
            for (i, &size) in sizes.iter().enumerate() {
                tx.send(&pattern(100 + i as u64, size)).await.unwrap();
            }
            tx.send(&[]).await.unwrap();
            tx.shutdown().await.unwrap();
            sizes
        });
        let mut buf = vec![0u8; 1400];
        let mut received = Vec::new();
        loop {
            match rx.recv(&mut buf).await {
                Ok(n) => received.push(buf[..n].to_vec()),
                Err(err) if err.kind() == io::ErrorKind::UnexpectedEof => break,
                Err(err) => panic!("{err}"),
            }
        }
        let sizes = sender.await.unwrap();
        assert_eq!(received.len(), 201);
        for (i, &size) in sizes.iter().enumerate() {
            assert_eq!(received[i], pattern(100 + i as u64, size), "datagram {i}");
        }
        assert!(received[200].is_empty());
        assert_eq!(server_task.await.unwrap(), 201);
    })
    .await;
}

#[tokio::test]
async fn vless_udp_recv_truncates_and_handles_coalesced_frames() {
    bounded(async {
        let (c, mut s) = pair().await;
        let mut packets = VlessPacketStream::new(Box::new(c));
        // Three frames in one write: a long one, then two short ones.
        let mut wire = Vec::new();
        let big = pattern(9, 5000);
        for payload in [&big[..], b"one", b"two"] {
            skiff_proto::vless::udp::encode_packet(payload, &mut wire).unwrap();
        }
        s.write_all(&wire).await.unwrap();
        let mut small = [0u8; 100];
        assert_eq!(packets.recv(&mut small).await.unwrap(), 100);
        assert_eq!(&small[..], &big[..100]);
        assert_eq!(packets.recv(&mut small).await.unwrap(), 3);
        assert_eq!(&small[..3], b"one");
        assert_eq!(packets.recv(&mut small).await.unwrap(), 3);
        assert_eq!(&small[..3], b"two");
        // Oversized payloads are refused before anything is written.
        let err = packets.send(&vec![0u8; 70_000]).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        packets.send(b"ping").await.unwrap();
        let mut got = [0u8; 6];
        s.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"\x00\x04ping");
        // End of stream inside a frame.
        s.write_all(&[0x00, 0x05, b'a']).await.unwrap();
        drop(s);
        let err = packets.recv(&mut small).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    })
    .await;
}

/// Records every write call made to the stream below.
struct Recording {
    inner: DuplexStream,
    writes: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl AsyncRead for Recording {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Recording {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = poll {
            self.writes.lock().unwrap().push(buf[..n].to_vec());
        }
        poll
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl ProxyStream for Recording {}

#[tokio::test]
async fn vless_client_header_and_first_payload_in_one_write() {
    bounded(async {
        let (a, mut b) = tokio::io::duplex(1 << 20);
        let writes = Arc::new(Mutex::new(Vec::new()));
        let recording = Recording {
            inner: a,
            writes: writes.clone(),
        };
        let mut stream = client::connect(Box::new(recording), &user(), &dest(), Command::Tcp);
        let hdr = header(*user().as_bytes(), None, Command::Tcp, Some(dest()));
        // A large first write: the header rides with the first 8 KiB, the rest follows.
        let payload = pattern(7, 20_000);
        stream.write_all(&payload).await.unwrap();
        stream.flush().await.unwrap();
        {
            let writes = writes.lock().unwrap();
            assert_eq!(writes[0], [&hdr[..], &payload[..8192]].concat());
            assert_eq!(writes[1..].concat(), &payload[8192..]);
        }
        let mut got = vec![0u8; hdr.len() + payload.len()];
        b.read_exact(&mut got).await.unwrap();
        assert_eq!(got, [&hdr[..], &payload[..]].concat());

        // Nothing to send: the header goes alone on flush.
        let (a, mut b) = tokio::io::duplex(1 << 20);
        let writes = Arc::new(Mutex::new(Vec::new()));
        let recording = Recording {
            inner: a,
            writes: writes.clone(),
        };
        let mut stream = client::connect(Box::new(recording), &user(), &dest(), Command::Udp);
        stream.flush().await.unwrap();
        let udp_hdr = header(*user().as_bytes(), None, Command::Udp, Some(dest()));
        assert_eq!(*writes.lock().unwrap(), vec![udp_hdr.clone()]);
        stream.shutdown().await.unwrap();
        let mut got = Vec::new();
        b.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, udp_hdr);
    })
    .await;
}

#[derive(Default)]
struct GateState {
    open: bool,
    /// One waker slot, overwritten by each waiter (like a socket's write readiness).
    waker: Option<std::task::Waker>,
}

/// Writes wait until the gate opens.
struct Gated {
    inner: DuplexStream,
    gate: Arc<Mutex<GateState>>,
}

impl AsyncRead for Gated {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Gated {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        {
            let mut gate = self.gate.lock().unwrap();
            if !gate.open {
                gate.waker = Some(cx.waker().clone());
                return Poll::Pending;
            }
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl ProxyStream for Gated {}

/// The writer waits for the first write to drain, the reader (another task) takes over the
/// inner waker slot and finishes the drain: the writer must still be woken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vless_client_reader_finishing_the_drain_wakes_the_writer() {
    bounded(async {
        let (a, mut b) = tokio::io::duplex(1 << 16);
        let gate = Arc::new(Mutex::new(GateState::default()));
        let gated = Gated {
            inner: a,
            gate: gate.clone(),
        };
        let stream = client::connect(Box::new(gated), &user(), &dest(), Command::Tcp);
        let (mut r, mut w) = tokio::io::split(stream);
        let writer = tokio::spawn(async move {
            w.write_all(b"data").await.unwrap();
            w.flush().await.unwrap();
            w
        });
        tokio::time::sleep(Duration::from_millis(30)).await;
        assert!(!writer.is_finished());
        let reader = tokio::spawn(async move {
            let mut buf = [0u8; 2];
            r.read_exact(&mut buf).await.unwrap();
            buf
        });
        tokio::time::sleep(Duration::from_millis(30)).await;
        let waker = {
            let mut gate = gate.lock().unwrap();
            gate.open = true;
            gate.waker.take()
        };
        waker.expect("someone waits").wake();
        let _w = tokio::time::timeout(Duration::from_secs(5), writer)
            .await
            .expect("writer was not woken")
            .unwrap();
        let hdr = header(*user().as_bytes(), None, Command::Tcp, Some(dest()));
        let mut got = vec![0u8; hdr.len() + 4];
        b.read_exact(&mut got).await.unwrap();
        assert_eq!(got, [&hdr[..], b"data"].concat());
        b.write_all(b"\x00\x00hi").await.unwrap();
        assert_eq!(&reader.await.unwrap(), b"hi");
    })
    .await;
}
