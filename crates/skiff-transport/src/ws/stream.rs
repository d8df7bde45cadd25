//! The WebSocket data stream over an async byte stream (both roles).
//!
//! Writes: one `poll_write` = one binary frame of at most [`MAX_FRAME_PAYLOAD`] bytes, encoded
//! into a reusable buffer (client frames masked with a fresh random key). Reads: frames are
//! decoded with [`FrameDecoder`] and unmasked in place in a reusable, lazily allocated read
//! buffer; pings are answered, a Close frame ends the read side. Our own Close frame is sent
//! by `poll_shutdown` (echoing the peer's code if it closed first), so a peer that half-closes
//! can still receive everything we write afterwards.
//!
//! Client streams may start with the HTTP handshake still pending (see [`super::io::connect`]).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, Waker, ready};

use bytes::{Buf, Bytes};
use skiff_core::{BoxStream, ProxyStream};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::decoder::{Event, FrameDecoder, Role};
use super::early_data::{ClientEarlyData, EarlyDataCarrier, PROTOCOL_HEADER};
use super::frame::{MAX_CONTROL_PAYLOAD, MAX_HEADER_LEN, Opcode, close_payload, encode_header};
use super::handshake::{ClientRequest, HandshakeError, build_request, parse_response};
use super::mask::extend_masked;
use crate::Parsed;
use skiff_core::buffers::{KEEP_WRITE, WriteBuffer};

/// Largest payload of a frame we send.
pub const MAX_FRAME_PAYLOAD: usize = 64 * 1024;
/// Size of the read buffer (allocated on the first read).
const READ_BUF_LEN: usize = 64 * 1024;
/// Frames at least this big have their payload read apart from the header, straight into the
/// reader's buffer.
const DIRECT_PAYLOAD_MIN: u64 = 16 * 1024;
/// Largest incoming frame payload. Data payloads are streamed, so this costs no memory.
const MAX_IN_PAYLOAD: u64 = i64::MAX as u64;

const READER: usize = 0;
const WRITER: usize = 1;

/// A source of masking keys: [`skiff_crypto::random::fill`] in batches.
pub(crate) struct KeyPool {
    buf: [u8; 256],
    pos: usize,
}

impl KeyPool {
    pub(crate) fn new() -> Self {
        KeyPool {
            buf: [0; 256],
            pos: 256,
        }
    }

    pub(crate) fn key(&mut self) -> [u8; 4] {
        if self.pos + 4 > self.buf.len() {
            skiff_crypto::random::fill(&mut self.buf);
            self.pos = 0;
        }
        let k = [
            self.buf[self.pos],
            self.buf[self.pos + 1],
            self.buf[self.pos + 2],
            self.buf[self.pos + 3],
        ];
        self.pos += 4;
        k
    }
}

/// Client handshake parameters kept until the first write (early data).
pub(crate) struct DeferredRequest {
    pub(crate) path: String,
    pub(crate) host: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) early: Option<ClientEarlyData>,
}

