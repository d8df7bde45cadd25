//! An encrypted Shadowsocks connection over any stream: what the peer sends is opened in place
//! in one receive buffer, what we write is sealed in place in one send buffer. Both buffers
//! are allocated when data moves and released when the connection goes quiet (the receive
//! buffer when a read would block with nothing held, the send buffer on flush once drained,
//! which the relay calls whenever its reader goes idle), so an idle connection holds neither.

use std::io;
use std::mem::MaybeUninit;
use std::ops::Range;
use std::pin::Pin;
use std::task::{Context, Poll, Waker, ready};

use skiff_core::{BoxStream, ProxyStream};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::cipher::{CHUNK_OVERHEAD, Step};
use super::codec::{Decoder, Encoder};
use super::{Method, unix_now};

/// Payload taken per write: a relay read (64 KiB) in one go.
const WRITE_BATCH: usize = 64 * 1024;
/// Receive buffer for AEAD-2017: 64 KiB of payload in the five chunks a 64 KiB write
/// becomes (four of 0x3FFF bytes and one of 4), with their overhead, and no more. A relay
/// reads 64 KiB at a time and sends what each read gave, so a read that opens to at most
/// 64 KiB is one send; one that opened to more would leave a small rest for a second send.
/// Any five chunks in this window carry at most 64 KiB; four whole ones, at most 4 × 0x3FFF.
const RECV_2017: usize = 64 * 1024 + 5 * CHUNK_OVERHEAD;
/// Receive buffer for 2022: a whole 64 KiB chunk (or variable header) must fit, with room.
const RECV_2022: usize = 64 * 1024 + 8 * 1024;

/// A sticky failure of the read side: reported again on every later read.
#[derive(Clone, Debug)]
struct Failed {
    kind: io::ErrorKind,
    message: String,
}

impl Failed {
    fn error(&self) -> io::Error {
        io::Error::new(self.kind, self.message.clone())
    }
}

/// One Shadowsocks TCP connection, either side. See the module docs.
pub struct SsStream {
    inner: BoxStream,
    decoder: Decoder,
    recv_capacity: usize,
    rbuf: Option<Box<[MaybeUninit<u8>]>>,
    /// Unopened ciphertext: `rbuf[rpos..rend]` (all of `..rend` is initialised).
    rpos: usize,
    rend: usize,
    /// Opened payload not yet returned, inside `rbuf[..rpos]`.
    plain: Range<usize>,
    read_eof: bool,
    read_failed: Option<Failed>,
    encoder: Encoder,
    wbuf: Option<Box<[u8]>>,
    /// Sealed bytes still to write: `wbuf[wpos..wend]`.
    wpos: usize,
    wend: usize,
    /// A writer waiting for the send buffer to drain while a reader may finish it.
    parked_writer: Option<Waker>,
}

/// `buf` viewed as initialised bytes.
///
/// # Safety
/// Every byte of `buf` must have been written.
unsafe fn assume_init(buf: &mut [MaybeUninit<u8>]) -> &mut [u8] {
    // SAFETY: the caller guarantees initialisation; MaybeUninit<u8> has u8's layout.
    unsafe { &mut *(buf as *mut [MaybeUninit<u8>] as *mut [u8]) }
}

impl SsStream {
    /// Wraps `inner`: `encoder` seals our direction, `decoder` opens the peer's. `received`
    /// is ciphertext a handshake already read for the decoder.
    pub fn new(
        inner: BoxStream,
        method: Method,
        encoder: Encoder,
        decoder: Decoder,
        received: &[u8],
    ) -> SsStream {
        let recv_capacity = if method.is_2022() {
            RECV_2022
        } else {
            RECV_2017
        };
        let mut stream = SsStream {
            inner,
            decoder,
            recv_capacity,
            rbuf: None,
            rpos: 0,
            rend: 0,
            plain: 0..0,
            read_eof: false,
            read_failed: None,
            encoder,
            wbuf: None,
            wpos: 0,
            wend: 0,
            parked_writer: None,
        };
        if !received.is_empty() {
            let cap = recv_capacity.max(received.len());
            let mut buf = Box::new_uninit_slice(cap);
            for (slot, byte) in buf.iter_mut().zip(received) {
                slot.write(*byte);
            }
            stream.rbuf = Some(buf);
            stream.rend = received.len();
        }
        stream
    }

    /// The stream underneath (buffered bytes are dropped).
    pub fn into_inner(self) -> BoxStream {
        self.inner
    }

    /// Bytes of buffers currently held, both directions (for tests of idle memory).
    pub fn buffered_capacity(&self) -> usize {
        self.rbuf.as_ref().map_or(0, |b| b.len()) + self.wbuf.as_ref().map_or(0, |b| b.len())
    }

