//! Async adapter of the HTTP proxy: reads requests off a client connection, hands CONNECT
//! tunnels to the dispatcher, and forwards everything else itself.
//!
//! Forwarding keeps both sides persistent where HTTP allows it: the client connection
//! carries request after request, and the upstream connection is reused while consecutive
//! requests go to the same destination. Request body and response run concurrently, so
//! `Expect: 100-continue` and early responses (an origin answering 413 mid-upload) work.
//!
//! Timeouts: the first request head is waited for without a bound unless the caller uses
//! [`serve_timed`] (the caller normally bounds the handshake); later keep-alive requests
//! get [`KEEPALIVE_IDLE`]; every single read or write while forwarding gets [`IO_IDLE`].

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use skiff_core::{
    Accepted, Address, BoxStream, ConnectOutcome, Connector, Prefixed, ProxyStream, Reply,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf, ReadHalf, WriteHalf};

use super::auth;
use super::body::{BodyError, BodyFramer, BodyKind};
use super::request::{ProxyRequest, RequestKind, parse_request, rewrite_for_upstream};
use super::response::{self, parse_response};
use super::{MAX_HEAD_LEN, Parse};

/// How long a persistent client connection may sit idle between requests.
pub const KEEPALIVE_IDLE: Duration = Duration::from_secs(60);
/// How long any one read or write may stall while forwarding (the connect, the response
/// head, each body chunk). Matches the usual connection-idle policy of the Xray family.
pub const IO_IDLE: Duration = Duration::from_secs(300);
/// Body copy buffer.
const COPY_CHUNK: usize = 32 * 1024;
/// Lingering close after an error answer: at most this long, at most this much input.
const LINGER: Duration = Duration::from_secs(1);
const LINGER_BYTES: usize = 64 * 1024;
/// Head read step; heads are small and this keeps the per-connection stack modest.
const HEAD_READ: usize = 4096;

/// Settings of an HTTP proxy inbound.
#[derive(Clone, Debug, Default)]
pub struct HttpServerConfig {
    /// `(user, pass)` pairs for Basic proxy authentication; empty means no authentication.
    pub accounts: Vec<(String, String)>,
    /// Accept origin-form requests (`GET /path` + `Host`), as a transparent proxy sees them.
    pub allow_transparent: bool,
}

/// Serves one client connection. CONNECT returns [`Accepted::Stream`] (with any bytes the
/// client sent after the head in front of the stream) for the dispatcher to connect and
/// reply via [`write_connect_reply`]. Other requests are forwarded here through
/// `connector`, request after request, and the result is [`Accepted::Done`] once the client
/// closes, idles out, or either side ends persistence.
///
/// Errors: wrong or missing credentials are answered with 407, malformed requests with
/// 400 (431 for oversized heads), failures to reach or hear from the origin with 502
/// (504 on timeout); each then returns an error.
///
/// The first request head is read without a time bound. Wrapping this whole call in a
/// handshake timeout would also cut forwarded exchanges that outlast it; [`serve_timed`]
/// bounds only the wait for the first head.
pub async fn serve<S: ProxyStream>(
    stream: S,
    config: &HttpServerConfig,
    connector: &dyn Connector,
) -> io::Result<Accepted> {
    serve_timed(stream, config, connector, None).await
}

