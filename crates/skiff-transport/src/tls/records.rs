//! Our own TLS 1.3 record layer for established connections.
//!
//! rustls does the handshake; once it is done we take the traffic keys
//! (`dangerous_extract_secrets`) and move application data ourselves: records are opened in
//! place in one read buffer and sealed in place in one write buffer, with no per-record
//! allocation and no extra copy between rustls' buffers (rustls' buffered API copies every
//! record's plaintext into a fresh `Vec` and then again into the reader's buffer). This is
//! also where later work (XTLS Vision) needs to stand: every byte read from the socket is in
//! our hands.
//!
//! Post-handshake messages: NewSessionTicket is skipped (we do not resume sessions);
//! KeyUpdate ends the connection with an error, since the extracted secrets are keys, not
//! traffic secrets, and cannot be ratcheted. Peers in this field (Go's crypto/tls, rustls) do
//! not send KeyUpdate unprompted at proxy volumes. TLS 1.2 connections stay on rustls.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use rustls::{CommonState, ConnectionTrafficSecrets, ProtocolVersion};
use skiff_core::{BoxStream, DirectSwitch, ProxyStream};
use skiff_crypto::{AeadKey, AeadKind, TAG_LEN};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use skiff_core::buffers::{KEEP_WRITE, ReadBuffer, WriteBuffer};

use super::read_ahead::ReadAhead;
use super::stream::TlsProxyStream;

const HEADER_LEN: usize = 5;
/// Largest plaintext per record (RFC 8446 §5.1).
const MAX_FRAGMENT: usize = 16 * 1024;
/// Largest ciphertext a peer may send (RFC 8446 §5.2).
const MAX_CIPHERTEXT: usize = MAX_FRAGMENT + 256;
/// Records sealed per write call: up to 64 KiB of plaintext goes out in one syscall.
const RECORDS_PER_WRITE: usize = 4;
/// Plaintext one write call takes: a relay's 64 KiB and what a layer above adds to it (a
/// WebSocket frame's header, VMess chunks' overhead), so that a 64 KiB write through such a
/// layer goes out in one send: at most four records, and a short fifth. Taking only 64 KiB
/// sent the 14 bytes a WebSocket header adds as a 36-byte record in a send of its own.
const WRITE_TAKE: usize = (RECORDS_PER_WRITE + 1) * MAX_FRAGMENT;
/// What one read of ciphertext asks for: exactly the four full records of one 64 KiB write
/// (header, 16 KiB, content type, tag each). A read starts at a record boundary (the partial
/// record held is moved to the front), so with data waiting each read completes four
/// records and the relay sends 64 KiB; the general 64 KiB window held three and a part.
const RECORDS_READ_WINDOW: usize = RECORDS_PER_WRITE * (HEADER_LEN + MAX_FRAGMENT + 1 + TAG_LEN);
/// A read into a buffer at least this big gets further records already buffered, as many
/// as fit (see `poll_read`); Vision's window (`skiff_core::buffers::VISION_READ_WINDOW`) is
/// below it.
const COALESCE_ROOM: usize = 2 * MAX_FRAGMENT;
const _: () = assert!(skiff_core::buffers::VISION_READ_WINDOW < COALESCE_ROOM);

const CONTENT_ALERT: u8 = 21;
const CONTENT_HANDSHAKE: u8 = 22;
const CONTENT_APPLICATION_DATA: u8 = 23;
const HANDSHAKE_NEW_SESSION_TICKET: u8 = 4;
const HANDSHAKE_KEY_UPDATE: u8 = 24;

fn invalid(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("TLS: {msg}"))
}

/// One direction's key, static IV and record sequence number.
struct DirectionKey {
    key: AeadKey,
    iv: [u8; 12],
    seq: u64,
}

impl DirectionKey {
    fn new((seq, secrets): (u64, ConnectionTrafficSecrets)) -> io::Result<DirectionKey> {
        let (kind, key, iv) = match &secrets {
            ConnectionTrafficSecrets::Aes128Gcm { key, iv } => (AeadKind::Aes128Gcm, key, iv),
            ConnectionTrafficSecrets::Aes256Gcm { key, iv } => (AeadKind::Aes256Gcm, key, iv),
            ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => {
                (AeadKind::ChaCha20Poly1305, key, iv)
            }
            _ => {
                return Err(io::Error::other(
                    "TLS: cipher suite without our record layer",
                ));
            }
        };
        let key = AeadKey::new(kind, key.as_ref()).map_err(io::Error::other)?;
        let iv: [u8; 12] = iv
            .as_ref()
            .try_into()
            .map_err(|_| io::Error::other("TLS: IV is not 12 bytes"))?;
        Ok(DirectionKey { key, iv, seq })
    }

