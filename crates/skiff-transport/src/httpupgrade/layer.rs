//! HTTPUpgrade as a layer of the stack: the server answers the upgrade and hands on the raw
//! stream; the client sends the request and checks the 101, now or (with `?ed=N`) on its
//! first read.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use skiff_core::{
    BoxFuture, BoxStream, ClientLayer, LayerSession, Prefixed, ProxyStream, ServerLayer,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

use super::handshake::{MAX_HEAD_LEN, RESPONSE, Verdict, parse_request, parse_response, request};
use crate::Parsed;
use crate::ws::early_data::split_xray_ed;

/// An inbound's HTTPUpgrade settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpUpgradeServer {
    /// The path requests must have (a query, `ed` included, is not part of it).
    path: String,
    /// When set, the host requests must name.
    host: Option<String>,
}

impl HttpUpgradeServer {
    /// `path` as configured (`?ed=N` and any query are dropped: requests match on the path).
    pub fn new(path: &str, host: Option<String>) -> HttpUpgradeServer {
        let (path, _) = split_xray_ed(path);
        let path = path.split('?').next().unwrap_or("/").to_owned();
        HttpUpgradeServer { path, host }
    }
}

impl ServerLayer for HttpUpgradeServer {
    fn accept<'a>(
        &'a self,
        mut stream: BoxStream,
        _session: &'a mut LayerSession,
    ) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(async move {
            let mut head = Vec::with_capacity(1024);
            let judged = loop {
                match parse_request(&head, &self.path, self.host.as_deref()) {
                    Ok(Parsed::Complete(verdict, n)) => break Ok((verdict, n)),
                    Ok(Parsed::Incomplete) => {}
                    Err(e) => break Err(e),
                }
                if read_more(&mut stream, &mut head).await? == 0 {
                    break Err("connection closed inside the request head");
                }
            };
            let reason = match judged {
                Ok((Verdict::Upgrade, n)) => {
                    stream.write_all(RESPONSE).await?;
                    stream.flush().await?;
                    // Bytes sent right behind the request are the stream's first.
                    return Ok(if n == head.len() {
                        stream
                    } else {
                        Box::new(Prefixed::new(Bytes::from(head).slice(n..), stream))
                    });
                }
                Ok((Verdict::Refuse(reason), _)) | Err(reason) => reason,
            };
            // Xray closes such a connection without a word: a prober learns nothing.
            let _ = stream.shutdown().await;
            Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "not an HTTPUpgrade request for this inbound ({reason}); closed as Xray does"
                ),
            ))
        })
    }
}

/// An outbound's HTTPUpgrade settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpUpgradeClient {
    path: String,
    host: String,
    headers: Vec<(String, String)>,
    /// `?ed=N` was in the path: send without waiting for the 101, check it on the first read.
    send_early: bool,
}

impl HttpUpgradeClient {
    /// `path` as configured, `?ed=N` included; `host` the request's `Host`; `headers` as the
    /// config gave them (no `Host`, no line breaks).
    pub fn new(path: &str, host: String, headers: Vec<(String, String)>) -> HttpUpgradeClient {
        let (path, ed) = split_xray_ed(path);
        HttpUpgradeClient {
            path,
            host,
            headers,
            send_early: ed.is_some(),
        }
    }
}

impl ClientLayer for HttpUpgradeClient {
    fn connect<'a>(&'a self, mut stream: BoxStream) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(async move {
            stream
                .write_all(&request(&self.path, &self.host, &self.headers))
                .await?;
            stream.flush().await?;
            let mut pending = AwaitingUpgrade {
                inner: stream,
                head: Some(Vec::new()),
                rest: Bytes::new(),
            };
            if self.send_early {
                return Ok(Box::new(pending) as BoxStream);
            }
            std::future::poll_fn(|cx| pending.poll_upgrade(cx)).await?;
            let AwaitingUpgrade { inner, rest, .. } = pending;
            Ok(if rest.is_empty() {
                inner
            } else {
                Box::new(Prefixed::new(rest, inner))
            })
        })
    }
}

async fn read_more(stream: &mut BoxStream, head: &mut Vec<u8>) -> io::Result<usize> {
    let old = head.len();
    head.resize((old + 1024).min(MAX_HEAD_LEN + 1), 0);
    let n = stream.read(&mut head[old..]).await?;
    head.truncate(old + n);
    Ok(n)
}

/// A client stream whose 101 has not been read yet: the first read consumes it (bytes behind
/// it are returned first), writes go straight through.
struct AwaitingUpgrade {
    inner: BoxStream,
    /// The answer's bytes so far; None once it has been checked.
    head: Option<Vec<u8>>,
    /// Bytes that came behind the 101, not yet returned.
    rest: Bytes,
}

impl AwaitingUpgrade {
    fn poll_upgrade(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some(head) = &mut self.head {
            match parse_response(head) {
                Ok(Parsed::Complete((), n)) => {
                    self.rest = Bytes::from(std::mem::take(head)).slice(n..);
                    self.head = None;
                    return Poll::Ready(Ok(()));
                }
                Ok(Parsed::Incomplete) => {}
                Err(e) => return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, e))),
            }
            let mut chunk = [0u8; 1024];
            let mut buf = ReadBuf::new(&mut chunk);
            ready!(Pin::new(&mut self.inner).poll_read(cx, &mut buf))?;
            if buf.filled().is_empty() {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "closed before answering the upgrade",
                )));
            }
            head.extend_from_slice(buf.filled());
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncRead for AwaitingUpgrade {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_upgrade(cx))?;
        if !this.rest.is_empty() {
            let n = this.rest.len().min(buf.remaining());
            buf.put_slice(&this.rest.split_to(n));
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for AwaitingUpgrade {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, data)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

impl ProxyStream for AwaitingUpgrade {
    /// The socket underneath once the 101 is read: from then on the stream is the socket's
    /// bytes (after the residue), so the relay may splice.
    fn raw_tcp(&self) -> Option<&TcpStream> {
        if self.head.is_some() {
            return None;
        }
        self.inner.raw_tcp()
    }

    fn take_read_residue(&mut self) -> Option<Bytes> {
        if self.head.is_some() {
            return None;
        }
        let mut residue = std::mem::take(&mut self.rest);
        if let Some(inner) = self.inner.take_read_residue() {
            residue = [residue, inner].concat().into();
        }
        (!residue.is_empty()).then_some(residue)
    }

    fn reset_on_close(&mut self) {
        self.inner.reset_on_close();
    }
}