impl DeferredRequest {
    /// Writes the upgrade request carrying `early` (already cut to size); returns the accept
    /// value and, if the early data rides in `Sec-WebSocket-Protocol`, the value to see echoed.
    pub(crate) fn build(
        &self,
        early: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(String, bool), HandshakeError> {
        let headers: Vec<(&str, &str)> = self
            .headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        let mut key = [0u8; 16];
        skiff_crypto::random::fill(&mut key);
        let carrier = self.early.as_ref().map(|e| &e.carrier);
        let req = ClientRequest {
            path: &self.path,
            host: &self.host,
            headers: &headers,
            key,
            early_data: carrier.map(|c| (c, early)),
        };
        let accept = build_request(&req, out)?;
        let expect_echo = !early.is_empty()
            && matches!(carrier, Some(EarlyDataCarrier::Header(h)) if h.eq_ignore_ascii_case(PROTOCOL_HEADER));
        Ok((accept, expect_echo))
    }
}

enum Phase {
    /// Client with early data: nothing sent yet; the first write starts the handshake.
    Deferred(Box<DeferredRequest>),
    /// Client: the request is in `wbuf` (or sent); waiting for the 101.
    AwaitResponse {
        accept: String,
        expect_echo: bool,
    },
    Open,
    Failed(io::ErrorKind, String),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum CloseOut {
    /// Not requested.
    None,
    /// To be encoded into the write buffer.
    Queued,
    /// Encoded (maybe not flushed yet).
    Encoded,
    /// Inner write side shut down.
    Done,
}

/// See the module documentation.
pub struct WsStream {
    inner: BoxStream,
    role: Role,
    phase: Phase,
    decoder: FrameDecoder,
    /// Early data (server side) returned before any frame payload.
    early: Bytes,
    /// Raw bytes from the inner stream: `[rpos, rend)` not yet decoded.
    rbuf: Vec<u8>,
    rpos: usize,
    rend: usize,
    /// Decoded payload waiting for the reader: `rbuf[data.0..data.1]`.
    data: (usize, usize),
    read_eof: bool,
    /// A read error met after bytes were already handed over; returned by the next read.
    deferred_error: Option<io::Error>,
    /// Close code the peer sent (echoed in our Close).
    peer_close: Option<u16>,
    /// Encoded frames not yet written.
    wbuf: WriteBuffer,
    /// Latest unanswered ping payload.
    pong: Option<([u8; MAX_CONTROL_PAYLOAD], usize)>,
    close: CloseOut,
    /// The write side is parked on the inner stream's write readiness.
    write_blocked: bool,
    keys: KeyPool,
    /// Tasks parked on the handshake (reader, writer).
    parked: [Option<Waker>; 2],
}

fn io_err(kind: io::ErrorKind, e: impl std::fmt::Display) -> io::Error {
    io::Error::new(kind, e.to_string())
}

impl WsStream {
    /// Server side after a successful upgrade. `rbuf[rpos..]` holds bytes that followed the
    /// request head; `early` is returned first.
    pub(crate) fn server(inner: BoxStream, rbuf: Vec<u8>, rpos: usize, early: Bytes) -> Self {
        let rend = rbuf.len();
        let mut s = WsStream::new(inner, Role::Server, Phase::Open);
        s.rbuf = rbuf;
        s.rpos = rpos;
        s.rend = rend;
        s.early = early;
        s
    }

    /// Client side; the handshake is started later by [`WsStream::start_handshake`] (or by
    /// the first write when early data is configured).
    pub(crate) fn client(inner: BoxStream, request: DeferredRequest) -> Self {
        WsStream::new(inner, Role::Client, Phase::Deferred(Box::new(request)))
    }

    fn new(inner: BoxStream, role: Role, phase: Phase) -> Self {
        WsStream {
            inner,
            role,
            phase,
            decoder: FrameDecoder::new(role, MAX_IN_PAYLOAD),
            early: Bytes::new(),
            rbuf: Vec::new(),
            rpos: 0,
            rend: 0,
            data: (0, 0),
            read_eof: false,
            deferred_error: None,
            peer_close: None,
            wbuf: WriteBuffer::new(KEEP_WRITE),
            pong: None,
            close: CloseOut::None,
            write_blocked: false,
            keys: KeyPool::new(),
            parked: [None, None],
        }
    }

    /// Client: queues the upgrade request with as much of `first` as early data as the policy
    /// allows; returns how many bytes of `first` it took. No-op unless deferred.
    pub(crate) fn start_handshake(&mut self, first: &[u8]) -> io::Result<usize> {
        let Phase::Deferred(req) = &self.phase else {
            return Ok(0);
        };
        let early = match &req.early {
            Some(policy) => policy.split(first).0,
            None => &[][..],
        };
        self.wbuf.clear();
        match req.build(early, self.wbuf.queue()) {
            Ok((accept, expect_echo)) => {
                let taken = early.len();
                self.phase = Phase::AwaitResponse {
                    accept,
                    expect_echo,
                };
                self.wake_parked();
                Ok(taken)
            }
            Err(e) => {
                self.wbuf.clear();
                Err(self.fail(io_err(io::ErrorKind::InvalidInput, e)))
            }
        }
    }

