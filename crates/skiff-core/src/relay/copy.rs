//! User-space relay for one direction, for streams that transform bytes (TLS, WebSocket…).
//! The buffer is allocated when the reader first has data, so idle connections hold none.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, ready};

use tokio::io::ReadBuf;

use crate::stats::{Counter, DirectionCounters};
use crate::stream::ProxyStream;

/// 64 KiB: big enough to keep syscalls and AEAD records per GiB low, small enough to not matter.
const BUFFER_SIZE: usize = 64 * 1024;

#[derive(Default)]
pub struct CopyState {
    buf: Option<Box<[u8]>>,
    start: usize,
    end: usize,
    eof: bool,
}

impl CopyState {
    /// Polls the copy from `reader` to `writer` until EOF has been read, everything written,
    /// and `writer` shut down.
    pub fn poll_copy<R, W>(
        &mut self,
        cx: &mut Context<'_>,
        reader: &mut R,
        writer: &mut W,
        counters: &DirectionCounters,
        copied: &Counter,
        tally: &AtomicU64,
    ) -> Poll<io::Result<()>>
    where
        R: ProxyStream + ?Sized,
        W: ProxyStream + ?Sized,
    {
        loop {
            if self.start == self.end && !self.eof {
                if self.buf.is_none() {
                    ready!(reader.poll_read_ready(cx))?;
                    self.buf = Some(vec![0u8; BUFFER_SIZE].into_boxed_slice());
                }
                let Some(buf) = self.buf.as_deref_mut() else {
                    continue;
                };
                let mut read_buf = ReadBuf::new(buf);
                match Pin::new(&mut *reader).poll_read(cx, &mut read_buf) {
                    Poll::Pending => {
                        // Nothing more to read now: push out what the writer may be holding.
                        ready!(Pin::new(&mut *writer).poll_flush(cx))?;
                        return Poll::Pending;
                    }
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Ready(Ok(())) => {
                        let n = read_buf.filled().len();
                        self.start = 0;
                        self.end = n;
                        self.eof = n == 0;
                    }
                }
            }
            while self.start < self.end {
                let Some(buf) = self.buf.as_deref() else {
                    break;
                };
                let chunk = &buf[self.start..self.end];
                let n = ready!(Pin::new(&mut *writer).poll_write(cx, chunk))?;
                if n == 0 {
                    return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                }
                self.start += n;
                counters.add(n as u64);
                copied.add(n as u64);
                tally.fetch_add(n as u64, Ordering::Relaxed);
            }
            if self.eof {
                ready!(Pin::new(&mut *writer).poll_flush(cx))?;
                return match ready!(Pin::new(&mut *writer).poll_shutdown(cx)) {
                    Err(e) if e.kind() == io::ErrorKind::NotConnected => Poll::Ready(Ok(())),
                    other => Poll::Ready(other),
                };
            }
        }
    }
}
