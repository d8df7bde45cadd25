//! The decrypted stream handed back by [`TlsServer::accept`](super::TlsServer::accept) and
//! [`TlsClient::connect`](super::TlsClient::connect): a thin newtype over tokio-rustls's
//! stream so it can implement [`ProxyStream`]. Below rustls sits a [`ReadAhead`] so ciphertext
//! arrives in 64 KiB reads rather than rustls' 4 KiB ones.

use std::io::{self, BufRead};
use std::pin::Pin;
use std::task::{Context, Poll};

use skiff_core::ProxyStream;

use super::read_ahead::ReadAhead;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Either side of an established TLS connection over a [`BoxStream`](skiff_core::BoxStream).
pub struct TlsProxyStream {
    inner: Inner,
    /// Cut on purpose ([`ProxyStream::reset_on_close`]): no close_notify at drop.
    reset: bool,
}

enum Inner {
    Client(tokio_rustls::client::TlsStream<ReadAhead>),
    Server(tokio_rustls::server::TlsStream<ReadAhead>),
}

impl TlsProxyStream {
    pub(crate) fn client(s: tokio_rustls::client::TlsStream<ReadAhead>) -> TlsProxyStream {
        TlsProxyStream {
            inner: Inner::Client(s),
            reset: false,
        }
    }

    pub(crate) fn server(s: tokio_rustls::server::TlsStream<ReadAhead>) -> TlsProxyStream {
        TlsProxyStream {
            inner: Inner::Server(s),
            reset: false,
        }
    }

    /// Whether rustls already holds decrypted bytes (or a clean end of stream) for the reader.
    fn plaintext_pending(&mut self) -> bool {
        let filled = match &mut self.inner {
            Inner::Client(s) => s.get_mut().1.reader().fill_buf().map(|b| b.len()),
            Inner::Server(s) => s.get_mut().1.reader().fill_buf().map(|b| b.len()),
        };
        // Ok(n > 0): plaintext buffered. Ok(0): close_notify received, a read returns EOF at
        // once. WouldBlock: nothing yet. Any other error: a read reports it at once.
        !matches!(filled, Err(ref e) if e.kind() == io::ErrorKind::WouldBlock)
    }

    fn io_mut(&mut self) -> &mut ReadAhead {
        match &mut self.inner {
            Inner::Client(s) => s.get_mut().0,
            Inner::Server(s) => s.get_mut().0,
        }
    }
}

impl ProxyStream for TlsProxyStream {
    fn poll_read_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.plaintext_pending() {
            Poll::Ready(Ok(()))
        } else {
            self.io_mut().poll_read_ready(cx)
        }
    }

    fn reset_on_close(&mut self) {
        self.reset = true;
        self.io_mut().reset_on_close()
    }
}

/// A TLS connection dropped without a shutdown (a handshake timeout, an unreachable fallback,
/// an idle timeout, the other side failing) still says close_notify, as Xray's (Go's) and
/// nginx's do on close: without it a peer, or a prober, sees a truncation no ordinary server
/// produces. Best effort: the alert goes out only if the socket takes it at once, and never
/// for a connection cut on purpose (which resets instead).
impl Drop for TlsProxyStream {
    fn drop(&mut self) {
        if self.reset {
            return;
        }
        match &mut self.inner {
            Inner::Client(s) => {
                let (io, conn) = s.get_mut();
                say_close_notify(io, conn);
            }
            Inner::Server(s) => {
                let (io, conn) = s.get_mut();
                say_close_notify(io, conn);
            }
        }
    }
}

fn say_close_notify<D>(io: &ReadAhead, conn: &mut rustls::ConnectionCommon<D>) {
    if conn.is_handshaking() {
        return;
    }
    let Some(socket) = io.socket() else { return };
    conn.send_close_notify();
    let mut out = Vec::new();
    if conn.write_tls(&mut out).is_ok() && !out.is_empty() {
        let _ = socket.try_write(&out);
    }
}

impl AsyncRead for TlsProxyStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match &mut self.inner {
            Inner::Client(s) => Pin::new(s).poll_read(cx, buf),
            Inner::Server(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for TlsProxyStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &mut self.inner {
            Inner::Client(s) => Pin::new(s).poll_write(cx, buf),
            Inner::Server(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match &mut self.inner {
            Inner::Client(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Inner::Server(s) => Pin::new(s).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match &self.inner {
            Inner::Client(s) => s.is_write_vectored(),
            Inner::Server(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.inner {
            Inner::Client(s) => Pin::new(s).poll_flush(cx),
            Inner::Server(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.inner {
            Inner::Client(s) => Pin::new(s).poll_shutdown(cx),
            Inner::Server(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}