    fn wake_parked(&mut self) {
        for w in self.parked.iter_mut() {
            if let Some(w) = w.take() {
                w.wake();
            }
        }
    }

    fn fail(&mut self, e: io::Error) -> io::Error {
        self.phase = Phase::Failed(e.kind(), e.to_string());
        self.wake_parked();
        e
    }

    /// Drives the client handshake to completion (no-op when open). `who` is the calling
    /// direction; a deferred handshake parks a reader until a writer starts it.
    pub(crate) fn poll_handshake(
        &mut self,
        cx: &mut Context<'_>,
        who: usize,
    ) -> Poll<io::Result<()>> {
        loop {
            match &self.phase {
                Phase::Open => return Poll::Ready(Ok(())),
                Phase::Failed(kind, msg) => {
                    return Poll::Ready(Err(io::Error::new(*kind, msg.clone())));
                }
                Phase::Deferred(_) => {
                    if who == WRITER {
                        self.start_handshake(&[])?;
                        continue;
                    }
                    self.parked[who] = Some(cx.waker().clone());
                    return Poll::Pending;
                }
                Phase::AwaitResponse { .. } => {}
            }
            match self.poll_drain(cx) {
                Poll::Pending => {
                    self.parked[who] = Some(cx.waker().clone());
                    return Poll::Pending;
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(self.fail(e))),
                Poll::Ready(Ok(())) => {}
            }
            let Phase::AwaitResponse {
                accept,
                expect_echo,
            } = &self.phase
            else {
                unreachable!()
            };
            match parse_response(&self.rbuf[..self.rend], accept) {
                Ok(Parsed::Complete(resp, n)) => {
                    if *expect_echo && resp.protocol.is_none() {
                        let e = io_err(
                            io::ErrorKind::InvalidData,
                            "server did not accept the early data (no Sec-WebSocket-Protocol echo)",
                        );
                        return Poll::Ready(Err(self.fail(e)));
                    }
                    self.rpos = n;
                    if self.rpos == self.rend {
                        // Nothing followed the response. If the writer drove the handshake,
                        // no read may come for a long time (a silent server): a quiet
                        // connection keeps no read buffer.
                        self.rbuf = Vec::new();
                        self.rpos = 0;
                        self.rend = 0;
                    }
                    self.phase = Phase::Open;
                    self.wake_parked();
                    return Poll::Ready(Ok(()));
                }
                Ok(Parsed::Incomplete) => {}
                Err(e) => {
                    return Poll::Ready(Err(self.fail(io_err(io::ErrorKind::InvalidData, e))));
                }
            }
            if self.rbuf.len() < READ_BUF_LEN {
                self.rbuf.resize(READ_BUF_LEN, 0);
            }
            let mut rb = ReadBuf::new(&mut self.rbuf[self.rend..]);
            match Pin::new(&mut self.inner).poll_read(cx, &mut rb) {
                Poll::Pending => {
                    self.parked[who] = Some(cx.waker().clone());
                    return Poll::Pending;
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(self.fail(e))),
                Poll::Ready(Ok(())) => {
                    let n = rb.filled().len();
                    if n == 0 {
                        let e = io_err(
                            io::ErrorKind::UnexpectedEof,
                            "EOF during the WebSocket handshake",
                        );
                        return Poll::Ready(Err(self.fail(e)));
                    }
                    self.rend += n;
                }
            }
        }
    }

    /// Appends one frame to the write buffer (client: masked).
    fn encode(&mut self, opcode: Opcode, payload: &[u8]) -> io::Result<()> {
        let mask = match self.role {
            Role::Client => Some(self.keys.key()),
            Role::Server => None,
        };
        let out = self.wbuf.queue();
        out.reserve(MAX_HEADER_LEN + payload.len());
        encode_header(true, opcode, payload.len() as u64, mask, out);
        match mask {
            Some(k) => extend_masked(out, payload, k),
            None => out.extend_from_slice(payload),
        }
        Ok(())
    }

