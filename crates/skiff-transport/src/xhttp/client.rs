//! The outbound side of XHTTP: a [`Dialer`] over the lower dialer (TCP, then TLS), opening
//! each tunnel as Xray's client does (transport/internet/splithttp/dialer.go): a download
//! `GET` and uploads (`POST`s of at most `scMaxEachPostBytes`, at least
//! `scMinPostsIntervalMs` apart), or one streaming `POST`. HTTP/2 connections are shared
//! between tunnels as xmux says; over HTTP/1.1 every request stream has its own connection
//! and a tunnel's packets share one kept-alive connection.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use skiff_core::{Address, BoxFuture, BoxPacketConn, BoxStream, Dialer, Metadata};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{Notify, Semaphore};
use tracing::debug;

use super::h1::{self, Body, ChunkedWriter};
use super::h2io::{H2Reader, H2Writer, to_io};
use super::request::normalize_path;
use super::tunnel::{BoxRead, BoxWrite, Tunnel};
use super::{Mode, XhttpOptions, padding};

/// How long a request may take to get its response head.
const RESPONSE_WAIT: Duration = Duration::from_secs(30);
/// Packet uploads in flight at once per tunnel over HTTP/2.
const POSTS_IN_FLIGHT: usize = 4;

pub struct XhttpDialer {
    lower: Arc<dyn Dialer>,
    opts: Arc<XhttpOptions>,
    /// `Host` / `:authority`.
    host: String,
    scheme: &'static str,
    http2: bool,
    pool: Mutex<Vec<Arc<H2Conn>>>,
    /// `downloadSettings`: where the download `GET` goes instead, with its own settings.
    download: Option<Download>,
}

/// The other server a tunnel downloads from (`downloadSettings`): the uploads stay on the
/// dialer's own server, the session id joins the two.
struct Download {
    dialer: Arc<XhttpDialer>,
    server: Address,
}

impl XhttpDialer {
    /// `host`: the `host` setting, else the TLS server name, else the server address;
    /// `http2`: TLS that may negotiate h2 (Xray's choice: no TLS, or ALPN exactly
    /// `http/1.1`, is HTTP/1.1).
    pub fn new(
        lower: Arc<dyn Dialer>,
        opts: XhttpOptions,
        host: String,
        tls: bool,
        http2: bool,
    ) -> Self {
        XhttpDialer {
            lower,
            opts: Arc::new(opts),
            host,
            scheme: if tls { "https" } else { "http" },
            http2,
            pool: Mutex::new(Vec::new()),
            download: None,
        }
    }

    /// Sends every tunnel's download `GET` through `dialer` to `server` (`downloadSettings`);
    /// stream-one tunnels, which have no separate download, are unaffected.
    pub fn download_from(mut self, dialer: XhttpDialer, server: Address) -> Self {
        self.download = Some(Download {
            dialer: Arc::new(dialer),
            server,
        });
        self
    }

    /// A tunnel's download: `GET /path/SESSION`, its response body streamed back. `Running`
    /// holds the tunnel's place on an HTTP/2 connection.
    async fn open_download(
        &self,
        server: &Address,
        meta: &Metadata,
        session: &str,
    ) -> io::Result<(BoxRead, Option<Running>)> {
        if self.http2 {
            let running = self.h2_conn(server, meta).await?;
            let get = self.h2_request("GET", &self.target(session, None), false, None)?;
            let (resp, _) = Self::h2_send(&running.0, get, true).await?;
            Ok((
                Box::pin(LazyResponse::new(resp, h2_response_body)),
                Some(running),
            ))
        } else {
            let (reader, _) = self
                .h1_stream(
                    server,
                    meta,
                    "GET",
                    &self.target(session, None),
                    false,
                    true,
                )
                .await?;
            Ok((reader, None))
        }
    }

