//! Relay behaviour that needs a hand-made stream.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

use super::*;
use crate::stream::ProxyStream;

/// A writer that, like WebSocket or TLS, accepts a write into its own buffer and sends it
/// only when flushed, and whose first flush after a write is not ready yet (as when the
/// socket under it is full).
struct HoldsUntilFlushed {
    inner: TcpStream,
    held: Vec<u8>,
    flush_deferred: bool,
}

impl AsyncRead for HoldsUntilFlushed {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for HoldsUntilFlushed {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.held.extend_from_slice(buf);
        self.flush_deferred = false;
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if !self.held.is_empty() && !self.flush_deferred {
            self.flush_deferred = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        while !self.held.is_empty() {
            let this = &mut *self;
            let n = ready!(Pin::new(&mut this.inner).poll_write(cx, &this.held))?;
            this.held.drain(..n);
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.as_mut().poll_flush(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl ProxyStream for HoldsUntilFlushed {}

async fn pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let connect = TcpStream::connect(listener.local_addr().unwrap());
    let (a, (b, _)) = tokio::try_join!(connect, listener.accept()).unwrap();
    (a, b)
}

/// The client sends a request and then waits for the answer without closing: every byte
/// must still reach the far side, though the writer only sends on flush.
#[tokio::test]
async fn a_quiet_reader_still_gets_the_writer_flushed() {
    let (mut app, client_side) = pair().await;
    let (server_side, mut far) = pair().await;
    let server: BoxStream = Box::new(HoldsUntilFlushed {
        inner: server_side,
        held: Vec::new(),
        flush_deferred: false,
    });
    let policy = RelayPolicy::timeouts(
        Duration::from_secs(30),
        Duration::from_secs(30),
        Duration::from_secs(30),
    );
    let relay = tokio::spawn(async move {
        relay(
            Box::new(client_side),
            server,
            &policy,
            &RelayCounters::default(),
        )
        .await
    });
    let request = vec![7u8; 100_000];
    app.write_all(&request).await.unwrap();
    let mut got = vec![0u8; request.len()];
    tokio::time::timeout(Duration::from_secs(10), far.read_exact(&mut got))
        .await
        .expect("the relay kept the last bytes to itself")
        .unwrap();
    assert_eq!(got, request);
    relay.abort();
}

/// Policy timeouts as large as a config can write (Xray's "never" in practice) must not
/// overflow the clock when a direction ends and the watchdog is re-armed.
#[tokio::test]
async fn huge_policy_timeouts_do_not_overflow_the_clock() {
    let (mut app, client_side) = pair().await;
    let (server_side, mut far) = pair().await;
    let huge = Duration::from_secs(u64::MAX);
    let policy = RelayPolicy::timeouts(huge, huge, huge);
    let relay = tokio::spawn(async move {
        relay(
            Box::new(client_side),
            Box::new(server_side),
            &policy,
            &RelayCounters::default(),
        )
        .await
    });
    app.write_all(b"request").await.unwrap();
    app.shutdown().await.unwrap();
    let mut got = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), far.read_to_end(&mut got))
        .await
        .expect("the uplink's end reached the far side")
        .unwrap();
    assert_eq!(got, b"request");
    far.write_all(b"answer").await.unwrap();
    far.shutdown().await.unwrap();
    let mut back = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), app.read_to_end(&mut back))
        .await
        .expect("the downlink's end reached the client")
        .unwrap();
    assert_eq!(back, b"answer");
    let outcome = tokio::time::timeout(Duration::from_secs(10), relay)
        .await
        .expect("the relay ended")
        .expect("the relay task did not panic");
    assert!(
        matches!(outcome.end, RelayEnd::Finished),
        "{:?}",
        outcome.end
    );
}

#[test]
fn deadlines_saturate_instead_of_overflowing() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let now = Instant::now();
        assert!(deadline_after(Duration::from_secs(u64::MAX)) > now);
        assert!(deadline_after(Duration::MAX) > now);
        let soon = deadline_after(Duration::from_secs(5));
        assert!(soon >= now + Duration::from_secs(5));
    });
}
