//! An HTTP/2 stream's two halves as byte streams: the received DATA frames as a reader
//! (releasing flow-control credit as they are read), and a writer that sends DATA within the
//! peer's window.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use h2::{RecvStream, SendStream};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Most bytes asked of the peer's window at once.
const MAX_RESERVE: usize = 64 * 1024;

pub struct H2Reader {
    recv: RecvStream,
    pending: Bytes,
}

impl H2Reader {
    pub fn new(recv: RecvStream) -> Self {
        H2Reader {
            recv,
            pending: Bytes::new(),
        }
    }
}

impl AsyncRead for H2Reader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        while this.pending.is_empty() {
            match ready!(this.recv.poll_data(cx)) {
                Some(Ok(data)) => {
                    let _ = this.recv.flow_control().release_capacity(data.len());
                    this.pending = data;
                }
                Some(Err(e)) if e.reason() == Some(h2::Reason::NO_ERROR) => {
                    return Poll::Ready(Ok(()));
                }
                Some(Err(e)) => return Poll::Ready(Err(to_io(e))),
                None => return Poll::Ready(Ok(())),
            }
        }
        let n = this.pending.len().min(out.remaining());
        out.put_slice(&this.pending.split_to(n));
        Poll::Ready(Ok(()))
    }
}

pub struct H2Writer {
    send: SendStream<Bytes>,
    ended: bool,
}

impl H2Writer {
    pub fn new(send: SendStream<Bytes>) -> Self {
        H2Writer { send, ended: false }
    }
}

impl AsyncWrite for H2Writer {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        if this.ended {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        this.send.reserve_capacity(buf.len().min(MAX_RESERVE));
        let n = loop {
            let have = this.send.capacity();
            if have > 0 {
                break have.min(buf.len());
            }
            match ready!(this.send.poll_capacity(cx)) {
                Some(Ok(_)) => continue,
                Some(Err(e)) => return Poll::Ready(Err(to_io(e))),
                None => return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into())),
            }
        };
        this.send
            .send_data(Bytes::copy_from_slice(&buf[..n]), false)
            .map_err(to_io)?;
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.ended {
            this.ended = true;
            this.send.send_data(Bytes::new(), true).map_err(to_io)?;
        }
        Poll::Ready(Ok(()))
    }
}

pub fn to_io(e: h2::Error) -> io::Error {
    if e.is_io() {
        return e.into_io().unwrap_or_else(|| io::ErrorKind::Other.into());
    }
    io::Error::other(e)
}