    /// The download from `downloadSettings`' server, if the dialer has one.
    async fn download_elsewhere(
        &self,
        meta: &Metadata,
        session: &str,
    ) -> Option<io::Result<(BoxRead, Option<Running>)>> {
        let d = self.download.as_ref()?;
        Some(d.dialer.open_download(&d.server, meta, session).await)
    }

    fn base_path(&self) -> String {
        normalize_path(&self.opts.path)
    }

    fn query(&self) -> Option<&str> {
        self.opts.path.split_once('?').map(|(_, q)| q)
    }

    /// The target of a request: the path, the session and sequence segments, the query.
    fn target(&self, session: &str, seq: Option<u64>) -> String {
        let mut t = self.base_path();
        t.push_str(session);
        if let Some(seq) = seq {
            t.push('/');
            t.push_str(&seq.to_string());
        }
        if let Some(q) = self.query() {
            t.push('?');
            t.push_str(q);
        }
        t
    }

    /// The headers of every request: the configured ones and the padding, carried in the
    /// `Referer`'s query as Xray's client carries it.
    fn headers(&self, streaming_body: bool) -> Vec<(String, String)> {
        let mut h = self.opts.headers.clone();
        let referer = format!(
            "{}://{}{}?x_padding={}",
            self.scheme,
            self.host,
            self.base_path(),
            padding(self.opts.x_padding_bytes)
        );
        h.push(("Referer".into(), referer));
        if streaming_body && !self.opts.no_grpc_header {
            h.push(("Content-Type".into(), "application/grpc".into()));
        }
        h
    }

    fn mode(&self) -> Mode {
        match self.opts.mode {
            Mode::Auto => Mode::PacketUp,
            m => m,
        }
    }
}

/// A session id as Xray makes one: a random UUID string.
fn session_id() -> String {
    let mut b = [0u8; 16];
    skiff_crypto::random::fill(&mut b);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

impl Dialer for XhttpDialer {
    fn dial<'a>(
        &'a self,
        server: &'a Address,
        meta: &'a Metadata,
    ) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(async move {
            let mode = self.mode();
            let session = if mode == Mode::StreamOne {
                String::new()
            } else {
                session_id()
            };
            debug!(?mode, http2 = self.http2, host = %self.host, "xhttp dialing");
            let tunnel = if self.http2 {
                self.dial_h2(server, meta, mode, &session).await?
            } else {
                self.dial_h1(server, meta, mode, &session).await?
            };
            Ok(Box::new(tunnel) as BoxStream)
        })
    }

    fn bind_via<'a>(
        &'a self,
        meta: &'a Metadata,
    ) -> BoxFuture<'a, io::Result<Option<BoxPacketConn>>> {
        self.lower.bind_via(meta)
    }

    fn is_chained(&self) -> bool {
        self.lower.is_chained()
    }
}

// ---- HTTP/1.1 ----

impl XhttpDialer {
    fn h1_head(
        &self,
        method: &str,
        target: &str,
        headers: &[(String, String)],
        body: H1BodyHead,
    ) -> Vec<u8> {
        let mut out = format!("{method} {target} HTTP/1.1\r\nHost: {}\r\n", self.host);
        for (n, v) in headers {
            out.push_str(&format!("{n}: {v}\r\n"));
        }
        match body {
            H1BodyHead::None => {}
            H1BodyHead::Length(n) => out.push_str(&format!("Content-Length: {n}\r\n")),
            H1BodyHead::Chunked => out.push_str("Transfer-Encoding: chunked\r\n"),
        }
        out.push_str("\r\n");
        out.into_bytes()
    }

