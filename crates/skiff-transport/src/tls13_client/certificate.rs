//! What a client needs from the server's leaf certificate, read straight from its DER
//! (RFC 5280 §4.1): the subject's public key and its algorithm (for CertificateVerify), the
//! Ed25519 key if that is its type, and the signature field (REALITY's HMAC). A REALITY server's temporary certificate carries an HMAC there
//! instead of a signature; a minimal reader keeps us from depending on an X.509 parser that
//! would reject such a certificate.

use super::messages::{HandshakeError, err};

/// id-Ed25519 (RFC 8410), DER-encoded with its tag and length.
const ED25519_OID: [u8; 5] = [0x06, 0x03, 0x2b, 0x65, 0x70];
const SEQUENCE: u8 = 0x30;
const BIT_STRING: u8 = 0x03;
/// tbsCertificate's optional `[0] EXPLICIT Version`.
const VERSION_TAG: u8 = 0xa0;

/// What a leaf certificate says about itself, as far as REALITY cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeafFacts {
    pub ed25519_key: Option<[u8; 32]>,
    /// subjectPublicKeyInfo's AlgorithmIdentifier contents (without its SEQUENCE header),
    /// as `rustls::pki_types::AlgorithmIdentifier` holds them.
    pub spki_algorithm: Vec<u8>,
    /// subjectPublicKey's bytes.
    pub public_key: Vec<u8>,
    /// The signatureValue bit string's bytes.
    pub signature: Vec<u8>,
}

/// One DER element: tag, contents, and what follows it.
fn element(bytes: &[u8]) -> Result<(u8, &[u8], &[u8]), HandshakeError> {
    let (&tag, rest) = bytes.split_first().ok_or_else(bad)?;
    let (&first, rest) = rest.split_first().ok_or_else(bad)?;
    let (len, rest) = if first < 0x80 {
        (first as usize, rest)
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 3 || rest.len() < n {
            return err("certificate: unsupported DER length");
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, &b| (acc << 8) | b as usize);
        (len, &rest[n..])
    };
    if rest.len() < len {
        return err("certificate: truncated DER");
    }
    Ok((tag, &rest[..len], &rest[len..]))
}

fn bad() -> HandshakeError {
    HandshakeError("certificate: truncated DER".into())
}

fn expect(bytes: &[u8], tag: u8) -> Result<(&[u8], &[u8]), HandshakeError> {
    let (t, contents, rest) = element(bytes)?;
    if t != tag {
        return err(format!(
            "certificate: expected DER tag {tag:#x}, found {t:#x}"
        ));
    }
    Ok((contents, rest))
}

/// Reads the leaf's key type and signature field.
pub fn leaf_facts(der: &[u8]) -> Result<LeafFacts, HandshakeError> {
    let (certificate, _) = expect(der, SEQUENCE)?;
    let (tbs, rest) = expect(certificate, SEQUENCE)?;
    let (_signature_algorithm, rest) = expect(rest, SEQUENCE)?;
    let (signature_bits, _) = expect(rest, BIT_STRING)?;
    // The first byte of a BIT STRING counts unused bits; signatures use whole bytes.
    let signature = signature_bits.get(1..).ok_or_else(bad)?.to_vec();

    let mut fields = tbs;
    let (tag, _, after) = element(fields)?;
    if tag == VERSION_TAG {
        fields = after;
    }
    // serialNumber, signature, issuer, validity, subject; then subjectPublicKeyInfo.
    for _ in 0..5 {
        fields = element(fields)?.2;
    }
    let (spki, _) = expect(fields, SEQUENCE)?;
    let (algorithm, rest) = expect(spki, SEQUENCE)?;
    let (key_bits, _) = expect(rest, BIT_STRING)?;
    let ed25519_key = if algorithm == ED25519_OID {
        match key_bits {
            [0, key @ ..] => key.try_into().ok(),
            _ => None,
        }
    } else {
        None
    };
    Ok(LeafFacts {
        ed25519_key,
        spki_algorithm: algorithm.to_vec(),
        public_key: key_bits.get(1..).ok_or_else(bad)?.to_vec(),
        signature,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reads_an_ed25519_certificate_made_by_rcgen() {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
        let cert = rcgen::CertificateParams::new(vec!["example.com".into()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let facts = leaf_facts(cert.der()).unwrap();
        let public = key.public_key_raw();
        assert_eq!(facts.ed25519_key.as_ref().map(|k| &k[..]), Some(public));
        assert_eq!(facts.signature.len(), 64);
    }

    #[test]
    fn an_ecdsa_certificate_has_no_ed25519_key() {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let cert = rcgen::CertificateParams::new(vec!["example.com".into()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        assert_eq!(leaf_facts(cert.der()).unwrap().ed25519_key, None);
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = leaf_facts(&bytes);
        }
    }
}
