//! HTTP/1.1 as XHTTP uses it: request and response heads (httparse), bodies by
//! `Content-Length` or chunked, and a chunked writer for the streaming bodies.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};

use super::chunked::{ChunkedDecoder, LAST_CHUNK, encode_chunk};

/// Largest request or response head accepted (Xray's `serverMaxHeaderBytes` default is 8192;
/// the padding alone may take 1000 bytes of it).
pub const MAX_HEAD: usize = 16 * 1024;
const MAX_HEADERS: usize = 64;

/// A parsed head: request (`method`, `target`) or response (`status`), and its headers.
#[derive(Clone, Debug, Default)]
pub struct Head {
    pub method: String,
    pub target: String,
    pub status: u16,
    pub headers: Vec<(String, String)>,
}

impl Head {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// How the body that follows this head is delimited.
    pub fn body_kind(&self) -> io::Result<BodyKind> {
        if let Some(te) = self.header("transfer-encoding") {
            if te.to_ascii_lowercase().trim().ends_with("chunked") {
                return Ok(BodyKind::Chunked);
            }
            return Err(bad("unsupported transfer-encoding"));
        }
        match self.header("content-length") {
            Some(v) => v
                .trim()
                .parse()
                .map(BodyKind::Length)
                .map_err(|_| bad("bad content-length")),
            None => Ok(BodyKind::Length(0)),
        }
    }
}

/// Parses a request head from the start of `buf` (sans-IO): Some((head, length)) when the
/// head is complete.
pub fn parse_request(buf: &[u8]) -> io::Result<Option<(Head, usize)>> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => Ok(Some((
            Head {
                method: req.method.unwrap_or_default().to_owned(),
                target: req.path.unwrap_or_default().to_owned(),
                status: 0,
                headers: collect(req.headers),
            },
            n,
        ))),
        Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => Err(bad("request head too large")),
        Ok(httparse::Status::Partial) => Ok(None),
        Err(e) => Err(bad(&format!("bad request head: {e}"))),
    }
}

/// Parses a response head from the start of `buf` (sans-IO).
pub fn parse_response(buf: &[u8]) -> io::Result<Option<(Head, usize)>> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut headers);
    match resp.parse(buf) {
        Ok(httparse::Status::Complete(n)) => Ok(Some((
            Head {
                status: resp.code.unwrap_or(0),
                headers: collect(resp.headers),
                ..Head::default()
            },
            n,
        ))),
        Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => {
            Err(bad("response head too large"))
        }
        Ok(httparse::Status::Partial) => Ok(None),
        Err(e) => Err(bad(&format!("bad response head: {e}"))),
    }
}

fn collect(headers: &[httparse::Header<'_>]) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|h| {
            (
                h.name.to_owned(),
                String::from_utf8_lossy(h.value).into_owned(),
            )
        })
        .collect()
}

/// A head parser: [`parse_request`] or [`parse_response`].
pub type ParseHead = fn(&[u8]) -> io::Result<Option<(Head, usize)>>;