    /// Opens a request whose response streams back: returns the response body reader and the
    /// request body writer (chunked), for GET (no body) or a streaming POST.
    async fn h1_stream(
        &self,
        server: &Address,
        meta: &Metadata,
        method: &str,
        target: &str,
        with_body: bool,
        wait_response: bool,
    ) -> io::Result<(BoxRead, Option<BoxWrite>)> {
        let stream = self.lower.dial(server, meta).await?;
        let (mut rd, mut wr) = tokio::io::split(super::tunnel::Linger::new(stream));
        // `Connection: close`, as Xray's client (keep-alive off for these): Go's HTTP/1.1
        // server otherwise swallows up to 256 KiB of a request body it has not read when the
        // response starts, which stream-up and stream-one responses do at once.
        let mut headers = self.headers(with_body);
        headers.push(("Connection".into(), "close".into()));
        let head = self.h1_head(
            method,
            target,
            &headers,
            if with_body {
                H1BodyHead::Chunked
            } else {
                H1BodyHead::None
            },
        );
        wr.write_all(&head).await?;
        wr.flush().await?;
        let writer = with_body.then(|| Box::pin(ChunkedWriter::new(wr, Vec::new())) as BoxWrite);
        if !wait_response {
            // stream-up's upload: the response is read (and dropped) in the background.
            tokio::spawn(async move {
                let mut sink = Vec::new();
                let _ = rd.read_to_end(&mut sink).await;
            });
            return Ok((Box::pin(super::tunnel::Empty), writer));
        }
        let reader = read_response(rd).await?;
        Ok((reader, writer))
    }

    async fn dial_h1(
        &self,
        server: &Address,
        meta: &Metadata,
        mode: Mode,
        session: &str,
    ) -> io::Result<Tunnel> {
        match mode {
            Mode::StreamOne => {
                let (reader, writer) = self
                    .h1_stream(server, meta, "POST", &self.target("", None), true, true)
                    .await?;
                Ok(Tunnel::new(reader, writer.expect("stream-one has a body")))
            }
            Mode::StreamUp => {
                let (reader, elsewhere) = match self.download_elsewhere(meta, session).await {
                    Some(download) => download?,
                    None => self.open_download(server, meta, session).await?,
                };
                let (_, writer) = self
                    .h1_stream(
                        server,
                        meta,
                        "POST",
                        &self.target(session, None),
                        true,
                        false,
                    )
                    .await?;
                Ok(Tunnel::new(reader, writer.expect("stream-up has a body"))
                    .on_drop(move || drop(elsewhere)))
            }
            Mode::PacketUp | Mode::Auto => {
                let (reader, elsewhere) = match self.download_elsewhere(meta, session).await {
                    Some(download) => download?,
                    None => self.open_download(server, meta, session).await?,
                };
                let (writer, shared) = packet_writer(&self.opts);
                let this = H1Uploader {
                    dialer: self.clone_for_upload(),
                    server: server.clone(),
                    meta: meta.clone(),
                    session: session.to_owned(),
                    conn: None,
                };
                tokio::spawn(run_uploads(shared, self.opts.clone(), Box::new(this)));
                Ok(Tunnel::new(reader, Box::pin(writer)).on_drop(move || drop(elsewhere)))
            }
        }
    }

    fn clone_for_upload(&self) -> Arc<XhttpDialer> {
        Arc::new(XhttpDialer {
            lower: self.lower.clone(),
            opts: self.opts.clone(),
            host: self.host.clone(),
            scheme: self.scheme,
            http2: self.http2,
            pool: Mutex::new(Vec::new()),
            download: None,
        })
    }
}

enum H1BodyHead {
    None,
    Length(usize),
    Chunked,
}

/// Reads a response head; a 200 gives its body as a reader.
async fn read_response<R: AsyncRead + Unpin + Send + 'static>(mut rd: R) -> io::Result<BoxRead> {
    let mut buf = BytesMut::new();
    let head = tokio::time::timeout(
        RESPONSE_WAIT,
        h1::read_head(&mut rd, &mut buf, h1::parse_response),
    )
    .await
    .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))??
    .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
    if head.status != 200 {
        return Err(io::Error::other(format!(
            "xhttp server answered {}",
            head.status
        )));
    }
    let kind = match head.body_kind()? {
        // A streaming response without a length runs to the connection's end.
        h1::BodyKind::Length(0) if head.header("content-length").is_none() => {
            h1::BodyKind::Length(u64::MAX)
        }
        k => k,
    };
    Ok(Box::pin(EofAtEnd(Body::new(rd, buf, kind))))
}