    fn fail_read(&mut self, error: io::Error) -> io::Error {
        let failed = Failed {
            kind: error.kind(),
            message: error.to_string(),
        };
        self.read_failed = Some(failed);
        // Nothing more will be read: let the buffer go.
        self.rbuf = None;
        self.plain = 0..0;
        self.rpos = 0;
        self.rend = 0;
        error
    }

    /// Opens the next block from what is buffered, without reading. True if it made progress.
    fn decode_buffered(&mut self) -> io::Result<bool> {
        if self.rpos >= self.rend {
            return Ok(false);
        }
        let Some(buf) = self.rbuf.as_deref_mut() else {
            return Ok(false);
        };
        // SAFETY: `..rend` is initialised (see the field docs).
        let input = unsafe { assume_init(&mut buf[self.rpos..self.rend]) };
        let now = if self.decoder.in_header() {
            unix_now()
        } else {
            0
        };
        match self.decoder.decode(input, now) {
            Ok(Step::Consumed { consumed, plain }) => {
                if let Some(range) = plain {
                    self.plain = self.rpos + range.start..self.rpos + range.end;
                }
                self.rpos += consumed;
                Ok(true)
            }
            Ok(Step::NeedMore(_)) => Ok(false),
            Err(e) => Err(self.fail_read(e.into())),
        }
    }

    /// Reads more ciphertext from the inner stream (allocating the buffer once data is there).
    /// Only called with no opened payload pending.
    fn poll_read_inner(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.rbuf.is_none() {
            ready!(self.inner.poll_read_ready(cx))?;
            self.rbuf = Some(Box::new_uninit_slice(self.recv_capacity));
            self.rpos = 0;
            self.rend = 0;
        }
        let Some(buf) = self.rbuf.as_deref_mut() else {
            return Poll::Ready(Ok(()));
        };
        let cap = buf.len();
        // Only called with the opened payload all returned: forget where it was.
        self.plain = 0..0;
        if self.rpos == self.rend {
            self.rpos = 0;
            self.rend = 0;
        } else if self.rpos > 0 {
            // Always move the partial chunk to the front: every read then gets the whole
            // window (compacting only when room ran low made B's reads 49 KiB on average,
            // and its sends as many).
            buf.copy_within(self.rpos..self.rend, 0);
            self.rend -= self.rpos;
            self.rpos = 0;
        }
        if self.rend == cap {
            // A block longer than the buffer: cannot happen with the capacities above.
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "Shadowsocks block larger than the receive buffer",
            )));
        }
        let mut read = ReadBuf::uninit(&mut buf[self.rend..]);
        match Pin::new(&mut self.inner).poll_read(cx, &mut read) {
            Poll::Pending => {
                if self.rpos == self.rend {
                    // Nothing held: a quiet connection keeps no buffer.
                    self.rbuf = None;
                    self.rpos = 0;
                    self.rend = 0;
                }
                Poll::Pending
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(self.fail_read(e))),
            Poll::Ready(Ok(())) => {
                let n = read.filled().len();
                if n == 0 {
                    self.read_eof = true;
                } else {
                    self.rend += n;
                }
                Poll::Ready(Ok(()))
            }
        }
    }

    /// Ready when opened payload is pending (non-empty), or at a clean end of stream (empty).
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            if !self.plain.is_empty() {
                return Poll::Ready(Ok(()));
            }
            if let Some(failed) = &self.read_failed {
                return Poll::Ready(Err(failed.error()));
            }
            if self.decode_buffered()? {
                continue;
            }
            if self.read_eof {
                if self.rpos == self.rend && self.decoder.at_boundary() {
                    return Poll::Ready(Ok(()));
                }
                let e = io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "Shadowsocks stream ended inside a chunk",
                );
                return Poll::Ready(Err(self.fail_read(e)));
            }
            ready!(self.poll_read_inner(cx))?;
        }
    }

    /// Ready once the current chunk has opened payload, or at a clean end of stream: then
    /// [`chunk`](Self::chunk) shows it. For handshakes that parse the first chunk themselves
    /// (see also [`consume`](Self::consume)).
    pub fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_fill(cx)
    }

    /// The opened payload of the current chunk not yet consumed (empty at the end).
    pub fn chunk(&self) -> &[u8] {
        let Some(buf) = self.rbuf.as_deref() else {
            return &[];
        };
        let Some(plain) = buf.get(self.plain.clone()) else {
            return &[];
        };
        // SAFETY: opened payload lies inside `..rend`, which is initialised.
        unsafe { &*(plain as *const [MaybeUninit<u8>] as *const [u8]) }
    }

    /// Marks `n` bytes of the current chunk as used.
    pub fn consume(&mut self, n: usize) {
        self.plain.start = (self.plain.start + n).min(self.plain.end);
    }

    /// Opened payload of the current chunk not yet consumed.
    pub fn chunk_left(&self) -> usize {
        self.plain.len()
    }

    fn copy_plain(&mut self, out: &mut ReadBuf<'_>) {
        if self.plain.is_empty() {
            return;
        }
        let Some(buf) = self.rbuf.as_deref_mut() else {
            return;
        };
        let n = self.plain.len().min(out.remaining());
        // SAFETY: opened payload lies inside `..rend`, which is initialised.
        let all = unsafe { assume_init(&mut buf[..self.rend]) };
        out.put_slice(&all[self.plain.start..self.plain.start + n]);
        self.plain.start += n;
    }

    /// Writes what is left of the send buffer.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.wpos < self.wend {
            let Some(buf) = self.wbuf.as_deref() else {
                break;
            };
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &buf[self.wpos..self.wend]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.wpos += n;
        }
        self.wpos = 0;
        self.wend = 0;
        if let Some(waker) = self.parked_writer.take() {
            waker.wake();
        }
        Poll::Ready(Ok(()))
    }

    /// Drains on behalf of a writer, remembering it so a reader finishing the drain wakes it
    /// (the inner stream keeps only the last waker per direction).
    fn poll_drain_as_writer(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = self.poll_drain(cx);
        if poll.is_pending() {
            match &self.parked_writer {
                Some(waker) if waker.will_wake(cx.waker()) => {}
                _ => self.parked_writer = Some(cx.waker().clone()),
            }
        }
        poll
    }

    /// Seals `input` into the (empty) send buffer; returns the input consumed.
    fn seal(&mut self, input: &[u8]) -> io::Result<usize> {
        debug_assert_eq!(self.wpos, self.wend);
        let take = input.len().min(WRITE_BATCH);
        if self.wbuf.is_none() {
            let len = self.encoder.max_output(WRITE_BATCH);
            self.wbuf = Some(vec![0u8; len].into_boxed_slice());
        }
        let now = if self.encoder.header_pending() {
            unix_now()
        } else {
            0
        };
        let Some(out) = self.wbuf.as_deref_mut() else {
            return Ok(0);
        };
        let (consumed, written) = self.encoder.encode(&input[..take], out, now);
        if consumed == 0 && written == 0 && !input.is_empty() {
            return Err(io::Error::other("Shadowsocks send buffer too small"));
        }
        self.wpos = 0;
        self.wend = written;
        Ok(consumed)
    }

    /// A client's request goes out even before it has payload (on a read, flush or
    /// shutdown), or the server never answers.
    fn kick(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        if self.encoder.sends_header_alone() && self.wpos == self.wend {
            self.seal(&[])?;
        }
        if self.wpos < self.wend
            && let Poll::Ready(Err(e)) = self.poll_drain(cx)
        {
            return Err(e);
        }
        Ok(())
    }
}

