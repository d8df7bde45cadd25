//! `--payload tls`: the bulk data travels inside end-to-end TLS 1.3 between the bench's source
//! and sink, as in the reports that tested XTLS (Vision only engages on TLS payloads). The
//! certificate is made fresh for each run; the source trusts exactly that one.

use std::sync::Arc;

use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore, ServerConfig};

/// The name the certificate is issued for and the source asks for.
pub const SERVER_NAME: &str = "sink.bench.skiff";

#[derive(Clone, Debug)]
pub struct TlsPayload {
    pub server: Arc<ServerConfig>,
    pub client: Arc<ClientConfig>,
}

impl TlsPayload {
    pub fn new() -> Result<TlsPayload, String> {
        let certified = rcgen::generate_simple_self_signed(vec![SERVER_NAME.to_string()])
            .map_err(|e| format!("cannot make the payload certificate: {e}"))?;
        let cert = certified.cert.der().clone();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
            certified.signing_key.serialize_der(),
        ));
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let tls13: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS13];
        let server = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(tls13)
            .map_err(|e| e.to_string())?
            .with_no_client_auth()
            .with_single_cert(vec![cert.clone()], key)
            .map_err(|e| format!("payload certificate: {e}"))?;
        let mut roots = RootCertStore::empty();
        roots
            .add(cert)
            .map_err(|e| format!("payload certificate: {e}"))?;
        let client = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(tls13)
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(TlsPayload {
            server: Arc::new(server),
            client: Arc::new(client),
        })
    }

    pub fn server_name() -> ServerName<'static> {
        ServerName::try_from(SERVER_NAME)
            .unwrap_or_else(|_| ServerName::IpAddress(std::net::Ipv4Addr::LOCALHOST.into()))
    }
}