/// [`serve`] with a bound on the wait for the first request head (the handshake timeout),
/// so a caller need not wrap the whole call, which would also cut long forwarded exchanges.
pub async fn serve_timed<S: ProxyStream>(
    stream: S,
    config: &HttpServerConfig,
    connector: &dyn Connector,
    first_request: Option<Duration>,
) -> io::Result<Accepted> {
    let (reader, writer) = tokio::io::split(stream);
    let mut client = Client {
        reader,
        writer,
        pending: Vec::new(),
    };
    let mut upstream: Option<Upstream> = None;
    let mut first = true;
    loop {
        let wait = if first {
            first_request
        } else {
            Some(KEEPALIVE_IDLE)
        };
        let read = client.read_request(config.allow_transparent);
        let req = match wait {
            None => read.await,
            Some(limit) => match tokio::time::timeout(limit, read).await {
                Ok(result) => result,
                Err(_) if first => Err(io::Error::new(io::ErrorKind::TimedOut, "no request")),
                Err(_) => Ok(None),
            },
        };
        let req = match req? {
            Some(req) => req,
            None if first => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "closed before a request",
                ));
            }
            None => {
                client.close().await;
                return Ok(Accepted::Done);
            }
        };
        first = false;

        let user = match auth::authenticate(&config.accounts, req.proxy_auth.as_ref()) {
            Ok(user) => user,
            Err(()) => {
                client.answer(407).await;
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    "proxy authentication failed",
                ));
            }
        };

        if req.kind == RequestKind::Connect {
            drop(upstream);
            let Client {
                reader,
                writer,
                pending,
            } = client;
            let stream = reader.unsplit(writer);
            return Ok(Accepted::Stream {
                destination: req.target,
                stream: Box::new(Prefixed::new(Bytes::from(pending), stream)),
                reply: Reply::HttpConnect,
                user,
                level: None,
            });
        }

        tracing::debug!(method = %req.method, target = %req.target, "http forward");
        if !forward(&mut client, &mut upstream, &req, user.as_deref(), connector).await? {
            client.close().await;
            return Ok(Accepted::Done);
        }
    }
}

/// Answers a CONNECT once the dispatcher knows whether the destination is reachable:
/// `200 Connection established`, or `502 Bad Gateway` (`504 Gateway Timeout` when the
/// connect timed out).
pub async fn write_connect_reply<S: AsyncWrite + Unpin>(
    stream: &mut S,
    outcome: ConnectOutcome<'_>,
) -> io::Result<()> {
    match outcome {
        ConnectOutcome::Connected { .. } => {
            stream.write_all(response::CONNECTION_ESTABLISHED).await?
        }
        ConnectOutcome::Failed(err) => {
            stream
                .write_all(&response::error_response(failure_status(err)))
                .await?
        }
    }
    stream.flush().await
}

fn failure_status(err: &io::Error) -> u16 {
    if err.kind() == io::ErrorKind::TimedOut {
        504
    } else {
        502
    }
}

/// Bounds one I/O step by [`IO_IDLE`].
async fn idle<T>(fut: impl Future<Output = io::Result<T>>) -> io::Result<T> {
    match tokio::time::timeout(IO_IDLE, fut).await {
        Ok(result) => result,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "http proxy: connection idle",
        )),
    }
}

/// The client side: split so the request body and the response can flow at once, with
/// the bytes read ahead of the current request (pipelined requests, body prefixes).
struct Client<S> {
    reader: ReadHalf<S>,
    writer: WriteHalf<S>,
    pending: Vec<u8>,
}

impl<S: ProxyStream> Client<S> {
    /// Reads the next request head. `Ok(None)` is a clean close between requests. A
    /// malformed head is answered (400/431) before the error returns. On success the head
    /// has been removed from `pending`.
    async fn read_request(&mut self, allow_transparent: bool) -> io::Result<Option<ProxyRequest>> {
        let mut chunk = [0u8; HEAD_READ];
        // Pipelined bytes may already hold a whole head.
        let mut try_parse = !self.pending.is_empty();
        loop {
            if try_parse {
                match parse_request(&self.pending, allow_transparent) {
                    Ok(Parse::Complete(req)) => {
                        self.pending.drain(..req.head_len);
                        return Ok(Some(req));
                    }
                    Ok(Parse::Incomplete) => {}
                    Err(err) => {
                        tracing::debug!(%err, "bad http request");
                        self.answer(err.status()).await;
                        return Err(err.into());
                    }
                }
            }
            let room = MAX_HEAD_LEN
                .saturating_sub(self.pending.len())
                .clamp(1, HEAD_READ);
            let n = self.reader.read(&mut chunk[..room]).await?;
            if n == 0 {
                return if self.pending.is_empty() {
                    Ok(None)
                } else {
                    Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "closed inside a request head",
                    ))
                };
            }
            self.pending.extend_from_slice(&chunk[..n]);
            // A head ends in LF, so re-parse only when one arrived (or the limit is hit):
            // a client trickling bytes cannot make us rescan the buffer for every byte.
            try_parse = chunk[..n].contains(&b'\n') || self.pending.len() >= MAX_HEAD_LEN;
        }
    }

    /// Best-effort error answer; the connection is closed right after, so failures to
    /// write it do not matter.
    ///
    /// Then a short lingering close: what the client already sent is read and discarded,
    /// because closing a socket with unread input makes the kernel send a reset, which can
    /// destroy the answer before the client reads it. Bounded in time and bytes.
    async fn answer(&mut self, status: u16) {
        let bytes = response::error_response(status);
        let _ = tokio::time::timeout(Duration::from_secs(5), async {
            self.writer.write_all(&bytes).await?;
            self.writer.shutdown().await
        })
        .await;
        let _ = tokio::time::timeout(LINGER, async {
            let mut sink = [0u8; HEAD_READ];
            let mut discarded = 0;
            while discarded < LINGER_BYTES {
                match self.reader.read(&mut sink).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => discarded += n,
                }
            }
        })
        .await;
    }

    async fn close(&mut self) {
        let _ = tokio::time::timeout(Duration::from_secs(5), self.writer.shutdown()).await;
    }
}