    /// Writes out the write buffer, then any pending pong / close.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            // Everything goes out; a quiet connection then keeps no frame-sized buffer.
            ready!(self.wbuf.poll_drain(&mut self.inner, cx))?;
            if !matches!(self.phase, Phase::Open) {
                return Poll::Ready(Ok(()));
            }
            if let Some((p, len)) = self.pong.take()
                && self.close == CloseOut::None
            {
                self.encode(Opcode::Pong, &p[..len])?;
                continue;
            }
            if self.close == CloseOut::Queued {
                let payload = close_payload(self.peer_close.unwrap_or(1000), "");
                self.encode(Opcode::Close, &payload)?;
                self.close = CloseOut::Encoded;
                continue;
            }
            return Poll::Ready(Ok(()));
        }
    }

    /// `poll_drain` from the write side (tracks whether the writer is parked on it).
    fn poll_drain_writer(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = self.poll_drain(cx);
        self.write_blocked = r.is_pending();
        r
    }

    /// Decodes buffered bytes until payload is available, the read side ends, or the buffer
    /// is used up.
    fn decode_some(&mut self) -> io::Result<()> {
        while self.data.0 == self.data.1 && !self.read_eof && self.rpos < self.rend {
            let start = self.rpos;
            let d = self
                .decoder
                .decode(&mut self.rbuf[start..self.rend])
                .map_err(|e| io_err(io::ErrorKind::InvalidData, e))?;
            let end = start + d.consumed;
            match d.event {
                Some(Event::Data { payload, .. }) => {
                    // The payload always ends at the last consumed byte.
                    self.data = (end - payload.len(), end);
                }
                Some(Event::Ping(p)) => {
                    let mut b = [0u8; MAX_CONTROL_PAYLOAD];
                    b[..p.len()].copy_from_slice(p);
                    self.pong = Some((b, p.len()));
                }
                Some(Event::Pong(_)) | None => {}
                Some(Event::Close { code, .. }) => {
                    self.peer_close = code;
                    self.read_eof = true;
                }
            }
            self.rpos = end;
        }
        Ok(())
    }
}

impl AsyncRead for WsStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.early.is_empty() {
            let n = this.early.len().min(buf.remaining());
            buf.put_slice(&this.early[..n]);
            this.early.advance(n);
            return Poll::Ready(Ok(()));
        }
        ready!(this.poll_handshake(cx, READER))?;
        if let Some(e) = this.deferred_error.take() {
            return Poll::Ready(Err(e));
        }
        loop {
            if this.data.0 < this.data.1 {
                let (a, b) = this.data;
                let n = (b - a).min(buf.remaining());
                buf.put_slice(&this.rbuf[a..a + n]);
                this.data.0 += n;
                this.continue_payload_direct(cx, buf);
                return Poll::Ready(Ok(()));
            }
            if this.read_eof {
                return Poll::Ready(Ok(()));
            }
            this.decode_some()?;
            // Answer pings from the read side too, unless that would steal the writer's
            // wake-up (a parked writer flushes the pong itself).
            if this.pong.is_some()
                && !this.write_blocked
                && let Poll::Ready(Err(e)) = this.poll_drain(cx)
            {
                return Poll::Ready(Err(e));
            }
            if this.data.0 < this.data.1 || this.read_eof {
                continue;
            }
            if this.rpos < this.rend {
                continue;
            }
            this.rpos = 0;
            this.rend = 0;
            this.data = (0, 0);
            let due = this.decoder.data_remaining();
            if due > 0 && buf.remaining() > 0 {
                return this.poll_read_payload_direct(cx, buf, due);
            }
            // A header comes next. After big frames, read little more than a header so the
            // payload that follows can go straight to the caller; small frames are read many
            // at a time.
            let want = if this.decoder.last_data_len() >= DIRECT_PAYLOAD_MIN {
                MAX_HEADER_LEN
            } else {
                READ_BUF_LEN
            };
            if this.rbuf.len() < want {
                this.rbuf.resize(want, 0);
            }
            let mut rb = ReadBuf::new(&mut this.rbuf[..want]);
            let polled = Pin::new(&mut this.inner).poll_read(cx, &mut rb);
            if polled.is_pending() {
                // Nothing buffered: a quiet connection keeps no read buffer.
                this.rbuf = Vec::new();
                return Poll::Pending;
            }
            ready!(polled)?;
            let n = rb.filled().len();
            if n == 0 {
                if this.decoder.is_mid_frame() {
                    return Poll::Ready(Err(io_err(
                        io::ErrorKind::UnexpectedEof,
                        "EOF inside a WebSocket frame",
                    )));
                }
                this.read_eof = true;
                return Poll::Ready(Ok(()));
            }
            this.rend = n;
        }
    }
}