/// A body whose connection closing is its end (responses without length or chunking).
struct EofAtEnd<R>(Body<R>);

impl<R: AsyncRead + Unpin> AsyncRead for EofAtEnd<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match Pin::new(&mut self.0).poll_read(cx, buf) {
            Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::UnexpectedEof => Poll::Ready(Ok(())),
            other => other,
        }
    }
}

struct H1Uploader {
    dialer: Arc<XhttpDialer>,
    server: Address,
    meta: Metadata,
    session: String,
    conn: Option<(BoxStream, BytesMut)>,
}

impl PostPacket for H1Uploader {
    fn post<'a>(&'a mut self, seq: u64, data: Bytes) -> BoxFuture<'a, io::Result<()>> {
        Box::pin(async move {
            let target = self.dialer.target(&self.session, Some(seq));
            let mut req = self.dialer.h1_head(
                "POST",
                &target,
                &self.dialer.headers(false),
                H1BodyHead::Length(data.len()),
            );
            req.extend_from_slice(&data);
            for attempt in 0..2 {
                let (mut io, mut buf) = match self.conn.take() {
                    Some(c) => c,
                    None => (
                        self.dialer.lower.dial(&self.server, &self.meta).await?,
                        BytesMut::new(),
                    ),
                };
                // The flush matters over TLS: a write may return with records still queued
                // (the socket was full), and nothing else sends them while we wait for the
                // answer, so the server would wait for the rest of the body until we time out.
                let sent = async {
                    io.write_all(&req).await?;
                    io.flush().await
                };
                if sent.await.is_err() && attempt == 0 {
                    continue;
                }
                let head = tokio::time::timeout(
                    RESPONSE_WAIT,
                    h1::read_head(&mut io, &mut buf, h1::parse_response),
                )
                .await
                .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))?;
                let head = match head {
                    Ok(Some(h)) => h,
                    _ if attempt == 0 => continue,
                    Ok(None) => return Err(io::ErrorKind::UnexpectedEof.into()),
                    Err(e) => return Err(e),
                };
                let mut body = Body::new(&mut io, buf, head.body_kind()?);
                tokio::io::copy(&mut (&mut body).take(1 << 16), &mut tokio::io::sink()).await?;
                let buf = body.into_buf();
                if head.status != 200 {
                    return Err(io::Error::other(format!(
                        "xhttp upload answered {}",
                        head.status
                    )));
                }
                let close = head
                    .header("connection")
                    .is_some_and(|c| c.eq_ignore_ascii_case("close"));
                if !close {
                    self.conn = Some((io, buf));
                }
                return Ok(());
            }
            Err(io::ErrorKind::ConnectionReset.into())
        })
    }
}

// ---- packet-up uploads, either HTTP version ----

/// What sends one packet: a kept-alive HTTP/1.1 connection, or HTTP/2 streams.
trait PostPacket: Send {
    fn post<'a>(&'a mut self, seq: u64, data: Bytes) -> BoxFuture<'a, io::Result<()>>;
}

/// The tunnel's writing half in packet-up: bytes gather (up to one post's worth) for the
/// uploader task.
struct PacketWriter {
    shared: Arc<UploadShared>,
}

struct UploadShared {
    inner: Mutex<UploadState>,
    data_ready: Notify,
    cap: usize,
}

struct UploadState {
    buf: BytesMut,
    closed: bool,
    failed: bool,
    writer: Option<Waker>,
}

fn packet_writer(opts: &XhttpOptions) -> (PacketWriter, Arc<UploadShared>) {
    let cap = (opts.sc_max_each_post_bytes.pick() as usize).max(1);
    let shared = Arc::new(UploadShared {
        inner: Mutex::new(UploadState {
            buf: BytesMut::new(),
            closed: false,
            failed: false,
            writer: None,
        }),
        data_ready: Notify::new(),
        cap,
    });
    (
        PacketWriter {
            shared: shared.clone(),
        },
        shared,
    )
}

