//! User-space relay for one direction, for streams that transform bytes (TLS, WebSocket…) or
//! have not yet become plain sockets (a protocol header still to write or strip). The buffer is
//! allocated when the reader first has data, so idle connections hold none.

use std::io;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use tokio::io::ReadBuf;

use crate::stats::{Counter, DirectionCounters};
use crate::stream::ProxyStream;

/// 64 KiB: big enough to keep syscalls and AEAD records per GiB low, small enough to not matter.
const BUFFER_SIZE: usize = 64 * 1024;

/// How a copy stopped.
#[derive(Debug, PartialEq, Eq)]
pub enum CopyEnd {
    /// EOF read, everything written, the writer shut down.
    Finished,
    /// The buffer is empty and both ends are raw sockets now: the caller may splice.
    BothRaw,
}

#[derive(Default)]
pub struct CopyState {
    buf: Option<Box<[MaybeUninit<u8>]>>,
    start: usize,
    end: usize,
    eof: bool,
}

impl CopyState {
    /// Queues bytes a handshake read ahead, to be written before anything else is read.
    pub fn load(&mut self, bytes: &Bytes) {
        let len = bytes.len().max(BUFFER_SIZE);
        let buf = match self.buf.take() {
            Some(buf) if buf.len() >= bytes.len() => buf,
            _ => Box::new_uninit_slice(len),
        };
        let buf = self.buf.insert(buf);
        for (slot, byte) in buf.iter_mut().zip(bytes.iter()) {
            slot.write(*byte);
        }
        self.start = 0;
        self.end = bytes.len();
    }

    /// Polls the copy from `reader` to `writer` until EOF has been read, everything written,
    /// and `writer` shut down; or, with `stop_when_raw`, until the buffer is empty at a moment
    /// when the reader answers `raw_tcp_read()` and the writer `raw_tcp_write()` (a protocol wrapper became transparent).
    #[allow(clippy::too_many_arguments)]
    pub fn poll_copy<R, W>(
        &mut self,
        cx: &mut Context<'_>,
        reader: &mut R,
        writer: &mut W,
        counters: &DirectionCounters,
        copied: &Counter,
        tally: &AtomicU64,
        stop_when_raw: bool,
    ) -> Poll<io::Result<CopyEnd>>
    where
        R: ProxyStream + ?Sized,
        W: ProxyStream + ?Sized,
    {
        loop {
            if self.start == self.end && !self.eof {
                if stop_when_raw
                    && reader.raw_tcp_read().is_some()
                    && writer.raw_tcp_write().is_some()
                {
                    // The buffer has done its job; splice needs none.
                    self.buf = None;
                    return Poll::Ready(Ok(CopyEnd::BothRaw));
                }
                if self.buf.is_none() {
                    if let Poll::Ready(ready) = reader.poll_read_ready(cx) {
                        ready?;
                    } else {
                        // A quiet reader must not stall the writer: a stream that buffers
                        // (WebSocket, TLS) may still hold bytes from the last write, and only
                        // flushing drives them out. Without this a connection whose client
                        // waits for an answer hangs with its last bytes inside Skiff.
                        ready!(Pin::new(&mut *writer).poll_flush(cx))?;
                        return Poll::Pending;
                    }
                    self.buf = Some(Box::new_uninit_slice(BUFFER_SIZE));
                }
                let Some(buf) = self.buf.as_deref_mut() else {
                    continue;
                };
                let mut read_buf = ReadBuf::uninit(buf);
                match Pin::new(&mut *reader).poll_read(cx, &mut read_buf) {
                    Poll::Pending => {
                        // Nothing to read now and nothing held: give the buffer back, so a
                        // connection that goes quiet costs no buffer (it comes back
                        // uninitialised, so taking it again is only a malloc).
                        self.buf = None;
                        // Push out what the writer may be holding.
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
                // SAFETY: `..end` was filled by the last read (ReadBuf tracks it; `load` copies
                // in), so these bytes are initialised.
                let chunk = unsafe { &*(chunk as *const [MaybeUninit<u8>] as *const [u8]) };
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
                    Err(e) if e.kind() == io::ErrorKind::NotConnected => {
                        Poll::Ready(Ok(CopyEnd::Finished))
                    }
                    Err(e) => Poll::Ready(Err(e)),
                    Ok(()) => Poll::Ready(Ok(CopyEnd::Finished)),
                };
            }
        }
    }
}
