//! TLS: a ClientHello peek for fallbacks (no cryptography), plus the TLS layer proper — a
//! [`TlsServer`] and a [`TlsClient`] on top of rustls (aws-lc-rs provider, always passed
//! explicitly; the process-default provider is never consulted). Both hand back a
//! [`BoxStream`](skiff_core::BoxStream) that implements [`ProxyStream`](skiff_core::ProxyStream).

pub mod client;
/// The peek lives in skiff-sniff (routing sniffs the same ClientHello); its old path stays.
pub use skiff_sniff::client_hello;
mod layer;
pub(crate) mod read_ahead;
pub(crate) mod records;
pub mod server;
pub mod stream;

pub use client::{TlsClient, TlsClientOptions};
pub use client_hello::{ClientHelloInfo, MAX_CLIENT_HELLO_LEN, Peek, peek_client_hello};
pub use server::{TlsServer, TlsServerOptions, TlsSession};
pub use stream::TlsProxyStream;

/// Handshakes that moved to our own record layer so far (process-wide): lets tests prove
/// which path carried their bytes.
#[doc(hidden)]
pub static RECORD_LAYER_TAKEOVERS: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(0);

use std::sync::Arc;

use rustls::SupportedProtocolVersion;
use rustls::crypto::CryptoProvider;

/// A TLS protocol version, for the `minVersion` / `maxVersion` settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TlsVersion {
    V1_2,
    V1_3,
}

/// The protocol versions between `min` and `max` (inclusive; `None` = unbounded).
pub(crate) fn protocol_versions(
    min: Option<TlsVersion>,
    max: Option<TlsVersion>,
) -> Result<Vec<&'static SupportedProtocolVersion>, String> {
    let lo = min.unwrap_or(TlsVersion::V1_2);
    let hi = max.unwrap_or(TlsVersion::V1_3);
    if lo > hi {
        return Err(format!(
            "minVersion ({lo:?}) is greater than maxVersion ({hi:?})"
        ));
    }
    let mut out = Vec::with_capacity(2);
    if lo <= TlsVersion::V1_3 && hi >= TlsVersion::V1_3 {
        out.push(&rustls::version::TLS13);
    }
    if lo <= TlsVersion::V1_2 && hi >= TlsVersion::V1_2 {
        out.push(&rustls::version::TLS12);
    }
    Ok(out)
}

/// The crypto provider every TLS config here is built with.
pub(crate) fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// ALPN strings as rustls wants them; rejects empty or over-long (>255 bytes) names.
pub(crate) fn alpn_protocols(alpn: &[String]) -> Result<Vec<Vec<u8>>, String> {
    alpn.iter()
        .map(|p| {
            if p.is_empty() || p.len() > 255 {
                Err(format!(
                    "invalid ALPN protocol {p:?} (must be 1..=255 bytes)"
                ))
            } else {
                Ok(p.as_bytes().to_vec())
            }
        })
        .collect()
}