    /// The per-record nonce (RFC 8446 §5.3), then the sequence number moves on.
    fn next_nonce(&mut self) -> [u8; 12] {
        let mut nonce = self.iv;
        for (n, s) in nonce[4..].iter_mut().zip(self.seq.to_be_bytes()) {
            *n ^= s;
        }
        self.seq = self.seq.wrapping_add(1);
        nonce
    }
}

/// An established TLS 1.3 connection driven by our record layer.
pub(crate) struct RecordStream {
    inner: BoxStream,
    rx: DirectionKey,
    tx: DirectionKey,
    /// Ciphertext read ahead (held), decrypted in place: records already opened stay in its
    /// storage until the next fill.
    rbuf: ReadBuffer,
    /// Decrypted application data waiting for the reader: `rbuf.storage()[plain.0..plain.1]`.
    plain: (usize, usize),
    read_eof: bool,
    /// Sealed records not yet written.
    wbuf: WriteBuffer,
    close_notify_sent: bool,
    /// XTLS Vision switched the read side to the bare socket: no more records come in.
    read_raw: bool,
    /// XTLS Vision switched the write side to the bare socket: no more records go out.
    write_raw: bool,
    /// Cut on purpose ([`ProxyStream::reset_on_close`]): no close_notify at drop.
    reset: bool,
}

impl RecordStream {
    /// `leftover` holds bytes read after the last handshake record; it starts at a record
    /// boundary. `plaintext` is application data rustls had already decrypted.
    pub(crate) fn new(
        inner: BoxStream,
        leftover: Vec<u8>,
        plaintext: Vec<u8>,
        peer_closed: bool,
        tx: (u64, ConnectionTrafficSecrets),
        rx: (u64, ConnectionTrafficSecrets),
    ) -> io::Result<RecordStream> {
        let (tx, rx) = (DirectionKey::new(tx)?, DirectionKey::new(rx)?);
        Ok(RecordStream::with_keys(
            inner,
            leftover,
            plaintext,
            peer_closed,
            tx,
            rx,
        ))
    }

    /// A stream whose keys came from our own TLS 1.3 client handshake
    /// ([`crate::tls13_client`]) rather than from rustls: each direction's AEAD, key and
    /// static IV, from record sequence number zero.
    pub(crate) fn from_handshake(
        inner: BoxStream,
        leftover: Vec<u8>,
        tx: (AeadKind, &[u8], [u8; 12]),
        rx: (AeadKind, &[u8], [u8; 12]),
    ) -> io::Result<RecordStream> {
        let key = |(kind, key, iv): (AeadKind, &[u8], [u8; 12])| {
            AeadKey::new(kind, key)
                .map(|key| DirectionKey { key, iv, seq: 0 })
                .map_err(io::Error::other)
        };
        Ok(RecordStream::with_keys(
            inner,
            leftover,
            Vec::new(),
            false,
            key(tx)?,
            key(rx)?,
        ))
    }

    fn with_keys(
        inner: BoxStream,
        leftover: Vec<u8>,
        plaintext: Vec<u8>,
        peer_closed: bool,
        tx: DirectionKey,
        rx: DirectionKey,
    ) -> RecordStream {
        // Already-decrypted data goes in front of the leftover ciphertext.
        let plain = (0, plaintext.len());
        let mut bytes = plaintext;
        bytes.extend_from_slice(&leftover);
        let mut rbuf = ReadBuffer::holding(bytes);
        rbuf.consume(plain.1);
        RecordStream {
            inner,
            rx,
            tx,
            rbuf,
            plain,
            read_eof: peer_closed,
            wbuf: WriteBuffer::new(KEEP_WRITE),
            close_notify_sent: false,
            reset: false,
            read_raw: false,
            write_raw: false,
        }
    }

