//! The Trojan outbound side: a stream wrapper that sends the request header in front of the
//! first payload (trojan.md §1, §5). Trojan has no response header: reads pass straight
//! through.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, Waker, ready};

use skiff_core::{Address, BoxStream, ProxyStream};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::codec::{Command, PasswordHash, Request, encode_request};

/// At most this many payload bytes ride in the same write as the request header: together
/// they stay within one TLS record, which is all trojan-gfw's server reads before deciding.
const FIRST_PAYLOAD_MAX: usize = 8 * 1024;

/// Wraps an established stream (TLS, or WebSocket over TLS) as a Trojan client connection to
/// `destination` with `command`.
///
/// The request header is sent together with the first payload write (one write of the header
/// and up to 8 KiB of payload), or alone on the first read, `poll_read_ready`, flush or
/// shutdown if the client has nothing to send yet (a server-speaks-first protocol). A
/// destination the header cannot carry (an invalid domain name) is an error on the first I/O.
pub fn connect(
    stream: BoxStream,
    hash: &PasswordHash,
    destination: &Address,
    command: Command,
) -> BoxStream {
    let request = Request {
        hash: *hash,
        command,
        destination: destination.clone(),
    };
    let mut out = Vec::new();
    let failed = encode_request(&request, &mut out)
        .err()
        .map(|e| e.to_string());
    Box::new(TrojanClientStream {
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

struct TrojanClientStream {
    inner: BoxStream,
    /// The request header, then the header with the first payload; freed once written.
    out: Vec<u8>,
    out_pos: usize,
    write: WriteState,
    failed: Option<String>,
    /// A writer that waits for `out` to drain while a reader may be the one finishing it.
    parked_writer: Option<Waker>,
}

impl TrojanClientStream {
    fn request_error(&self) -> io::Error {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "cannot encode Trojan request: {}",
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

    /// On the read side: a client that reads before writing still has to send the header, or
    /// the server never answers.
    fn kick_from_reader(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        match self.write {
            WriteState::Unsent | WriteState::Draining => match self.poll_drain(cx) {
                Poll::Ready(result) => result,
                // Whoever finishes the write, the reader is woken by the inner read it
                // registers next.
                Poll::Pending => Ok(()),
            },
            WriteState::Failed => Err(self.request_error()),
            WriteState::Done => Ok(()),
        }
    }
}

impl AsyncRead for TrojanClientStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.write != WriteState::Done {
            this.kick_from_reader(cx)?;
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for TrojanClientStream {
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

impl ProxyStream for TrojanClientStream {
    /// Once the request header is out the wrapper adds nothing: the relay may splice the
    /// socket underneath (only ever raw when Trojan runs without TLS, as Xray allows).
    fn raw_tcp(&self) -> Option<&tokio::net::TcpStream> {
        if self.write == WriteState::Done {
            self.inner.raw_tcp()
        } else {
            None
        }
    }

    fn take_read_residue(&mut self) -> Option<bytes::Bytes> {
        self.inner.take_read_residue()
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
