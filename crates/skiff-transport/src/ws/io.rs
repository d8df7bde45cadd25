//! Async WebSocket handshakes: [`accept`] (server) and [`connect`] (client).

use std::future::poll_fn;
use std::io;

use bytes::Bytes;
use skiff_core::{BoxStream, Prefixed};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::early_data::{ClientEarlyData, EarlyDataCarrier, split_xray_ed};
use super::handshake::{
    MAX_HEAD_LEN, ServerOptions, ServerRequest, parse_request, refuse_malformed, refuse_request,
};
use super::stream::{DeferredRequest, WsStream};
use crate::Parsed;

/// Server configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WsServerOptions {
    /// Configured path (normalised; an `ed` query parameter is ignored).
    pub path: String,
    /// If set, the request `Host` must match.
    pub host: Option<String>,
    /// Where early data is read from. `None`: Xray's `Sec-WebSocket-Protocol`; `Some("")`:
    /// v2fly's URL-path suffix (the path then matches by prefix); `Some(name)`: that header.
    pub early_data_header: Option<String>,
}

/// Outcome of [`accept`].
pub enum WsAccepted {
    /// Upgraded: reads yield early data first, then the client's frames' payload.
    Upgraded { stream: BoxStream, path: String },
    /// Not a WebSocket request for us (plain HTTP, wrong path, malformed or oversized head,
    /// EOF inside the head): `stream` replays every byte read so far, so a fallback can take
    /// the connection; `path` is the request target if a request head was parsed.
    NotWebSocket {
        stream: BoxStream,
        path: Option<String>,
    },
}

impl std::fmt::Debug for WsAccepted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WsAccepted::Upgraded { path, .. } => {
                f.debug_struct("Upgraded").field("path", path).finish()
            }
            WsAccepted::NotWebSocket { path, .. } => {
                f.debug_struct("NotWebSocket").field("path", path).finish()
            }
        }
    }
}

fn carrier(header: Option<&str>) -> EarlyDataCarrier {
    match header {
        None => EarlyDataCarrier::xray(),
        Some("") => EarlyDataCarrier::PathSuffix,
        Some(name) => EarlyDataCarrier::Header(name.to_owned()),
    }
}

fn server_options(options: &WsServerOptions) -> ServerOptions {
    ServerOptions {
        path: split_xray_ed(&options.path).0,
        host: options.host.clone(),
        early_data: Some(carrier(options.early_data_header.as_deref())),
    }
}

/// Answers a connection whose first request [`accept`] did not upgrade (`stream` replays it)
/// as Xray's listener does: a 404 or 400 per request while the client keeps the connection
/// alive, Go's plain 400 and a close for bytes that are not HTTP. Returns when either side
/// ends it; the caller's handshake timeout bounds the whole exchange. A later request that
/// would upgrade is not served (Xray would): no client sends one after a refusal.
pub async fn refuse(mut stream: BoxStream, options: &WsServerOptions) -> io::Result<()> {
    let opts = server_options(options);
    let mut buf: Vec<u8> = Vec::new();
    let mut skip: u64 = 0;
    loop {
        if skip > 0 {
            let drop_now = (skip as usize).min(buf.len());
            buf.drain(..drop_now);
            skip -= drop_now as u64;
        }
        if skip == 0 && !buf.is_empty() {
            let refusal = match parse_request(&buf, &opts) {
                Ok(Parsed::Complete(ServerRequest::NotWebSocket { request, .. }, n)) => {
                    buf.drain(..n);
                    Some(refuse_request(
                        &request,
                        &opts,
                        std::time::SystemTime::now(),
                    ))
                }
                Ok(Parsed::Complete(ServerRequest::Upgrade(_), _)) => return Ok(()),
                Ok(Parsed::Incomplete) => None,
                Err(_) => Some(refuse_malformed()),
            };
            if let Some(refusal) = refusal {
                stream.write_all(&refusal.response).await?;
                stream.flush().await?;
                if refusal.close {
                    return stream.shutdown().await;
                }
                skip = refusal.body;
                continue;
            }
        }
        let old = buf.len();
        buf.resize(old + 4096, 0);
        let n = stream.read(&mut buf[old..]).await?;
        buf.truncate(old + n);
        if n == 0 {
            return Ok(());
        }
    }
}

/// Reads the upgrade request (head ≤ 16 KiB) and answers 101, or hands the connection back.
/// An EOF before any byte is an `UnexpectedEof` error. The caller applies timeouts.
pub async fn accept(mut stream: BoxStream, options: &WsServerOptions) -> io::Result<WsAccepted> {
    let opts = server_options(options);
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    loop {
        let not_ws = |buf: Vec<u8>, stream: BoxStream, path| {
            Ok(WsAccepted::NotWebSocket {
                stream: Box::new(Prefixed::new(Bytes::from(buf), stream)),
                path,
            })
        };
        match parse_request(&buf, &opts) {
            Ok(Parsed::Complete(ServerRequest::Upgrade(up), n)) => {
                stream.write_all(&up.response()).await?;
                stream.flush().await?;
                let path = up.request.target;
                let ws = WsStream::server(stream, buf, n, Bytes::from(up.early_data));
                return Ok(WsAccepted::Upgraded {
                    stream: Box::new(ws),
                    path,
                });
            }
            Ok(Parsed::Complete(ServerRequest::NotWebSocket { request, .. }, _)) => {
                return not_ws(buf, stream, Some(request.target));
            }
            Ok(Parsed::Incomplete) => {}
            Err(_) => return not_ws(buf, stream, None),
        }
        let old = buf.len();
        let want = (MAX_HEAD_LEN - old).min(4096);
        buf.resize(old + want, 0);
        let n = match stream.read(&mut buf[old..]).await {
            Ok(n) => n,
            Err(e) => return Err(e),
        };
        buf.truncate(old + n);
        if n == 0 {
            if old == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            return not_ws(buf, stream, None);
        }
    }
}

/// Client configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WsClientOptions {
    /// Request path; may carry `?ed=N` (removed from the request, enables early data).
    pub path: String,
    /// `Host` header.
    pub host: String,
    /// Extra headers (handshake headers among them are ignored).
    pub headers: Vec<(String, String)>,
    /// With `?ed=N`: `None` = Xray (`Sec-WebSocket-Protocol`, a first write > N bytes goes in
    /// frames); `Some("")` = v2fly path suffix, `Some(name)` = v2fly header (first N bytes
    /// early, the rest in frames).
    pub early_data_header: Option<String>,
}

/// Client side. With early data configured (`?ed=N`), the HTTP handshake is deferred until the
/// first write (up to N bytes of it ride in the handshake) or the first flush/shutdown, as Xray
/// does; reads wait for that. Without it the handshake completes before this returns.
pub async fn connect(stream: BoxStream, options: &WsClientOptions) -> io::Result<BoxStream> {
    let (path, ed) = split_xray_ed(&options.path);
    let early = ed.map(|n| match options.early_data_header.as_deref() {
        None => ClientEarlyData::xray(n),
        Some(name) => ClientEarlyData::v2fly(n, name),
    });
    let request = DeferredRequest {
        path,
        host: options.host.clone(),
        headers: options.headers.clone(),
        early,
    };
    // Report unusable options now rather than on the first write.
    request
        .build(&[], &mut Vec::new())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
    let deferred = request.early.is_some();
    let mut ws = WsStream::client(stream, request);
    if !deferred {
        ws.start_handshake(&[])?;
        poll_fn(|cx| ws.poll_handshake(cx, 1)).await?;
    }
    Ok(Box::new(ws))
}
