//! HTTP header obfuscation as a layer of the stack. The server reads and judges the request
//! head at accept (answering a refused one with Xray's 404/400 before closing) and writes its
//! response head in front of its first bytes; the client writes its request head in front of
//! its first bytes and skips the response head on its first read — both lazily, as Xray's
//! `http.Conn` does, so the heads leave with the protocol's first bytes.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, Waker, ready};
use std::time::SystemTime;

use bytes::Bytes;
use skiff_core::time::http_date;
use skiff_core::{
    BoxFuture, BoxStream, ClientLayer, LayerSession, Prefixed, ProxyStream, ServerLayer,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

use super::head::{
    MAX_HEAD_LEN, Refusal, RequestTemplate, ResponseTemplate, closed_early_answer, judge_request,
    skip_response,
};
use crate::Parsed;

fn pick(n: usize) -> usize {
    let mut b = [0u8; 4];
    skiff_crypto::random::fill(&mut b);
    u32::from_le_bytes(b) as usize % n.max(1)
}

fn now() -> String {
    http_date(SystemTime::now())
}

/// An inbound's HTTP header settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpHeaderServer {
    /// The request's `path` list: a request for another path gets a 404.
    paths: Vec<String>,
    response: ResponseTemplate,
}

impl HttpHeaderServer {
    pub fn new(paths: Vec<String>, response: ResponseTemplate) -> HttpHeaderServer {
        HttpHeaderServer { paths, response }
    }
}

impl ServerLayer for HttpHeaderServer {
    fn accept<'a>(
        &'a self,
        mut stream: BoxStream,
        _session: &'a mut LayerSession,
    ) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(async move {
            let mut head = Vec::with_capacity(1024);
            let refusal = loop {
                match judge_request(&head, &self.paths) {
                    Ok(Parsed::Complete((), n)) => {
                        let rest = Bytes::from(head).slice(n..);
                        let inner = if rest.is_empty() {
                            stream
                        } else {
                            Box::new(Prefixed::new(rest, stream)) as BoxStream
                        };
                        let head = self.response.head(&now(), pick);
                        return Ok(Box::new(HeadFirst::server(inner, head)) as BoxStream);
                    }
                    Ok(Parsed::Incomplete) => {}
                    Err(refusal) => break refusal,
                }
                let old = head.len();
                head.resize((old + 2048).min(MAX_HEAD_LEN), 0);
                let n = stream.read(&mut head[old..]).await?;
                head.truncate(old + n);
                if n == 0 {
                    // Xray answers a head cut short with its 400 as it closes.
                    break Refusal::BadRequest("connection closed inside the request head");
                }
            };
            stream.write_all(&refusal.answer(&now())).await?;
            let _ = stream.shutdown().await;
            Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "HTTP header: request refused ({}); answered as Xray does",
                    refusal.describe()
                ),
            ))
        })
    }
}

/// An outbound's HTTP header settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpHeaderClient {
    request: RequestTemplate,
}

impl HttpHeaderClient {
    pub fn new(request: RequestTemplate) -> HttpHeaderClient {
        HttpHeaderClient { request }
    }
}

impl ClientLayer for HttpHeaderClient {
    fn connect<'a>(&'a self, stream: BoxStream) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(async move {
            let head = self.request.head(pick);
            Ok(Box::new(HeadFirst::client(stream, head)) as BoxStream)
        })
    }
}

/// A stream that writes `out_head` before its first byte (or at shutdown, if nothing was
/// written) and, on the client, skips the peer's head before its first read.
struct HeadFirst {
    inner: BoxStream,
    /// The head still to write (what is left of it), None once written.
    out_head: Option<Bytes>,
    /// Client: the peer's head read so far, None once skipped.
    in_head: Option<Vec<u8>>,
    /// Bytes read behind the peer's head, not returned yet.
    rest: Bytes,
    /// A byte of the head went out (or the stream was shut down or reset): no 400 on close.
    head_started: bool,
    /// The server side: a close before its head answers Xray's 400.
    server: bool,
}

impl HeadFirst {
    fn server(inner: BoxStream, head: Vec<u8>) -> HeadFirst {
        HeadFirst {
            inner,
            out_head: Some(head.into()),
            in_head: None,
            rest: Bytes::new(),
            head_started: false,
            server: true,
        }
    }

    fn client(inner: BoxStream, head: Vec<u8>) -> HeadFirst {
        HeadFirst {
            inner,
            out_head: Some(head.into()),
            in_head: Some(Vec::new()),
            rest: Bytes::new(),
            head_started: false,
            server: false,
        }
    }

