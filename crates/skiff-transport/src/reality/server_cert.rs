//! REALITY's temporary certificate: one Ed25519 key per process, a minimal self-signed X.509
//! certificate for it, and per connection the same certificate with its signature field
//! replaced by HMAC-SHA512(auth key, Ed25519 public key). A REALITY client recomputes that
//! HMAC to know it reached the real server; to anyone else the certificate is garbage.
//!
//! The CertificateVerify is a normal Ed25519 signature over the transcript, whatever
//! signature algorithms the client offered (REALITY's server does the same: browsers'
//! fingerprints do not offer Ed25519, REALITY clients accept it anyway).

use std::sync::{Arc, OnceLock};

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::{CertifiedKey, Signer, SigningKey};
use rustls::{SignatureAlgorithm, SignatureScheme};

/// DER of the certificate without its signature's 64 bytes, which follow at the very end.
/// Fields: version 3, serial 0, Ed25519, empty issuer and subject, validity from and to the
/// year 1 (Go's zero time, as REALITY's certificate has), the public key; no extensions.
fn certificate_prefix(public: &[u8; 32]) -> Vec<u8> {
    const ED25519: [u8; 7] = [0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70];
    const YEAR_ONE: &[u8; 15] = b"00010101000000Z";
    let mut tbs = Vec::with_capacity(128);
    tbs.extend_from_slice(&[0xa0, 0x03, 0x02, 0x01, 0x02]); // [0] version v3
    tbs.extend_from_slice(&[0x02, 0x01, 0x00]); // serial 0
    tbs.extend_from_slice(&ED25519);
    tbs.extend_from_slice(&[0x30, 0x00]); // issuer
    tbs.extend_from_slice(&[0x30, 0x22, 0x18, 0x0f]);
    tbs.extend_from_slice(YEAR_ONE);
    tbs.extend_from_slice(&[0x18, 0x0f]);
    tbs.extend_from_slice(YEAR_ONE);
    tbs.extend_from_slice(&[0x30, 0x00]); // subject
    tbs.extend_from_slice(&[0x30, 0x2a]);
    tbs.extend_from_slice(&ED25519);
    tbs.extend_from_slice(&[0x03, 0x21, 0x00]);
    tbs.extend_from_slice(public);
    let mut body = vec![0x30, tbs.len() as u8];
    body.extend_from_slice(&tbs);
    body.extend_from_slice(&ED25519);
    body.extend_from_slice(&[0x03, 0x41, 0x00]); // the signature: 64 bytes follow
    let total = body.len() + 64;
    let mut cert = vec![0x30, 0x81, total as u8];
    cert.extend_from_slice(&body);
    cert
}

/// The process's Ed25519 key and certificate prefix (REALITY also makes one per process).
struct ProcessKey {
    signing: Arc<dyn SigningKey>,
    public: [u8; 32],
    prefix: Vec<u8>,
}

fn process_key() -> Result<&'static ProcessKey, String> {
    static KEY: OnceLock<Result<ProcessKey, String>> = OnceLock::new();
    KEY.get_or_init(|| {
        let key = skiff_crypto::ed25519::generate();
        let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.pkcs8.clone()));
        let signing = super::super::tls::provider()
            .key_provider
            .load_private_key(der)
            .map_err(|e| format!("REALITY's Ed25519 key: {e}"))?;
        Ok(ProcessKey {
            signing,
            prefix: certificate_prefix(&key.public),
            public: key.public,
        })
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// The temporary certificate for one connection, keyed by its REALITY auth key.
pub(crate) fn temporary_certificate(auth_key: &[u8; 32]) -> Result<Arc<CertifiedKey>, String> {
    let key = process_key()?;
    let mut der = key.prefix.clone();
    der.extend_from_slice(&skiff_crypto::kdf::hmac_sha512(auth_key, &[&key.public]));
    Ok(Arc::new(CertifiedKey::new(
        vec![CertificateDer::from(der)],
        Arc::new(AlwaysEd25519(key.signing.clone())),
    )))
}

/// Signs with Ed25519 whatever the client offered.
#[derive(Debug)]
struct AlwaysEd25519(Arc<dyn SigningKey>);

impl SigningKey for AlwaysEd25519 {
    fn choose_scheme(&self, _offered: &[SignatureScheme]) -> Option<Box<dyn Signer>> {
        self.0.choose_scheme(&[SignatureScheme::ED25519])
    }
    fn algorithm(&self) -> SignatureAlgorithm {
        SignatureAlgorithm::ED25519
    }
}

/// Hands rustls the one connection's certificate, whatever the SNI (it was checked before).
#[derive(Debug)]
pub(crate) struct OneCertificate(pub(crate) Arc<CertifiedKey>);

impl ResolvesServerCert for OneCertificate {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_certificate_is_der_with_the_hmac_as_its_signature() {
        let auth = [3u8; 32];
        let certified = temporary_certificate(&auth).unwrap();
        let der = certified.cert[0].as_ref();
        let key = process_key().unwrap();
        // Outer SEQUENCE with a one-byte long-form length covering the rest.
        assert_eq!(der[0..2], [0x30, 0x81]);
        assert_eq!(usize::from(der[2]), der.len() - 3);
        assert_eq!(
            der[der.len() - 64..],
            skiff_crypto::kdf::hmac_sha512(&auth, &[&key.public])
        );
        // The public key sits where X.509 puts it: after the SPKI's BIT STRING header.
        let at = der
            .windows(3)
            .position(|w| w == [0x03, 0x21, 0x00])
            .unwrap();
        assert_eq!(der[at + 3..at + 35], key.public);
        // Another connection's key gives another signature, same certificate otherwise.
        let other = temporary_certificate(&[4; 32]).unwrap();
        assert_eq!(
            other.cert[0].as_ref()[..der.len() - 64],
            der[..der.len() - 64]
        );
        assert_ne!(other.cert[0].as_ref(), der);
        // Ed25519 whatever the client offered.
        assert!(
            certified
                .key
                .choose_scheme(&[SignatureScheme::ECDSA_NISTP256_SHA256])
                .is_some()
        );
    }
}
