//! A smux stream as a Skiff stream: reads wait for data (EOF after the peer's FIN), writes wait
//! for room in the session's output and (v2) the peer's window; shutdown sends FIN; dropping
//! the stream closes it. After the peer's FIN, writes fail unless the session keeps half-close.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use skiff_core::ProxyStream;
use skiff_kcp::smux::{StreamRead, StreamWrite};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::conn::Conn;

pub struct KcpStream {
    conn: Arc<Conn>,
    sid: u32,
}

impl KcpStream {
    pub(crate) fn new(conn: Arc<Conn>, sid: u32) -> KcpStream {
        KcpStream { conn, sid }
    }

    pub fn sid(&self) -> u32 {
        self.sid
    }

    pub fn conn(&self) -> &Arc<Conn> {
        &self.conn
    }
}

impl AsyncRead for KcpStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let sid = self.sid;
        let mut inner = self.conn.lock();
        let could_receive = inner.smux.wants_input();
        match inner.smux.read(sid, buf.initialize_unfilled()) {
            StreamRead::Data(n) => {
                buf.advance(n);
                // A read may have queued a window update or reopened the receive budget.
                let poke =
                    inner.smux.pending_output() > 0 || (!could_receive && inner.smux.wants_input());
                drop(inner);
                if poke {
                    self.conn.poke.notify_one();
                }
                Poll::Ready(Ok(()))
            }
            StreamRead::Eof => Poll::Ready(Ok(())),
            StreamRead::Reset => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::ConnectionReset,
                "KCP session ended",
            ))),
            StreamRead::Pending => {
                inner.readers.insert(sid, cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

impl AsyncWrite for KcpStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let sid = self.sid;
        let mut inner = self.conn.lock();
        match inner.smux.write(sid, data) {
            StreamWrite::Written(n) => {
                drop(inner);
                self.conn.poke.notify_one();
                Poll::Ready(Ok(n))
            }
            StreamWrite::Closed => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "smux stream closed",
            ))),
            StreamWrite::Pending => {
                inner.writers.insert(sid, cx.waker().clone());
                drop(inner);
                // Make sure the driver is draining what holds us up.
                self.conn.poke.notify_one();
                Poll::Pending
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Written bytes are queued in the session, in order; the driver sends them.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.conn.lock().smux.shutdown(self.sid);
        self.conn.poke.notify_one();
        Poll::Ready(Ok(()))
    }
}

impl Drop for KcpStream {
    fn drop(&mut self) {
        {
            let mut inner = self.conn.lock();
            inner.smux.close(self.sid);
            inner.readers.remove(&self.sid);
            inner.writers.remove(&self.sid);
            inner.live_streams = inner.live_streams.saturating_sub(1);
        }
        self.conn.poke.notify_one();
    }
}

impl ProxyStream for KcpStream {
    fn poll_read_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut inner = self.conn.lock();
        if inner.smux.readable(self.sid) {
            Poll::Ready(Ok(()))
        } else {
            inner.readers.insert(self.sid, cx.waker().clone());
            Poll::Pending
        }
    }
}
