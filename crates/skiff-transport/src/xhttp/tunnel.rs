//! One XHTTP tunnel as a stream: its reading half and its writing half come from different
//! places (the upload's request body or the session's reassembled packets; the download's
//! response body), and something may need to happen when it ends (the session leaves the
//! table, the request that carried it finishes).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use skiff_core::ProxyStream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

pub type BoxRead = Pin<Box<dyn AsyncRead + Send>>;
pub type BoxWrite = Pin<Box<dyn AsyncWrite + Send>>;

/// A reading half and a writing half joined; `on_drop` runs when the tunnel is dropped.
pub struct Tunnel {
    reader: BoxRead,
    writer: BoxWrite,
    on_drop: Vec<Box<dyn FnOnce() + Send>>,
}

impl Tunnel {
    pub fn new(reader: BoxRead, writer: BoxWrite) -> Self {
        Tunnel {
            reader,
            writer,
            on_drop: Vec::new(),
        }
    }

    pub fn on_drop(mut self, f: impl FnOnce() + Send + 'static) -> Self {
        self.on_drop.push(Box::new(f));
        self
    }
}

impl Drop for Tunnel {
    fn drop(&mut self) {
        for f in self.on_drop.drain(..) {
            f();
        }
    }
}

impl AsyncRead for Tunnel {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.reader.as_mut().poll_read(cx, buf)
    }
}

impl AsyncWrite for Tunnel {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.writer.as_mut().poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.writer.as_mut().poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.writer.as_mut().poll_shutdown(cx)
    }
}

impl ProxyStream for Tunnel {}

/// A reader that is already at its end (stream-one's GET, or a failed upload).
pub struct Empty;

impl AsyncRead for Empty {
    fn poll_read(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        _buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// How long a closed HTTP/1.1 connection keeps reading after its last write, so the kernel
/// sends FIN rather than RST (which would make the peer drop what it had not read yet).
const LINGER: std::time::Duration = std::time::Duration::from_millis(500);

/// An HTTP/1.1 connection that, when dropped, ends as Go's server ends one whose request
/// body is still coming (`closeWriteAndWait`): its sending side shut, what still arrives read
/// and dropped for a moment, then closed. Without it, a tunnel ending while the peer still
/// uploads resets the connection and the peer loses the tail of the download.
pub struct Linger(Option<skiff_core::BoxStream>);

impl Linger {
    pub fn new(io: skiff_core::BoxStream) -> Self {
        Linger(Some(io))
    }

    fn io(&mut self) -> &mut skiff_core::BoxStream {
        self.0.as_mut().expect("present until dropped")
    }
}

impl Drop for Linger {
    fn drop(&mut self) {
        let Some(mut io) = self.0.take() else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            use tokio::io::AsyncWriteExt;
            let _ = io.shutdown().await;
            let _ = tokio::time::timeout(LINGER, tokio::io::copy(&mut io, &mut tokio::io::sink()))
                .await;
        });
    }
}

impl AsyncRead for Linger {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(self.io()).poll_read(cx, buf)
    }
}

impl AsyncWrite for Linger {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(self.io()).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(self.io()).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(self.io()).poll_shutdown(cx)
    }
}
