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

use skiff_core::buffers::{READ_WINDOW, ReadBuffer};
use skiff_core::{BoxStream, ProxyStream};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

const RECORD_HEADER_LEN: usize = 5;

pub(crate) struct ReadAhead {
    inner: BoxStream,
    /// Bytes read but not yet handed out.
    buf: ReadBuffer,
    /// Bytes of the current record not yet handed out; 0 at a record boundary.
    record_left: usize,
}

impl ReadAhead {
    pub(crate) fn new(inner: BoxStream) -> ReadAhead {
        ReadAhead {
            inner,
            buf: ReadBuffer::new(),
            record_left: 0,
        }
    }

    /// The TCP socket writes go to, for a last record at drop time.
    pub(crate) fn socket(&self) -> Option<&tokio::net::TcpStream> {
        self.inner.raw_tcp_write()
    }

    /// Whether bytes are waiting in the read-ahead buffer.
    pub(crate) fn has_buffered(&self) -> bool {
        !self.buf.is_empty()
    }

    /// Everything handed out so far ended at a record boundary.
    pub(crate) fn at_record_boundary(&self) -> bool {
        self.record_left == 0
    }

    /// The stream underneath and the bytes read from it but not handed out.
    pub(crate) fn into_parts(mut self) -> (BoxStream, Vec<u8>) {
        let rest = self.buf.take();
        (self.inner, rest)
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
            let held = this.buf.held();
            if this.record_left == 0 && held.len() >= RECORD_HEADER_LEN {
                let len = usize::from(u16::from_be_bytes([held[3], held[4]]));
                this.record_left = RECORD_HEADER_LEN + len;
            }
            if this.record_left > 0 && !held.is_empty() {
                let take = held.len().min(this.record_left).min(out.remaining());
                out.put_slice(&held[..take]);
                this.buf.consume(take);
                this.record_left -= take;
                this.buf.release_if_empty();
                return Poll::Ready(Ok(()));
            }
            // Nothing held, or only part of a record header: read more.
            if ready!(this.buf.poll_fill(&mut this.inner, cx, READ_WINDOW))? == 0 {
                // The peer ended the stream: hand on a partial header (rustls reports the
                // truncation), or the end itself.
                let held = this.buf.held();
                let take = held.len().min(out.remaining());
                out.put_slice(&held[..take]);
                this.buf.consume(take);
                this.buf.release_if_empty();
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