impl WsStream {
    /// After handing over the payload bytes that came in with a frame's header, reads more
    /// of the same frame into the rest of `buf` when the socket has them. Without this, a
    /// header read that took a few payload bytes along (10 header bytes read as the 14 a
    /// masked header could need) hands them over alone, and the relay writes each 64 KiB
    /// frame as a 4-byte send and the rest: a syscall and a packet per frame for nothing.
    /// Bytes are already in `buf`, so an error waits for the next read.
    fn continue_payload_direct(&mut self, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) {
        let due = self.decoder.data_remaining();
        if self.data.0 < self.data.1 || self.rpos < self.rend || due == 0 || buf.remaining() == 0 {
            return;
        }
        self.rpos = 0;
        self.rend = 0;
        self.data = (0, 0);
        if let Poll::Ready(Err(e)) = self.poll_read_payload_direct(cx, buf, due) {
            self.deferred_error = Some(e);
        }
    }

    /// Reads up to `due` payload bytes of the current data frame straight into `buf` and
    /// unmasks them there: no copy through the read buffer.
    fn poll_read_payload_direct(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
        due: u64,
    ) -> Poll<io::Result<()>> {
        let want = usize::try_from(due)
            .unwrap_or(usize::MAX)
            .min(buf.remaining());
        let before = buf.filled().len();
        // SAFETY: the sub-buffer only ever gets initialised bytes written into it (ReadBuf
        // tracks that), and only the `n` bytes the read reports as filled are declared
        // initialised in `buf` below.
        let n = {
            let unfilled = unsafe { buf.unfilled_mut() };
            let mut sub = ReadBuf::uninit(&mut unfilled[..want]);
            ready!(Pin::new(&mut self.inner).poll_read(cx, &mut sub))?;
            sub.filled().len()
        };
        if n == 0 {
            return Poll::Ready(Err(io_err(
                io::ErrorKind::UnexpectedEof,
                "EOF inside a WebSocket frame",
            )));
        }
        // SAFETY: the read above initialised these `n` bytes.
        unsafe { buf.assume_init(n) };
        buf.advance(n);
        let payload = &mut buf.filled_mut()[before..before + n];
        let decoded = self
            .decoder
            .decode(payload)
            .map_err(|e| io_err(io::ErrorKind::InvalidData, e))?;
        if decoded.consumed != n {
            return Poll::Ready(Err(io_err(
                io::ErrorKind::InvalidData,
                "WebSocket decoder disagreed about the frame length",
            )));
        }
        Poll::Ready(Ok(()))
    }

    /// Server frames carry no mask: header and payload go out in one vectored write, straight
    /// from the caller's buffer. Only what the socket did not take is copied, into the write
    /// buffer, to finish the frame later. Pending means nothing was committed.
    fn poll_write_unmasked_direct(
        &mut self,
        cx: &mut Context<'_>,
        payload: &[u8],
    ) -> Poll<io::Result<usize>> {
        let mut header = Vec::with_capacity(MAX_HEADER_LEN);
        encode_header(
            true,
            Opcode::Binary,
            payload.len() as u64,
            None,
            &mut header,
        );
        let slices = [io::IoSlice::new(&header), io::IoSlice::new(payload)];
        let wrote = ready!(Pin::new(&mut self.inner).poll_write_vectored(cx, &slices))?;
        if wrote == 0 {
            return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
        }
        if wrote < header.len() + payload.len() {
            self.wbuf.clear();
            let out = self.wbuf.queue();
            if wrote < header.len() {
                out.extend_from_slice(&header[wrote..]);
                out.extend_from_slice(payload);
            } else {
                out.extend_from_slice(&payload[wrote - header.len()..]);
            }
            // The frame is committed; later calls finish writing it.
            if let Poll::Ready(Err(e)) = self.poll_drain_writer(cx) {
                return Poll::Ready(Err(e));
            }
        }
        Poll::Ready(Ok(payload.len()))
    }
}

