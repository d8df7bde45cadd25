//! The inbound side of XHTTP: one value per inbound (its session table spans connections),
//! serving each accepted connection as HTTP/2 (ALPN `h2` or the client preface) or HTTP/1.1,
//! and handing each tunnel to the inbound's protocol.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use skiff_core::{BoxFuture, BoxStream, LayerSession, MultiplexServer, TunnelSink};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::oneshot;
use tracing::{debug, info};

use super::h1::{self, Body, BodyKind, ChunkedWriter};
use super::h2io::{H2Reader, H2Writer};
use super::request::{self, RequestParts, RequestRules, Route};
use super::session::{Session, SessionReader, Sessions};
use super::tunnel::{BoxRead, Linger, Tunnel};
use super::{XhttpOptions, padding};

/// Sessions one inbound holds at most (each bounded by its window of posts).
const MAX_SESSIONS: usize = 4096;
/// How long an upload may wait for its turn in the window.
const ADMISSION_WAIT: Duration = Duration::from_secs(30);
/// How long an HTTP/1.1 connection may sit between requests, or an HTTP/2 connection without
/// a stream.
const IDLE: Duration = Duration::from_secs(120);
/// The largest refused request body read and dropped to keep the connection (Go's 256 KiB).
const DISCARD_LIMIT: u64 = 256 * 1024;
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Response headers: names as written, values.
type Headers = Vec<(&'static str, String)>;

pub struct XhttpServer {
    inner: Arc<Inner>,
}

struct Inner {
    opts: XhttpOptions,
    rules: RequestRules,
    sessions: Arc<Sessions>,
}

impl XhttpServer {
    pub fn new(opts: XhttpOptions) -> Self {
        let rules = RequestRules {
            path: request::normalize_path(&opts.path),
            host: opts.host.clone(),
            padding: (opts.x_padding_bytes.from, opts.x_padding_bytes.to),
            mode: opts.mode,
        };
        let sessions = Sessions::new(opts.sc_max_buffered_posts, MAX_SESSIONS);
        XhttpServer {
            inner: Arc::new(Inner {
                opts,
                rules,
                sessions,
            }),
        }
    }

    /// Sessions currently held (for tests and accounting).
    pub fn sessions(&self) -> usize {
        self.inner.sessions.len()
    }
}

impl MultiplexServer for XhttpServer {
    fn serve<'a>(
        &'a self,
        stream: BoxStream,
        session: LayerSession,
        tunnels: TunnelSink,
    ) -> BoxFuture<'a, io::Result<()>> {
        let inner = self.inner.clone();
        Box::pin(async move {
            let mut stream = stream;
            let mut buf = BytesMut::new();
            // HTTP/2 when TLS negotiated it, or when the bytes are its preface (h2c).
            let h2 = session.alpn.as_deref() == Some("h2") || {
                while buf.len() < H2_PREFACE.len() && H2_PREFACE.starts_with(&buf) {
                    buf.reserve(H2_PREFACE.len());
                    let n = tokio::time::timeout(IDLE, stream.read_buf(&mut buf))
                        .await
                        .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))??;
                    if n == 0 {
                        return Ok(());
                    }
                }
                buf.starts_with(H2_PREFACE)
            };
            if h2 {
                let io = skiff_core::Prefixed::new(buf.freeze(), stream);
                serve_h2(inner, io, session, tunnels).await
            } else {
                serve_h1(inner, stream, buf, session, tunnels).await
            }
        })
    }
}

impl Inner {
    /// What the request is; a refusal is its status and headers.
    fn route(&self, parts: &RequestParts<'_>) -> Result<Route, (u16, Headers)> {
        request::route(parts, &self.rules).map_err(|refusal| {
            debug!(method = parts.method, target = parts.target, reason = %refusal, "xhttp request refused");
            let headers = if refusal.after_common_headers() {
                self.common_headers()
            } else {
                Vec::new()
            };
            (refusal.status(), headers)
        })
    }

    /// Headers every answer carries, as Xray's `WriteResponseHeader` and padding write them.
    fn common_headers(&self) -> Headers {
        vec![
            ("Access-Control-Allow-Origin", "*".into()),
            ("X-Padding", padding(self.opts.x_padding_bytes)),
        ]
    }

