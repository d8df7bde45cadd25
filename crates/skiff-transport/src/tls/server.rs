//! TLS server side: certificates from PEM, selection by SNI (SAN DNS names and subject CN,
//! `*.example.com` wildcards one label deep), Xray's `rejectUnknownSni`, ALPN and version
//! bounds.

use std::fmt;
use std::io;
use std::sync::Arc;

use bytes::Bytes;

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use skiff_core::{BoxStream, Prefixed, ProxyStream};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::TlsAcceptor;

use super::read_ahead::ReadAhead;
use super::records;
use super::{TlsVersion, alpn_protocols, protocol_versions, provider};

/// Server settings (Xray's `tlsSettings` on an inbound).
#[derive(Debug, Clone, Default)]
pub struct TlsServerOptions {
    /// PEM text of each certificate chain (leaf first) and its private key (PKCS#8, PKCS#1 or
    /// SEC1). The first one is the default certificate.
    pub certificates: Vec<(String, String)>,
    /// ALPN protocols in server preference order, e.g. `["h2", "http/1.1"]`; empty = no ALPN.
    pub alpn: Vec<String>,
    pub min_version: Option<TlsVersion>,
    pub max_version: Option<TlsVersion>,
    /// Xray's `rejectUnknownSni`: fail the handshake when the SNI is absent or matches no
    /// certificate, instead of falling back to the first certificate.
    pub reject_unknown_sni: bool,
}

/// What the client asked for during the handshake.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TlsSession {
    /// The server name the client sent (lower-case), if any.
    pub sni: Option<String>,
    /// The ALPN protocol negotiated, if any.
    pub alpn: Option<String>,
}

/// A TLS server configuration, cheap to share across connections.
#[derive(Clone)]
pub struct TlsServer {
    config: Arc<ServerConfig>,
}

impl fmt::Debug for TlsServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsServer").finish_non_exhaustive()
    }
}

impl TlsServer {
    /// Builds the configuration. Errors name the offending certificate, counting from 1
    /// (e.g. `certificate 2: no private key found`).
    pub fn new(options: &TlsServerOptions) -> Result<TlsServer, String> {
        if options.certificates.is_empty() {
            return Err("no certificate configured".into());
        }
        let provider = provider();
        let mut entries = Vec::with_capacity(options.certificates.len());
        for (i, (cert_pem, key_pem)) in options.certificates.iter().enumerate() {
            let n = i + 1;
            let entry = load_entry(&provider, cert_pem, key_pem)
                .map_err(|e| format!("certificate {n}: {e}"))?;
            entries.push(entry);
        }
        let versions = protocol_versions(options.min_version, options.max_version)?;
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&versions)
            .map_err(|e| format!("TLS versions: {e}"))?
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(SniResolver {
                entries,
                reject_unknown_sni: options.reject_unknown_sni,
            }));
        config.alpn_protocols = alpn_protocols(&options.alpn)?;
        // TLS 1.3 traffic keys move to our own record layer after the handshake.
        config.enable_secret_extraction = true;
        Ok(TlsServer {
            config: Arc::new(config),
        })
    }

    /// Handshake on `stream`; returns the decrypted stream and what the client asked for.
    /// Bound it with a timeout: a silent client stalls it indefinitely.
    ///
    /// A first record that is not TLS at all is answered like Go's crypto/tls (Xray's TLS)
    /// answers it, not like rustls would: see [`first_record`].
    pub async fn accept(&self, mut stream: BoxStream) -> io::Result<(BoxStream, TlsSession)> {
        let first = first_record(&mut stream).await?;
        let stream: BoxStream = Box::new(Prefixed::new(first, stream));
        let tls = TlsAcceptor::from(self.config.clone())
            .accept(ReadAhead::new(stream))
            .await?;
        // Session tickets rustls queued go out now, so the keys can move to our record layer.
        let mut tls = tls;
        tls.flush().await?;
        let conn = tls.get_ref().1;
        let session = TlsSession {
            sni: conn.server_name().map(str::to_owned),
            alpn: conn
                .alpn_protocol()
                .map(|p| String::from_utf8_lossy(p).into_owned()),
        };
        Ok((records::server_stream(tls)?, session))
    }
}

/// Go's first read of a connection: 5 header bytes plus `bytes.MinRead` (512), which Go's
/// allocator rounds up to its 576-byte size class (crypto/tls conn.go `readFromUntil`).
const GO_FIRST_READ: usize = 576;
const RECORD_HEADER_LEN: usize = 5;
/// Go's `maxCiphertext` and `maxHandshake` (crypto/tls common.go).
const GO_MAX_CIPHERTEXT: usize = 16384 + 2048;
const GO_MAX_HANDSHAKE: usize = 65536;
/// Go's fatal alerts before any version was agreed (record version TLS 1.0):
/// unexpected_message, protocol_version, record_overflow, internal_error.
const ALERT_UNEXPECTED_MESSAGE: [u8; 7] = [0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x0a];
const ALERT_PROTOCOL_VERSION: [u8; 7] = [0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x46];
const ALERT_RECORD_OVERFLOW: [u8; 7] = [0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x16];
const ALERT_INTERNAL_ERROR: [u8; 7] = [0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x50];