    /// Length of the whole record at the start of what `rbuf` holds, if it is all there.
    fn complete_record(&self) -> io::Result<Option<usize>> {
        let held = self.rbuf.held();
        if held.len() < HEADER_LEN {
            return Ok(None);
        }
        if held[0] != CONTENT_APPLICATION_DATA {
            return Err(invalid("unexpected record type after the handshake"));
        }
        let len = usize::from(u16::from_be_bytes([held[3], held[4]]));
        if !(TAG_LEN + 1..=MAX_CIPHERTEXT).contains(&len) {
            return Err(invalid("record length out of range"));
        }
        Ok((held.len() >= HEADER_LEN + len).then_some(HEADER_LEN + len))
    }

    /// Opens the buffered record of `total` bytes in place and acts on its content.
    fn open_record(&mut self, total: usize) -> io::Result<()> {
        let start = self.rbuf.start();
        let mut header = [0u8; HEADER_LEN];
        header.copy_from_slice(&self.rbuf.held()[..HEADER_LEN]);
        let nonce = self.rx.next_nonce();
        let body = &mut self.rbuf.held_mut()[HEADER_LEN..total];
        let opened = self
            .rx
            .key
            .open_in_place(&nonce, &header, body)
            .map_err(|_| invalid("record failed authentication"))?;
        // TLSInnerPlaintext: content, then the real type, then zero padding.
        let Some(type_at) = opened.iter().rposition(|&b| b != 0) else {
            return Err(invalid("record without a content type"));
        };
        let content_type = opened[type_at];
        let data_start = start + HEADER_LEN;
        let data_end = data_start + type_at;
        self.rbuf.consume(total);
        match content_type {
            CONTENT_APPLICATION_DATA => self.plain = (data_start, data_end),
            CONTENT_ALERT => {
                let alert = &self.rbuf.storage()[data_start..data_end];
                if alert.len() == 2 && alert[1] == 0 {
                    // close_notify: the peer's write side has ended.
                    self.read_eof = true;
                } else {
                    return Err(invalid(&format!(
                        "peer sent alert {}",
                        alert.get(1).copied().unwrap_or(0)
                    )));
                }
            }
            CONTENT_HANDSHAKE => {
                self.check_post_handshake(data_start, data_end)?;
            }
            _ => return Err(invalid("unexpected content type")),
        }
        Ok(())
    }

    /// Post-handshake handshake messages: tickets are skipped, anything else ends the
    /// connection (see the module documentation).
    fn check_post_handshake(&self, start: usize, end: usize) -> io::Result<()> {
        let mut msgs = &self.rbuf.storage()[start..end];
        while !msgs.is_empty() {
            if msgs.len() < 4 {
                return Err(invalid("fragmented post-handshake message"));
            }
            let len = usize::from(msgs[1]) << 16 | usize::from(msgs[2]) << 8 | usize::from(msgs[3]);
            if msgs.len() < 4 + len {
                return Err(invalid("fragmented post-handshake message"));
            }
            match msgs[0] {
                HANDSHAKE_NEW_SESSION_TICKET => {}
                HANDSHAKE_KEY_UPDATE => return Err(invalid("peer asked for a key update")),
                _ => return Err(invalid("unexpected post-handshake message")),
            }
            msgs = &msgs[4 + len..];
        }
        Ok(())
    }

    /// Seals `data` (at most a fragment) of `content_type` as one record into `wbuf`.
    fn seal_record(&mut self, content_type: u8, data: &[u8]) {
        let start = self.begin_record(data.len());
        self.wbuf.queue().extend_from_slice(data);
        self.finish_record(start, content_type);
    }

    /// Starts a record of about `plaintext` bytes in `wbuf` (its header, the length filled
    /// in by `finish_record`); returns where it starts. The plaintext is appended to
    /// `wbuf.queue()` after it.
    fn begin_record(&mut self, plaintext: usize) -> usize {
        let out = self.wbuf.queue();
        let start = out.len();
        out.reserve(HEADER_LEN + plaintext + 1 + TAG_LEN);
        out.extend_from_slice(&[CONTENT_APPLICATION_DATA, 3, 3, 0, 0]);
        start
    }

    /// Seals the record begun at `start` whose plaintext follows its header, as `content_type`.
    fn finish_record(&mut self, start: usize, content_type: u8) {
        let out = self.wbuf.queue();
        out.push(content_type);
        out.extend_from_slice(&[0; TAG_LEN]);
        let len = out.len() - start - HEADER_LEN;
        out[start + 3] = (len >> 8) as u8;
        out[start + 4] = len as u8;
        let mut header = [0u8; HEADER_LEN];
        header.copy_from_slice(&out[start..start + HEADER_LEN]);
        let nonce = self.tx.next_nonce();
        self.tx
            .key
            .seal_in_place(&nonce, &header, &mut out[start + HEADER_LEN..]);
    }