impl UploadShared {
    fn lock(&self) -> std::sync::MutexGuard<'_, UploadState> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl AsyncWrite for PacketWriter {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let mut st = self.shared.lock();
        if st.failed {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "xhttp upload failed",
            )));
        }
        if st.closed {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        let room = self.shared.cap.saturating_sub(st.buf.len());
        if room == 0 {
            st.writer = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let n = room.min(buf.len());
        st.buf.extend_from_slice(&buf[..n]);
        drop(st);
        self.shared.data_ready.notify_one();
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.shared.lock().closed = true;
        self.shared.data_ready.notify_one();
        Poll::Ready(Ok(()))
    }
}

impl Drop for PacketWriter {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.data_ready.notify_one();
    }
}

/// Takes what the tunnel wrote, one post at a time, numbered from 0, no closer together than
/// `scMinPostsIntervalMs`.
async fn run_uploads(
    shared: Arc<UploadShared>,
    opts: Arc<XhttpOptions>,
    mut poster: Box<dyn PostPacket>,
) {
    let mut seq = 0u64;
    let mut last: Option<Instant> = None;
    let mut pacer = super::pacer::Pacer::new();
    loop {
        let data = loop {
            {
                let mut st = shared.lock();
                if !st.buf.is_empty() {
                    break Some(());
                }
                if st.closed {
                    break None;
                }
                if let Some(w) = st.writer.take() {
                    w.wake();
                }
            }
            shared.data_ready.notified().await;
        };
        if data.is_none() {
            return;
        }
        let interval = Duration::from_millis(u64::from(opts.sc_min_posts_interval_ms.pick()));
        if let Some(last) = last {
            pacer.sleep_until(last + interval).await;
        }
        let chunk = {
            let mut st = shared.lock();
            let n = st.buf.len().min(shared.cap);
            let chunk = st.buf.split_to(n).freeze();
            if let Some(w) = st.writer.take() {
                w.wake();
            }
            chunk
        };
        last = Some(Instant::now());
        if let Err(e) = poster.post(seq, chunk).await {
            debug!(seq, error = %e, "xhttp upload failed");
            let mut st = shared.lock();
            st.failed = true;
            if let Some(w) = st.writer.take() {
                w.wake();
            }
            return;
        }
        seq += 1;
    }
}

// ---- HTTP/2 and xmux ----

/// One HTTP/2 connection and its xmux accounting.
struct H2Conn {
    send: h2::client::SendRequest<Bytes>,
    running: AtomicUsize,
    reuses_left: AtomicI64,
    requests_left: AtomicI64,
    unusable_at: Option<Instant>,
    closed: Arc<AtomicBool>,
}

impl H2Conn {
    fn usable(&self) -> bool {
        !self.closed.load(Ordering::Relaxed)
            && self.reuses_left.load(Ordering::Relaxed) > 0
            && self.requests_left.load(Ordering::Relaxed) > 0
            && self.unusable_at.is_none_or(|t| Instant::now() < t)
    }
}

/// A limit of zero is no limit (Xray's meaning); as a counter, "very many".
fn limit(v: u32) -> i64 {
    if v == 0 { i64::MAX } else { i64::from(v) }
}

/// Holds a tunnel's place on a connection (`running`) until dropped.
struct Running(Arc<H2Conn>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::Relaxed);
    }
}

