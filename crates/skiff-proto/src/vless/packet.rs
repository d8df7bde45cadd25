//! Datagrams over a VLESS UDP stream (command 0x02, vless.md §4.2): both directions carry
//! 2-byte big-endian length prefixed packets, so the same type serves both sides:
//! * outbound: `VlessPacketStream::new(client::connect(stream, user, dest, Command::Udp))`;
//! * inbound: `VlessPacketStream::new(stream)` with the stream of [`super::server::VlessAccept::Udp`].

use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use skiff_core::BoxStream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf, ReadHalf, WriteHalf};

use super::udp::encode_packet;
use crate::datagram::{DatagramRecv, DatagramSend};

/// Initial receive buffer; it grows (once) to the largest frame seen, at most 2 + 65535.
const INITIAL_RECV_BUF: usize = 4096;

/// A VLESS UDP stream as packets. See the module docs.
pub struct VlessPacketStream {
    reader: VlessPacketReader,
    writer: VlessPacketWriter,
}

impl VlessPacketStream {
    pub fn new(stream: BoxStream) -> VlessPacketStream {
        let (read, write) = tokio::io::split(stream);
        VlessPacketStream {
            reader: VlessPacketReader {
                inner: read,
                buf: vec![0; INITIAL_RECV_BUF],
                start: 0,
                end: 0,
            },
            writer: VlessPacketWriter {
                inner: write,
                frame: Vec::new(),
                pos: 0,
            },
        }
    }

    /// The receiving and sending halves, usable from different tasks.
    pub fn into_split(self) -> (VlessPacketReader, VlessPacketWriter) {
        (self.reader, self.writer)
    }

    /// See [`VlessPacketWriter::send`].
    pub async fn send(&mut self, payload: &[u8]) -> io::Result<()> {
        self.writer.send(payload).await
    }

    /// See [`VlessPacketReader::recv`].
    pub async fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.reader.recv(buf).await
    }
}

/// The receiving half.
pub struct VlessPacketReader {
    inner: ReadHalf<BoxStream>,
    /// `buf[start..end]` holds received bytes not yet returned.
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl VlessPacketReader {
    /// Receives the next datagram into `buf` and returns its length; a datagram longer than
    /// `buf` is truncated (the rest is dropped, as with a UDP socket). `Ok(0)` is an empty
    /// datagram; the end of the stream (between or inside packets) is an `UnexpectedEof`
    /// error. Cancel-safe: a partly received packet stays buffered.
    pub async fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut read_buf = ReadBuf::new(buf);
        poll_fn(|cx| self.poll_recv(cx, &mut read_buf)).await?;
        Ok(read_buf.filled().len())
    }

    /// Poll form of [`recv`](Self::recv): appends one datagram (truncated to the space left)
    /// to `out`.
    pub fn poll_recv(
        &mut self,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let Some(len) = ready!(self.poll_frame(cx))? else {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "VLESS UDP stream closed",
            )));
        };
        let payload = &self.buf[self.start + 2..self.start + 2 + len];
        let n = len.min(out.remaining());
        out.put_slice(&payload[..n]);
        self.consume(len);
        Poll::Ready(Ok(()))
    }

    /// Receives the next datagram whole, as its own buffer of exactly its length (no scratch
    /// buffer of the maximal datagram size needed). `Ok(None)` is the end of the stream
    /// between packets (the peer closed cleanly); the end inside a packet is an
    /// `UnexpectedEof` error. Cancel-safe like [`recv`](Self::recv).
    pub async fn recv_packet(&mut self) -> io::Result<Option<Bytes>> {
        poll_fn(|cx| self.poll_recv_packet(cx)).await
    }

    /// Poll form of [`recv_packet`](Self::recv_packet).
    pub fn poll_recv_packet(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Option<Bytes>>> {
        let Some(len) = ready!(self.poll_frame(cx))? else {
            return Poll::Ready(Ok(None));
        };
        let payload = Bytes::copy_from_slice(&self.buf[self.start + 2..self.start + 2 + len]);
        self.consume(len);
        Poll::Ready(Ok(Some(payload)))
    }

    /// Received bytes not yet returned as datagrams: non-zero after an error means the
    /// stream ended or failed inside a packet.
    pub fn buffered(&self) -> usize {
        self.end - self.start
    }

    /// Reads until a whole frame sits at `buf[start..]` and returns its payload length, or
    /// `None` when the stream ended cleanly before another frame began.
    fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Option<usize>>> {
        loop {
            let avail = &self.buf[self.start..self.end];
            let need = match avail {
                [hi, lo, rest @ ..] => {
                    let len = usize::from(u16::from_be_bytes([*hi, *lo]));
                    if rest.len() >= len {
                        return Poll::Ready(Ok(Some(len)));
                    }
                    2 + len
                }
                _ => 2,
            };
            if self.buf.len() - self.start < need {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
                if self.buf.len() < need {
                    self.buf.resize(need, 0);
                }
            }
            let mut read_buf = ReadBuf::new(&mut self.buf[self.end..]);
            ready!(Pin::new(&mut self.inner).poll_read(cx, &mut read_buf))?;
            let n = read_buf.filled().len();
            if n == 0 {
                if self.start == self.end {
                    return Poll::Ready(Ok(None));
                }
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "VLESS UDP stream closed inside a packet",
                )));
            }
            self.end += n;
        }
    }

    /// Drops the frame of payload length `len` at `buf[start..]`.
    fn consume(&mut self, len: usize) {
        self.start += 2 + len;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }
}