    fn poll_write_head(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some(head) = &mut self.out_head {
            if head.is_empty() {
                self.out_head = None;
                break;
            }
            self.head_started = true;
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, head))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            let _ = head.split_to(n);
        }
        Poll::Ready(Ok(()))
    }

    fn poll_skip_head(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some(head) = &mut self.in_head {
            match skip_response(head) {
                Ok(Parsed::Complete((), n)) => {
                    self.rest = Bytes::from(std::mem::take(head)).slice(n..);
                    self.in_head = None;
                    return Poll::Ready(Ok(()));
                }
                Ok(Parsed::Incomplete) => {}
                Err(e) => return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, e))),
            }
            let mut chunk = [0u8; 2048];
            let room = (MAX_HEAD_LEN - head.len()).min(chunk.len());
            let mut buf = ReadBuf::new(&mut chunk[..room]);
            ready!(Pin::new(&mut self.inner).poll_read(cx, &mut buf))?;
            if buf.filled().is_empty() {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "HTTP header: closed before the response head ended",
                )));
            }
            head.extend_from_slice(buf.filled());
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncRead for HeadFirst {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_skip_head(cx))?;
        if !this.rest.is_empty() {
            let n = this.rest.len().min(buf.remaining());
            buf.put_slice(&this.rest.split_to(n));
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for HeadFirst {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_write_head(cx))?;
        Pin::new(&mut this.inner).poll_write(cx, data)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    /// A stream ending before a byte of its head went out is a connection the protocol gave
    /// up on: as Xray's `Close`, the server answers its 400 and the client sends nothing.
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.head_started {
            this.head_started = true;
            this.out_head = this
                .server
                .then(|| Bytes::from(closed_early_answer(&now())));
        }
        ready!(this.poll_write_head(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

impl Drop for HeadFirst {
    /// The protocol refused the connection (or it timed out) before the server wrote: Xray
    /// answers its 400 as it closes. Best effort, without waiting: one write attempt.
    fn drop(&mut self) {
        if self.head_started || !self.server {
            return;
        }
        let answer = closed_early_answer(&now());
        let mut cx = Context::from_waker(Waker::noop());
        if let Poll::Ready(Ok(n)) = Pin::new(&mut self.inner).poll_write(&mut cx, &answer)
            && n == answer.len()
        {
            let _ = Pin::new(&mut self.inner).poll_flush(&mut cx);
        }
    }
}

impl ProxyStream for HeadFirst {
    /// The socket underneath once both heads are done: then the stream is the socket's bytes
    /// (after the residue), so the relay may splice.
    fn raw_tcp(&self) -> Option<&TcpStream> {
        if self.out_head.is_some() || self.in_head.is_some() {
            return None;
        }
        self.inner.raw_tcp()
    }

    fn take_read_residue(&mut self) -> Option<Bytes> {
        if self.in_head.is_some() {
            return None;
        }
        let mut residue = std::mem::take(&mut self.rest);
        if let Some(inner) = self.inner.take_read_residue() {
            residue = [residue, inner].concat().into();
        }
        (!residue.is_empty()).then_some(residue)
    }

    fn reset_on_close(&mut self) {
        self.head_started = true;
        self.inner.reset_on_close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http_header::defaults;
    use tokio::net::UnixStream;

    fn templates() -> (RequestTemplate, ResponseTemplate) {
        let request = RequestTemplate {
            method: "GET".into(),
            version: "1.1".into(),
            paths: vec!["/a".into(), "/b".into()],
            headers: defaults::request_headers(),
        };
        let response = ResponseTemplate {
            version: "1.1".into(),
            status: "200".into(),
            reason: "OK".into(),
            headers: defaults::response_headers(),
        };
        (request, response)
    }

    async fn read_all(s: &mut UnixStream) -> Vec<u8> {
        let mut out = Vec::new();
        s.read_to_end(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn client_and_server_meet_and_the_heads_stay_out_of_the_stream() {
        let (request, response) = templates();
        let (a, b) = UnixStream::pair().unwrap();
        let client = HttpHeaderClient::new(request.clone());
        let server = HttpHeaderServer::new(request.paths, response);
        let client_side = async {
            let mut s = client.connect(Box::new(a)).await.unwrap();
            s.write_all(b"hello").await.unwrap();
            let mut got = [0u8; 5];
            s.read_exact(&mut got).await.unwrap();
            assert_eq!(&got, b"world");
            s.shutdown().await.unwrap();
        };
        let server_side = async {
            let mut session = LayerSession::default();
            let mut s = server.accept(Box::new(b), &mut session).await.unwrap();
            let mut got = [0u8; 5];
            s.read_exact(&mut got).await.unwrap();
            assert_eq!(&got, b"hello");
            s.write_all(b"world").await.unwrap();
            s.shutdown().await.unwrap();
        };
        tokio::join!(client_side, server_side);
    }

    #[tokio::test]
    async fn refusals_and_early_closes_get_xrays_answers() {
        let (request, response) = templates();
        let server = HttpHeaderServer::new(request.paths, response);
        let mut session = LayerSession::default();

        let (mut a, b) = UnixStream::pair().unwrap();
        a.write_all(b"GET /c HTTP/1.1\r\n\r\n").await.unwrap();
        assert!(server.accept(Box::new(b), &mut session).await.is_err());
        assert!(
            read_all(&mut a)
                .await
                .starts_with(b"HTTP/1.1 404 Not Found\r\n")
        );

        // Accepted, then given up before a byte was written: dropped, or shut down.
        for shut in [false, true] {
            let (mut a, b) = UnixStream::pair().unwrap();
            a.write_all(b"GET /b HTTP/1.1\r\n\r\nxyz").await.unwrap();
            let mut s = server.accept(Box::new(b), &mut session).await.unwrap();
            let mut got = [0u8; 3];
            s.read_exact(&mut got).await.unwrap();
            assert_eq!(&got, b"xyz");
            if shut {
                s.shutdown().await.unwrap();
            }
            drop(s);
            assert!(
                read_all(&mut a)
                    .await
                    .starts_with(b"HTTP/1.1 400 Bad Request\r\n")
            );
        }
    }
}