impl XhttpDialer {
    async fn new_h2(&self, server: &Address, meta: &Metadata) -> io::Result<Arc<H2Conn>> {
        let stream = self.lower.dial(server, meta).await?;
        let (send, conn) = h2::client::Builder::new()
            .initial_window_size(1 << 20)
            .initial_connection_window_size(4 << 20)
            .handshake::<_, Bytes>(stream)
            .await
            .map_err(to_io)?;
        let closed = Arc::new(AtomicBool::new(false));
        let flag = closed.clone();
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                debug!(error = %e, "xhttp h2 connection ended");
            }
            flag.store(true, Ordering::Relaxed);
        });
        let x = &self.opts.xmux;
        let secs = x.h_max_reusable_secs.pick();
        Ok(Arc::new(H2Conn {
            send,
            running: AtomicUsize::new(0),
            reuses_left: AtomicI64::new(limit(x.c_max_reuse_times.pick())),
            requests_left: AtomicI64::new(limit(x.h_max_request_times.pick())),
            unusable_at: (secs > 0).then(|| Instant::now() + Duration::from_secs(u64::from(secs))),
            closed,
        }))
    }

    /// A connection for a new tunnel, as xmux picks: a new one while under `maxConnections`
    /// (or when every one has `maxConcurrency` tunnels), else the least busy usable one.
    async fn h2_conn(&self, server: &Address, meta: &Metadata) -> io::Result<Running> {
        let x = self.opts.xmux;
        let picked = {
            let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
            pool.retain(|c| c.usable());
            let max_conn = x.max_connections.pick() as usize;
            let max_conc = x.max_concurrency.pick() as usize;
            let room =
                |c: &Arc<H2Conn>| max_conc == 0 || c.running.load(Ordering::Relaxed) < max_conc;
            if max_conn > 0 && pool.len() < max_conn {
                None
            } else {
                pool.iter()
                    .filter(|c| room(c))
                    .min_by_key(|c| c.running.load(Ordering::Relaxed))
                    .cloned()
            }
        };
        let conn = match picked {
            Some(c) => c,
            None => {
                let c = self.new_h2(server, meta).await?;
                self.pool
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(c.clone());
                c
            }
        };
        conn.reuses_left.fetch_sub(1, Ordering::Relaxed);
        conn.running.fetch_add(1, Ordering::Relaxed);
        Ok(Running(conn))
    }

    fn h2_request(
        &self,
        method: &str,
        target: &str,
        streaming_body: bool,
        length: Option<usize>,
    ) -> io::Result<http::Request<()>> {
        let uri = format!("{}://{}{}", self.scheme, self.host, target);
        let mut r = http::Request::builder().method(method).uri(uri);
        for (n, v) in self.headers(streaming_body) {
            r = r.header(n, v);
        }
        if let Some(n) = length {
            r = r.header("content-length", n);
        }
        r.body(()).map_err(io::Error::other)
    }

    /// Sends a request on `conn`; returns its response future and body stream.
    async fn h2_send(
        conn: &H2Conn,
        req: http::Request<()>,
        end: bool,
    ) -> io::Result<(h2::client::ResponseFuture, h2::SendStream<Bytes>)> {
        conn.requests_left.fetch_sub(1, Ordering::Relaxed);
        let send = conn.send.clone().ready().await.map_err(to_io)?;
        let mut send = send;
        send.send_request(req, end).map_err(to_io)
    }

    /// The download on the tunnel's connection, unless it goes to `downloadSettings`' server.
    async fn h2_download(
        &self,
        conn: &H2Conn,
        meta: &Metadata,
        session: &str,
    ) -> io::Result<(BoxRead, Option<Running>)> {
        if let Some(download) = self.download_elsewhere(meta, session).await {
            return download;
        }
        let get = self.h2_request("GET", &self.target(session, None), false, None)?;
        let (resp, _) = Self::h2_send(conn, get, true).await?;
        Ok((Box::pin(LazyResponse::new(resp, h2_response_body)), None))
    }

    async fn dial_h2(
        &self,
        server: &Address,
        meta: &Metadata,
        mode: Mode,
        session: &str,
    ) -> io::Result<Tunnel> {
        let running = self.h2_conn(server, meta).await?;
        let conn = running.0.clone();
        match mode {
            Mode::StreamOne => {
                let req = self.h2_request("POST", &self.target("", None), true, None)?;
                let (resp, send) = Self::h2_send(&conn, req, false).await?;
                let reader = LazyResponse::new(resp, h2_response_body);
                Ok(Tunnel::new(Box::pin(reader), Box::pin(H2Writer::new(send)))
                    .on_drop(move || drop(running)))
            }
            Mode::StreamUp => {
                let (reader, elsewhere) = self.h2_download(&conn, meta, session).await?;
                let post = self.h2_request("POST", &self.target(session, None), true, None)?;
                let (up_resp, send) = Self::h2_send(&conn, post, false).await?;
                tokio::spawn(async move {
                    // The upload's response only carries padding; read it so flow control runs.
                    if let Ok(r) = up_resp.await {
                        let mut body = H2Reader::new(r.into_body());
                        let _ = tokio::io::copy(&mut body, &mut tokio::io::sink()).await;
                    }
                });
                Ok(Tunnel::new(reader, Box::pin(H2Writer::new(send)))
                    .on_drop(move || drop((running, elsewhere))))
            }
            Mode::PacketUp | Mode::Auto => {
                let (reader, elsewhere) = self.h2_download(&conn, meta, session).await?;
                let (writer, shared) = packet_writer(&self.opts);
                let poster = H2Uploader {
                    dialer: self.clone_for_upload(),
                    conn: conn.clone(),
                    session: session.to_owned(),
                    in_flight: Arc::new(Semaphore::new(POSTS_IN_FLIGHT)),
                    failed: Arc::new(AtomicBool::new(false)),
                };
                tokio::spawn(run_uploads(shared, self.opts.clone(), Box::new(poster)));
                Ok(Tunnel::new(reader, Box::pin(writer))
                    .on_drop(move || drop((running, elsewhere))))
            }
        }
    }
}

