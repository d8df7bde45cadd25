//! The two directions of a VMess connection as buffer-owning state machines over any
//! transport: [`ChunkReader`] opens chunks (and, on the client, strips the response header
//! first), [`ChunkWriter`] seals them (sending the request or response header in front of the
//! first one). [`super::stream::VmessStream`] puts both on one transport for TCP,
//! [`super::packet`] puts them on the two halves of a split transport for UDP.
//!
//! Each direction owns one buffer. Chunks are opened and sealed in place there, so no chunk
//! allocates; the buffer itself is allocated when data moves and given back when the
//! direction goes idle (reader: nothing buffered and the transport has nothing; writer:
//! everything written and flushed), so an idle connection holds none.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, Waker, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::chunk::{
    ChunkOpener, ChunkSealer, MAX_CHUNK_OVERHEAD, MAX_PACKET_PAYLOAD, Opened, STREAM_CHUNK_PAYLOAD,
};
use super::response::open_response;
use skiff_core::wire::Parsed;

/// What the reader asks of the transport per read; a chunk larger than this grows the
/// buffer (once) to fit it. 64 KiB of chunks open to a little less than 64 KiB of payload,
/// which a relay's 64 KiB buffer takes whole: one read, one write on the other side (32 KiB
/// made B in a VMess download read and send twice per 57 KiB).
const READ_BUF: usize = 64 * 1024;
/// A relay's write (64 KiB) in one call: the chunks it takes, sealed into one transport
/// write. With 8 chunks (64 880 bytes) every 64 KiB write left 656 bytes for a second,
/// tiny send.
const WRITE_INPUT: usize = 64 * 1024;
const CHUNKS_PER_WRITE: usize = WRITE_INPUT.div_ceil(STREAM_CHUNK_PAYLOAD);

/// The response header a client expects before the first chunk.
pub(crate) struct ExpectResponse {
    pub key: [u8; 16],
    pub iv: [u8; 16],
    pub auth: u8,
}

/// The receiving direction. See the module docs.
pub(crate) struct ChunkReader {
    opener: ChunkOpener,
    /// Client only: the response header still to strip.
    head: Option<ExpectResponse>,
    /// Empty (no allocation) while idle. `buf[start..end]`: received, not yet opened;
    /// `buf[plain.0..plain.1]`: opened payload not yet returned (always before `start`).
    buf: Vec<u8>,
    start: usize,
    end: usize,
    plain: (usize, usize),
    /// The end-of-stream chunk (or the transport's end between chunks) was seen.
    eof: bool,
}

/// What the buffered bytes hold next.
enum Next {
    /// `plain` holds payload now.
    Payload,
    Eof,
    /// At least this many bytes from `start` are needed.
    NeedMore(usize),
}

impl ChunkReader {
    /// `initial`: bytes already received after the request header (server side).
    pub fn new(opener: ChunkOpener, head: Option<ExpectResponse>, initial: &[u8]) -> ChunkReader {
        let mut reader = ChunkReader {
            opener,
            head,
            buf: Vec::new(),
            start: 0,
            end: 0,
            plain: (0, 0),
            eof: false,
        };
        if !initial.is_empty() {
            // Exactly what came: often a whole first chunk, which then needs no read buffer.
            reader.buf = initial.to_vec();
            reader.end = initial.len();
        }
        reader
    }

    /// Payload or buffered bytes are waiting: a read makes progress without the transport.
    pub fn has_buffered(&self) -> bool {
        self.plain.0 < self.plain.1 || self.start < self.end || self.eof
    }

    /// Bytes of buffer held (0 while idle).
    pub fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// Received bytes not yet returned as payload (non-zero after an error: the stream ended
    /// or failed inside a chunk).
    pub fn buffered(&self) -> usize {
        (self.plain.1 - self.plain.0) + (self.end - self.start)
    }

