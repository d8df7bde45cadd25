//! The stream abstraction every layer and protocol passes along, with the two escape hatches
//! the splice relay needs: "what raw socket is underneath" and "what did you read ahead".

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A bidirectional byte stream on the data path.
pub trait ProxyStream: AsyncRead + AsyncWrite + Send + Unpin + 'static {
    /// The kernel socket this stream is *exactly*, byte for byte, once `take_read_residue` has
    /// been drained: then the relay may splice(2) it. Layers that transform bytes return None.
    fn raw_tcp(&self) -> Option<&TcpStream> {
        None
    }

    /// Bytes already read from the socket but not yet returned to the reader. The relay sends
    /// them on before it starts splicing.
    fn take_read_residue(&mut self) -> Option<Bytes> {
        None
    }

    /// Ready when a read would make progress, without needing a buffer yet: lets the relay
    /// allocate its buffers only once data arrives, so idle connections stay small.
    fn poll_read_ready(&mut self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    /// The socket this stream's *read* side is exactly, once the residue is drained. A stream
    /// whose two directions leave a wrapping layer at different moments (XTLS Vision's direct
    /// mode) answers per direction; every other stream answers as `raw_tcp`.
    fn raw_tcp_read(&self) -> Option<&TcpStream> {
        self.raw_tcp()
    }

    /// The socket this stream's *write* side is exactly: writes may go to it directly.
    fn raw_tcp_write(&self) -> Option<&TcpStream> {
        self.raw_tcp()
    }

    /// A TLS stream under our own record layer can stop encrypting one direction at a time
    /// (XTLS Vision's "direct" switch). None for everything else.
    fn direct_switch(&mut self) -> Option<&mut dyn DirectSwitch> {
        None
    }

    /// Makes the socket underneath end with a reset (RST) instead of a FIN when the stream is
    /// dropped: for connections cut short (the end of a shutdown's grace period), so the peer
    /// cannot take a cut transfer for a complete one. Wrappers pass it to their inner stream;
    /// streams with no TCP socket underneath do nothing.
    fn reset_on_close(&mut self) {
        if let Some(tcp) = self.raw_tcp() {
            // A socket already closed by the peer may refuse; then there is nothing to cut.
            let _ = socket2::SockRef::from(tcp).set_linger(Some(std::time::Duration::ZERO));
        }
    }
}

/// Leaving the outer TLS one direction at a time (vless.md §7.4–7.5): after the switch that
/// direction's bytes go to or come from the TCP socket unmodified.
pub trait DirectSwitch {
    /// From now on reads return, in order: plaintext already decrypted but not returned,
    /// bytes read from the socket but not decrypted, then the socket's own bytes.
    fn read_direct(&mut self);
    /// From now on writes go to the socket as they are, after the records already sealed.
    fn write_direct(&mut self);
}

pub type BoxStream = Box<dyn ProxyStream>;

impl ProxyStream for TcpStream {
    fn raw_tcp(&self) -> Option<&TcpStream> {
        Some(self)
    }

    fn poll_read_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        TcpStream::poll_read_ready(self, cx)
    }
}

impl ProxyStream for BoxStream {
    fn raw_tcp(&self) -> Option<&TcpStream> {
        (**self).raw_tcp()
    }
    fn take_read_residue(&mut self) -> Option<Bytes> {
        (**self).take_read_residue()
    }
    fn poll_read_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        (**self).poll_read_ready(cx)
    }
    fn raw_tcp_read(&self) -> Option<&TcpStream> {
        (**self).raw_tcp_read()
    }
    fn raw_tcp_write(&self) -> Option<&TcpStream> {
        (**self).raw_tcp_write()
    }
    fn direct_switch(&mut self) -> Option<&mut dyn DirectSwitch> {
        (**self).direct_switch()
    }
    fn reset_on_close(&mut self) {
        (**self).reset_on_close()
    }
}

/// A stream with bytes in front of it that a handshake read ahead (e.g. the start of the
/// payload that arrived with a SOCKS or HTTP request). Reads return the prefix first.
pub struct Prefixed<S> {
    prefix: Bytes,
    inner: S,
}

impl<S> Prefixed<S> {
    pub fn new(prefix: Bytes, inner: S) -> Prefixed<S> {
        Prefixed { prefix, inner }
    }

    pub fn into_parts(self) -> (Bytes, S) {
        (self.prefix, self.inner)
    }
}

/// `stream`, boxed, with a copy of `prefix` (bytes a handshake read past its header) in front;
/// no wrapper when there is none.
pub fn with_prefix<S: ProxyStream>(prefix: &[u8], stream: S) -> BoxStream {
    if prefix.is_empty() {
        Box::new(stream)
    } else {
        Box::new(Prefixed::new(Bytes::copy_from_slice(prefix), stream))
    }
}

impl<S: ProxyStream> ProxyStream for Prefixed<S> {
    fn raw_tcp(&self) -> Option<&TcpStream> {
        self.inner.raw_tcp()
    }

    fn raw_tcp_read(&self) -> Option<&TcpStream> {
        self.inner.raw_tcp_read()
    }

    fn raw_tcp_write(&self) -> Option<&TcpStream> {
        self.inner.raw_tcp_write()
    }

    fn take_read_residue(&mut self) -> Option<Bytes> {
        let mine = std::mem::take(&mut self.prefix);
        match self.inner.take_read_residue() {
            None if mine.is_empty() => None,
            None => Some(mine),
            Some(theirs) if mine.is_empty() => Some(theirs),
            Some(theirs) => {
                let mut joined = Vec::with_capacity(mine.len() + theirs.len());
                joined.extend_from_slice(&mine);
                joined.extend_from_slice(&theirs);
                Some(joined.into())
            }
        }
    }

    fn poll_read_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.prefix.is_empty() {
            self.inner.poll_read_ready(cx)
        } else {
            Poll::Ready(Ok(()))
        }
    }

    /// The prefix is plaintext read before any switch, so it still comes first: after
    /// `read_direct` reads return the prefix, then what the inner stream returns in direct
    /// mode. Without this a fallback-capable inbound (which reads ahead into a `Prefixed`)
    /// could never run XTLS Vision.
    fn direct_switch(&mut self) -> Option<&mut dyn DirectSwitch> {
        self.inner.direct_switch()
    }

    fn reset_on_close(&mut self) {
        self.inner.reset_on_close()
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Prefixed<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if !self.prefix.is_empty() {
            let n = self.prefix.len().min(buf.remaining());
            buf.put_slice(&self.prefix[..n]);
            self.prefix.advance(n);
            if self.prefix.is_empty() {
                // An emptied `Bytes` still holds its storage: let it go now, not when the
                // connection ends.
                self.prefix = Bytes::new();
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Prefixed<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// Unix sockets carry fallbacks to local web servers; they are never spliced.
#[cfg(unix)]
impl ProxyStream for tokio::net::UnixStream {}
