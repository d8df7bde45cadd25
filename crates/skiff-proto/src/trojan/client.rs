//! The Trojan outbound side: a stream wrapper that sends the request header in front of the
//! first payload (trojan.md §1, §5). Trojan has no response header: reads pass straight
//! through.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use skiff_core::{Address, BoxStream, ProxyStream};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::codec::{Command, PasswordHash, Request, encode_request};
use crate::header_first::HeaderFirst;

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
    let encoded = encode_request(&request, &mut out)
        .map(|()| out)
        .map_err(|e| e.to_string());
    Box::new(TrojanClientStream {
        inner: stream,
        header: HeaderFirst::new("Trojan", encoded, FIRST_PAYLOAD_MAX),
    })
}

struct TrojanClientStream {
    inner: BoxStream,
    header: HeaderFirst,
}

impl AsyncRead for TrojanClientStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.header.is_done() {
            this.header.kick_from_reader(&mut this.inner, cx)?;
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
        this.header.poll_write(&mut this.inner, cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.header.poll_write_vectored(&mut this.inner, cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.header.poll_flush(&mut this.inner, cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.header.poll_shutdown(&mut this.inner, cx)
    }
}

impl ProxyStream for TrojanClientStream {
    /// Once the request header is out the wrapper adds nothing: the relay may splice the
    /// socket underneath (only ever raw when Trojan runs without TLS, as Xray allows).
    fn raw_tcp(&self) -> Option<&tokio::net::TcpStream> {
        if self.header.is_done() {
            self.inner.raw_tcp()
        } else {
            None
        }
    }

    fn take_read_residue(&mut self) -> Option<bytes::Bytes> {
        self.inner.take_read_residue()
    }

    fn poll_read_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if !self.header.is_done()
            && let Err(error) = self.header.kick_from_reader(&mut self.inner, cx)
        {
            return Poll::Ready(Err(error));
        }
        self.inner.poll_read_ready(cx)
    }

    fn reset_on_close(&mut self) {
        self.inner.reset_on_close()
    }
}
