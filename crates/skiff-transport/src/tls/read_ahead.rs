//! A read-ahead buffer between the socket and rustls that never hands rustls more than the
//! rest of the current TLS record.
//!
//! Two reasons. rustls' buffered connection reads ciphertext 4 KiB at a time, so a 16 KiB
//! record would cost four or five `recv` calls; this adapter reads up to 64 KiB per syscall
//! and serves rustls' small reads from memory. And because rustls only ever sees whole
//! records' worth of bytes up to a record boundary, when the handshake completes rustls holds
//! no ciphertext of a later record: everything after the last handshake record is still here,
//! so the connection can move to our own record layer ([`super::records`]) without losing a
//! byte. The buffer exists only while it holds bytes: a quiet connection keeps none.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use skiff_core::{BoxStream, ProxyStream};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

const READ_AHEAD: usize = 64 * 1024;
const RECORD_HEADER_LEN: usize = 5;

pub(crate) struct ReadAhead {
    inner: BoxStream,
    /// `buf[start..end]` holds bytes read but not yet handed out.
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// Bytes of the current record not yet handed out; 0 at a record boundary.
    record_left: usize,
}

impl ReadAhead {
    pub(crate) fn new(inner: BoxStream) -> ReadAhead {
        ReadAhead {
            inner,
            buf: Vec::new(),
            start: 0,
            end: 0,
            record_left: 0,
        }
    }

    /// The TCP socket writes go to, for a last record at drop time.
    pub(crate) fn socket(&self) -> Option<&tokio::net::TcpStream> {
        self.inner.raw_tcp_write()
    }

    /// Whether bytes are waiting in the read-ahead buffer.
    pub(crate) fn has_buffered(&self) -> bool {
        self.start < self.end
    }

    /// Everything handed out so far ended at a record boundary.
    pub(crate) fn at_record_boundary(&self) -> bool {
        self.record_left == 0
    }

    /// The stream underneath and the bytes read from it but not handed out.
    pub(crate) fn into_parts(self) -> (BoxStream, Vec<u8>) {
        let rest = self.buf[self.start..self.end].to_vec();
        (self.inner, rest)
    }

    fn release_if_empty(&mut self) {
        if self.start == self.end {
            self.buf = Vec::new();
            self.start = 0;
            self.end = 0;
        }
    }

    /// Reads more from the socket, keeping what is buffered (moved to the front).
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.buf.len() < READ_AHEAD {
            self.buf.resize(READ_AHEAD, 0);
        }
        let mut read_buf = ReadBuf::new(&mut self.buf[self.end..]);
        let polled = Pin::new(&mut self.inner).poll_read(cx, &mut read_buf);
        let n = read_buf.filled().len();
        if polled.is_pending() && self.end == 0 {
            // Nothing held: give the buffer back while the connection is quiet.
            self.buf = Vec::new();
        }
        ready!(polled)?;
        self.end += n;
        Poll::Ready(Ok(n))
    }
}

impl AsyncRead for ReadAhead {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if out.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        loop {
            let held = this.end - this.start;
            if this.record_left == 0 && held >= RECORD_HEADER_LEN {
                let h = &this.buf[this.start..this.start + RECORD_HEADER_LEN];
                let len = usize::from(u16::from_be_bytes([h[3], h[4]]));
                this.record_left = RECORD_HEADER_LEN + len;
            }
            if this.record_left > 0 && held > 0 {
                let take = held.min(this.record_left).min(out.remaining());
                out.put_slice(&this.buf[this.start..this.start + take]);
                this.start += take;
                this.record_left -= take;
                this.release_if_empty();
                return Poll::Ready(Ok(()));
            }
            // Nothing held, or only part of a record header: read more.
            if ready!(this.poll_fill(cx))? == 0 {
                // The peer ended the stream: hand on a partial header (rustls reports the
                // truncation), or the end itself.
                let take = held.min(out.remaining());
                out.put_slice(&this.buf[this.start..this.start + take]);
                this.start += take;
                this.release_if_empty();
                return Poll::Ready(Ok(()));
            }
        }
    }
}

impl AsyncWrite for ReadAhead {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

impl ProxyStream for ReadAhead {
    fn poll_read_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.has_buffered() {
            Poll::Ready(Ok(()))
        } else {
            self.inner.poll_read_ready(cx)
        }
    }

    fn reset_on_close(&mut self) {
        self.inner.reset_on_close()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Fake records of assorted lengths, written in odd slices: every read stops at or
    /// before a record's end, and together the reads give back every byte in order.
    #[tokio::test]
    async fn reads_never_cross_a_record_boundary_and_lose_nothing() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let connect = tokio::net::TcpStream::connect(listener.local_addr().unwrap());
        let (a, (mut b, _)) = tokio::try_join!(connect, listener.accept()).unwrap();
        let mut data = Vec::new();
        let mut boundaries = Vec::new();
        for (i, len) in [0usize, 1, 300, 16_384, 5, 40_000, 2, 16_401]
            .iter()
            .enumerate()
        {
            data.extend_from_slice(&[23, 3, 3]);
            data.extend_from_slice(&(*len as u16).to_be_bytes());
            data.extend((0..*len).map(|j| (i * 31 + j) as u8));
            boundaries.push(data.len());
        }
        let sent = data.clone();
        let writer = tokio::spawn(async move {
            for piece in sent.chunks(7_777) {
                b.write_all(piece).await.unwrap();
                tokio::task::yield_now().await;
            }
            b.shutdown().await.unwrap();
        });
        let mut ahead = ReadAhead::new(Box::new(a));
        let mut got = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            let n = ahead.read(&mut chunk).await.unwrap();
            if n == 0 {
                break;
            }
            let (from, to) = (got.len(), got.len() + n);
            assert!(
                !boundaries.iter().any(|&b| from < b && b < to),
                "a read of {from}..{to} crossed a record boundary"
            );
            got.extend_from_slice(&chunk[..n]);
        }
        writer.await.unwrap();
        assert_eq!(got, data);
        assert!(ahead.buf.is_empty(), "an empty read-ahead holds no buffer");
    }
}
