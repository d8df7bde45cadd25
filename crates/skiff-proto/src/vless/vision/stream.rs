//! The Vision stream over an outer TLS 1.3 connection (vless.md §7): pads the first writes of
//! each direction, unpads what the peer sends, watches for inner TLS 1.3, and once a
//! direction's inner application data starts, leaves the outer TLS for that direction. The
//! relay then sees that side as a bare socket ([`ProxyStream::raw_tcp_read`] /
//! [`ProxyStream::raw_tcp_write`]) and splices it.
//!
//! The VLESS request header (client) or response header (server) rides in front of the first
//! frame, in the same outer record, as Xray expects.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use skiff_core::buffers::{KEEP_VISION_WRITE, ReadBuffer, VISION_READ_WINDOW, WriteBuffer};
use skiff_core::{BoxStream, ProxyStream};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::filter::TlsFilter;
use super::frame::{
    CMD_CONTINUE, CMD_DIRECT, CMD_END, Finish, MAX_CONTENT, Unpadder, padding_len, write_frame,
};
use crate::vless::codec::{Parsed, parse_response_header};

/// How many directions (in this process) left the outer TLS: for tests and diagnostics.
pub static DIRECT_READS: AtomicU64 = AtomicU64::new(0);
pub static DIRECT_WRITES: AtomicU64 = AtomicU64::new(0);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Client,
    Server,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Frames inside the outer TLS.
    Padded,
    /// Unframed, still inside the outer TLS.
    Plain,
    /// Bare socket.
    Direct,
}

/// Where the writer stands in the inner TLS record stream, so that it can leave the outer
/// TLS exactly at an inner record boundary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RecordTrack {
    /// This many bytes of the current inner record are still to come.
    Inside(usize),
    /// A write ended inside a record header: boundaries are unknown from here on.
    Lost,
}

pub struct VisionStream {
    inner: BoxStream,
    uuid: [u8; 16],
    side: Side,
    filter: TlsFilter,
    // Read side.
    read_mode: Mode,
    unpadder: Unpadder,
    /// Padded bytes read from the outer TLS and not yet unpadded.
    rbuf: ReadBuffer,
    read_eof: bool,
    /// Client: the VLESS response header is still to be stripped.
    response_pending: bool,
    // Write side.
    write_mode: Mode,
    /// The VLESS header that goes in front of the first frame; None once sent.
    greeting: Option<Vec<u8>>,
    uuid_sent: bool,
    track: RecordTrack,
    wbuf: WriteBuffer,
    /// The Direct frame is in `wbuf`: once it is handed on, writes bypass the outer TLS.
    direct_after_drain: bool,
}

fn random_u32() -> u32 {
    let mut bytes = [0u8; 4];
    skiff_crypto::random::fill(&mut bytes);
    u32::from_le_bytes(bytes)
}

