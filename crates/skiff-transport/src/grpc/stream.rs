//! One gRPC call (an HTTP/2 stream) as a byte stream: reads return the data of the Hunks
//! received, writes go out as one Hunk each. The client half-closes with END_STREAM; the
//! server ends its side with trailers (`grpc-status: 0`), as a gRPC handler that returns.

use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, ready};

use bytes::{Bytes, BytesMut};
use h2::client::ResponseFuture;
use h2::{RecvStream, SendStream};
use http::{HeaderMap, HeaderValue, StatusCode};
use skiff_core::ProxyStream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::codec::{MAX_HEAD_LEN, MessageDecoder, decode_hunks, encode_head};

/// The longest message a peer may send: gRPC-go's default receive limit, which Xray keeps.
pub const MAX_MESSAGE: usize = 4 << 20;
/// The most all calls of one connection may hold in unfinished messages: each call may
/// hold up to [`MAX_MESSAGE`], and this keeps a peer from multiplying that by its calls.
pub const CONNECTION_HELD_LIMIT: usize = 32 << 20;
/// The most data one write puts in one Hunk (well under every peer's receive limit).
const MAX_HUNK: usize = 64 << 10;

/// Which end of the call this is: what ending our side means on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Client,
    Server,
}

enum Receiving {
    /// Client: the response headers are still to come.
    Response(ResponseFuture),
    Body(RecvStream),
    /// Client: the body ended; the trailers say whether the call succeeded.
    Trailers(RecvStream),
    Done,
}

pub struct GrpcStream {
    side: Side,
    receiving: Receiving,
    send: SendStream<Bytes>,
    decoder: MessageDecoder,
    /// Data received and decoded, not yet read.
    ready: VecDeque<Bytes>,
    scratch: Vec<Bytes>,
    multi: bool,
    write_closed: bool,
    /// Held while the call is open: the client counts live calls by it (keepalive pings
    /// only while calls are open, unless `permit_without_stream`).
    _open: Option<Arc<()>>,
    /// What all calls of the connection hold in unfinished messages, and this call's part.
    held: Arc<AtomicUsize>,
    my_held: usize,
}

impl GrpcStream {
    /// The client's end of a call just sent: the response comes later.
    pub fn client(
        response: ResponseFuture,
        send: SendStream<Bytes>,
        multi: bool,
        open: Arc<()>,
        held: Arc<AtomicUsize>,
    ) -> Self {
        Self::new(
            Side::Client,
            Receiving::Response(response),
            send,
            multi,
            Some(open),
            held,
        )
    }

    /// The server's end of a call whose response headers went out.
    pub fn server(
        body: RecvStream,
        send: SendStream<Bytes>,
        multi: bool,
        held: Arc<AtomicUsize>,
    ) -> Self {
        Self::new(Side::Server, Receiving::Body(body), send, multi, None, held)
    }

    fn new(
        side: Side,
        receiving: Receiving,
        send: SendStream<Bytes>,
        multi: bool,
        open: Option<Arc<()>>,
        held: Arc<AtomicUsize>,
    ) -> Self {
        GrpcStream {
            side,
            receiving,
            send,
            decoder: MessageDecoder::new(MAX_MESSAGE),
            ready: VecDeque::new(),
            scratch: Vec::new(),
            multi,
            write_closed: false,
            _open: open,
            held,
            my_held: 0,
        }
    }

    /// Counts what the decoder holds against the connection's limit.
    fn account_held(&mut self) -> io::Result<()> {
        let now = self.decoder.buffered();
        if now > self.my_held {
            let more = now - self.my_held;
            let total = self.held.fetch_add(more, Ordering::Relaxed) + more;
            self.my_held = now;
            if total > CONNECTION_HELD_LIMIT {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "gRPC connection holds too many unfinished messages",
                ));
            }
        } else {
            self.held.fetch_sub(self.my_held - now, Ordering::Relaxed);
            self.my_held = now;
        }
        Ok(())
    }

    /// Makes `ready` non-empty, or reports the end of the peer's data (Ok(false)).
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<bool>> {
        loop {
            if !self.ready.is_empty() {
                return Poll::Ready(Ok(true));
            }
            match &mut self.receiving {
                Receiving::Response(response) => {
                    let response = ready!(Pin::new(response).poll(cx)).map_err(h2_error)?;
                    let (parts, body) = response.into_parts();
                    check_response(parts.status, &parts.headers)?;
                    self.receiving = Receiving::Body(body);
                }
                Receiving::Body(body) => match ready!(body.poll_data(cx)) {
                    Some(Ok(data)) => {
                        // The window opens as data is decoded: what is held is bounded by
                        // one message plus the decoded data waiting here.
                        let _ = body.flow_control().release_capacity(data.len());
                        self.decoder.push(data);
                        while let Some(message) = self.decoder.next_message()? {
                            self.scratch.clear();
                            decode_hunks(message, self.multi, &mut self.scratch)?;
                            self.ready.extend(self.scratch.drain(..));
                        }
                        self.account_held()?;
                    }
                    Some(Err(e)) => return Poll::Ready(Err(h2_error(e))),
                    None => {
                        if !self.decoder.is_idle() {
                            return Poll::Ready(Err(io::Error::new(
                                io::ErrorKind::UnexpectedEof,
                                "gRPC stream ended inside a message",
                            )));
                        }
                        let Receiving::Body(body) =
                            std::mem::replace(&mut self.receiving, Receiving::Done)
                        else {
                            unreachable!()
                        };
                        if self.side == Side::Client {
                            self.receiving = Receiving::Trailers(body);
                        }
                    }
                },
                Receiving::Trailers(body) => {
                    let trailers = ready!(body.poll_trailers(cx)).map_err(h2_error)?;
                    self.receiving = Receiving::Done;
                    if let Some(trailers) = trailers {
                        check_status(&trailers)?;
                    }
                }
                Receiving::Done => return Poll::Ready(Ok(false)),
            }
        }
    }
}

