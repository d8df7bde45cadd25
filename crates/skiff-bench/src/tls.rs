//! `--payload tls`: the bulk data travels inside end-to-end TLS 1.3 between the bench's source
//! and sink, as in the reports that tested XTLS (Vision only engages on TLS payloads). The
//! certificate is made fresh for each run; the source trusts exactly that one.
//! `--payload tls:SIZE` caps the payload's records at SIZE bytes of plaintext (rustls'
//! `max_fragment_size` at both ends), for the reports' record-size sweep: Vision and the TLS
//! layers below it see records of that size.

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

/// Smallest and largest `--payload tls:SIZE`: TLS 1.3 allows 2^14 bytes of plaintext.
const RECORD_SIZES: std::ops::RangeInclusive<usize> = 512..=16384;

/// `--payload`: `raw` (None), `tls`, or `tls:SIZE` (`1k`, `4096`, `16k`…).
pub fn parse_payload(text: &str) -> Result<Option<TlsPayload>, String> {
    let bad = || format!("--payload `{text}`: expected raw, tls, or tls:SIZE (e.g. tls:4k)");
    match text.split_once(':') {
        None if text == "raw" => Ok(None),
        None if text == "tls" => TlsPayload::with_records(None).map(Some),
        Some(("tls", size)) => {
            let size = size.trim().to_ascii_lowercase();
            let (digits, scale) = match size.strip_suffix('k') {
                Some(d) => (d, 1024),
                None => (size.as_str(), 1),
            };
            let n = digits.parse::<usize>().map_err(|_| bad())? * scale;
            if !RECORD_SIZES.contains(&n) {
                return Err(format!(
                    "--payload `{text}`: the record size must be {} to {} bytes",
                    RECORD_SIZES.start(),
                    RECORD_SIZES.end()
                ));
            }
            TlsPayload::with_records(Some(n)).map(Some)
        }
        _ => Err(bad()),
    }
}

impl TlsPayload {
    pub fn new() -> Result<TlsPayload, String> {
        Self::with_records(None)
    }

    /// `record`: the most plaintext per record (None: TLS's 16 KiB).
    pub fn with_records(record: Option<usize>) -> Result<TlsPayload, String> {
        let certified = rcgen::generate_simple_self_signed(vec![SERVER_NAME.to_string()])
            .map_err(|e| format!("cannot make the payload certificate: {e}"))?;
        let cert = certified.cert.der().clone();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
            certified.signing_key.serialize_der(),
        ));
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let tls13: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS13];
        let mut server = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(tls13)
            .map_err(|e| e.to_string())?
            .with_no_client_auth()
            .with_single_cert(vec![cert.clone()], key)
            .map_err(|e| format!("payload certificate: {e}"))?;
        let mut roots = RootCertStore::empty();
        roots
            .add(cert)
            .map_err(|e| format!("payload certificate: {e}"))?;
        let mut client = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(tls13)
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        // rustls counts the record's 5-byte header in its limit.
        let fragment = record.map(|n| n + 5);
        server.max_fragment_size = fragment;
        client.max_fragment_size = fragment;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_kinds_and_record_sizes() {
        assert!(parse_payload("raw").unwrap().is_none());
        let plain = parse_payload("tls").unwrap().unwrap();
        assert_eq!(plain.client.max_fragment_size, None);
        for (text, record) in [("tls:1k", 1024), ("tls:4096", 4096), ("tls:16K", 16384)] {
            let p = parse_payload(text).unwrap().unwrap();
            assert_eq!(p.client.max_fragment_size, Some(record + 5), "{text}");
            assert_eq!(p.server.max_fragment_size, Some(record + 5), "{text}");
        }
        for bad in ["tls:", "tls:17k", "tls:100", "tls:x", "quic", "raw:1k"] {
            assert!(parse_payload(bad).is_err(), "{bad}");
        }
    }
}