/// Reads the first record header the way Go's crypto/tls does (crypto/tls conn.go
/// `readRecordOrCCS`, `readHandshake`) and refuses what Go refuses there, with Go's answer
/// rather than rustls's (which would tell a prober this is not Xray):
/// * type 0x80 (an SSLv2 hello): a `protocol_version` alert;
/// * a first record that is neither handshake (22) nor alert (21), or whose version is 0x1000
///   or more (plain HTTP, random bytes…): closed without a byte;
/// * a record longer than 18 432 bytes: a `record_overflow` alert;
/// * a whole first handshake record announcing a message over 64 KiB: an `internal_error`
///   alert;
/// * a whole first alert record that is not 2 bytes, or whose level is neither warning nor
///   fatal (and that is not close_notify): an `unexpected_message` alert.
///
/// Consumes what Go's first read would consume (the close is a FIN or an RST in the same
/// cases). Returns the bytes read, for the handshake proper.
async fn first_record(stream: &mut BoxStream) -> io::Result<Bytes> {
    // Allocate only once bytes are there: silent connections stay small.
    std::future::poll_fn(|cx| stream.poll_read_ready(cx)).await?;
    let mut buf = vec![0u8; GO_FIRST_READ];
    let mut filled = 0;
    while filled < RECORD_HEADER_LEN {
        let n = stream.read(&mut buf[filled..]).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "closed inside the first TLS record header",
            ));
        }
        filled += n;
    }
    let (kind, version) = (buf[0], u16::from_be_bytes([buf[1], buf[2]]));
    let record_len = usize::from(u16::from_be_bytes([buf[3], buf[4]]));
    let refuse = |why: &'static str| io::Error::new(io::ErrorKind::InvalidData, why);
    let alert = if kind == 0x80 {
        Some((
            ALERT_PROTOCOL_VERSION,
            "unsupported SSLv2 handshake received",
        ))
    } else if (kind != 0x15 && kind != 0x16) || version >= 0x1000 {
        return Err(refuse("first record does not look like a TLS handshake"));
    } else if record_len > GO_MAX_CIPHERTEXT {
        Some((ALERT_RECORD_OVERFLOW, "oversized first record"))
    } else if kind == 0x16
        && record_len >= 4
        && filled >= RECORD_HEADER_LEN + record_len
        && u32::from_be_bytes([0, buf[6], buf[7], buf[8]]) as usize > GO_MAX_HANDSHAKE
    {
        Some((ALERT_INTERNAL_ERROR, "oversized first handshake message"))
    } else if kind == 0x15
        && filled >= RECORD_HEADER_LEN + record_len
        && (record_len != 2 || (buf[6] != 0 && !matches!(buf[5], 1 | 2)))
    {
        Some((ALERT_UNEXPECTED_MESSAGE, "malformed first alert"))
    } else {
        None
    };
    if let Some((bytes, why)) = alert {
        stream.write_all(&bytes).await?;
        stream.flush().await?;
        return Err(refuse(why));
    }
    if version >> 8 != 3 {
        // Go takes any first-record version below 0x1000; rustls only 3.x. The field means
        // nothing more to either, so rustls gets one it takes.
        buf[1..3].copy_from_slice(&[3, 1]);
    }
    Ok(Bytes::copy_from_slice(&buf[..filled]))
}

/// One configured certificate and the names it answers to.
#[derive(Debug)]
struct Entry {
    key: Arc<CertifiedKey>,
    /// Lower-case SAN DNS names plus the subject CN (exact or `*.` wildcard patterns).
    names: Vec<String>,
}

fn load_entry(
    provider: &rustls::crypto::CryptoProvider,
    cert_pem: &str,
    key_pem: &str,
) -> Result<Entry, String> {
    let chain = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("bad certificate PEM: {e}"))?;
    if chain.is_empty() {
        return Err("no certificate found in the certificate PEM".into());
    }
    let key = match PrivateKeyDer::from_pem_slice(key_pem.as_bytes()) {
        Ok(k) => k,
        Err(rustls::pki_types::pem::Error::NoItemsFound) => {
            return Err("no private key found (expected PKCS#8, PKCS#1 or SEC1 PEM)".into());
        }
        Err(e) => return Err(format!("bad private key PEM: {e}")),
    };
    let signing_key = load_key_whatever_its_label(provider, key)?;
    let names = leaf_names(&chain[0]).ok_or("leaf certificate is not valid DER X.509")?;
    let certified = CertifiedKey::new(chain, signing_key);
    match certified.keys_match() {
        Ok(()) => {}
        // Keys whose public half the provider cannot derive: nothing to compare against.
        Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => {}
        Err(_) => return Err("private key does not match the certificate".into()),
    }
    Ok(Entry {
        key: Arc::new(certified),
        names,
    })
}