impl AsyncRead for SsStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.encoder.header_pending() {
            this.kick(cx)?;
        }
        if out.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        ready!(this.poll_fill(cx))?;
        this.copy_plain(out);
        // More whole chunks may already be buffered: hand them over in the same read.
        while out.remaining() > 0 && this.plain.is_empty() && this.read_failed.is_none() {
            match this.decode_buffered() {
                Ok(true) => this.copy_plain(out),
                Ok(false) => break,
                // Reported on the next read; this one returns what it has.
                Err(_) => break,
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for SsStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_drain_as_writer(cx))?;
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let consumed = this.seal(buf)?;
        // The sealed bytes are ours now: they count as written even if the socket is full.
        if let Poll::Ready(Err(e)) = this.poll_drain_as_writer(cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(consumed))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.encoder.header_pending() {
            this.kick(cx)?;
        }
        ready!(this.poll_drain_as_writer(cx))?;
        ready!(Pin::new(&mut this.inner).poll_flush(cx))?;
        // Everything is out and the writer is idle: give the send buffer back.
        this.wbuf = None;
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.encoder.header_pending() {
            this.kick(cx)?;
        }
        ready!(this.poll_drain_as_writer(cx))?;
        this.wbuf = None;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

impl ProxyStream for SsStream {
    fn poll_read_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.encoder.header_pending()
            && let Err(e) = self.kick(cx)
        {
            return Poll::Ready(Err(e));
        }
        if !self.plain.is_empty()
            || self.read_eof
            || self.read_failed.is_some()
            || self.rend - self.rpos >= self.decoder.need()
        {
            return Poll::Ready(Ok(()));
        }
        self.inner.poll_read_ready(cx)
    }

    fn reset_on_close(&mut self) {
        self.inner.reset_on_close()
    }
}