impl VisionStream {
    /// `inner` must be a TLS 1.3 stream under Skiff's record layer (it must offer
    /// [`ProxyStream::direct_switch`]); `header` is the encoded VLESS request (client) or
    /// response (server) header. `leftover` holds bytes the handshake already read (server:
    /// what followed the request header).
    pub fn new(
        mut inner: BoxStream,
        side: Side,
        uuid: [u8; 16],
        header: Vec<u8>,
        leftover: &[u8],
    ) -> io::Result<VisionStream> {
        if inner.direct_switch().is_none() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "XTLS Vision needs TLS 1.3 directly under VLESS (no WebSocket, no TLS 1.2)",
            ));
        }
        Ok(VisionStream {
            inner,
            uuid,
            side,
            filter: TlsFilter::default(),
            read_mode: Mode::Padded,
            unpadder: Unpadder::new(uuid),
            rbuf: ReadBuffer::holding(leftover.to_vec()),
            read_eof: false,
            response_pending: side == Side::Client,
            write_mode: Mode::Padded,
            greeting: Some(header),
            uuid_sent: false,
            track: RecordTrack::Inside(0),
            wbuf: WriteBuffer::new(KEEP_VISION_WRITE),
            direct_after_drain: false,
        })
    }

    fn held(&self) -> &[u8] {
        self.rbuf.held()
    }

    /// Copies held bytes out as they are (after the framing ended).
    fn deliver_held(&mut self, out: &mut ReadBuf<'_>) -> bool {
        if self.rbuf.is_empty() {
            return false;
        }
        let held = self.rbuf.held();
        let n = held.len().min(out.remaining());
        out.put_slice(&held[..n]);
        if self.filter.active() {
            self.filter.observe(&held[..n]);
        }
        self.rbuf.consume(n);
        self.rbuf.release_if_empty();
        true
    }

    fn finish_reading(&mut self, finish: Finish) -> io::Result<()> {
        match finish {
            Finish::Direct => {
                let switch = self
                    .inner
                    .direct_switch()
                    .ok_or_else(|| io::Error::other("Vision: the outer stream cannot go direct"))?;
                switch.read_direct();
                self.read_mode = Mode::Direct;
                DIRECT_READS.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(side = ?self.side, "Vision: the peer went direct, reading the bare socket");
            }
            Finish::End | Finish::NotPadded => self.read_mode = Mode::Plain,
        }
        Ok(())
    }

    /// One unpadding step over the held bytes. Ok(true) when it delivered content.
    fn unpad_step(&mut self, out: &mut ReadBuf<'_>) -> io::Result<Option<bool>> {
        if self.response_pending {
            return match parse_response_header(self.held()) {
                Ok(Parsed::Complete(n)) => {
                    self.rbuf.consume(n);
                    self.response_pending = false;
                    Ok(Some(false))
                }
                Ok(Parsed::Incomplete) => Ok(None),
                Err(e) => Err(io::Error::new(io::ErrorKind::InvalidData, e.to_string())),
            };
        }
        let at_end = self.read_eof;
        let held = self.rbuf.held();
        let step = self.unpadder.step(held, out.remaining(), at_end);
        let mut delivered = false;
        if !step.content.is_empty() {
            let content = &held[step.content.clone()];
            out.put_slice(content);
            if self.filter.active() {
                self.filter.observe(content);
            }
            delivered = true;
        }
        self.rbuf.consume(step.consumed);
        if let Some(finish) = step.finish {
            self.finish_reading(finish)?;
            return Ok(Some(delivered));
        }
        if step.consumed == 0 {
            return Ok(None);
        }
        Ok(Some(delivered))
    }

    /// Reads more padded bytes from the outer TLS into `rbuf`.
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let n = ready!(self.rbuf.poll_fill(&mut self.inner, cx, VISION_READ_WINDOW))?;
        if n == 0 {
            self.read_eof = true;
        }
        Poll::Ready(Ok(()))
    }

    /// Frames `data` (a prefix of it) for the padded write side; returns how much it took.
    fn pad_write(&mut self, data: &[u8]) -> usize {
        if self.filter.active() {
            self.filter.observe(data);
        }
        let mut out = std::mem::take(self.wbuf.queue());
        if let Some(greeting) = self.greeting.take() {
            out.extend_from_slice(&greeting);
        }
        let taken = if self.filter.is_tls {
            self.pad_tls(&mut out, data)
        } else if !self.filter.is_tls12_or_above && self.filter.packets_left() <= 1 {
            // Not TLS after all: end padding early, the rest goes unframed (§7.4 b).
            let n = data.len().min(MAX_CONTENT);
            self.frame(&mut out, CMD_END, &data[..n], true);
            self.write_mode = Mode::Plain;
            n
        } else {
            let n = data.len().min(MAX_CONTENT);
            self.frame(&mut out, CMD_CONTINUE, &data[..n], false);
            n
        };
        *self.wbuf.queue() = out;
        taken
    }

    /// Padded writes of inner TLS: follow its records so that the switch to the bare socket
    /// (or the end of padding) happens at a record boundary.
    fn pad_tls(&mut self, out: &mut Vec<u8>, data: &[u8]) -> usize {
        match self.track {
            RecordTrack::Inside(left) if left > 0 => {
                let n = left.min(data.len()).min(MAX_CONTENT);
                self.frame(out, CMD_CONTINUE, &data[..n], true);
                self.track = RecordTrack::Inside(left - n);
                return n;
            }
            _ => {}
        }
        let at_boundary = self.track == RecordTrack::Inside(0);
        let complete = complete_records_prefix(data);
        let app_data = data.starts_with(&[0x17, 0x03, 0x03]);
        let whole = complete == data.len();
        // Xray's rule: a write of whole application-data records ends padding. At a known
        // boundary we may also end it with the whole records that start a longer write.
        if app_data && complete > 0 && (whole || at_boundary) {
            let last_command = if self.filter.enable_direct {
                CMD_DIRECT
            } else {
                CMD_END
            };
            let chunks = complete.div_ceil(MAX_CONTENT);
            for (i, chunk) in data[..complete].chunks(MAX_CONTENT).enumerate() {
                let command = if i + 1 == chunks {
                    last_command
                } else {
                    CMD_CONTINUE
                };
                self.frame(out, command, chunk, true);
            }
            if last_command == CMD_DIRECT {
                self.direct_after_drain = true;
            } else {
                self.write_mode = Mode::Plain;
            }
            return complete;
        }
        let n = data.len().min(MAX_CONTENT);
        let taken = if at_boundary {
            // Stop at a record header cut by the end of this piece, to keep our place.
            match records_end(&data[..n]) {
                RecordsEnd::Inside(left) => {
                    self.track = RecordTrack::Inside(left);
                    n
                }
                RecordsEnd::CutHeader(at) if at > 0 => at,
                RecordsEnd::CutHeader(_) => {
                    self.track = RecordTrack::Lost;
                    n
                }
            }
        } else {
            n
        };
        self.frame(out, CMD_CONTINUE, &data[..taken], true);
        taken
    }

    fn frame(&mut self, out: &mut Vec<u8>, command: u8, content: &[u8], long: bool) {
        let long = long || command != CMD_CONTINUE;
        let padding = padding_len(content.len(), long, random_u32());
        let uuid = (!self.uuid_sent).then_some(&self.uuid);
        self.uuid_sent = true;
        write_frame(out, uuid, command, content, padding);
    }

    /// The header alone with an empty, long-padded frame: for a client that reads first or a
    /// side that ends before it wrote anything.
    fn queue_greeting(&mut self) {
        if self.greeting.is_some() && self.write_mode == Mode::Padded {
            let mut out = std::mem::take(self.wbuf.queue());
            if let Some(greeting) = self.greeting.take() {
                out.extend_from_slice(&greeting);
            }
            self.frame(&mut out, CMD_CONTINUE, &[], true);
            *self.wbuf.queue() = out;
        }
    }

    /// Hands `wbuf` to the outer TLS; after a Direct frame, switches the write side.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.wbuf.poll_drain(&mut self.inner, cx))?;
        if self.direct_after_drain {
            self.direct_after_drain = false;
            let switch = self
                .inner
                .direct_switch()
                .ok_or_else(|| io::Error::other("Vision: the outer stream cannot go direct"))?;
            switch.write_direct();
            self.write_mode = Mode::Direct;
            DIRECT_WRITES.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(side = ?self.side, "Vision: inner TLS 1.3 application data, writing the bare socket");
        }
        Poll::Ready(Ok(()))
    }
}