/// A persistent connection to one destination, with bytes read past the last response.
struct Upstream {
    destination: Address,
    reader: ReadHalf<BoxStream>,
    writer: WriteHalf<BoxStream>,
    pending: Vec<u8>,
}

impl Upstream {
    fn new(destination: Address, stream: BoxStream) -> Upstream {
        let (reader, writer) = tokio::io::split(stream);
        Upstream {
            destination,
            reader,
            writer,
            pending: Vec::new(),
        }
    }

    /// An idle keep-alive connection the origin has since closed would fail our next
    /// request; a read that would block now means nothing (no FIN, no stray bytes) arrived.
    /// Polled once with a no-op waker, so this never waits.
    fn looks_alive(&mut self) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        let mut byte = [0u8; 1];
        let mut buf = ReadBuf::new(&mut byte);
        self.pending.is_empty()
            && matches!(
                Pin::new(&mut self.reader).poll_read(&mut cx, &mut buf),
                Poll::Pending
            )
    }
}

/// How one forwarded exchange ended.
struct Outcome {
    /// The client was told the connection persists.
    client_keep_alive: bool,
    /// The upstream connection is clean and may carry the next request.
    upstream_reusable: bool,
}

/// Why one forwarded exchange failed.
struct Failure {
    err: io::Error,
    /// What to answer the client, if nothing has been sent to it for this request yet and
    /// it is still there to read it.
    status: Option<u16>,
    /// The upstream failed before taking anything from the client or giving anything
    /// back: the request can be replayed on a fresh connection.
    replayable: bool,
}

impl Failure {
    fn client(err: io::Error) -> Failure {
        Failure {
            err,
            status: None,
            replayable: false,
        }
    }

    fn upstream(err: io::Error, responded: bool) -> Failure {
        let status = (!responded).then(|| failure_status(&err));
        Failure {
            err,
            status,
            replayable: false,
        }
    }
}

/// Forwards one request and its response. Returns whether the client connection persists.
async fn forward<S: ProxyStream>(
    client: &mut Client<S>,
    upstream: &mut Option<Upstream>,
    req: &ProxyRequest,
    user: Option<&str>,
    connector: &dyn Connector,
) -> io::Result<bool> {
    let mut head = Vec::with_capacity(req.head_len + 64);
    rewrite_for_upstream(req, &mut head);
    let mut replayed = false;
    loop {
        let reusable = upstream
            .as_mut()
            .is_some_and(|up| up.destination == req.target && up.looks_alive());
        // A connection to another destination, or a dead one, is closed here, before we
        // dial the next.
        let previous = upstream.take().filter(|_| reusable);
        let (mut up, reused) = match previous {
            Some(up) => (up, true),
            None => match idle(connector.connect(&req.target, user)).await {
                Ok(stream) => (Upstream::new(req.target.clone(), stream), false),
                Err(err) => {
                    tracing::debug!(target = %req.target, %err, "http forward: connect failed");
                    client.answer(failure_status(&err)).await;
                    return Err(err);
                }
            },
        };
        match exchange(client, &mut up, req, &head).await {
            Ok(outcome) => {
                if outcome.client_keep_alive && outcome.upstream_reusable {
                    *upstream = Some(up);
                }
                return Ok(outcome.client_keep_alive);
            }
            // A reused connection the origin closed just as we sent: try once more, fresh.
            Err(failure) if failure.replayable && reused && !replayed => {
                tracing::debug!(err = %failure.err, "http forward: stale upstream, retrying");
                replayed = true;
            }
            Err(failure) => {
                if let Some(status) = failure.status {
                    client.answer(status).await;
                }
                return Err(failure.err);
            }
        }
    }
}