    fn decode_buffered(&mut self) -> io::Result<Next> {
        if self.eof {
            return Ok(Next::Eof);
        }
        let avail = self.buf.get_mut(self.start..self.end).unwrap_or_default();
        if let Some(head) = &self.head {
            return match open_response(&head.key, &head.iv, head.auth, avail)? {
                Parsed::Complete(len) => {
                    self.start += len;
                    self.head = None;
                    self.decode_buffered()
                }
                Parsed::Incomplete => Ok(Next::NeedMore(avail.len() + 1)),
            };
        }
        match self.opener.open(avail)? {
            Opened::Payload {
                start,
                end,
                consumed,
            } => {
                self.plain = (self.start + start, self.start + end);
                self.start += consumed;
                Ok(Next::Payload)
            }
            Opened::End { consumed } => {
                self.start += consumed;
                self.eof = true;
                Ok(Next::Eof)
            }
            Opened::NeedMore(n) => Ok(Next::NeedMore(n)),
        }
    }

    /// Reads more from `inner` so that `need` bytes from `start` can fit. Ready(Ok) after
    /// some bytes arrived or the end was recorded (clean between chunks, an error inside).
    fn poll_more<R: AsyncRead + Unpin + ?Sized>(
        &mut self,
        cx: &mut Context<'_>,
        inner: &mut R,
        need: usize,
    ) -> Poll<io::Result<()>> {
        if self.start == self.end {
            self.buf.clear();
            self.start = 0;
            self.end = 0;
        }
        let want = need.max(READ_BUF);
        // `buf` holds exactly the received bytes (its length is `end`); reads go into its
        // spare capacity, so a buffer given back while idle and taken again is not zeroed
        // each time (64 KiB per wake-up in a bulk transfer).
        debug_assert_eq!(self.buf.len(), self.end);
        if self.buf.capacity() - self.start < want {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            self.buf.truncate(self.end);
            self.buf.reserve_exact(want.saturating_sub(self.end));
        }
        let mut read_buf = ReadBuf::uninit(self.buf.spare_capacity_mut());
        match Pin::new(inner).poll_read(cx, &mut read_buf) {
            Poll::Pending => {
                if self.start == self.end {
                    // Nothing held: a quiet connection keeps no buffer.
                    self.buf = Vec::new();
                    self.start = 0;
                    self.end = 0;
                }
                Poll::Pending
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Ready(Ok(())) => {
                let n = read_buf.filled().len();
                if n > 0 {
                    // SAFETY: the read initialised these `n` bytes of spare capacity, right
                    // after the `end` bytes already held.
                    unsafe { self.buf.set_len(self.end + n) };
                    self.end += n;
                } else if self.start == self.end && self.head.is_none() {
                    // The transport ended between chunks: an end like the empty chunk.
                    self.eof = true;
                } else {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        if self.head.is_some() {
                            "VMess server closed the connection before its response header"
                        } else {
                            "VMess connection ended inside a chunk"
                        },
                    )));
                }
                Poll::Ready(Ok(()))
            }
        }
    }

    /// Copies opened payload into `dst`: as many chunks as are already buffered, reading
    /// from `inner` only while nothing was copied yet. Nothing copied and Ready means the end.
    pub fn poll_read<R: AsyncRead + Unpin + ?Sized>(
        &mut self,
        cx: &mut Context<'_>,
        inner: &mut R,
        dst: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let mut copied = false;
        loop {
            if self.plain.0 < self.plain.1 {
                let n = (self.plain.1 - self.plain.0).min(dst.remaining());
                dst.put_slice(&self.buf[self.plain.0..self.plain.0 + n]);
                self.plain.0 += n;
                copied |= n > 0;
                if dst.remaining() == 0 {
                    return Poll::Ready(Ok(()));
                }
            }
            match self.decode_buffered()? {
                Next::Payload => continue,
                Next::Eof => return Poll::Ready(Ok(())),
                Next::NeedMore(_) if copied => return Poll::Ready(Ok(())),
                Next::NeedMore(need) => ready!(self.poll_more(cx, inner, need))?,
            }
        }
    }

    /// The next whole chunk's payload (UDP: one datagram), or `None` at the end.
    pub fn poll_chunk<R: AsyncRead + Unpin + ?Sized>(
        &mut self,
        cx: &mut Context<'_>,
        inner: &mut R,
    ) -> Poll<io::Result<Option<&[u8]>>> {
        loop {
            if self.plain.0 < self.plain.1 {
                let (from, to) = self.plain;
                self.plain = (0, 0);
                return Poll::Ready(Ok(Some(&self.buf[from..to])));
            }
            match self.decode_buffered()? {
                Next::Payload => continue,
                Next::Eof => return Poll::Ready(Ok(None)),
                Next::NeedMore(need) => ready!(self.poll_more(cx, inner, need))?,
            }
        }
    }
}

