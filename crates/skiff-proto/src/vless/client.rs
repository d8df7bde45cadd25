//! The VLESS outbound side: a stream wrapper that sends the request header in front of the
//! first payload and strips the server's response header from the downlink (vless.md §2, §3).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, Waker, ready};

use skiff_core::{Address, BoxStream, ProxyStream};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::codec::{Command, Parsed, Request, VERSION, encode_request, parse_response_header};
use super::user::UserId;

/// At most this many payload bytes ride in the same write as the request header.
const FIRST_PAYLOAD_MAX: usize = 8 * 1024;
/// Version, addons length, addons.
const MAX_RESPONSE_HEADER_LEN: usize = 2 + 255;

/// Wraps an established stream (raw TCP, TLS or WebSocket) as a VLESS client connection to
/// `destination`.
///
/// The request header is sent together with the first payload write (one write of the header
/// and up to 8 KiB of payload), or alone on the first read, `poll_read_ready`, flush or
/// shutdown if the client has nothing to send yet. Reads strip the server's response header
/// (version + addons) before returning data; a bad response header is an `InvalidData` error,
/// an end of stream before it an `UnexpectedEof` error.
///
/// Errors in the request itself (a destination the header cannot carry, e.g. an invalid domain
/// name, or a command without destination) surface as an error on the first I/O.
pub fn connect(
    stream: BoxStream,
    user: &UserId,
    destination: &Address,
    command: Command,
) -> BoxStream {
    let request = Request {
        version: VERSION,
        user: *user.as_bytes(),
        flow: None,
        command,
        destination: command.has_destination().then(|| destination.clone()),
    };
    let mut out = Vec::new();
    let failed = encode_request(&request, &mut out)
        .err()
        .map(|e| e.to_string());
    Box::new(VlessClientStream {
        inner: stream,
        out,
        out_pos: 0,
        write: if failed.is_some() {
            WriteState::Failed
        } else {
            WriteState::Unsent
        },
        failed,
        parked_writer: None,
        resp: [0; MAX_RESPONSE_HEADER_LEN],
        resp_len: 0,
        resp_done: false,
    })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WriteState {
    /// `out` holds the request header; nothing written yet.
    Unsent,
    /// `out[out_pos..]` (header, maybe with first payload) is still to be written.
    Draining,
    /// The header is out: writes go straight through.
    Done,
    /// The request could not be encoded.
    Failed,
}

struct VlessClientStream {
    inner: BoxStream,
    /// The request header, then the header with the first payload; freed once written.
    out: Vec<u8>,
    out_pos: usize,
    write: WriteState,
    failed: Option<String>,
    /// A writer that waits for `out` to drain while a reader may be the one finishing it.
    parked_writer: Option<Waker>,
    resp: [u8; MAX_RESPONSE_HEADER_LEN],
    resp_len: usize,
    resp_done: bool,
}

impl VlessClientStream {
    fn request_error(&self) -> io::Error {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "cannot encode VLESS request: {}",
                self.failed.as_deref().unwrap_or("unknown error")
            ),
        )
    }

    /// Writes what is left of `out`. Ready(Ok) once the header (and first payload) are out.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.write {
            WriteState::Done => return Poll::Ready(Ok(())),
            WriteState::Failed => return Poll::Ready(Err(self.request_error())),
            WriteState::Unsent => self.write = WriteState::Draining,
            WriteState::Draining => {}
        }
        while self.out_pos < self.out.len() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &self.out[self.out_pos..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.out_pos += n;
        }
        self.out = Vec::new();
        self.out_pos = 0;
        self.write = WriteState::Done;
        if let Some(waker) = self.parked_writer.take() {
            waker.wake();
        }
        Poll::Ready(Ok(()))
    }

    /// Drains `out` on behalf of a writer, remembering it so a reader finishing the drain wakes
    /// it (the inner stream keeps only the last waker per direction).
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

    /// On the read side: a client that reads before writing still has to send the header,
    /// or the server never answers. A writer parked on the same drain is woken when the
    /// reader finishes it.
    fn kick_from_reader(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        match self.write {
            WriteState::Unsent | WriteState::Draining => match self.poll_drain(cx) {
                Poll::Ready(result) => result,
                // The response cannot arrive before the header is out; whoever finishes the
                // write, the reader is woken by the inner read it registers next.
                Poll::Pending => Ok(()),
            },
            WriteState::Failed => Err(self.request_error()),
            WriteState::Done => Ok(()),
        }
    }

    /// Consumes response header bytes from the front of `data`; returns how many.
    fn eat_response(&mut self, data: &[u8]) -> io::Result<usize> {
        let mut used = 0;
        while !self.resp_done && used < data.len() {
            let want = if self.resp_len < 2 {
                2 - self.resp_len
            } else {
                2 + usize::from(self.resp[1]) - self.resp_len
            };
            let take = want.min(data.len() - used);
            self.resp[self.resp_len..self.resp_len + take]
                .copy_from_slice(&data[used..used + take]);
            self.resp_len += take;
            used += take;
            if self.resp[0] != VERSION {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("unexpected VLESS response version {:#04x}", self.resp[0]),
                ));
            }
            if self.resp_len >= 2 && self.resp_len == 2 + usize::from(self.resp[1]) {
                match parse_response_header(&self.resp[..self.resp_len]) {
                    Ok(Parsed::Complete(_)) => self.resp_done = true,
                    Ok(Parsed::Incomplete) => {}
                    Err(error) => {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!("bad VLESS response header: {error}"),
                        ));
                    }
                }
            }
        }
        Ok(used)
    }
}