/// Sends the request head, then runs the request body and the response relay together.
async fn exchange<S: ProxyStream>(
    client: &mut Client<S>,
    up: &mut Upstream,
    req: &ProxyRequest,
    head: &[u8],
) -> Result<Outcome, Failure> {
    let bodiless = req.body == BodyKind::None;
    // Flushed: a bodiless request's head is all we send before waiting for the answer, and a
    // TLS stream below may hold records until flushed.
    let sent = async {
        up.writer.write_all(head).await?;
        up.writer.flush().await
    };
    if let Err(err) = idle(sent).await {
        return Err(Failure {
            replayable: bodiless,
            ..Failure::upstream(err, false)
        });
    }

    let body_done = AtomicBool::new(bodiless);
    let responded = AtomicBool::new(false);
    let Client {
        reader: client_reader,
        writer: client_writer,
        pending: client_pending,
    } = client;
    let Upstream {
        reader: up_reader,
        writer: up_writer,
        pending: up_pending,
        ..
    } = up;
    let send = send_body(
        client_reader,
        client_pending,
        up_writer,
        req.body,
        &body_done,
    );
    let recv = relay_response(
        up_reader,
        up_pending,
        client_writer,
        req,
        &body_done,
        &responded,
    );
    tokio::pin!(send, recv);

    let mut sending = !bodiless;
    loop {
        tokio::select! {
            sent = &mut send, if sending => {
                sending = false;
                match sent {
                    Ok(()) => {}
                    // The origin stopped reading (it may have answered early): stop sending
                    // but still relay its response; the connections close afterwards.
                    Err(SendError::Upstream(err)) => {
                        tracing::debug!(%err, "http forward: upstream stopped taking the body");
                    }
                    Err(SendError::Client(mut failure)) => {
                        // An answer cannot follow a response that has already begun.
                        if responded.load(Ordering::Acquire) {
                            failure.status = None;
                        }
                        return Err(failure);
                    }
                }
            }
            result = &mut recv => {
                let mut outcome = result?;
                // A body the origin did not wait for leaves both streams mid-message.
                if !body_done.load(Ordering::Acquire) {
                    outcome.client_keep_alive = false;
                    outcome.upstream_reusable = false;
                }
                return Ok(outcome);
            }
        }
    }
}

enum SendError {
    /// Reading the body from the client failed: the exchange is over.
    Client(Failure),
    /// Writing it upstream failed.
    Upstream(io::Error),
}

/// Copies the request body from the client to the origin, exactly as framed; bytes past
/// its end stay in `pending` for the next request.
async fn send_body<R, W>(
    reader: &mut R,
    pending: &mut Vec<u8>,
    writer: &mut W,
    kind: BodyKind,
    done: &AtomicBool,
) -> Result<(), SendError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut framer = BodyFramer::new(kind);
    let bad_body = |err: BodyError| {
        let status = (err != BodyError::Truncated).then_some(400);
        SendError::Client(Failure {
            err: err.into(),
            status,
            replayable: false,
        })
    };
    if !pending.is_empty() && !framer.is_complete() {
        let n = framer.feed(pending).map_err(bad_body)?;
        idle(writer.write_all(&pending[..n]))
            .await
            .map_err(SendError::Upstream)?;
        pending.drain(..n);
    }
    if !framer.is_complete() {
        let mut chunk = vec![0u8; COPY_CHUNK];
        while !framer.is_complete() {
            let read = idle(reader.read(&mut chunk)).await;
            let read = read.map_err(|err| SendError::Client(Failure::client(err)))?;
            if read == 0 {
                framer.finish_eof().map_err(bad_body)?;
                break;
            }
            let n = framer.feed(&chunk[..read]).map_err(bad_body)?;
            idle(writer.write_all(&chunk[..n]))
                .await
                .map_err(SendError::Upstream)?;
            // A pipelined next request.
            pending.extend_from_slice(&chunk[n..read]);
        }
    }
    idle(writer.flush()).await.map_err(SendError::Upstream)?;
    done.store(true, Ordering::Release);
    Ok(())
}

