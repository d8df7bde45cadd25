//! A stream wrapper that feeds live counters, for byte flows the relay does not carry itself
//! (an HTTP proxy forwarding requests copies bodies on its own).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::stats::DirectionCounters;
use crate::stream::ProxyStream;

pub struct Counted<S> {
    inner: S,
    /// Bytes written into the stream (towards the destination).
    written: DirectionCounters,
    /// Bytes read from the stream (from the destination).
    read: DirectionCounters,
}

impl<S> Counted<S> {
    pub fn new(inner: S, written: DirectionCounters, read: DirectionCounters) -> Counted<S> {
        Counted {
            inner,
            written,
            read,
        }
    }
}

// Counting changes no byte, but the counters would miss spliced bytes, so the wrapper hides
// the raw socket from the relay.
impl<S: ProxyStream> ProxyStream for Counted<S> {
    fn poll_read_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.inner.poll_read_ready(cx)
    }

    fn reset_on_close(&mut self) {
        self.inner.reset_on_close()
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Counted<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let result = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        if n > 0 {
            self.read.add(n as u64);
        }
        result
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Counted<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let result = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = result {
            self.written.add(n as u64);
        }
        result
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