    /// Headers of a streaming response (download, stream-one).
    fn stream_headers(&self) -> Headers {
        let mut h = self.common_headers();
        h.push(("X-Accel-Buffering", "no".into()));
        h.push(("Cache-Control", "no-store".into()));
        if !self.opts.no_sse_header {
            h.push(("Content-Type", "text/event-stream".into()));
        }
        h
    }

    fn max_post(&self) -> usize {
        self.opts.sc_max_each_post_bytes.to as usize
    }

    /// One packet-up upload: waits for its place in the window, reads its body (bounded),
    /// stores it. The error is the status to answer.
    async fn packet<R: AsyncRead + Unpin>(
        &self,
        session_id: &str,
        seq: u64,
        length: Option<u64>,
        body: &mut R,
    ) -> Result<(), u16> {
        let max = self.max_post();
        if length.is_some_and(|n| n > max as u64) {
            info!(
                session = session_id,
                seq, "xhttp upload larger than scMaxEachPostBytes; refused"
            );
            return Err(413);
        }
        let session = self.sessions.upsert(session_id).map_err(|_| {
            info!("xhttp session table full; upload refused");
            503u16
        })?;
        if let Err(e) = session.wait_admission(seq, ADMISSION_WAIT).await {
            info!(session = session_id, seq, error = %e, "xhttp upload refused");
            return Err(500);
        }
        let mut data = Vec::new();
        let read = body.take(max as u64 + 1).read_to_end(&mut data).await;
        if let Err(e) = read {
            debug!(session = session_id, seq, error = %e, "xhttp upload body failed");
            return Err(400);
        }
        if data.len() > max {
            info!(
                session = session_id,
                seq, "xhttp upload larger than scMaxEachPostBytes; refused"
            );
            return Err(413);
        }
        session.push(seq, Bytes::from(data)).map_err(|e| {
            info!(session = session_id, seq, error = %e, "xhttp upload refused");
            500u16
        })
    }

    /// The download of `session_id`: its reader, what ends the session with the tunnel, and
    /// the session.
    fn download(
        self: &Arc<Self>,
        session_id: &str,
    ) -> Result<(BoxRead, impl FnOnce() + Send + 'static, Arc<Session>), u16> {
        let session = self.sessions.upsert(session_id).map_err(|_| 503u16)?;
        if !session.mark_connected() {
            info!(
                session = session_id,
                "xhttp session already has a download; refused"
            );
            return Err(409);
        }
        let (sessions, id, s) = (
            self.sessions.clone(),
            session_id.to_owned(),
            session.clone(),
        );
        Ok((
            Box::pin(SessionReader::new(session.clone())) as BoxRead,
            move || sessions.remove(&id, &s),
            session,
        ))
    }

    /// Makes `body` the upload of `session_id` (stream-up); the receiver fires when the
    /// tunnel no longer reads it.
    fn stream_up(&self, session_id: &str, body: BoxRead) -> Result<oneshot::Receiver<()>, u16> {
        let session = self.sessions.upsert(session_id).map_err(|_| 503u16)?;
        let (tx, rx) = oneshot::channel();
        let body = Box::pin(OnDrop {
            inner: body,
            tx: Some(tx),
        });
        session.set_stream_up(body).map_err(|e| {
            info!(session = session_id, error = %e, "xhttp stream-up refused");
            409u16
        })?;
        Ok(rx)
    }
}

/// A reader that signals when it is dropped.
struct OnDrop {
    inner: BoxRead,
    tx: Option<oneshot::Sender<()>>,
}

impl Drop for OnDrop {
    fn drop(&mut self) {
        if let Some(tx) = self.tx.take() {
            let _ = tx.send(());
        }
    }
}

impl AsyncRead for OnDrop {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        self.inner.as_mut().poll_read(cx, buf)
    }
}

fn done_signal() -> (impl FnOnce() + Send + 'static, oneshot::Receiver<()>) {
    let (tx, rx) = oneshot::channel::<()>();
    (
        move || {
            let _ = tx.send(());
        },
        rx,
    )
}