    /// Seals up to [`WRITE_TAKE`] bytes of `bufs` as full records that run across the
    /// slices' boundaries, copied straight into `wbuf`; returns how many bytes were taken.
    fn seal_slices(&mut self, bufs: &[io::IoSlice<'_>]) -> usize {
        let mut taken = 0;
        let mut open: Option<(usize, usize)> = None; // (record start, plaintext so far)
        for buf in bufs {
            let mut rest: &[u8] = buf;
            while !rest.is_empty() && taken < WRITE_TAKE {
                let (start, filled) = match open {
                    Some(record) => record,
                    None => {
                        let left = WRITE_TAKE - taken;
                        (self.begin_record(left.min(MAX_FRAGMENT)), 0)
                    }
                };
                let n = rest
                    .len()
                    .min(MAX_FRAGMENT - filled)
                    .min(WRITE_TAKE - taken);
                self.wbuf.queue().extend_from_slice(&rest[..n]);
                rest = &rest[n..];
                taken += n;
                if filled + n == MAX_FRAGMENT {
                    self.finish_record(start, CONTENT_APPLICATION_DATA);
                    open = None;
                } else {
                    open = Some((start, filled + n));
                }
            }
        }
        if let Some((start, _)) = open {
            self.finish_record(start, CONTENT_APPLICATION_DATA);
        }
        taken
    }

    /// Writes out the sealed records.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.wbuf.poll_drain(&mut self.inner, cx)
    }
}

impl AsyncRead for RecordStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.read_raw {
            return this.poll_read_raw(cx, out);
        }
        let mut delivered = false;
        loop {
            let (a, b) = this.plain;
            if a < b {
                let n = (b - a).min(out.remaining());
                out.put_slice(&this.rbuf.storage()[a..a + n]);
                this.plain.0 += n;
                delivered = true;
                // A reader with a big buffer gets the records already read too, as long as
                // each fits whole: the relay then writes 64 KiB at a time instead of one
                // record, four times fewer sends. (Asking for two records' room instead made
                // a 64 KiB read stop after three: a 48 KiB send and a 16 KiB one.) A reader
                // that may switch to raw bytes after a record (Vision) reads with a buffer
                // under COALESCE_ROOM, so it never gets plaintext from past the record it
                // asked for.
                if this.plain.0 == this.plain.1
                    && out.capacity() >= COALESCE_ROOM
                    && let Some(total) = this.complete_record()?
                    && out.remaining() >= total - HEADER_LEN - TAG_LEN - 1
                {
                    this.open_record(total)?;
                    continue;
                }
                return Poll::Ready(Ok(()));
            }
            if this.read_eof || delivered {
                return Poll::Ready(Ok(()));
            }
            if let Some(total) = this.complete_record()? {
                this.open_record(total)?;
                continue;
            }
            if ready!(
                this.rbuf
                    .poll_fill(&mut this.inner, cx, RECORDS_READ_WINDOW)
            )? == 0
            {
                if !this.rbuf.is_empty() {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "TLS: connection closed inside a record",
                    )));
                }
                // Closed at a record boundary without close_notify: an end, as Go treats it.
                this.read_eof = true;
                this.rbuf.release();
            }
        }
    }
}

