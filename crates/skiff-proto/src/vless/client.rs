//! The VLESS outbound side: a stream wrapper that sends the request header in front of the
//! first payload and strips the server's response header from the downlink (vless.md §2, §3).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use skiff_core::{Address, BoxStream, ProxyStream};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::codec::{
    Command, FLOW_VISION, Parsed, Request, VERSION, encode_request, parse_response_header,
};
use super::vision::{Side, VisionStream};
use crate::header_first::{HeaderFirst, HeaderFirstStream};
use crate::user_id::UserId;

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
    let encoded = encode_request(&request, &mut out)
        .map(|()| out)
        .map_err(|e| e.to_string());
    Box::new(VlessClientStream {
        inner: HeaderFirstStream::new(
            stream,
            HeaderFirst::new("VLESS", encoded, FIRST_PAYLOAD_MAX),
        ),
        resp: [0; MAX_RESPONSE_HEADER_LEN],
        resp_len: 0,
        resp_done: false,
    })
}

/// Like [`connect`] for a TCP request under XTLS Vision (vless.md §7): `stream` must be TLS 1.3
/// under Skiff's record layer. The request header rides with the first padded frame.
pub fn connect_vision(
    stream: BoxStream,
    user: &UserId,
    destination: &Address,
) -> io::Result<BoxStream> {
    let request = Request {
        version: VERSION,
        user: *user.as_bytes(),
        flow: Some(FLOW_VISION.to_owned()),
        command: Command::Tcp,
        destination: Some(destination.clone()),
    };
    let mut header = Vec::new();
    encode_request(&request, &mut header)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
    Ok(Box::new(VisionStream::new(
        stream,
        Side::Client,
        *user.as_bytes(),
        header,
        &[],
    )?))
}

struct VlessClientStream {
    /// The connection, the request header going out with the first payload.
    inner: HeaderFirstStream,
    resp: [u8; MAX_RESPONSE_HEADER_LEN],
    resp_len: usize,
    resp_done: bool,
}

impl VlessClientStream {
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
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

impl ProxyStream for VlessClientStream {
    /// Once the response header is stripped (and the request header out, which the inner
    /// stream checks), the wrapper adds nothing: the relay may splice the socket underneath.
    fn raw_tcp(&self) -> Option<&tokio::net::TcpStream> {
        if self.resp_done {
            self.inner.raw_tcp()
        } else {
            None
        }
    }

    /// The read side is the socket once the response header is stripped.
    fn raw_tcp_read(&self) -> Option<&tokio::net::TcpStream> {
        if self.resp_done {
            self.inner.raw_tcp_read()
        } else {
            None
        }
    }

    /// The write side is the socket as soon as the request header is out, whether or not a
    /// response has come: a server answers with its first bytes (Xray's, and Skiff's), so an
    /// upload that gets no answer would otherwise be copied to its end instead of spliced.
    fn raw_tcp_write(&self) -> Option<&tokio::net::TcpStream> {
        self.inner.raw_tcp_write()
    }

    fn take_read_residue(&mut self) -> Option<bytes::Bytes> {
        if self.resp_done {
            self.inner.take_read_residue()
        } else {
            None
        }
    }

    fn poll_read_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.inner.poll_read_ready(cx)
    }

    fn reset_on_close(&mut self) {
        self.inner.reset_on_close()
    }
}