async fn serve_h1(
    inner: Arc<Inner>,
    stream: BoxStream,
    mut buf: BytesMut,
    layer: LayerSession,
    tunnels: TunnelSink,
) -> io::Result<()> {
    let mut io = stream;
    loop {
        let head =
            match tokio::time::timeout(IDLE, h1::read_head(&mut io, &mut buf, h1::parse_request))
                .await
            {
                Err(_) => return Ok(()),
                Ok(Ok(None)) => return Ok(()),
                Ok(Ok(Some(head))) => head,
                Ok(Err(e)) => {
                    let _ = send_head(
                        &mut io,
                        &h1::response_head(
                            400,
                            &[
                                ("Content-Length", "0".into()),
                                ("Connection", "close".into()),
                            ],
                        ),
                    )
                    .await;
                    return Err(e);
                }
            };
        let parts = RequestParts {
            method: &head.method,
            target: &head.target,
            host: head.header("host"),
            referer: head.header("referer"),
        };
        let kind = head.body_kind()?;
        let length = match kind {
            BodyKind::Length(n) => Some(n),
            BodyKind::Chunked => None,
        };
        let route = match inner.route(&parts) {
            Ok(r) => r,
            Err((status, mut h)) => {
                // As Go's server: a small body is read and dropped, and the connection kept.
                let small = length.is_some_and(|n| n <= DISCARD_LIMIT);
                if small {
                    let mut body = Body::new(&mut io, std::mem::take(&mut buf), kind);
                    tokio::io::copy(&mut body, &mut tokio::io::sink()).await?;
                    buf = body.into_buf();
                } else {
                    h.push(("Connection", "close".into()));
                }
                h.push(("Content-Length", "0".into()));
                send_head(&mut io, &h1::response_head(status, &h)).await?;
                if !small {
                    return Ok(());
                }
                continue;
            }
        };
        match route {
            Route::Options => {
                let mut h = inner.common_headers();
                h.push(("Content-Length", "0".into()));
                send_head(&mut io, &h1::response_head(200, &h)).await?;
                let mut body = Body::new(&mut io, std::mem::take(&mut buf), kind);
                tokio::io::copy(&mut (&mut body).take(1 << 16), &mut tokio::io::sink()).await?;
                buf = body.into_buf();
            }
            Route::Packet { session, seq } => {
                let mut body = Body::new(&mut io, std::mem::take(&mut buf), kind);
                let result = inner.packet(&session, seq, length, &mut body).await;
                buf = body.into_buf();
                match result {
                    Ok(()) => {
                        let mut h = inner.common_headers();
                        if length == Some(0) {
                            h.push(("Cache-Control", "no-store".into()));
                        }
                        h.push(("Content-Length", "0".into()));
                        send_head(&mut io, &h1::response_head(200, &h)).await?;
                    }
                    Err(status) => {
                        let h = [
                            ("Content-Length", "0".to_string()),
                            ("Connection", "close".into()),
                        ];
                        send_head(&mut io, &h1::response_head(status, &h)).await?;
                        return Ok(());
                    }
                }
            }
            Route::Download { session } => {
                let (reader, end, session) = match inner.download(&session) {
                    Ok(d) => d,
                    Err(status) => return refuse_h1(&mut io, status).await,
                };
                let (mut rd, wr) = tokio::io::split(Linger::new(io));
                let mut done =
                    stream_h1_split(&inner, wr, reader, layer, tunnels, end, None).await?;
                // The client closing the download's connection ends the session, and with it
                // the tunnel's upload (a packet-up client has no other way to say it is gone).
                let mut byte = [0u8; 1];
                tokio::select! {
                    _ = &mut done => {}
                    _ = rd.read(&mut byte) => {
                        session.close();
                        let _ = done.await;
                    }
                }
                return Ok(());
            }
            Route::StreamOne => {
                let (rd, wr) = tokio::io::split(Linger::new(io));
                let gate = Arc::new(h1::Gate::default());
                let reader: BoxRead =
                    Box::pin(Body::new(rd, buf, kind).with_end_gate(gate.clone()));
                let done =
                    stream_h1_split(&inner, wr, reader, layer, tunnels, || {}, Some(gate)).await?;
                let _ = done.await;
                return Ok(());
            }
            Route::StreamUp { session } => {
                let (rd, mut wr) = tokio::io::split(Linger::new(io));
                let body: BoxRead = Box::pin(Body::new(rd, buf, kind));
                let ended = match inner.stream_up(&session, body) {
                    Ok(rx) => rx,
                    Err(status) => {
                        let h = [
                            ("Content-Length", "0".to_string()),
                            ("Connection", "close".into()),
                        ];
                        send_head(&mut wr, &h1::response_head(status, &h)).await?;
                        return Ok(());
                    }
                };
                let mut h = inner.common_headers();
                h.push(("X-Accel-Buffering", "no".into()));
                h.push(("Cache-Control", "no-store".into()));
                h.push(("Transfer-Encoding", "chunked".into()));
                send_head(&mut wr, &h1::response_head(200, &h)).await?;
                let mut writer = ChunkedWriter::new(wr, Vec::new());
                keep_alive_until(&inner, &mut writer, ended, parts_has_referer(&head)).await;
                let _ = writer.shutdown().await;
                return Ok(());
            }
        }
    }
}