/// A download's response: a 200 gives its body.
fn h2_response_body(resp: http::Response<h2::RecvStream>) -> io::Result<BoxRead> {
    if resp.status() != 200 {
        return Err(io::Error::other(format!(
            "xhttp server answered {}",
            resp.status()
        )));
    }
    Ok(Box::pin(H2Reader::new(resp.into_body())))
}

struct H2Uploader {
    dialer: Arc<XhttpDialer>,
    conn: Arc<H2Conn>,
    session: String,
    in_flight: Arc<Semaphore>,
    failed: Arc<AtomicBool>,
}

impl PostPacket for H2Uploader {
    fn post<'a>(&'a mut self, seq: u64, data: Bytes) -> BoxFuture<'a, io::Result<()>> {
        Box::pin(async move {
            if self.failed.load(Ordering::Relaxed) {
                return Err(io::Error::other("an earlier upload failed"));
            }
            let permit = self
                .in_flight
                .clone()
                .acquire_owned()
                .await
                .map_err(io::Error::other)?;
            let target = self.dialer.target(&self.session, Some(seq));
            let req = self
                .dialer
                .h2_request("POST", &target, false, Some(data.len()))?;
            let (resp, mut send) = XhttpDialer::h2_send(&self.conn, req, false).await?;
            send.send_data(data, true).map_err(to_io)?;
            let failed = self.failed.clone();
            tokio::spawn(async move {
                let ok = match tokio::time::timeout(RESPONSE_WAIT, resp).await {
                    Ok(Ok(r)) => r.status() == 200,
                    _ => false,
                };
                if !ok {
                    debug!(seq, "xhttp upload refused or lost");
                    failed.store(true, Ordering::Relaxed);
                }
                drop(permit);
            });
            Ok(())
        })
    }
}

/// A response body read once its head arrives (the dial does not wait for it, as Xray's
/// does not).
struct LazyResponse<F> {
    state: LazyState,
    make: Option<F>,
}

enum LazyState {
    Waiting(h2::client::ResponseFuture),
    Body(BoxRead),
    Failed,
}

impl<F> LazyResponse<F> {
    fn new(resp: h2::client::ResponseFuture, make: F) -> Self {
        LazyResponse {
            state: LazyState::Waiting(resp),
            make: Some(make),
        }
    }
}

