//! Datagrams over a VLESS UDP stream (command 0x02, vless.md §4.2): both directions carry
//! 2-byte big-endian length prefixed packets, so the same type serves both sides:
//! * outbound: `VlessPacketStream::new(client::connect(stream, user, dest, Command::Udp))`;
//! * inbound: `VlessPacketStream::new(stream)` with the stream of [`super::server::VlessAccept::Udp`].

use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use skiff_core::BoxStream;
use tokio::io::{AsyncRead, AsyncWriteExt, ReadBuf, ReadHalf, WriteHalf};

use super::udp::encode_packet;

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
        loop {
            let avail = &self.buf[self.start..self.end];
            let need = match avail {
                [hi, lo, rest @ ..] => {
                    let len = usize::from(u16::from_be_bytes([*hi, *lo]));
                    if let Some(payload) = rest.get(..len) {
                        let n = len.min(out.remaining());
                        out.put_slice(&payload[..n]);
                        self.start += 2 + len;
                        if self.start == self.end {
                            self.start = 0;
                            self.end = 0;
                        }
                        return Poll::Ready(Ok(()));
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
                let what = if self.start == self.end {
                    "VLESS UDP stream closed"
                } else {
                    "VLESS UDP stream closed inside a packet"
                };
                return Poll::Ready(Err(io::Error::new(io::ErrorKind::UnexpectedEof, what)));
            }
            self.end += n;
        }
    }
}

/// The sending half.
pub struct VlessPacketWriter {
    inner: WriteHalf<BoxStream>,
    /// Reused frame buffer.
    frame: Vec<u8>,
}

impl VlessPacketWriter {
    /// Sends one datagram (length prefix and payload in one write) and flushes. Payloads over
    /// 65535 bytes are an `InvalidInput` error. Not cancel-safe: a cancelled send may leave a
    /// partial frame on the stream, which must then be closed.
    pub async fn send(&mut self, payload: &[u8]) -> io::Result<()> {
        self.frame.clear();
        encode_packet(payload, &mut self.frame)
            .map_err(|error| io::Error::new(io::ErrorKind::InvalidInput, error.to_string()))?;
        self.inner.write_all(&self.frame).await?;
        self.inner.flush().await
    }

    /// Shuts the sending direction down (half-close).
    pub async fn shutdown(&mut self) -> io::Result<()> {
        self.inner.shutdown().await
    }
}