fn parts_has_referer(head: &h1::Head) -> bool {
    head.header("referer").is_some_and(|r| !r.is_empty())
}

/// Holds a stream-up request open until its body is no longer read, writing padding now and
/// then (as Xray does for clients that send a `Referer`) so middleboxes keep it.
async fn keep_alive_until<W: AsyncWrite + Unpin>(
    inner: &Inner,
    writer: &mut W,
    mut ended: oneshot::Receiver<()>,
    pad: bool,
) {
    loop {
        let wait =
            Duration::from_secs(u64::from(inner.opts.sc_stream_up_server_secs.pick().max(1)));
        tokio::select! {
            _ = &mut ended => return,
            _ = tokio::time::sleep(wait), if pad => {
                if writer.write_all(padding(inner.opts.x_padding_bytes).as_bytes()).await.is_err()
                    || writer.flush().await.is_err()
                {
                    let _ = ended.await;
                    return;
                }
            }
        }
    }
}

async fn refuse_h1(io: &mut BoxStream, status: u16) -> io::Result<()> {
    let h = [
        ("Content-Length", "0".to_string()),
        ("Connection", "close".into()),
    ];
    send_head(io, &h1::response_head(status, &h)).await
}

/// Writes a response head and flushes it: over TLS a write may keep records queued while the
/// socket is full, and after an answer we wait for the client's next request (or drop the
/// connection), which would never send them.
async fn send_head<W: AsyncWrite + Unpin + ?Sized>(io: &mut W, head: &[u8]) -> io::Result<()> {
    io.write_all(head).await?;
    io.flush().await
}

/// Answers 200 with a chunked streaming body and hands the tunnel over; the receiver fires
/// when the tunnel is dropped.
async fn stream_h1_split<W: AsyncWrite + Send + Unpin + 'static>(
    inner: &Inner,
    mut wr: W,
    reader: BoxRead,
    layer: LayerSession,
    tunnels: TunnelSink,
    end: impl FnOnce() + Send + 'static,
    hold_end: Option<Arc<h1::Gate>>,
) -> io::Result<oneshot::Receiver<()>> {
    let mut h = inner.stream_headers();
    h.push(("Transfer-Encoding", "chunked".into()));
    wr.write_all(&h1::response_head(200, &h)).await?;
    wr.flush().await?;
    let (signal, done) = done_signal();
    let mut writer = ChunkedWriter::new(wr, Vec::new());
    if let Some(gate) = hold_end {
        writer = writer.hold_end_until(gate);
    }
    let tunnel = Tunnel::new(reader, Box::pin(writer))
        .on_drop(end)
        .on_drop(signal);
    tunnels(Box::new(tunnel), layer);
    Ok(done)
}

async fn serve_h2<T>(
    inner: Arc<Inner>,
    io: T,
    layer: LayerSession,
    tunnels: TunnelSink,
) -> io::Result<()>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut conn = tokio::time::timeout(
        IDLE,
        h2::server::Builder::new()
            .initial_window_size(1 << 20)
            .initial_connection_window_size(4 << 20)
            .max_concurrent_streams(256)
            .handshake::<_, Bytes>(io),
    )
    .await
    .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))?
    .map_err(super::h2io::to_io)?;
    let active = Arc::new(AtomicUsize::new(0));
    loop {
        let next = match tokio::time::timeout(IDLE, conn.accept()).await {
            Err(_) if active.load(Ordering::Relaxed) == 0 => return Ok(()),
            Err(_) => continue,
            Ok(None) => return Ok(()),
            Ok(Some(next)) => next,
        };
        let (req, respond) = next.map_err(super::h2io::to_io)?;
        let (inner, layer, tunnels, active) = (
            inner.clone(),
            layer.clone(),
            tunnels.clone(),
            active.clone(),
        );
        active.fetch_add(1, Ordering::Relaxed);
        tokio::spawn(async move {
            if let Err(e) = handle_h2(&inner, req, respond, layer, tunnels).await {
                debug!(error = %e, "xhttp h2 request failed");
            }
            active.fetch_sub(1, Ordering::Relaxed);
        });
    }
}