impl<F> AsyncRead for LazyResponse<F>
where
    F: FnOnce(http::Response<h2::RecvStream>) -> io::Result<BoxRead> + Unpin,
{
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            match &mut this.state {
                LazyState::Waiting(fut) => {
                    let resp = match Pin::new(fut).poll(cx) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(r) => r,
                    };
                    let made = resp.map_err(to_io).and_then(|r| match this.make.take() {
                        Some(make) => make(r),
                        None => Err(io::ErrorKind::Other.into()),
                    });
                    match made {
                        Ok(body) => this.state = LazyState::Body(body),
                        Err(e) => {
                            this.state = LazyState::Failed;
                            return Poll::Ready(Err(e));
                        }
                    }
                }
                LazyState::Body(body) => return body.as_mut().poll_read(cx, buf),
                LazyState::Failed => return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into())),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use tokio::io::{AsyncBufReadExt, BufReader, BufStream};
    use tokio::net::UnixStream;

    use super::*;

    /// A stream that keeps what is written until it is flushed, as TLS does when the socket is
    /// full: the AsyncWrite contract allows it.
    struct Buffered(BufStream<UnixStream>);

    impl AsyncRead for Buffered {
        fn poll_read(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            Pin::new(&mut self.0).poll_read(cx, buf)
        }
    }

    impl AsyncWrite for Buffered {
        fn poll_write(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            Pin::new(&mut self.0).poll_write(cx, buf)
        }
        fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.0).poll_flush(cx)
        }
        fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.0).poll_shutdown(cx)
        }
    }

    impl skiff_core::ProxyStream for Buffered {}

    /// Hands out the one prepared connection.
    struct OneConnection(Mutex<Option<UnixStream>>);

    impl Dialer for OneConnection {
        fn dial<'a>(
            &'a self,
            _: &'a Address,
            _: &'a Metadata,
        ) -> BoxFuture<'a, io::Result<BoxStream>> {
            let conn = self.0.lock().unwrap().take();
            Box::pin(async move {
                let conn = conn.ok_or_else(|| io::Error::other("dialed twice"))?;
                Ok(Box::new(Buffered(BufStream::new(conn))) as BoxStream)
            })
        }
        fn bind_via<'a>(
            &'a self,
            _: &'a Metadata,
        ) -> BoxFuture<'a, io::Result<Option<BoxPacketConn>>> {
            Box::pin(async { Ok(None) })
        }
    }

    /// An HTTP/1.1 packet upload reaches the server whole and gets its answer even when the
    /// connection below keeps written bytes until a flush (it waited for the answer forever).
    #[tokio::test]
    async fn a_packet_post_is_flushed_before_its_answer_is_awaited() {
        let (client, server) = UnixStream::pair().unwrap();
        let lower = Arc::new(OneConnection(Mutex::new(Some(client))));
        let dialer = XhttpDialer::new(
            lower,
            XhttpOptions::default(),
            "example.com".into(),
            false,
            false,
        );
        let address: SocketAddr = "127.0.0.1:80".parse().unwrap();
        let mut uploader = H1Uploader {
            dialer: Arc::new(dialer),
            server: Address::Ip(address),
            meta: Metadata::new("test".into(), address, address),
            session: "session".into(),
            conn: None,
        };
        let answer = tokio::spawn(async move {
            let mut server = BufReader::new(server);
            let mut length = 0;
            loop {
                let mut line = String::new();
                server.read_line(&mut line).await.unwrap();
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap();
                }
                if line == "\r\n" || line.is_empty() {
                    break;
                }
            }
            let mut body = vec![0u8; length];
            server.read_exact(&mut body).await.unwrap();
            server
                .get_mut()
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                .await
                .unwrap();
            body
        });
        let posted = tokio::time::timeout(
            Duration::from_secs(10),
            uploader.post(0, Bytes::from_static(b"one packet")),
        )
        .await;
        assert!(matches!(posted, Ok(Ok(()))), "{posted:?}");
        assert_eq!(answer.await.unwrap(), b"one packet");
    }
}
