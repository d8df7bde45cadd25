//! An mKCP connection as a Skiff stream. Reads wait for in-order data and end when the peer
//! has terminated; writes wait for room in the send window. There is no half-close in mKCP
//! (V2Ray closes both directions at once), so shutdown only flushes; dropping the stream
//! closes the connection, whose task still delivers what was queued.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use skiff_core::ProxyStream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::conn::Conn;

pub struct MkcpStream {
    conn: Arc<Conn>,
}

impl MkcpStream {
    pub(crate) fn new(conn: Arc<Conn>) -> MkcpStream {
        MkcpStream { conn }
    }

    pub fn conn(&self) -> &Arc<Conn> {
        &self.conn
    }
}

impl AsyncRead for MkcpStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let mut inner = self.conn.lock();
        let n = inner.session.recv(buf.initialize_unfilled());
        if n > 0 {
            buf.advance(n);
            let now = self.conn.now_ms();
            // The read may have opened the window enough to tell the peer.
            let wake = inner.session.next_update_ms(now) == now;
            drop(inner);
            if wake {
                self.conn.poke.notify_one();
            }
            return Poll::Ready(Ok(()));
        }
        if inner.session.read_finished() || self.conn.is_dead() {
            return Poll::Ready(Ok(()));
        }
        inner.reader = Some(cx.waker().clone());
        Poll::Pending
    }
}

impl AsyncWrite for MkcpStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.conn.is_dead() {
            return Poll::Ready(Err(closed()));
        }
        let mut inner = self.conn.lock();
        match inner.session.send(data) {
            Ok(0) if !data.is_empty() => {
                inner.writer = Some(cx.waker().clone());
                Poll::Pending
            }
            Ok(n) => {
                drop(inner);
                self.conn.poke.notify_one();
                Poll::Ready(Ok(n))
            }
            Err(_) => Poll::Ready(Err(closed())),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Queued data is the session's to send; the driver was poked on every write.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // No half-close in mKCP: closing here would stop the peer from sending too.
        Poll::Ready(Ok(()))
    }
}

fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "mKCP connection closed")
}

impl Drop for MkcpStream {
    fn drop(&mut self) {
        let now = self.conn.now_ms();
        {
            let mut inner = self.conn.lock();
            inner.session.close(now);
            inner.reader = None;
            inner.writer = None;
        }
        self.conn.poke.notify_one();
    }
}

impl ProxyStream for MkcpStream {
    fn poll_read_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut inner = self.conn.lock();
        if inner.session.readable() || inner.session.read_finished() || self.conn.is_dead() {
            Poll::Ready(Ok(()))
        } else {
            inner.reader = Some(cx.waker().clone());
            Poll::Pending
        }
    }
}