fn h2_response(status: u16, headers: &[(&'static str, String)]) -> http::Response<()> {
    let mut r = http::Response::builder().status(status);
    for (n, v) in headers {
        r = r.header(*n, v.as_str());
    }
    r.body(()).unwrap_or_default()
}

async fn handle_h2(
    inner: &Arc<Inner>,
    req: http::Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<Bytes>,
    layer: LayerSession,
    tunnels: TunnelSink,
) -> io::Result<()> {
    let (head, body) = req.into_parts();
    let target = head
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    let host = head
        .uri
        .authority()
        .map(|a| a.as_str().to_owned())
        .or_else(|| {
            head.headers
                .get("host")
                .and_then(|h| h.to_str().ok())
                .map(str::to_owned)
        });
    let referer = head.headers.get("referer").and_then(|h| h.to_str().ok());
    let parts = RequestParts {
        method: head.method.as_str(),
        target: &target,
        host: host.as_deref(),
        referer,
    };
    let pad = referer.is_some_and(|r| !r.is_empty());
    let length = head
        .headers
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let to_io = super::h2io::to_io;
    let route = match inner.route(&parts) {
        Ok(r) => r,
        Err((status, h)) => {
            respond
                .send_response(h2_response(status, &h), true)
                .map_err(to_io)?;
            return Ok(());
        }
    };
    match route {
        Route::Options => {
            respond
                .send_response(h2_response(200, &inner.common_headers()), true)
                .map_err(to_io)?;
        }
        Route::Packet { session, seq } => {
            let mut reader = H2Reader::new(body);
            match inner.packet(&session, seq, length, &mut reader).await {
                Ok(()) => {
                    let mut h = inner.common_headers();
                    if length == Some(0) {
                        h.push(("Cache-Control", "no-store".into()));
                    }
                    respond
                        .send_response(h2_response(200, &h), true)
                        .map_err(to_io)?;
                }
                Err(status) => {
                    respond
                        .send_response(h2_response(status, &[]), true)
                        .map_err(to_io)?;
                }
            }
        }
        Route::Download { session } => {
            let (reader, end, _) = match inner.download(&session) {
                Ok(d) => d,
                Err(status) => {
                    respond
                        .send_response(h2_response(status, &[]), true)
                        .map_err(to_io)?;
                    return Ok(());
                }
            };
            let send = respond
                .send_response(h2_response(200, &inner.stream_headers()), false)
                .map_err(to_io)?;
            let tunnel = Tunnel::new(reader, Box::pin(H2Writer::new(send))).on_drop(end);
            tunnels(Box::new(tunnel), layer);
        }
        Route::StreamOne => {
            let send = respond
                .send_response(h2_response(200, &inner.stream_headers()), false)
                .map_err(to_io)?;
            let tunnel = Tunnel::new(Box::pin(H2Reader::new(body)), Box::pin(H2Writer::new(send)));
            tunnels(Box::new(tunnel), layer);
        }
        Route::StreamUp { session } => {
            let ended = match inner.stream_up(&session, Box::pin(H2Reader::new(body))) {
                Ok(rx) => rx,
                Err(status) => {
                    respond
                        .send_response(h2_response(status, &[]), true)
                        .map_err(to_io)?;
                    return Ok(());
                }
            };
            let mut h = inner.common_headers();
            h.push(("X-Accel-Buffering", "no".into()));
            h.push(("Cache-Control", "no-store".into()));
            let send = respond
                .send_response(h2_response(200, &h), false)
                .map_err(to_io)?;
            let mut writer = H2Writer::new(send);
            keep_alive_until(inner, &mut writer, ended, pad).await;
            let _ = writer.shutdown().await;
        }
    }
    Ok(())
}