/// Loads `key`; if its PEM label names a form its bytes are not in, the same bytes are tried
/// as each of the other forms, as Go's `tls.X509KeyPair` (so Xray) does: `xray tls cert`
/// writes a PKCS#8 EC key under an `RSA PRIVATE KEY` label.
fn load_key_whatever_its_label(
    provider: &rustls::crypto::CryptoProvider,
    key: PrivateKeyDer<'static>,
) -> Result<Arc<dyn rustls::sign::SigningKey>, String> {
    use rustls::pki_types::{PrivatePkcs1KeyDer, PrivatePkcs8KeyDer, PrivateSec1KeyDer};
    let first_error = match provider.key_provider.load_private_key(key.clone_key()) {
        Ok(k) => return Ok(k),
        Err(e) => e,
    };
    let der = key.secret_der().to_vec();
    let others: [PrivateKeyDer<'static>; 3] = [
        PrivatePkcs8KeyDer::from(der.clone()).into(),
        PrivateSec1KeyDer::from(der.clone()).into(),
        PrivatePkcs1KeyDer::from(der).into(),
    ];
    others
        .into_iter()
        .filter(|other| std::mem::discriminant(other) != std::mem::discriminant(&key))
        .find_map(|other| provider.key_provider.load_private_key(other).ok())
        .ok_or_else(|| format!("unusable private key: {first_error}"))
}

/// Picks the certificate for a ClientHello by SNI (rustls calls this during the handshake).
#[derive(Debug)]
struct SniResolver {
    entries: Vec<Entry>,
    reject_unknown_sni: bool,
}

impl SniResolver {
    fn select(&self, sni: Option<&str>) -> Option<&Entry> {
        let Some(sni) = sni.filter(|s| !s.is_empty()) else {
            return if self.reject_unknown_sni {
                None
            } else {
                self.entries.first()
            };
        };
        let sni = sni.trim_end_matches('.').to_ascii_lowercase();
        let found = self
            .entries
            .iter()
            .find(|e| e.names.iter().any(|pattern| name_matches(pattern, &sni)));
        match found {
            Some(e) => Some(e),
            None if self.reject_unknown_sni => None,
            None => self.entries.first(),
        }
    }
}

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.select(hello.server_name()).map(|e| e.key.clone())
    }
}

/// `pattern` is a certificate name (lower-case); `*.example.com` matches exactly one label.
fn name_matches(pattern: &str, sni: &str) -> bool {
    if let Some(suffix) = pattern.strip_prefix("*.") {
        match sni.split_once('.') {
            Some((label, rest)) => !label.is_empty() && rest == suffix,
            None => false,
        }
    } else {
        pattern == sni
    }
}

// ---- Minimal DER reading: just enough to find the leaf's SAN DNS names and subject CN. ----

const TAG_SEQUENCE: u8 = 0x30;
const TAG_SET: u8 = 0x31;
const TAG_OID: u8 = 0x06;
const TAG_BOOLEAN: u8 = 0x01;
const TAG_OCTET_STRING: u8 = 0x04;
const TAG_EXPLICIT_0: u8 = 0xa0;
const TAG_EXPLICIT_3: u8 = 0xa3;
const TAG_DNS_NAME: u8 = 0x82;
const OID_SUBJECT_ALT_NAME: &[u8] = &[0x55, 0x1d, 0x11];
const OID_COMMON_NAME: &[u8] = &[0x55, 0x04, 0x03];

/// One TLV: (tag, contents, rest). Single-byte tags, definite lengths only.
fn tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let mut len = 0usize;
        for &b in &rest[..n] {
            len = (len << 8) | usize::from(b);
        }
        rest = &rest[n..];
        len
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

fn expect(input: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    match tlv(input)? {
        (t, body, rest) if t == tag => Some((body, rest)),
        _ => None,
    }
}