/// Reads from `io` into `buf` until `parse` finds a complete head; the head's bytes are
/// removed from `buf`, what follows stays. None: the peer closed before a byte of a head.
pub async fn read_head<R: AsyncRead + Unpin>(
    io: &mut R,
    buf: &mut BytesMut,
    parse: ParseHead,
) -> io::Result<Option<Head>> {
    loop {
        if !buf.is_empty()
            && let Some((head, n)) = parse(buf)?
        {
            let _ = buf.split_to(n);
            return Ok(Some(head));
        }
        buf.reserve(4096);
        if io.read_buf(buf).await? == 0 {
            return if buf.is_empty() {
                Ok(None)
            } else {
                Err(io::ErrorKind::UnexpectedEof.into())
            };
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyKind {
    Length(u64),
    Chunked,
}

/// Opens once a request body has ended (or its reader is gone): stream-one over HTTP/1.1
/// holds its response's last chunk until then. Go's HTTP/1.1 client (Xray's) closes the
/// connection when a response ends while it still sends the request, and Xray then drops
/// what it had not yet passed on of the response.
#[derive(Default)]
pub struct Gate {
    open: std::sync::atomic::AtomicBool,
    waiter: std::sync::Mutex<Option<std::task::Waker>>,
}

impl Gate {
    pub fn open(&self) {
        self.open.store(true, std::sync::atomic::Ordering::Release);
        if let Some(w) = self.waiter.lock().unwrap_or_else(|e| e.into_inner()).take() {
            w.wake();
        }
    }

    fn poll_open(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.open.load(std::sync::atomic::Ordering::Acquire) {
            return Poll::Ready(());
        }
        *self.waiter.lock().unwrap_or_else(|e| e.into_inner()) = Some(cx.waker().clone());
        if self.open.load(std::sync::atomic::Ordering::Acquire) {
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

/// A message body as a reader: bytes already buffered first, then from `io`.
pub struct Body<R> {
    io: R,
    buf: BytesMut,
    kind: BodyState,
    ended: Option<std::sync::Arc<Gate>>,
}

impl<R> Drop for Body<R> {
    fn drop(&mut self) {
        if let Some(g) = self.ended.take() {
            g.open();
        }
    }
}

enum BodyState {
    Length(u64),
    Chunked(ChunkedDecoder),
}

impl<R: AsyncRead + Unpin> Body<R> {
    pub fn new(io: R, buf: BytesMut, kind: BodyKind) -> Self {
        let kind = match kind {
            BodyKind::Length(n) => BodyState::Length(n),
            BodyKind::Chunked => BodyState::Chunked(ChunkedDecoder::new()),
        };
        Body {
            io,
            buf,
            kind,
            ended: None,
        }
    }

    /// `gate` opens when this body ends.
    pub fn with_end_gate(mut self, gate: std::sync::Arc<Gate>) -> Self {
        self.ended = Some(gate);
        self
    }

    /// The bytes read past the body (the next request's, when pipelined).
    pub fn into_buf(mut self) -> BytesMut {
        std::mem::take(&mut self.buf)
    }

    fn take(&mut self, max: usize) -> io::Result<Option<Bytes>> {
        match &mut self.kind {
            BodyState::Length(0) => Ok(Some(Bytes::new())),
            BodyState::Length(left) => {
                if self.buf.is_empty() {
                    return Ok(None);
                }
                let n = (*left).min(self.buf.len() as u64).min(max as u64) as usize;
                *left -= n as u64;
                Ok(Some(self.buf.split_to(n).freeze()))
            }
            BodyState::Chunked(d) => {
                if d.is_done() {
                    return Ok(Some(Bytes::new()));
                }
                match d.decode(&mut self.buf, max) {
                    Ok(Some(data)) => Ok(Some(data)),
                    Ok(None) if d.is_done() => Ok(Some(Bytes::new())),
                    Ok(None) => Ok(None),
                    Err(e) => Err(bad(&e.to_string())),
                }
            }
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Body<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if let Some(data) = this.take(out.remaining())? {
                if data.is_empty()
                    && let Some(g) = this.ended.take()
                {
                    g.open();
                }
                out.put_slice(&data);
                return Poll::Ready(Ok(()));
            }
            this.buf.reserve(16 * 1024);
            let n = {
                let dst = this.buf.spare_capacity_mut();
                let mut rb = ReadBuf::uninit(dst);
                ready!(Pin::new(&mut this.io).poll_read(cx, &mut rb))?;
                rb.filled().len()
            };
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::UnexpectedEof.into()));
            }
            // SAFETY: `n` bytes of the spare capacity were just initialised by the read.
            unsafe { this.buf.set_len(this.buf.len() + n) };
        }
    }
}

/// Writes a body in chunks; shutting it down sends the last chunk (once `hold`, if any, is
/// open).
pub struct ChunkedWriter<W> {
    io: W,
    out: Vec<u8>,
    ended: bool,
    hold: Option<std::sync::Arc<Gate>>,
}

impl<W: AsyncWrite + Unpin> ChunkedWriter<W> {
    /// `prefix`: bytes to send first (the response head).
    pub fn new(io: W, prefix: Vec<u8>) -> Self {
        ChunkedWriter {
            io,
            out: prefix,
            ended: false,
            hold: None,
        }
    }

    /// Holds the last chunk until `gate` opens.
    pub fn hold_end_until(mut self, gate: std::sync::Arc<Gate>) -> Self {
        self.hold = Some(gate);
        self
    }

    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while !self.out.is_empty() {
            let n = ready!(Pin::new(&mut self.io).poll_write(cx, &self.out))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.out.drain(..n);
        }
        Poll::Ready(Ok(()))
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for ChunkedWriter<W> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_drain(cx))?;
        if this.ended {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        encode_chunk(buf, &mut this.out);
        // Errors surface on the next call; the chunk is accepted.
        let _ = this.poll_drain(cx);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.ended {
            ready!(this.poll_drain(cx))?;
            if let Some(gate) = &this.hold {
                ready!(gate.poll_open(cx));
            }
            this.ended = true;
            this.out.extend_from_slice(LAST_CHUNK);
        }
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.io).poll_flush(cx)
    }
}

/// A response head: status line, `headers`, and a `Date` as Go's server adds one.
pub fn response_head(status: u16, headers: &[(&str, String)]) -> Vec<u8> {
    let mut out = format!("HTTP/1.1 {status} {}\r\n", reason(status)).into_bytes();
    for (name, value) in headers {
        out.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
    }
    out.extend_from_slice(
        format!("Date: {}\r\n", http_date(std::time::SystemTime::now())).as_bytes(),
    );
    out.extend_from_slice(b"\r\n");
    out
}

/// The reason phrases Go's net/http writes for the statuses XHTTP answers with.
fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        413 => "Request Entity Too Large",
        _ => "Internal Server Error",
    }
}

/// `Sun, 06 Nov 1994 08:49:37 GMT` (RFC 9110's IMF-fixdate).
pub fn http_date(t: std::time::SystemTime) -> String {
    let secs = t
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let weekday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][(days % 7) as usize];
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let name = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ][(month - 1) as usize];
    format!(
        "{weekday}, {day:02} {name} {year} {:02}:{:02}:{:02} GMT",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

pub fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_as_rfc_9110() {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(784_111_777);
        assert_eq!(http_date(t), "Sun, 06 Nov 1994 08:49:37 GMT");
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_709_164_800);
        assert_eq!(http_date(t), "Thu, 29 Feb 2024 00:00:00 GMT");
    }

    #[tokio::test]
    async fn body_then_pipelined_request() {
        let wire = b"POST /x/s/0 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabcGET /x/s HTTP/1.1\r\nHost: h\r\n\r\n";
        let mut io = &wire[..];
        let mut buf = BytesMut::new();
        let head = read_head(&mut io, &mut buf, parse_request)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(head.method, "POST");
        let mut body = Body::new(&mut io, std::mem::take(&mut buf), head.body_kind().unwrap());
        let mut got = Vec::new();
        let mut chunk = [0u8; 2];
        loop {
            let n = body.read(&mut chunk).await.unwrap();
            if n == 0 {
                break;
            }
            got.extend_from_slice(&chunk[..n]);
        }
        assert_eq!(got, b"abc");
        let mut buf = body.into_buf();
        let next = read_head(&mut io, &mut buf, parse_request)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (next.method.as_str(), next.target.as_str()),
            ("GET", "/x/s")
        );
    }
}