impl AsyncWrite for WsStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if matches!(this.phase, Phase::Deferred(_)) {
            let taken = this.start_handshake(buf)?;
            if taken > 0 {
                // The bytes ride in the request; push it out if the socket takes it now.
                if let Poll::Ready(Err(e)) = this.poll_drain_writer(cx) {
                    return Poll::Ready(Err(this.fail(e)));
                }
                return Poll::Ready(Ok(taken));
            }
        }
        ready!(this.poll_handshake(cx, WRITER))?;
        if this.close != CloseOut::None {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        ready!(this.poll_drain_writer(cx))?;
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let n = buf.len().min(MAX_FRAME_PAYLOAD);
        // Over a plain socket, server frames skip the write buffer. (Over TLS, a separate
        // header slice would become its own TLS record, so those frames are assembled.)
        if this.role == Role::Server
            && this.inner.raw_tcp().is_some()
            && this.inner.is_write_vectored()
        {
            return this.poll_write_unmasked_direct(cx, &buf[..n]);
        }
        this.encode(Opcode::Binary, &buf[..n])?;
        // The frame is committed; later calls finish writing it.
        if let Poll::Ready(Err(e)) = this.poll_drain_writer(cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if matches!(this.phase, Phase::Deferred(_)) {
            this.start_handshake(&[])?;
        }
        if let Phase::Failed(kind, msg) = &this.phase {
            return Poll::Ready(Err(io::Error::new(*kind, msg.clone())));
        }
        if this.close == CloseOut::Done {
            return Poll::Ready(Ok(()));
        }
        ready!(this.poll_drain_writer(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_handshake(cx, WRITER))?;
        if this.close == CloseOut::Done {
            return Poll::Ready(Ok(()));
        }
        // WebSocket has no half-close: Xray and v2ray end the whole conversation on a Close
        // frame, dropping whatever the other direction still carried. So while the peer may
        // still send, ending our side only flushes; the Close goes out once the read side has
        // ended too (the relay's uplinkOnly/downlinkOnly timeouts end an idle other half).
        if !this.read_eof {
            return this.poll_drain_writer(cx);
        }
        if this.close == CloseOut::None {
            this.close = CloseOut::Queued;
        }
        ready!(this.poll_drain_writer(cx))?;
        ready!(Pin::new(&mut this.inner).poll_shutdown(cx))?;
        this.close = CloseOut::Done;
        Poll::Ready(Ok(()))
    }
}

impl ProxyStream for WsStream {
    fn poll_read_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if !self.early.is_empty()
            || self.data.0 < self.data.1
            || self.rpos < self.rend
            || self.read_eof
        {
            return Poll::Ready(Ok(()));
        }
        match self.phase {
            Phase::Open => {
                // Nothing buffered and the reader only waits for readiness (the relay does
                // this once it went idle): give the read buffer back now. A reader that
                // stopped after its last frame would otherwise keep it for as long as the
                // peer stays silent.
                if self.rbuf.capacity() > 0 {
                    self.rbuf = Vec::new();
                    self.rpos = 0;
                    self.rend = 0;
                    self.data = (0, 0);
                }
                self.inner.poll_read_ready(cx)
            }
            // Nothing to read before a write starts the handshake.
            Phase::Deferred(_) => {
                self.parked[READER] = Some(cx.waker().clone());
                Poll::Pending
            }
            // Let the read itself drive the handshake (or report its failure).
            _ => Poll::Ready(Ok(())),
        }
    }

    fn reset_on_close(&mut self) {
        self.inner.reset_on_close()
    }
}