/// Reads the response (after any interim 1xx heads) from the origin and relays it to the
/// client, re-serialising the head and copying the body exactly as framed.
async fn relay_response<R, W>(
    reader: &mut R,
    pending: &mut Vec<u8>,
    writer: &mut W,
    req: &ProxyRequest,
    body_done: &AtomicBool,
    responded: &AtomicBool,
) -> Result<Outcome, Failure>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let is_head = req.method == "HEAD";
    let has_responded = || responded.load(Ordering::Acquire);
    let mut received = !pending.is_empty();
    let resp = loop {
        let resp = match read_response_head(reader, pending, is_head, &mut received).await {
            Ok(resp) => resp,
            Err(err) => {
                // Nothing at all came back on a request that sent no body: replayable.
                let replayable = !received && !has_responded() && req.body == BodyKind::None;
                return Err(Failure {
                    replayable,
                    ..Failure::upstream(err, has_responded())
                });
            }
        };
        if resp.status == 101 {
            // We never forward Upgrade, so a switch is a protocol error by the origin.
            let err = io::Error::new(io::ErrorKind::InvalidData, "unrequested protocol switch");
            return Err(Failure::upstream(err, has_responded()));
        }
        if !resp.is_interim() {
            break resp;
        }
        // RFC 9110 §15.2: no 1xx to an HTTP/1.0 client.
        if req.version >= 1 {
            let mut out = Vec::with_capacity(resp.head_len);
            response::rewrite_for_client(&resp, true, &mut out);
            responded.store(true, Ordering::Release);
            idle(writer.write_all(&out))
                .await
                .map_err(Failure::client)?;
            idle(writer.flush()).await.map_err(Failure::client)?;
        }
    };

    let client_keep_alive = req.keep_alive && resp.keep_alive && body_done.load(Ordering::Acquire);
    let mut out = Vec::with_capacity(resp.head_len + 32);
    response::rewrite_for_client(&resp, client_keep_alive, &mut out);
    responded.store(true, Ordering::Release);
    idle(writer.write_all(&out))
        .await
        .map_err(Failure::client)?;

    let mut framer = BodyFramer::new(resp.body);
    let broken = |err: BodyError| Failure::upstream(err.into(), true);
    if !pending.is_empty() && !framer.is_complete() {
        let n = framer.feed(pending).map_err(broken)?;
        idle(writer.write_all(&pending[..n]))
            .await
            .map_err(Failure::client)?;
        pending.drain(..n);
    }
    if !framer.is_complete() {
        let mut chunk = vec![0u8; COPY_CHUNK];
        while !framer.is_complete() {
            let read = idle(reader.read(&mut chunk)).await;
            let read = read.map_err(|err| Failure::upstream(err, true))?;
            if read == 0 {
                framer.finish_eof().map_err(broken)?;
                break;
            }
            let n = framer.feed(&chunk[..read]).map_err(broken)?;
            idle(writer.write_all(&chunk[..n]))
                .await
                .map_err(Failure::client)?;
            // Bytes after the response: the origin is out of step; do not reuse it.
            pending.extend_from_slice(&chunk[n..read]);
        }
    }
    idle(writer.flush()).await.map_err(Failure::client)?;
    Ok(Outcome {
        client_keep_alive,
        upstream_reusable: resp.keep_alive && pending.is_empty(),
    })
}

/// Reads until a whole response head is buffered, then takes it off `pending`.
async fn read_response_head<R: AsyncRead + Unpin>(
    reader: &mut R,
    pending: &mut Vec<u8>,
    is_head: bool,
    received: &mut bool,
) -> io::Result<response::ProxyResponse> {
    let mut chunk = [0u8; HEAD_READ];
    loop {
        if let Parse::Complete(resp) = parse_response(pending, is_head)? {
            pending.drain(..resp.head_len);
            return Ok(resp);
        }
        let room = MAX_HEAD_LEN
            .saturating_sub(pending.len())
            .clamp(1, HEAD_READ);
        let n = idle(reader.read(&mut chunk[..room])).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "upstream closed before a complete response head",
            ));
        }
        *received = true;
        pending.extend_from_slice(&chunk[..n]);
    }
}
