//! TLS client side. There is no system root store yet, so a certificate is accepted only by
//! pin (`pinnedPeerCertSha256`: SHA-256 of the leaf certificate's DER) or not checked at all
//! (`allowInsecure`); [`TlsClient::new`] refuses options that set neither. In both cases the
//! handshake signature is still verified against the presented leaf's public key, so a pin
//! proves the server holds that certificate's private key.

use std::fmt;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{WebPkiSupportedAlgorithms, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};
use sha2::{Digest, Sha256};
use skiff_core::BoxStream;

use super::read_ahead::ReadAhead;
use tokio_rustls::TlsConnector;

use super::records;
use super::{TlsVersion, alpn_protocols, protocol_versions, provider};

/// Client settings (Xray's `tlsSettings` on an outbound).
#[derive(Debug, Clone, Default)]
pub struct TlsClientOptions {
    /// Sent as SNI (unless an IP literal, which TLS never sends) and used for session lookup.
    pub server_name: String,
    /// ALPN protocols to offer; empty = no ALPN.
    pub alpn: Vec<String>,
    /// Xray's `allowInsecure`: accept any certificate (ignored when pins are set: pins win).
    pub allow_insecure: bool,
    /// Xray's `pinnedPeerCertSha256`: accept a chain whose leaf certificate's SHA-256 (of the
    /// DER) is one of these, regardless of CA. When non-empty, the leaf *must* match.
    pub pinned_sha256: Vec<[u8; 32]>,
    pub min_version: Option<TlsVersion>,
    pub max_version: Option<TlsVersion>,
    /// Xray's `fingerprint`: send this browser's ClientHello through our own TLS 1.3
    /// handshake (`tls13_client/fingerprinted.rs`) instead of rustls'.
    pub fingerprint: Option<crate::fingerprint::Fingerprint>,
}

/// A TLS client configuration for one server name, cheap to share across connections.
#[derive(Clone)]
pub struct TlsClient {
    config: Arc<ClientConfig>,
    server_name: ServerName<'static>,
    fingerprinted: Option<Arc<crate::tls13_client::fingerprinted::FingerprintedTls>>,
}

impl fmt::Debug for TlsClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsClient")
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

impl TlsClient {
    /// Builds the configuration. Requires `allow_insecure` or at least one pin (no system
    /// root store yet).
    pub fn new(options: &TlsClientOptions) -> Result<TlsClient, String> {
        if !options.allow_insecure && options.pinned_sha256.is_empty() {
            return Err(
                "set allowInsecure or pinnedPeerCertSha256 (no system root store yet)".into(),
            );
        }
        let server_name = ServerName::try_from(options.server_name.clone())
            .map_err(|_| format!("invalid server name {:?}", options.server_name))?;
        let provider = provider();
        let verifier = PinVerifier {
            pins: options.pinned_sha256.clone(),
            algorithms: provider.signature_verification_algorithms,
        };
        let versions = protocol_versions(options.min_version, options.max_version)?;
        let mut config = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&versions)
            .map_err(|e| format!("TLS versions: {e}"))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth();
        config.alpn_protocols = alpn_protocols(&options.alpn)?;
        // TLS 1.3 traffic keys move to our own record layer after the handshake.
        config.enable_secret_extraction = true;
        let fingerprinted = match options.fingerprint {
            Some(_) if options.max_version == Some(TlsVersion::V1_2) => {
                return Err("a TLS fingerprint needs TLS 1.3 (maxVersion is 1.2)".into());
            }
            Some(fingerprint) => Some(Arc::new(
                crate::tls13_client::fingerprinted::FingerprintedTls {
                    fingerprint,
                    server_name: options.server_name.clone(),
                    alpn: options.alpn.clone(),
                    pins: options.pinned_sha256.clone(),
                },
            )),
            None => None,
        };
        Ok(TlsClient {
            config: Arc::new(config),
            server_name,
            fingerprinted,
        })
    }

    /// Handshake on `stream`; returns the decrypted stream. Bound it with a timeout.
    pub async fn connect(&self, stream: BoxStream) -> std::io::Result<BoxStream> {
        if let Some(fingerprinted) = &self.fingerprinted {
            return fingerprinted.connect(stream).await;
        }
        let tls = TlsConnector::from(self.config.clone())
            .connect(self.server_name.clone(), ReadAhead::new(stream))
            .await?;
        records::client_stream(tls)
    }
}

/// Accepts the leaf by pin, or anything when no pins are set (`allowInsecure`).
#[derive(Debug)]
struct PinVerifier {
    pins: Vec<[u8; 32]>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for PinVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if self.pins.is_empty() {
            return Ok(ServerCertVerified::assertion());
        }
        let digest: [u8; 32] = Sha256::digest(end_entity.as_ref()).into();
        if self.pins.contains(&digest) {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General(
                "peer certificate matches no pinnedPeerCertSha256".into(),
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}