/// The sending direction. See the module docs.
pub(crate) struct ChunkWriter {
    sealer: ChunkSealer,
    /// The header to send in front of the first chunk; empty once it is in `out`.
    prefix: Vec<u8>,
    /// Empty (no allocation) while idle; `out[pos..]` is still to be written.
    out: Vec<u8>,
    pos: usize,
    /// The end-of-stream chunk has been sealed.
    ended: bool,
    /// The user's `NoTerminationSignal` experiment: end with the transport's end only.
    end_signal: bool,
    /// A writer that waits for `out` to drain while a reader may be the one finishing it
    /// (the transport keeps only the last waker per direction).
    parked: Option<Waker>,
}

impl ChunkWriter {
    pub fn new(sealer: ChunkSealer, prefix: Vec<u8>, end_signal: bool) -> ChunkWriter {
        ChunkWriter {
            sealer,
            prefix,
            out: Vec::new(),
            pos: 0,
            ended: false,
            end_signal,
            parked: None,
        }
    }

    /// Bytes of buffer held (0 while idle).
    pub fn capacity(&self) -> usize {
        self.out.capacity()
    }

    /// The header has not left yet (nothing was written).
    pub fn header_pending(&self) -> bool {
        !self.prefix.is_empty()
    }

    /// Writes what is left of `out`; Ready(Ok) once it is empty. A pending write leaves the
    /// caller's waker parked so that a reader finishing the drain wakes it.
    fn poll_drain<W: AsyncWrite + Unpin + ?Sized>(
        &mut self,
        cx: &mut Context<'_>,
        inner: &mut W,
    ) -> Poll<io::Result<()>> {
        while self.pos < self.out.len() {
            match Pin::new(&mut *inner).poll_write(cx, &self.out[self.pos..]) {
                Poll::Pending => {
                    match &self.parked {
                        Some(waker) if waker.will_wake(cx.waker()) => {}
                        _ => self.parked = Some(cx.waker().clone()),
                    }
                    return Poll::Pending;
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => self.pos += n,
            }
        }
        self.out.clear();
        self.pos = 0;
        if let Some(waker) = self.parked.take()
            && !waker.will_wake(cx.waker())
        {
            waker.wake();
        }
        Poll::Ready(Ok(()))
    }

    /// Makes `out` ready for sealing: the header first if it has not left yet.
    fn stage(&mut self, room: usize) {
        // A no-op while the buffer is big enough: only the first write after idle allocates.
        self.out.reserve(room + self.prefix.len());
        if !self.prefix.is_empty() {
            self.out.extend_from_slice(&self.prefix);
            self.prefix = Vec::new();
        }
    }

    /// Seals as much of `src` as fits in one buffer (up to 8 chunks) and starts writing it.
    /// The sealed bytes count as written even if the transport has to wait: the next call,
    /// flush or shutdown finishes them.
    pub fn poll_write<W: AsyncWrite + Unpin + ?Sized>(
        &mut self,
        cx: &mut Context<'_>,
        inner: &mut W,
        src: &[u8],
    ) -> Poll<io::Result<usize>> {
        ready!(self.poll_drain(cx, inner))?;
        if src.is_empty() {
            return Poll::Ready(Ok(0));
        }
        if self.ended {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "VMess stream already ended",
            )));
        }
        // Room for what this call seals: a small write does not reserve a bulk buffer.
        let take = src.len().min(CHUNKS_PER_WRITE * STREAM_CHUNK_PAYLOAD);
        self.stage(take + take.div_ceil(STREAM_CHUNK_PAYLOAD) * MAX_CHUNK_OVERHEAD);
        let mut taken = 0;
        for chunk in src.chunks(STREAM_CHUNK_PAYLOAD).take(CHUNKS_PER_WRITE) {
            self.sealer.seal(chunk, &mut self.out)?;
            taken += chunk.len();
        }
        if let Poll::Ready(Err(e)) = self.poll_drain(cx, inner) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(taken))
    }

    /// Sends only the header (client whose application has not written in time).
    pub fn poll_send_header<W: AsyncWrite + Unpin + ?Sized>(
        &mut self,
        cx: &mut Context<'_>,
        inner: &mut W,
    ) -> Poll<io::Result<()>> {
        if !self.prefix.is_empty() {
            ready!(self.poll_drain(cx, inner))?;
            self.stage(0);
        }
        ready!(self.poll_drain(cx, inner))?;
        Pin::new(inner).poll_flush(cx)
    }

    /// Writes out what is sealed (never a header alone: that leaves with the first data)
    /// and flushes; then the buffer goes back.
    pub fn poll_flush<W: AsyncWrite + Unpin + ?Sized>(
        &mut self,
        cx: &mut Context<'_>,
        inner: &mut W,
    ) -> Poll<io::Result<()>> {
        ready!(self.poll_drain(cx, inner))?;
        ready!(Pin::new(&mut *inner).poll_flush(cx))?;
        self.out = Vec::new();
        Poll::Ready(Ok(()))
    }

    /// Sends the header if it has not left, the end-of-stream chunk, then shuts the
    /// transport's sending side.
    pub fn poll_shutdown<W: AsyncWrite + Unpin + ?Sized>(
        &mut self,
        cx: &mut Context<'_>,
        inner: &mut W,
    ) -> Poll<io::Result<()>> {
        if !self.ended {
            ready!(self.poll_drain(cx, inner))?;
            self.stage(MAX_CHUNK_OVERHEAD);
            if self.end_signal {
                self.sealer.seal_end(&mut self.out);
            }
            self.ended = true;
        }
        ready!(self.poll_drain(cx, inner))?;
        self.out = Vec::new();
        Pin::new(inner).poll_shutdown(cx)
    }

    /// UDP: ready to take a datagram once everything sealed before is written.
    pub fn poll_ready<W: AsyncWrite + Unpin + ?Sized>(
        &mut self,
        cx: &mut Context<'_>,
        inner: &mut W,
    ) -> Poll<io::Result<()>> {
        self.poll_drain(cx, inner)
    }

    /// UDP: seals `payload` as exactly one chunk, to be written by [`Self::poll_flush_packets`]
    /// (call [`Self::poll_ready`] first, or the buffer grows). Empty datagrams are skipped, as
    /// Xray's writer skips them (an empty chunk would end the stream).
    pub fn start_packet(&mut self, payload: &[u8]) -> io::Result<()> {
        if payload.is_empty() {
            return Ok(());
        }
        if payload.len() > MAX_PACKET_PAYLOAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "a datagram of {} bytes exceeds VMess's limit of {MAX_PACKET_PAYLOAD}",
                    payload.len()
                ),
            ));
        }
        if self.ended {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        self.stage(payload.len() + MAX_CHUNK_OVERHEAD);
        self.sealer.seal(payload, &mut self.out)?;
        Ok(())
    }

    /// UDP: writes the sealed datagrams and flushes; the (datagram-sized) buffer is kept.
    pub fn poll_flush_packets<W: AsyncWrite + Unpin + ?Sized>(
        &mut self,
        cx: &mut Context<'_>,
        inner: &mut W,
    ) -> Poll<io::Result<()>> {
        ready!(self.poll_drain(cx, inner))?;
        Pin::new(inner).poll_flush(cx)
    }
}