impl AsyncWrite for RecordStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_drain(cx))?;
        if this.write_raw {
            return Pin::new(&mut this.inner).poll_write(cx, buf);
        }
        if this.close_notify_sent {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let take = buf.len().min(WRITE_TAKE);
        for fragment in buf[..take].chunks(MAX_FRAGMENT) {
            this.seal_record(CONTENT_APPLICATION_DATA, fragment);
        }
        // The records are committed; later calls finish writing them.
        if let Poll::Ready(Err(e)) = this.poll_drain(cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(take))
    }

    /// A frame header and its payload (h2 writes each DATA frame so) become one record and one
    /// send, where two writes made a 9-byte record and a send of their own for every frame.
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_drain(cx))?;
        if this.write_raw {
            return Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        }
        if this.close_notify_sent {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        let taken = this.seal_slices(bufs);
        if taken == 0 {
            return Poll::Ready(Ok(0));
        }
        // The records are committed; later calls finish writing them.
        if let Poll::Ready(Err(e)) = this.poll_drain(cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(taken))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.close_notify_sent && !this.write_raw {
            ready!(this.poll_drain(cx))?;
            // close_notify (warning level), then TCP's FIN: the read side stays open.
            this.seal_record(CONTENT_ALERT, &[1, 0]);
            this.close_notify_sent = true;
        }
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

impl ProxyStream for RecordStream {
    fn poll_read_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.read_raw {
            return if self.plain.0 < self.plain.1 || !self.rbuf.is_empty() {
                Poll::Ready(Ok(()))
            } else {
                self.inner.poll_read_ready(cx)
            };
        }
        let record_ready = !matches!(self.complete_record(), Ok(None));
        if self.plain.0 < self.plain.1 || self.read_eof || record_ready {
            Poll::Ready(Ok(()))
        } else {
            self.inner.poll_read_ready(cx)
        }
    }

    fn raw_tcp_read(&self) -> Option<&tokio::net::TcpStream> {
        if self.read_raw {
            self.inner.raw_tcp_read()
        } else {
            None
        }
    }

    fn raw_tcp_write(&self) -> Option<&tokio::net::TcpStream> {
        if self.write_raw && self.wbuf.is_drained() {
            self.inner.raw_tcp_write()
        } else {
            None
        }
    }

    /// After the read side went direct: the plaintext not yet returned, then the ciphertext
    /// buffer's bytes, which are the peer's raw stream.
    fn take_read_residue(&mut self) -> Option<Bytes> {
        if !self.read_raw {
            return None;
        }
        let mut residue = Vec::new();
        // `plain` may point past a freed buffer once drained: only a non-empty range is read.
        let (a, b) = self.plain;
        if a < b {
            residue.extend_from_slice(&self.rbuf.storage()[a..b]);
        }
        residue.extend_from_slice(self.rbuf.held());
        self.plain = (0, 0);
        self.rbuf.release();
        let inner = self.inner.take_read_residue();
        match inner {
            Some(more) => residue.extend_from_slice(&more),
            None if residue.is_empty() => return None,
            None => {}
        }
        Some(Bytes::from(residue))
    }

    fn direct_switch(&mut self) -> Option<&mut dyn DirectSwitch> {
        Some(self)
    }

    fn reset_on_close(&mut self) {
        self.reset = true;
        self.inner.reset_on_close()
    }
}

/// Dropped without a shutdown (handshake timeout, unreachable fallback, idle timeout, the
/// other side failing), the connection still says close_notify, as Go's TLS (so Xray) and
/// nginx do on close. Best effort, only at a record boundary of what we sent, only while
/// records still go out (not after Vision's direct switch), never for a connection cut on
/// purpose.
impl Drop for RecordStream {
    fn drop(&mut self) {
        if self.reset || self.close_notify_sent || self.write_raw || !self.wbuf.is_drained() {
            return;
        }
        if self.inner.raw_tcp_write().is_none() {
            return;
        }
        self.wbuf.clear();
        self.seal_record(CONTENT_ALERT, &[1, 0]);
        if let Some(socket) = self.inner.raw_tcp_write() {
            let _ = socket.try_write(self.wbuf.pending());
        }
    }
}

impl DirectSwitch for RecordStream {
    fn read_direct(&mut self) {
        self.read_raw = true;
    }

    fn write_direct(&mut self) {
        self.write_raw = true;
    }
}

impl RecordStream {
    /// Reads once the read side went direct: held plaintext, held ciphertext, then the socket.
    fn poll_read_raw(
        &mut self,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let (a, b) = self.plain;
        if a < b {
            let n = (b - a).min(out.remaining());
            out.put_slice(&self.rbuf.storage()[a..a + n]);
            self.plain.0 += n;
            return Poll::Ready(Ok(()));
        }
        if !self.rbuf.is_empty() {
            let held = self.rbuf.held();
            let n = held.len().min(out.remaining());
            out.put_slice(&held[..n]);
            self.rbuf.consume(n);
            self.rbuf.release_if_empty();
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, out)
    }
}

/// Whether a finished handshake can move to [`RecordStream`]: TLS 1.3, nothing left for
/// rustls to send, and rustls holding no part of a later record.
fn can_take_over(io: &ReadAhead, conn: &CommonState) -> bool {
    conn.protocol_version() == Some(ProtocolVersion::TLSv1_3)
        && !conn.is_handshaking()
        && !conn.wants_write()
        && io.at_record_boundary()
}