/// A response that does not carry the call's data: its status, or the gRPC status of a
/// trailers-only answer, becomes the error.
fn check_response(status: StatusCode, headers: &HeaderMap) -> io::Result<()> {
    if status != StatusCode::OK {
        return Err(io::Error::new(
            io::ErrorKind::ConnectionRefused,
            format!("gRPC server answered HTTP {status}"),
        ));
    }
    check_status(headers)
}

fn check_status(headers: &HeaderMap) -> io::Result<()> {
    match headers.get("grpc-status").map(HeaderValue::as_bytes) {
        None | Some(b"0") => Ok(()),
        Some(code) => {
            let message = headers
                .get("grpc-message")
                .and_then(|m| m.to_str().ok())
                .unwrap_or("");
            Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                format!(
                    "gRPC call failed with status {}: {message}",
                    String::from_utf8_lossy(code)
                ),
            ))
        }
    }
}

fn h2_error(e: h2::Error) -> io::Error {
    if e.is_io() {
        return e
            .into_io()
            .unwrap_or_else(|| io::Error::other("HTTP/2 I/O error"));
    }
    io::Error::new(io::ErrorKind::ConnectionReset, e)
}

impl AsyncRead for GrpcStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !ready!(this.poll_fill(cx))? {
            return Poll::Ready(Ok(()));
        }
        while buf.remaining() > 0
            && let Some(front) = this.ready.front_mut()
        {
            let n = front.len().min(buf.remaining());
            buf.put_slice(&front.split_to(n));
            if front.is_empty() {
                this.ready.pop_front();
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for GrpcStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.write_closed {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let want = buf.len().min(MAX_HUNK);
        loop {
            // Send only what the peer's windows allow, so nothing piles up in h2's buffers.
            let capacity = this.send.capacity();
            if capacity > MAX_HEAD_LEN {
                let n = want.min(capacity - MAX_HEAD_LEN);
                let mut head = [0u8; MAX_HEAD_LEN];
                let head_len = encode_head(n, &mut head);
                let mut message = BytesMut::with_capacity(head_len + n);
                message.extend_from_slice(&head[..head_len]);
                message.extend_from_slice(&buf[..n]);
                this.send
                    .send_data(message.freeze(), false)
                    .map_err(h2_error)?;
                return Poll::Ready(Ok(n));
            }
            this.send.reserve_capacity(want + MAX_HEAD_LEN);
            match ready!(this.send.poll_capacity(cx)) {
                Some(Ok(_)) => {}
                Some(Err(e)) => return Poll::Ready(Err(h2_error(e))),
                None => return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into())),
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // The connection's task writes what was sent.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.write_closed {
            return Poll::Ready(Ok(()));
        }
        this.write_closed = true;
        this.send.reserve_capacity(0);
        let sent = match this.side {
            Side::Client => this.send.send_data(Bytes::new(), true),
            Side::Server => {
                let mut trailers = HeaderMap::new();
                trailers.insert("grpc-status", HeaderValue::from_static("0"));
                this.send.send_trailers(trailers)
            }
        };
        Poll::Ready(sent.map_err(h2_error))
    }
}

impl Drop for GrpcStream {
    /// A server's tunnel dropped before it ended (its protocol refused the client, or the
    /// relay failed) still ends the call as Xray's handler does, with `grpc-status: 0`; h2
    /// then resets what the client still sends. A client's drop cancels the call (RST_STREAM).
    fn drop(&mut self) {
        self.held.fetch_sub(self.my_held, Ordering::Relaxed);
        if self.side == Side::Server && !self.write_closed {
            let mut trailers = HeaderMap::new();
            trailers.insert("grpc-status", HeaderValue::from_static("0"));
            let _ = self.send.send_trailers(trailers);
        }
    }
}

impl ProxyStream for GrpcStream {
    fn poll_read_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_fill(cx).map_ok(|_| ())
    }
}