impl AsyncRead for VlessClientStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.write != WriteState::Done {
            this.kick_from_reader(cx)?;
        }
        if this.resp_done || buf.remaining() == 0 {
            return Pin::new(&mut this.inner).poll_read(cx, buf);
        }
        loop {
            let before = buf.filled().len();
            ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
            let n = buf.filled().len() - before;
            if n == 0 {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "VLESS server closed the connection before its response header",
                )));
            }
            let used = this.eat_response(&buf.filled()[before..])?;
            if used > 0 {
                buf.filled_mut().copy_within(before + used.., before);
                buf.set_filled(before + n - used);
            }
            if n > used {
                return Poll::Ready(Ok(()));
            }
            if this.resp_done {
                return Pin::new(&mut this.inner).poll_read(cx, buf);
            }
        }
    }
}

impl AsyncWrite for VlessClientStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match this.write {
            WriteState::Done => Pin::new(&mut this.inner).poll_write(cx, buf),
            WriteState::Unsent if !buf.is_empty() => {
                // Header and first payload in one write. The copied bytes are ours now: they
                // count as written even if the inner write has to wait.
                let take = buf.len().min(FIRST_PAYLOAD_MAX);
                this.out.reserve_exact(take);
                this.out.extend_from_slice(&buf[..take]);
                match this.poll_drain_as_writer(cx) {
                    Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
                    _ => Poll::Ready(Ok(take)),
                }
            }
            _ => {
                ready!(this.poll_drain_as_writer(cx))?;
                Pin::new(&mut this.inner).poll_write(cx, buf)
            }
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.write == WriteState::Done {
            return Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        }
        let first = bufs
            .iter()
            .find(|b| !b.is_empty())
            .map_or(&[][..], |b| &**b);
        Pin::new(this).poll_write(cx, first)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_drain_as_writer(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_drain_as_writer(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

impl ProxyStream for VlessClientStream {
    /// Once the request header is out and the response header stripped, the wrapper adds
    /// nothing: the relay may splice the socket underneath.
    fn raw_tcp(&self) -> Option<&tokio::net::TcpStream> {
        if self.write == WriteState::Done && self.resp_done {
            self.inner.raw_tcp()
        } else {
            None
        }
    }

    fn take_read_residue(&mut self) -> Option<bytes::Bytes> {
        if self.resp_done {
            self.inner.take_read_residue()
        } else {
            None
        }
    }

    fn poll_read_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.write != WriteState::Done
            && let Err(error) = self.kick_from_reader(cx)
        {
            return Poll::Ready(Err(error));
        }
        self.inner.poll_read_ready(cx)
    }
}
