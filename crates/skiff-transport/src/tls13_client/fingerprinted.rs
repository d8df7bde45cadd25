//! `tlsSettings.fingerprint` on an ordinary TLS client: the same browser ClientHello as
//! REALITY sends, our own TLS 1.3 handshake, and the certificate accepted as the rustls
//! client accepts it (`tls/client.rs`): by `pinnedPeerCertSha256`, or anything with
//! `allowInsecure`; in both cases CertificateVerify must be a valid signature by the leaf.
//! A server that only speaks TLS 1.2 fails the handshake with a clear error.

use std::io;

use sha2::{Digest, Sha256};
use skiff_core::BoxStream;

use super::handshake;
use crate::fingerprint::Fingerprint;

/// A fingerprinted TLS 1.3 client for one server name.
#[derive(Debug, Clone)]
pub struct FingerprintedTls {
    pub fingerprint: Fingerprint,
    pub server_name: String,
    /// Offered as configured; empty = the browser's own (h2, http/1.1), as uTLS does.
    pub alpn: Vec<String>,
    /// Empty = `allowInsecure`.
    pub pins: Vec<[u8; 32]>,
}

impl FingerprintedTls {
    pub async fn connect(&self, stream: BoxStream) -> io::Result<BoxStream> {
        let sni = (!self.server_name.is_empty()
            && self.server_name.parse::<std::net::IpAddr>().is_err())
        .then_some(self.server_name.as_str());
        let alpn = if self.alpn.is_empty() {
            crate::fingerprint::browser_alpn()
        } else {
            self.alpn.clone()
        };
        let mut session_id = [0u8; 32];
        skiff_crypto::random::fill(&mut session_id);
        let hello = self
            .fingerprint
            .client_hello(sni, &alpn, session_id)
            .ok_or_else(|| io::Error::other("TLS: no key for the ClientHello"))?;
        let established = handshake(stream, hello).await?;
        if !established.signature_valid {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "TLS: the server's CertificateVerify is not a valid signature by its certificate",
            ));
        }
        if !self.pins.is_empty() {
            let digest: [u8; 32] = Sha256::digest(&established.certificates[0]).into();
            if !self.pins.contains(&digest) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "TLS: peer certificate matches no pinnedPeerCertSha256",
                ));
            }
        }
        established.into_stream()
    }
}