/// Lower-case SAN DNS names and subject CN of a DER certificate; None if it does not parse.
fn leaf_names(cert: &[u8]) -> Option<Vec<String>> {
    let (certificate, _) = expect(cert, TAG_SEQUENCE)?;
    let (mut tbs, _) = expect(certificate, TAG_SEQUENCE)?;
    if let Some((TAG_EXPLICIT_0, _, rest)) = tlv(tbs) {
        tbs = rest; // version
    }
    // serialNumber, signature, issuer, validity.
    for _ in 0..4 {
        tbs = tlv(tbs)?.2;
    }
    let (subject, mut rest) = expect(tbs, TAG_SEQUENCE)?;
    rest = tlv(rest)?.2; // subjectPublicKeyInfo
    let mut names = Vec::new();
    // Optional issuerUniqueID [1], subjectUniqueID [2], then extensions [3].
    while let Some((tag, body, next)) = tlv(rest) {
        if tag == TAG_EXPLICIT_3 {
            collect_san_dns(body, &mut names)?;
        }
        rest = next;
    }
    collect_common_names(subject, &mut names)?;
    Some(names)
}

fn collect_san_dns(extensions: &[u8], names: &mut Vec<String>) -> Option<()> {
    let (mut list, _) = expect(extensions, TAG_SEQUENCE)?;
    while !list.is_empty() {
        let (ext, next) = expect(list, TAG_SEQUENCE)?;
        list = next;
        let (oid, mut ext) = expect(ext, TAG_OID)?;
        if oid != OID_SUBJECT_ALT_NAME {
            continue;
        }
        if let Some((TAG_BOOLEAN, _, rest)) = tlv(ext) {
            ext = rest; // critical
        }
        let (value, _) = expect(ext, TAG_OCTET_STRING)?;
        let (mut general_names, _) = expect(value, TAG_SEQUENCE)?;
        while !general_names.is_empty() {
            let (tag, body, next) = tlv(general_names)?;
            general_names = next;
            if tag == TAG_DNS_NAME
                && let Ok(name) = std::str::from_utf8(body)
            {
                names.push(name.trim_end_matches('.').to_ascii_lowercase());
            }
        }
    }
    Some(())
}

fn collect_common_names(mut subject: &[u8], names: &mut Vec<String>) -> Option<()> {
    while !subject.is_empty() {
        let (mut set, next) = expect(subject, TAG_SET)?;
        subject = next;
        while !set.is_empty() {
            let (attribute, next) = expect(set, TAG_SEQUENCE)?;
            set = next;
            let (oid, value) = expect(attribute, TAG_OID)?;
            if oid == OID_COMMON_NAME {
                // UTF8String, PrintableString, IA5String…: take the bytes if they are text.
                let (_, body, _) = tlv(value)?;
                if let Ok(name) = std::str::from_utf8(body) {
                    names.push(name.trim_end_matches('.').to_ascii_lowercase());
                }
            }
        }
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::{leaf_names, load_entry, name_matches};

    /// `xray tls cert` writes its PKCS#8 EC key under an `RSA PRIVATE KEY` label; Xray reads
    /// it, and so must we.
    #[test]
    fn a_key_under_the_wrong_pem_label_still_loads() {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["mislabelled.test".into()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let pkcs8 = key.serialize_pem();
        assert!(pkcs8.starts_with("-----BEGIN PRIVATE KEY-----"));
        let mislabelled = pkcs8.replace("PRIVATE KEY-----", "RSA PRIVATE KEY-----");
        let provider = super::provider();
        for key_pem in [&pkcs8, &mislabelled] {
            let entry = load_entry(&provider, &cert.pem(), key_pem);
            assert!(entry.is_ok(), "{key_pem}: {:?}", entry.err());
        }
        // Bytes that are no key under any label still fail, with the first reason.
        let garbage = "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n";
        let err = load_entry(&provider, &cert.pem(), garbage).err().unwrap();
        assert!(err.starts_with("unusable private key"), "{err}");
    }

    #[test]
    fn wildcard_is_one_label_deep() {
        assert!(name_matches("example.com", "example.com"));
        assert!(name_matches("*.example.com", "a.example.com"));
        assert!(!name_matches("*.example.com", "example.com"));
        assert!(!name_matches("*.example.com", "a.b.example.com"));
        assert!(!name_matches("*.example.com", ".example.com"));
        assert!(!name_matches("a.example.com", "b.example.com"));
    }

    #[test]
    fn leaf_names_reads_san_and_common_name() {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params =
            rcgen::CertificateParams::new(vec!["San.Test".into(), "*.w.test".into()]).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "cn.test");
        let cert = params.self_signed(&key).unwrap();
        let der = cert.der().as_ref();
        assert_eq!(
            leaf_names(der).unwrap(),
            ["san.test", "*.w.test", "cn.test"]
        );
        // Truncated or corrupted input: None or some names, never a panic.
        for len in 0..der.len() {
            let _ = leaf_names(&der[..len]);
        }
        let mut flipped = der.to_vec();
        for i in 0..flipped.len() {
            flipped[i] ^= 0xff;
            let _ = leaf_names(&flipped);
            flipped[i] ^= 0xff;
        }
    }
}