/// The sending half.
pub struct VlessPacketWriter {
    inner: WriteHalf<BoxStream>,
    /// Reused frame buffer; `frame[pos..]` is still to be written.
    frame: Vec<u8>,
    pos: usize,
}

impl VlessPacketWriter {
    /// Sends one datagram (length prefix and payload in one write) and flushes. Payloads over
    /// 65535 bytes are an `InvalidInput` error. If cancelled after the datagram was taken,
    /// the next send (or shutdown) finishes writing it first.
    pub async fn send(&mut self, payload: &[u8]) -> io::Result<()> {
        crate::datagram::send(self, payload).await
    }

    /// Shuts the sending direction down (half-close).
    pub async fn shutdown(&mut self) -> io::Result<()> {
        crate::datagram::shutdown(self).await
    }

    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.pos < self.frame.len() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &self.frame[self.pos..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.pos += n;
        }
        self.frame.clear();
        self.pos = 0;
        Poll::Ready(Ok(()))
    }
}

impl DatagramRecv for VlessPacketReader {
    fn poll_recv_datagram(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Option<Bytes>>> {
        self.poll_recv_packet(cx)
    }

    fn buffered(&self) -> usize {
        VlessPacketReader::buffered(self)
    }
}

impl DatagramSend for VlessPacketWriter {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_drain(cx)
    }

    fn start_send(&mut self, payload: &[u8]) -> io::Result<()> {
        encode_packet(payload, &mut self.frame)
            .map_err(|error| io::Error::new(io::ErrorKind::InvalidInput, error.to_string()))
    }

    fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_drain(cx))?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_drain(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;
    use tokio::net::UnixStream;

    #[tokio::test]
    async fn recv_packet_returns_whole_datagrams_and_a_clean_end() {
        let (a, mut b) = UnixStream::pair().unwrap();
        let mut packets = VlessPacketStream::new(Box::new(a));
        let big = vec![0x5a; 9000];
        let mut wire = Vec::new();
        for payload in [&big[..], b"", b"two"] {
            encode_packet(payload, &mut wire).unwrap();
        }
        // Split inside the first length prefix and inside the big payload.
        for part in [&wire[..1], &wire[1..5000], &wire[5000..]] {
            b.write_all(part).await.unwrap();
        }
        assert_eq!(packets.reader.recv_packet().await.unwrap().unwrap(), big);
        assert!(
            packets
                .reader
                .recv_packet()
                .await
                .unwrap()
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            &packets.reader.recv_packet().await.unwrap().unwrap()[..],
            b"two"
        );
        drop(b);
        assert!(packets.reader.recv_packet().await.unwrap().is_none());
    }

    #[tokio::test]
    async fn recv_packet_refuses_an_end_inside_a_packet() {
        let (a, mut b) = UnixStream::pair().unwrap();
        let mut packets = VlessPacketStream::new(Box::new(a));
        b.write_all(&[0x00, 0x05, b'a', b'b']).await.unwrap();
        drop(b);
        let err = packets.reader.recv_packet().await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        assert_eq!(packets.reader.buffered(), 4);
    }
}
