//! The read and write buffers of the streams that transform bytes (TLS records, WebSocket
//! frames, Vision padding), and the one size policy they follow.
//!
//! # Size policy
//!
//! * **No bytes, no buffer.** A buffer's storage exists only while it holds bytes: a read
//!   buffer is freed when a read finds it empty and the socket has nothing, a write buffer
//!   above its keep size when it drains. An idle connection keeps no buffer (design property
//!   7: a few KiB per idle connection).
//! * [`READ_WINDOW`] (64 KiB) is what a stream parsing records off a socket asks for in one
//!   read (the TLS record stream asks for exactly four full records, a little more), so bulk
//!   TLS costs one `recv` per four records instead of one per record, or one per 4 KiB as
//!   rustls alone reads. A read is given exactly the window it asks for.
//! * [`VISION_READ_WINDOW`] (16 KiB + 64) is what Vision asks the outer TLS for: one record's
//!   plaintext (16 KiB) plus a frame header of slack. It must stay under the room at which the
//!   TLS stream hands out several records per read (two records' worth): after the record
//!   that switches Vision to raw bytes, the next bytes are not records.
//! * [`KEEP_WRITE`] (4 KiB): a drained write buffer that grew beyond this is freed, and a
//!   smaller one is kept for the next write. Handshakes, pings and interactive traffic reuse
//!   it. A bulk write (up to 64 KiB of records or frames) gets a fresh buffer instead of
//!   pinning 64 KiB per connection.
//! * [`KEEP_VISION_WRITE`] (16 KiB): Vision's padded frames carry at most one outer record
//!   (16 KiB) and come back to back during its padded phase, so keeping one frame's worth
//!   avoids an allocation per write. The phase ends after a few packets (direct or plain),
//!   and then the buffer drains and stays empty.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

pub const READ_WINDOW: usize = 64 * 1024;
pub const VISION_READ_WINDOW: usize = 16 * 1024 + 64;
pub const KEEP_WRITE: usize = 4 * 1024;
pub const KEEP_VISION_WRITE: usize = 16 * 1024;

/// Bytes read ahead of the parser: `held()` is what is not yet used. A fill moves what is held
/// to the front, then reads behind it ("compact and fill").
#[derive(Debug, Default)]
pub struct ReadBuffer {
    storage: Vec<u8>,
    start: usize,
    end: usize,
}

impl ReadBuffer {
    pub const fn new() -> ReadBuffer {
        ReadBuffer {
            storage: Vec::new(),
            start: 0,
            end: 0,
        }
    }

    /// A buffer holding `bytes` (read before this buffer took over).
    pub fn holding(bytes: Vec<u8>) -> ReadBuffer {
        let end = bytes.len();
        ReadBuffer {
            storage: bytes,
            start: 0,
            end,
        }
    }

    /// The bytes read and not yet used.
    pub fn held(&self) -> &[u8] {
        &self.storage[self.start..self.end]
    }

    /// The held bytes, for a parser that works in place (decryption).
    pub fn held_mut(&mut self) -> &mut [u8] {
        &mut self.storage[self.start..self.end]
    }

    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// Where `held()` starts in [`ReadBuffer::storage`].
    pub fn start(&self) -> usize {
        self.start
    }

    /// The whole storage. Bytes before `start()` were used but stay where they are until the
    /// next fill or release, so an in-place parser may still hand them out.
    pub fn storage(&self) -> &[u8] {
        &self.storage
    }

    /// Marks `n` held bytes as used. The storage is kept, see [`ReadBuffer::release_if_empty`].
    pub fn consume(&mut self, n: usize) {
        self.start = (self.start + n).min(self.end);
    }

    /// Frees the storage when nothing is held. Call it once no used byte is referenced.
    pub fn release_if_empty(&mut self) {
        if self.start == self.end {
            self.release();
        }
    }

    /// Frees the storage, held bytes included.
    pub fn release(&mut self) {
        *self = ReadBuffer::new();
    }

    /// The held bytes, leaving the buffer empty and freed.
    pub fn take(&mut self) -> Vec<u8> {
        let held = self.held().to_vec();
        self.release();
        held
    }

