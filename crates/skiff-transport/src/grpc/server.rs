//! The server side: HTTP/2 connections (after TLS, or h2c behind nginx's `grpc_pass`) whose
//! calls to the service's two paths are tunnels. Any other request gets the answer gRPC-go
//! (Xray's server) gives it, so a probe learns nothing gRPC-go would not tell it.

use std::io;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use bytes::Bytes;
use h2::server::SendResponse;
use http::{HeaderValue, Method, Request, Response, StatusCode};
use skiff_core::{BoxFuture, BoxStream, LayerSession, MultiplexServer, TunnelSink};

use super::keepalive::{Keepalive, run_pings};
use super::names::ServicePaths;
use super::stream::GrpcStream;
use super::{Windows, h2_io_error};

/// Calls open at once on one connection; more wait (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS).
pub const MAX_CALLS_PER_CONNECTION: u32 = 1024;

/// How long a connection may take to send HTTP/2's preface and SETTINGS.
const PREFACE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

pub struct GrpcServer {
    paths: ServicePaths,
    windows: Windows,
    keepalive: Option<Keepalive>,
}

impl GrpcServer {
    pub fn new(service_name: &str, windows: Windows, keepalive: Option<Keepalive>) -> Self {
        GrpcServer {
            paths: ServicePaths::new(service_name),
            windows,
            keepalive,
        }
    }

    /// Answers one request: a tunnel for the service's paths, gRPC-go's refusal otherwise.
    fn route(
        &self,
        request: Request<h2::RecvStream>,
        mut respond: SendResponse<Bytes>,
        session: &LayerSession,
        tunnels: &TunnelSink,
        held: &Arc<AtomicUsize>,
    ) {
        let (parts, body) = request.into_parts();
        let path = parts.uri.path();
        let content_type = parts
            .headers
            .get(http::header::CONTENT_TYPE)
            .map(HeaderValue::as_bytes)
            .unwrap_or(b"");
        let ours = path == self.paths.tun || path == self.paths.tun_multi;
        let refusal = refusal(&parts.method, content_type, path, ours, &self.paths.tun);
        if let Some((status, code, message)) = refusal {
            let mut response = Response::builder()
                .status(status)
                .header(http::header::CONTENT_TYPE, "application/grpc")
                .header("grpc-status", code)
                .body(())
                .expect("static response parts");
            if let Ok(value) = HeaderValue::from_str(&percent_encode(&message)) {
                response.headers_mut().insert("grpc-message", value);
            }
            let _ = respond.send_response(response, true);
            return;
        }
        // The multi path first: a custom path without "|" names both, and gRPC-go keeps the
        // last stream registered under a name, TunMulti.
        let multi = path == self.paths.tun_multi;
        let response = Response::builder()
            .status(StatusCode::OK)
            .header(http::header::CONTENT_TYPE, "application/grpc")
            .body(())
            .expect("static response parts");
        match respond.send_response(response, false) {
            Ok(send) => tunnels(
                Box::new(GrpcStream::server(body, send, multi, held.clone())),
                session.clone(),
            ),
            Err(e) => tracing::debug!(error = %e, "gRPC call reset before its response"),
        }
    }
}

/// What gRPC-go answers a request it will not run (HTTP status, grpc-status, message), or
/// None for a call to one of our paths. `tun` is one of them; the other shares its service.
fn refusal(
    method: &Method,
    content_type: &[u8],
    path: &str,
    ours: bool,
    tun: &str,
) -> Option<(StatusCode, &'static str, String)> {
    let grpc_type = content_type == b"application/grpc"
        || content_type.starts_with(b"application/grpc+")
        || content_type.starts_with(b"application/grpc;");
    if !grpc_type {
        return Some((
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "3",
            format!(
                "invalid gRPC request content-type \"{}\"",
                String::from_utf8_lossy(content_type)
            ),
        ));
    }
    if method != Method::POST {
        return Some((
            StatusCode::METHOD_NOT_ALLOWED,
            "13",
            format!("received a headers frame with :method \"{method}\" which should be POST"),
        ));
    }
    if ours {
        return None;
    }
    // gRPC-go splits the method name at its last "/".
    let Some((service, method)) = path.strip_prefix('/').and_then(|p| p.rsplit_once('/')) else {
        return Some((
            StatusCode::OK,
            "12",
            format!("malformed method name: \"{path}\""),
        ));
    };
    let our_service = tun[1..].rsplit_once('/').map_or("", |(service, _)| service);
    if service != our_service {
        return Some((StatusCode::OK, "12", format!("unknown service {service}")));
    }
    Some((
        StatusCode::OK,
        "12",
        format!("unknown method {method} for service {service}"),
    ))
}

/// grpc-message's encoding: printable ASCII but "%" as is, every other byte as %XX.
fn percent_encode(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    for &b in message.as_bytes() {
        if (0x20..=0x7e).contains(&b) && b != b'%' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl MultiplexServer for GrpcServer {
    fn serve<'a>(
        &'a self,
        stream: BoxStream,
        session: LayerSession,
        tunnels: TunnelSink,
    ) -> BoxFuture<'a, io::Result<()>> {
        Box::pin(async move {
            let mut builder = h2::server::Builder::new();
            builder
                .initial_window_size(self.windows.stream)
                .initial_connection_window_size(self.windows.connection)
                .max_concurrent_streams(MAX_CALLS_PER_CONNECTION);
            let handshake = tokio::time::timeout(PREFACE_TIMEOUT, builder.handshake(stream));
            let mut connection = handshake
                .await
                .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no HTTP/2 preface"))?
                .map_err(h2_io_error)?;
            let pings = run_pings(connection.ping_pong(), self.keepalive, None);
            let held = Arc::new(AtomicUsize::new(0));
            let calls = async {
                while let Some(call) = connection.accept().await {
                    let (request, respond) = call.map_err(h2_io_error)?;
                    self.route(request, respond, &session, &tunnels, &held);
                }
                Ok(())
            };
            tokio::select! {
                done = calls => done,
                dead = pings => Err(dead),
            }
        })
    }
}