/// Length of the longest prefix of `data` made of complete TLS records.
fn complete_records_prefix(data: &[u8]) -> usize {
    let mut at = 0;
    while let Some(header) = data.get(at..at + 5) {
        let end = at + 5 + usize::from(u16::from_be_bytes([header[3], header[4]]));
        if end > data.len() {
            break;
        }
        at = end;
    }
    at
}

enum RecordsEnd {
    /// The data ends inside a record's body with this many bytes of it still to come
    /// (0: exactly at a boundary).
    Inside(usize),
    /// The data ends inside a record header that starts at this offset.
    CutHeader(usize),
}

fn records_end(data: &[u8]) -> RecordsEnd {
    let mut at = 0;
    while at < data.len() {
        let Some(header) = data.get(at..at + 5) else {
            return RecordsEnd::CutHeader(at);
        };
        let end = at + 5 + usize::from(u16::from_be_bytes([header[3], header[4]]));
        if end > data.len() {
            return RecordsEnd::Inside(end - data.len());
        }
        at = end;
    }
    RecordsEnd::Inside(0)
}

impl AsyncRead for VisionStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.side == Side::Client && this.greeting.is_some() {
            // The server answers nothing before it has our request.
            this.queue_greeting();
        }
        if !this.wbuf.is_drained() {
            // Best effort: the relay's flush finishes a write that is pending here.
            if let Poll::Ready(Err(e)) = this.poll_drain(cx) {
                return Poll::Ready(Err(e));
            }
        }
        if out.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        for _ in 0..1024 {
            match this.read_mode {
                Mode::Direct | Mode::Plain => {
                    if this.deliver_held(out) {
                        return Poll::Ready(Ok(()));
                    }
                    let before = out.filled().len();
                    ready!(Pin::new(&mut this.inner).poll_read(cx, out))?;
                    if this.read_mode == Mode::Plain && this.filter.active() {
                        this.filter.observe(&out.filled()[before..]);
                    }
                    return Poll::Ready(Ok(()));
                }
                Mode::Padded => {}
            }
            if !this.rbuf.is_empty() || this.read_eof {
                match this.unpad_step(out)? {
                    Some(true) => return Poll::Ready(Ok(())),
                    Some(false) => continue,
                    None if this.read_eof => {
                        if this.response_pending {
                            return Poll::Ready(Err(io::Error::new(
                                io::ErrorKind::UnexpectedEof,
                                "connection closed before the VLESS response header",
                            )));
                        }
                        if this.unpadder.may_end(this.rbuf.held().len()) {
                            return Poll::Ready(Ok(()));
                        }
                        return Poll::Ready(Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "connection closed inside a Vision frame",
                        )));
                    }
                    None => {}
                }
            }
            ready!(this.poll_fill(cx))?;
        }
        // Only frames without content (header or padding pieces) came: let others run.
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

