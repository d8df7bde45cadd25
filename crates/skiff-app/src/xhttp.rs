//! `xhttpSettings` → skiff-transport's XHTTP options, and the outbound's dialer. A module of
//! its own because XHTTP is not a layer: its client dials HTTP connections itself.

use std::sync::Arc;

use skiff_config::{StreamSecurity, XhttpMode, XhttpPlan};
use skiff_core::Dialer;
use skiff_transport::tls::TlsClientOptions;
use skiff_transport::xhttp::{Mode, Range, XhttpDialer, XhttpOptions, Xmux};

fn range((from, to): (u32, u32)) -> Range {
    Range { from, to }
}

pub fn options(x: &XhttpPlan) -> XhttpOptions {
    XhttpOptions {
        path: x.path.clone(),
        host: x.host.clone(),
        mode: match x.mode {
            XhttpMode::Auto => Mode::Auto,
            XhttpMode::PacketUp => Mode::PacketUp,
            XhttpMode::StreamUp => Mode::StreamUp,
            XhttpMode::StreamOne => Mode::StreamOne,
        },
        headers: x.headers.clone(),
        x_padding_bytes: range(x.x_padding_bytes),
        no_grpc_header: x.no_grpc_header,
        no_sse_header: x.no_sse_header,
        sc_max_each_post_bytes: range(x.sc_max_each_post_bytes),
        sc_min_posts_interval_ms: range(x.sc_min_posts_interval_ms),
        sc_max_buffered_posts: x.sc_max_buffered_posts,
        sc_stream_up_server_secs: range(x.sc_stream_up_server_secs),
        xmux: Xmux {
            max_concurrency: range(x.xmux.max_concurrency),
            max_connections: range(x.xmux.max_connections),
            c_max_reuse_times: range(x.xmux.c_max_reuse_times),
            h_max_request_times: range(x.xmux.h_max_request_times),
            h_max_reusable_secs: range(x.xmux.h_max_reusable_secs),
        },
    }
}

/// Xray's TLS client offers `h2, http/1.1` when no ALPN is configured; XHTTP needs it to
/// reach HTTP/2.
pub fn client_alpn(options: &mut TlsClientOptions) {
    if options.alpn.is_empty() {
        options.alpn = vec!["h2".into(), "http/1.1".into()];
    }
}

/// The outbound's dialer: HTTP/1.1 without TLS or with ALPN exactly `http/1.1`, HTTP/2
/// otherwise (Xray's `decideHTTPVersion`). The `Host` is `host`, else the TLS server name,
/// else the server's address (`server_name` is already that fallback). `auto` is decided
/// here as Xray's client decides it: packet-up, but stream-one under REALITY (stream-up
/// when the downloads go elsewhere).
pub fn dialer(
    x: &XhttpPlan,
    lower: Arc<dyn Dialer>,
    security: &StreamSecurity,
    server_name: &str,
) -> XhttpDialer {
    let mut options = options(x);
    if options.mode == Mode::Auto {
        options.mode = match (security, &x.download) {
            (StreamSecurity::Reality(_), None) => Mode::StreamOne,
            (StreamSecurity::Reality(_), Some(_)) => Mode::StreamUp,
            _ => Mode::PacketUp,
        };
    }
    let (tls, http2) = match security {
        StreamSecurity::Tls(t) => (true, !(t.alpn.len() == 1 && t.alpn[0] == "http/1.1")),
        StreamSecurity::None => (false, false),
        // Xray's `decideHTTPVersion`: REALITY always carries HTTP/2.
        StreamSecurity::Reality(_) => (true, true),
    };
    let host = x.host.clone().unwrap_or_else(|| server_name.to_owned());
    XhttpDialer::new(lower, options, host, tls, http2)
}
