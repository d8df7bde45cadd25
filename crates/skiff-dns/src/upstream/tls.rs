//! The TLS client of DoH and DoT. Unlike outbounds (skiff-transport's client, which pins),
//! a public resolver is checked the ordinary way: its chain against the system's CA
//! certificates, plus any the caller adds (tests add their own self-signed root).

use std::sync::Arc;

use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use crate::config::Host;
use crate::error::DnsError;

/// Certificates to trust besides the system's.
#[derive(Clone, Debug, Default)]
pub struct TlsRoots {
    pub extra: Vec<CertificateDer<'static>>,
    /// Skip the system store (tests: only the given roots count).
    pub no_system: bool,
}

impl TlsRoots {
    /// A client configuration offering `alpn`. Fails when no certificate can be trusted.
    pub fn client_config(&self, alpn: &[&[u8]]) -> Result<Arc<ClientConfig>, String> {
        let mut roots = RootCertStore::empty();
        if !self.no_system {
            // Unreadable entries are skipped, as browsers do; an empty store is the error.
            let found = rustls_native_certs::load_native_certs();
            roots.add_parsable_certificates(found.certs);
        }
        roots.add_parsable_certificates(self.extra.iter().cloned());
        if roots.is_empty() {
            return Err("no CA certificates found for DNS over TLS/HTTPS".into());
        }
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Ok(Arc::new(config))
    }
}

/// The TLS handshake with `host` over `tcp`; the certificate must be valid for `host`.
pub async fn connect(
    config: &Arc<ClientConfig>,
    host: &Host,
    tcp: TcpStream,
) -> Result<TlsStream<TcpStream>, DnsError> {
    let name = match host {
        Host::Ip(ip) => ServerName::IpAddress((*ip).into()),
        Host::Name(n) => {
            ServerName::try_from(n.clone()).map_err(|_| DnsError::BadName(n.clone()))?
        }
    };
    Ok(TlsConnector::from(config.clone())
        .connect(name, tcp)
        .await?)
}