impl AsyncWrite for VisionStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_drain(cx))?;
        match this.write_mode {
            Mode::Direct => return Pin::new(&mut this.inner).poll_write(cx, buf),
            Mode::Plain => {
                let n = ready!(Pin::new(&mut this.inner).poll_write(cx, buf))?;
                if this.filter.active() {
                    this.filter.observe(&buf[..n]);
                }
                return Poll::Ready(Ok(n));
            }
            Mode::Padded => {}
        }
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let taken = this.pad_write(buf);
        // The frames are committed; a pending write finishes on the next call.
        if let Poll::Ready(Err(e)) = this.poll_drain(cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(taken))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.side == Side::Client {
            this.queue_greeting();
        }
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.queue_greeting();
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

impl ProxyStream for VisionStream {
    fn raw_tcp_read(&self) -> Option<&tokio::net::TcpStream> {
        if self.read_mode == Mode::Direct && self.rbuf.is_empty() {
            self.inner.raw_tcp_read()
        } else {
            None
        }
    }

    fn raw_tcp_write(&self) -> Option<&tokio::net::TcpStream> {
        if self.write_mode == Mode::Direct && self.wbuf.is_drained() {
            self.inner.raw_tcp_write()
        } else {
            None
        }
    }

    fn take_read_residue(&mut self) -> Option<Bytes> {
        if self.read_mode != Mode::Direct {
            return None;
        }
        let mine = self.rbuf.take();
        match self.inner.take_read_residue() {
            None if mine.is_empty() => None,
            None => Some(Bytes::from(mine)),
            Some(theirs) if mine.is_empty() => Some(theirs),
            Some(theirs) => {
                let mut joined = mine;
                joined.extend_from_slice(&theirs);
                Some(Bytes::from(joined))
            }
        }
    }

    fn poll_read_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if !self.rbuf.is_empty()
            || self.read_eof
            || (self.side == Side::Client && self.greeting.is_some())
        {
            Poll::Ready(Ok(()))
        } else {
            self.inner.poll_read_ready(cx)
        }
    }

    fn reset_on_close(&mut self) {
        self.inner.reset_on_close()
    }
}