    /// Reads more from `reader` behind what is held, with room for `window` bytes. Returns
    /// the count read, 0 at end of stream. While the reader has nothing and nothing is held,
    /// the storage is freed, so a quiet connection keeps none.
    pub fn poll_fill<R: AsyncRead + Unpin + ?Sized>(
        &mut self,
        reader: &mut R,
        cx: &mut Context<'_>,
        window: usize,
    ) -> Poll<io::Result<usize>> {
        if self.start > 0 {
            self.storage.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.storage.len() < self.end + window {
            self.storage.resize(self.end + window, 0);
        }
        // Exactly the window, even when the storage grew larger earlier: a reader below may
        // decide how much to hand over by the room it is given (the TLS stream does).
        let mut read_buf = ReadBuf::new(&mut self.storage[self.end..self.end + window]);
        let polled = Pin::new(reader).poll_read(cx, &mut read_buf);
        let n = read_buf.filled().len();
        if polled.is_pending() && self.end == 0 {
            self.release();
        }
        ready!(polled)?;
        self.end += n;
        Poll::Ready(Ok(n))
    }
}

/// Bytes encoded for the writer and not yet written: `pending()`. After a complete drain the
/// storage is kept if at most `keep` bytes, else freed.
#[derive(Debug)]
pub struct WriteBuffer {
    bytes: Vec<u8>,
    sent: usize,
    keep: usize,
}

impl WriteBuffer {
    /// An empty buffer that keeps at most `keep` bytes of storage once drained (one of the
    /// `KEEP_*` sizes above).
    pub const fn new(keep: usize) -> WriteBuffer {
        WriteBuffer {
            bytes: Vec::new(),
            sent: 0,
            keep,
        }
    }

    /// The bytes not yet written.
    pub fn pending(&self) -> &[u8] {
        &self.bytes[self.sent..]
    }

    pub fn is_drained(&self) -> bool {
        self.sent == self.bytes.len()
    }

    /// The queue to append encoded bytes to. Only append: bytes before the written mark are
    /// already out, and whatever is left after a drain is discarded.
    pub fn queue(&mut self) -> &mut Vec<u8> {
        &mut self.bytes
    }

    /// Drops everything queued, written or not.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.sent = 0;
    }

    /// Writes everything pending to `writer`; once it is all out, applies the keep size.
    pub fn poll_drain<W: AsyncWrite + Unpin + ?Sized>(
        &mut self,
        writer: &mut W,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        while self.sent < self.bytes.len() {
            let n = ready!(Pin::new(&mut *writer).poll_write(cx, &self.bytes[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        if self.bytes.capacity() > self.keep {
            self.bytes = Vec::new();
        } else {
            self.bytes.clear();
        }
        self.sent = 0;
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Waker;

    fn cx() -> Context<'static> {
        Context::from_waker(Waker::noop())
    }

    #[test]
    fn a_fill_keeps_what_is_held_and_an_empty_buffer_is_freed() {
        let mut buf = ReadBuffer::holding(b"abc".to_vec());
        buf.consume(1);
        let mut reader: &[u8] = b"defg";
        assert!(matches!(
            buf.poll_fill(&mut reader, &mut cx(), 8),
            Poll::Ready(Ok(4))
        ));
        assert_eq!(buf.held(), b"bcdefg");
        buf.consume(6);
        assert_eq!(buf.storage().len(), 2 + 8, "used bytes stay until released");
        buf.release_if_empty();
        assert!(buf.storage().is_empty() && buf.is_empty());
        assert!(matches!(
            buf.poll_fill(&mut reader, &mut cx(), 8),
            Poll::Ready(Ok(0))
        ));
    }

    #[test]
    fn a_drained_write_buffer_keeps_only_small_storage() {
        let mut out = Vec::new();
        let mut buf = WriteBuffer::new(16);
        buf.queue().extend_from_slice(b"hello");
        assert!(matches!(
            buf.poll_drain(&mut out, &mut cx()),
            Poll::Ready(Ok(()))
        ));
        assert!(buf.is_drained() && buf.queue().capacity() > 0);
        buf.queue().extend_from_slice(&[7; 100]);
        assert_eq!(buf.pending().len(), 100);
        assert!(matches!(
            buf.poll_drain(&mut out, &mut cx()),
            Poll::Ready(Ok(()))
        ));
        assert_eq!(buf.queue().capacity(), 0);
        assert_eq!(out.len(), 105);
    }
}