/// Application data rustls already decrypted, and whether close_notify came with it.
fn drain_plaintext(mut reader: rustls::Reader<'_>) -> io::Result<(Vec<u8>, bool)> {
    let mut out = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match io::Read::read(&mut reader, &mut chunk) {
            Ok(0) => return Ok((out, true)),
            Ok(n) => out.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok((out, false)),
            Err(e) => return Err(e),
        }
    }
}

/// Moves a finished handshake to [`RecordStream`]: the bytes rustls did not see, the
/// plaintext it already decrypted, and the traffic keys.
fn take_over(io: ReadAhead, mut conn: rustls::Connection) -> io::Result<BoxStream> {
    let (plaintext, peer_closed) = drain_plaintext(conn.reader())?;
    let secrets = conn.dangerous_extract_secrets().map_err(io::Error::other)?;
    let (inner, leftover) = io.into_parts();
    super::RECORD_LAYER_TAKEOVERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Ok(Box::new(RecordStream::new(
        inner,
        leftover,
        plaintext,
        peer_closed,
        secrets.tx,
        secrets.rx,
    )?))
}

/// The server side after its handshake: our record layer for TLS 1.3, rustls otherwise.
pub(crate) fn server_stream(
    tls: tokio_rustls::server::TlsStream<ReadAhead>,
) -> io::Result<BoxStream> {
    let (io, conn) = tls.get_ref();
    if !can_take_over(io, conn) {
        return Ok(Box::new(TlsProxyStream::server(tls)));
    }
    let (io, conn) = tls.into_inner();
    take_over(io, rustls::Connection::from(conn))
}

