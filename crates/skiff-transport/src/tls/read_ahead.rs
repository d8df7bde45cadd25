//! A read-ahead buffer between the socket and rustls.
//!
//! rustls' buffered connection reads ciphertext 4 KiB at a time (its deframer grows by 4 KiB
//! per `read_tls`), so a 16 KiB record costs four or five `recv` calls, and on loopback the
//! syscalls cost more than the decryption. This adapter reads up to 64 KiB per syscall and
//! serves rustls' small reads from memory. The buffer exists only while it holds bytes: a
//! quiet connection keeps none.

use std::io;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use skiff_core::{BoxStream, ProxyStream};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

const READ_AHEAD: usize = 64 * 1024;

pub(crate) struct ReadAhead {
    inner: BoxStream,
    buf: Option<Box<[MaybeUninit<u8>]>>,
    /// `buf[start..end]` holds bytes read but not yet handed out.
    start: usize,
    end: usize,
}

impl ReadAhead {
    pub(crate) fn new(inner: BoxStream) -> ReadAhead {
        ReadAhead {
            inner,
            buf: None,
            start: 0,
            end: 0,
        }
    }

    fn buffered(&self) -> &[u8] {
        match &self.buf {
            Some(buf) => {
                let held = &buf[self.start..self.end];
                // SAFETY: `..end` was filled by a read into this buffer (ReadBuf tracks it).
                unsafe { &*(held as *const [MaybeUninit<u8>] as *const [u8]) }
            }
            None => &[],
        }
    }

    /// Whether bytes are waiting in the read-ahead buffer.
    pub(crate) fn has_buffered(&self) -> bool {
        self.start < self.end
    }
}

impl AsyncRead for ReadAhead {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.has_buffered() {
            if out.remaining() >= READ_AHEAD {
                // A big read gains nothing from a detour through our buffer.
                return Pin::new(&mut this.inner).poll_read(cx, out);
            }
            let buf = this
                .buf
                .get_or_insert_with(|| Box::new_uninit_slice(READ_AHEAD));
            let mut read_buf = ReadBuf::uninit(buf);
            let polled = Pin::new(&mut this.inner).poll_read(cx, &mut read_buf);
            let filled = read_buf.filled().len();
            if polled.is_pending() {
                // Nothing held: give the buffer back while the connection is quiet.
                this.buf = None;
                return Poll::Pending;
            }
            ready!(polled)?;
            this.start = 0;
            this.end = filled;
            if filled == 0 {
                this.buf = None;
                return Poll::Ready(Ok(()));
            }
        }
        let held = this.buffered();
        let n = held.len().min(out.remaining());
        out.put_slice(&held[..n]);
        this.start += n;
        if this.start == this.end {
            this.buf = None;
            this.start = 0;
            this.end = 0;
        }
        Poll::Ready(Ok(()))
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn small_reads_see_every_byte_in_order_and_the_end() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let connect = tokio::net::TcpStream::connect(listener.local_addr().unwrap());
        let (a, (mut b, _)) = tokio::try_join!(connect, listener.accept()).unwrap();
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        let sent = data.clone();
        let writer = tokio::spawn(async move {
            b.write_all(&sent).await.unwrap();
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
            got.extend_from_slice(&chunk[..n]);
        }
        writer.await.unwrap();
        assert_eq!(got, data);
        assert!(ahead.buf.is_none(), "an empty read-ahead holds no buffer");
    }
}