/// The client side after its handshake: our record layer for TLS 1.3, rustls otherwise.
pub(crate) fn client_stream(
    tls: tokio_rustls::client::TlsStream<ReadAhead>,
) -> io::Result<BoxStream> {
    let (io, conn) = tls.get_ref();
    if !can_take_over(io, conn) {
        return Ok(Box::new(TlsProxyStream::client(tls)));
    }
    let (io, conn) = tls.into_inner();
    take_over(io, rustls::Connection::from(conn))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rustls::crypto::cipher::{AeadKey as RustlsKey, Iv};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn secrets(byte: u8) -> (u64, ConnectionTrafficSecrets) {
        (
            0,
            // `From<[u8; 32]>` makes a 32-byte key: AES-256 (real AES-128 secrets come from
            // rustls with their length set to 16).
            ConnectionTrafficSecrets::Aes256Gcm {
                key: RustlsKey::from([byte; 32]),
                iv: Iv::new([byte; 12]),
            },
        )
    }

    /// Two record streams facing each other over a socket pair, same keys both ways round.
    fn pair() -> (RecordStream, RecordStream) {
        let (a, b) = tokio::net::UnixStream::pair().unwrap();
        let left = RecordStream::new(Box::new(a), vec![], vec![], false, secrets(1), secrets(2));
        let right = RecordStream::new(Box::new(b), vec![], vec![], false, secrets(2), secrets(1));
        (left.unwrap(), right.unwrap())
    }

    #[test]
    fn nonces_follow_the_sequence_number() {
        let mut key = DirectionKey::new(secrets(0)).unwrap();
        assert_eq!(key.next_nonce(), [0; 12]);
        assert_eq!(key.next_nonce()[11], 1);
        key.seq = 0x0102;
        assert_eq!(key.next_nonce()[10..], [1, 2]);
    }

    #[tokio::test]
    async fn records_round_trip_with_half_close_in_both_directions() {
        let (mut left, mut right) = pair();
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        left.write_all(&data).await.unwrap();
        left.shutdown().await.unwrap();
        let mut got = Vec::new();
        right.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, data);
        // The other direction still works after the first one ended.
        right.write_all(b"reply").await.unwrap();
        right.shutdown().await.unwrap();
        let mut reply = Vec::new();
        left.read_to_end(&mut reply).await.unwrap();
        assert_eq!(reply, b"reply");
    }

    /// A relay's 64 KiB read gets all four 16 KiB records of a 64 KiB write (one send on the
    /// other side, not 48 KiB and 16 KiB), while a Vision-sized read gets one record only.
    #[tokio::test]
    async fn a_big_read_takes_every_record_that_fits_and_a_vision_read_one() {
        let (mut left, mut right) = pair();
        let data: Vec<u8> = (0..3 * 65_536u32).map(|i| (i % 253) as u8).collect();
        for write in data.chunks(65_536) {
            left.write_all(write).await.unwrap();
        }
        left.flush().await.unwrap();
        let mut buf = vec![0u8; 65_536];
        for (i, expected) in data.chunks(65_536).take(2).enumerate() {
            let n = right.read(&mut buf).await.unwrap();
            assert_eq!(&buf[..n], expected, "read {i}: {n} bytes");
        }
        let mut vision = vec![0u8; skiff_core::buffers::VISION_READ_WINDOW];
        let n = right.read(&mut vision).await.unwrap();
        assert_eq!(&vision[..n], &data[2 * 65_536..2 * 65_536 + MAX_FRAGMENT]);
    }

    /// A 64 KiB write with a WebSocket frame's header in front is taken in one call (so it
    /// goes out in one send), and arrives intact.
    #[tokio::test]
    async fn a_relay_write_plus_a_frame_header_is_one_write() {
        let (mut left, mut right) = pair();
        let frame: Vec<u8> = (0..65_536 + 14u32).map(|i| (i % 241) as u8).collect();
        assert_eq!(left.write(&frame).await.unwrap(), frame.len());
        left.shutdown().await.unwrap();
        let mut got = Vec::new();
        right.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, frame);
    }

    /// An h2 DATA frame written as its 9-byte header and its payload in one vectored call
    /// fills whole records across the two slices: the first record a one-record reader gets
    /// is a full 16 KiB, not the header alone.
    #[tokio::test]
    async fn a_vectored_write_fills_records_across_its_slices() {
        let (mut left, mut right) = pair();
        assert!(left.is_write_vectored());
        let header = [7u8; 9];
        let payload: Vec<u8> = (0..MAX_FRAGMENT as u32).map(|i| (i % 251) as u8).collect();
        let slices = [io::IoSlice::new(&header), io::IoSlice::new(&payload)];
        let n = left.write_vectored(&slices).await.unwrap();
        assert_eq!(n, header.len() + payload.len());
        left.flush().await.unwrap();
        let mut record = vec![0u8; skiff_core::buffers::VISION_READ_WINDOW];
        let first = right.read(&mut record).await.unwrap();
        assert_eq!(
            first, MAX_FRAGMENT,
            "the first record holds the header and payload"
        );
        let mut got = record[..first].to_vec();
        let second = right.read(&mut record).await.unwrap();
        got.extend_from_slice(&record[..second]);
        let mut sent = header.to_vec();
        sent.extend_from_slice(&payload);
        assert_eq!(got, sent);
    }

    /// One vectored call takes at most what one plain write takes, however many slices.
    #[tokio::test]
    async fn a_vectored_write_takes_at_most_a_write_s_worth() {
        let (mut left, mut right) = pair();
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 241) as u8).collect();
        let slices: Vec<io::IoSlice<'_>> = data.chunks(1000).map(io::IoSlice::new).collect();
        let n = left.write_vectored(&slices).await.unwrap();
        assert_eq!(n, WRITE_TAKE);
        left.write_all(&data[n..]).await.unwrap();
        left.shutdown().await.unwrap();
        let mut got = Vec::new();
        right.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, data);
    }

    fn read_garbage(bytes: Vec<u8>) -> io::Result<Vec<u8>> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let (a, mut b) = tokio::net::UnixStream::pair().unwrap();
            let mut stream =
                RecordStream::new(Box::new(a), vec![], vec![], false, secrets(1), secrets(2))
                    .unwrap();
            b.write_all(&bytes).await.unwrap();
            drop(b);
            let mut out = Vec::new();
            tokio::time::timeout(
                std::time::Duration::from_secs(5),
                stream.read_to_end(&mut out),
            )
            .await
            .expect("a bounded input ends the read")?;
            Ok(out)
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Bytes that are not records sealed with our key never yield data and never panic.
        #[test]
        fn arbitrary_ciphertext_is_an_error_or_an_empty_end(
            bytes in proptest::collection::vec(any::<u8>(), 0..3000),
        ) {
            if let Ok(out) = read_garbage(bytes) {
                prop_assert!(out.is_empty());
            }
        }
    }
}
