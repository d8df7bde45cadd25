//! The async edge: sends a ClientHello we built, reads the server's flight record by record,
//! checks it, answers with our Finished, and hands back the traffic keys. Each step's parsing
//! and key derivation is in the sans-IO modules beside this one.

use std::io;

use skiff_core::BoxStream;
use skiff_crypto::tls13::{Transcript, ed25519_verify};
use skiff_crypto::{AeadKey, TAG_LEN, constant_time_eq, x25519};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::certificate::{LeafFacts, leaf_facts};
use super::messages::{
    self, CERTIFICATE, CERTIFICATE_REQUEST, CERTIFICATE_VERIFY, ENCRYPTED_EXTENSIONS, FINISHED,
    HandshakeError, MessageBuffer, SERVER_HELLO,
};
use super::schedule::{HandshakeSecrets, Suite, TrafficKey};
use crate::fingerprint::specs::{SECP256R1, X25519, X25519MLKEM768};
use crate::fingerprint::{ClientHello, KeyShares};
use crate::tls::records::RecordStream;

const CONTENT_CHANGE_CIPHER_SPEC: u8 = 20;
const CONTENT_ALERT: u8 = 21;
const CONTENT_HANDSHAKE: u8 = 22;
const CONTENT_APPLICATION_DATA: u8 = 23;
/// Largest record a server may send (RFC 8446 §5.2).
const MAX_RECORD_BODY: usize = 16 * 1024 + 256;
/// Ed25519 in TLS's SignatureScheme registry.
const ED25519_SCHEME: u16 = 0x0807;

/// A finished handshake, before the record layer takes over.
pub struct Established {
    stream: BoxStream,
    leftover: Vec<u8>,
    client_key: TrafficKey,
    server_key: TrafficKey,
    /// The server's chain, leaf first.
    pub certificates: Vec<Vec<u8>>,
    pub leaf: LeafFacts,
    /// True when CertificateVerify is a valid signature by the leaf's key (any key type
    /// rustls' aws-lc-rs provider verifies: ECDSA, RSA-PSS, Ed25519), with the scheme it
    /// names.
    pub signature_valid: bool,
    pub alpn: Option<Vec<u8>>,
    pub suite: Suite,
    pub group: u16,
}

impl Established {
    /// Our TLS 1.3 record layer over the connection, from sequence number zero.
    pub fn into_stream(self) -> io::Result<BoxStream> {
        let client = &self.client_key;
        let server = &self.server_key;
        let stream = RecordStream::from_handshake(
            self.stream,
            self.leftover,
            (client.kind, &client.key, client.iv),
            (server.kind, &server.key, server.iv),
        )?;
        Ok(Box::new(stream))
    }
}

fn invalid(e: HandshakeError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

/// Records read off the socket, and the handshake-phase decryption.
struct Records {
    stream: BoxStream,
    buf: Vec<u8>,
}

impl Records {
    /// The next record: its type and body.
    async fn next(&mut self) -> io::Result<(u8, Vec<u8>)> {
        loop {
            if self.buf.len() >= 5 {
                let len = usize::from(u16::from_be_bytes([self.buf[3], self.buf[4]]));
                if len > MAX_RECORD_BODY {
                    return Err(invalid(HandshakeError("record too long".into())));
                }
                if self.buf.len() >= 5 + len {
                    let rest = self.buf.split_off(5 + len);
                    let record = std::mem::replace(&mut self.buf, rest);
                    return Ok((record[0], record[5..].to_vec()));
                }
            }
            let mut chunk = [0u8; 8192];
            let n = self.stream.read(&mut chunk).await?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "TLS handshake: the server closed the connection",
                ));
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

/// One direction's handshake-phase record protection.
struct HandshakeKey {
    key: AeadKey,
    iv: [u8; 12],
    seq: u64,
}

impl HandshakeKey {
    fn new(k: &TrafficKey) -> io::Result<HandshakeKey> {
        Ok(HandshakeKey {
            key: AeadKey::new(k.kind, &k.key).map_err(io::Error::other)?,
            iv: k.iv,
            seq: 0,
        })
    }

    fn nonce(&mut self) -> [u8; 12] {
        let mut nonce = self.iv;
        for (n, s) in nonce[4..].iter_mut().zip(self.seq.to_be_bytes()) {
            *n ^= s;
        }
        self.seq += 1;
        nonce
    }

    /// Opens one application_data record: (inner content type, plaintext).
    fn open(&mut self, body: &mut [u8]) -> Result<(u8, Vec<u8>), HandshakeError> {
        let header = [
            CONTENT_APPLICATION_DATA,
            3,
            3,
            (body.len() >> 8) as u8,
            body.len() as u8,
        ];
        let nonce = self.nonce();
        let plain = self
            .key
            .open_in_place(&nonce, &header, body)
            .map_err(|_| HandshakeError("a handshake record failed to decrypt".into()))?;
        // TLSInnerPlaintext: content, the type byte, then zero padding.
        let end = plain
            .iter()
            .rposition(|&b| b != 0)
            .ok_or_else(|| HandshakeError("record without a content type".into()))?;
        Ok((plain[end], plain[..end].to_vec()))
    }

    /// Seals `content` of `content_type` into one record.
    fn seal(&mut self, content_type: u8, content: &[u8]) -> Vec<u8> {
        let len = content.len() + 1 + TAG_LEN;
        let mut record = vec![CONTENT_APPLICATION_DATA, 3, 3, (len >> 8) as u8, len as u8];
        let header: [u8; 5] = record[..5].try_into().expect("five bytes");
        record.extend_from_slice(content);
        record.push(content_type);
        record.extend_from_slice(&[0; TAG_LEN]);
        let nonce = self.nonce();
        self.key.seal_in_place(&nonce, &header, &mut record[5..]);
        record
    }
}

/// The (EC)DHE secret of the server's share against the private half we kept.
fn shared_secret(
    shares: &mut KeyShares,
    group: u16,
    share: &[u8],
) -> Result<Vec<u8>, HandshakeError> {
    let bad = || HandshakeError(format!("bad key share for group {group:#06x}"));
    match group {
        X25519 => {
            let private = shares.x25519.as_ref().ok_or_else(|| not_offered(group))?;
            Ok(x25519::shared_secret(private, share)
                .ok_or_else(bad)?
                .to_vec())
        }
        X25519MLKEM768 => {
            let (kem, private) = match (&shares.mlkem, &shares.hybrid_x25519) {
                (Some(k), Some(p)) => (k, p),
                _ => return Err(not_offered(group)),
            };
            let split = share
                .len()
                .checked_sub(32)
                .filter(|&s| s == skiff_crypto::tls13::MLKEM768_CIPHERTEXT_LEN)
                .ok_or_else(bad)?;
            let mut secret = kem.decapsulate(&share[..split]).ok_or_else(bad)?.to_vec();
            secret.extend_from_slice(
                &x25519::shared_secret(private, &share[split..]).ok_or_else(bad)?,
            );
            Ok(secret)
        }
        SECP256R1 => {
            let key = shares.p256.take().ok_or_else(|| not_offered(group))?;
            key.agree(share).ok_or_else(bad)
        }
        _ => Err(not_offered(group)),
    }
}

fn not_offered(group: u16) -> HandshakeError {
    HandshakeError(format!(
        "the server chose group {group:#06x}, which we did not offer"
    ))
}

/// CertificateVerify's signature against the leaf's key, through the verification
/// algorithms of rustls' aws-lc-rs provider (the ones our TLS server and client trust).
fn verify_signature(leaf: &LeafFacts, scheme: u16, message: &[u8], signature: &[u8]) -> bool {
    if let Some(key) = leaf.ed25519_key {
        return scheme == ED25519_SCHEME && ed25519_verify(&key, message, signature);
    }
    let algorithms =
        rustls::crypto::aws_lc_rs::default_provider().signature_verification_algorithms;
    // TLS 1.3 allows ECDSA with its curve's hash, RSA-PSS and EdDSA in CertificateVerify;
    // never PKCS#1 v1.5 or SHA-1 (RFC 8446 §4.4.3).
    if !matches!(scheme, 0x0403 | 0x0503 | 0x0603 | 0x0804..=0x0806 | 0x0809..=0x080b) {
        return false;
    }
    let scheme = rustls::SignatureScheme::from(scheme);
    algorithms
        .mapping
        .iter()
        .filter(|(s, _)| *s == scheme)
        .flat_map(|(_, algs)| algs.iter())
        .filter(|alg| alg.public_key_alg_id().as_ref() == leaf.spki_algorithm.as_slice())
        .any(|alg| {
            alg.verify_signature(&leaf.public_key, message, signature)
                .is_ok()
        })
}

/// What CertificateVerify signs (RFC 8446 §4.4.3).
fn certificate_verify_input(transcript_hash: &[u8]) -> Vec<u8> {
    let mut m = vec![0x20u8; 64];
    m.extend_from_slice(b"TLS 1.3, server CertificateVerify\0");
    m.extend_from_slice(transcript_hash);
    m
}

/// Runs the handshake with `hello` on `stream`. Bound it with a timeout.
pub async fn handshake(stream: BoxStream, mut hello: ClientHello) -> io::Result<Established> {
    let mut records = Records {
        stream,
        buf: Vec::new(),
    };
    records.stream.write_all(&hello.to_record()).await?;
    records.stream.flush().await?;

    // ServerHello, in the clear.
    let mut plain = MessageBuffer::default();
    let server_hello_raw = loop {
        let (kind, body) = records.next().await?;
        match kind {
            CONTENT_HANDSHAKE => plain.push(&body),
            CONTENT_ALERT => return Err(alert(&body)),
            _ => {
                return Err(invalid(HandshakeError(format!(
                    "record type {kind} before ServerHello"
                ))));
            }
        }
        if let Some(m) = plain.next_message().map_err(invalid)? {
            if m.kind != SERVER_HELLO {
                return Err(invalid(HandshakeError(format!(
                    "handshake message {} before ServerHello",
                    m.kind
                ))));
            }
            if !plain.is_empty() {
                return Err(invalid(HandshakeError(
                    "data after ServerHello in its record".into(),
                )));
            }
            break m;
        }
    };
    let server_hello = messages::parse_server_hello(server_hello_raw.body()).map_err(invalid)?;
    if server_hello.is_retry {
        return Err(invalid(HandshakeError(
            "the server asked for a HelloRetryRequest, which this client does not do".into(),
        )));
    }
    if server_hello.version != Some(0x0304) {
        return Err(invalid(HandshakeError(
            "the server did not choose TLS 1.3".into(),
        )));
    }
    if server_hello.session_id != hello.message[crate::fingerprint::SESSION_ID_OFFSET..][..32] {
        return Err(invalid(HandshakeError(
            "ServerHello does not echo our session ID".into(),
        )));
    }
    let suite = Suite::from_id(server_hello.cipher_suite).ok_or_else(|| {
        invalid(HandshakeError(format!(
            "the server chose cipher suite {:#06x}",
            server_hello.cipher_suite
        )))
    })?;
    let (group, share) = server_hello
        .key_share
        .clone()
        .ok_or_else(|| invalid(HandshakeError("ServerHello without a key share".into())))?;
    let secret = shared_secret(&mut hello.shares, group, &share).map_err(invalid)?;
    let mut transcript = Transcript::new(suite.hash);
    transcript.update(&hello.message);
    transcript.update(&server_hello_raw.raw);
    let secrets = HandshakeSecrets::new(suite, &secret, &transcript.current());
    let mut server_key = HandshakeKey::new(&suite.traffic_key(&secrets.server))?;
    let mut client_key = HandshakeKey::new(&suite.traffic_key(&secrets.client))?;

    // The encrypted flight: EncryptedExtensions, Certificate, CertificateVerify, Finished.
    let mut flight = MessageBuffer::default();
    let mut expected = ENCRYPTED_EXTENSIONS;
    let mut alpn = None;
    let mut certificates = Vec::new();
    let mut leaf = None;
    let mut signature_valid = false;
    loop {
        let (kind, mut body) = records.next().await?;
        match kind {
            CONTENT_CHANGE_CIPHER_SPEC if body == [1] => continue,
            CONTENT_ALERT => return Err(alert(&body)),
            CONTENT_APPLICATION_DATA => {}
            _ => {
                return Err(invalid(HandshakeError(format!(
                    "unexpected record type {kind} in the server's flight"
                ))));
            }
        }
        let (inner, content) = server_key.open(&mut body).map_err(invalid)?;
        match inner {
            CONTENT_HANDSHAKE => flight.push(&content),
            CONTENT_ALERT => return Err(alert(&content)),
            _ => {
                return Err(invalid(HandshakeError(format!(
                    "unexpected content type {inner} in the server's flight"
                ))));
            }
        }
        while let Some(m) = flight.next_message().map_err(invalid)? {
            if m.kind == CERTIFICATE_REQUEST {
                return Err(invalid(HandshakeError(
                    "the server asks for a client certificate".into(),
                )));
            }
            if m.kind != expected {
                return Err(invalid(HandshakeError(format!(
                    "handshake message {} where {expected} belongs",
                    m.kind
                ))));
            }
            match m.kind {
                ENCRYPTED_EXTENSIONS => {
                    alpn = messages::parse_encrypted_extensions(m.body()).map_err(invalid)?;
                    expected = CERTIFICATE;
                }
                CERTIFICATE => {
                    certificates = messages::parse_certificate(m.body()).map_err(invalid)?;
                    leaf = Some(leaf_facts(&certificates[0]).map_err(invalid)?);
                    expected = CERTIFICATE_VERIFY;
                }
                CERTIFICATE_VERIFY => {
                    let (scheme, signature) =
                        messages::parse_certificate_verify(m.body()).map_err(invalid)?;
                    if let Some(leaf) = &leaf {
                        let input = certificate_verify_input(&transcript.current());
                        signature_valid = verify_signature(leaf, scheme, &input, &signature);
                    }
                    expected = FINISHED;
                }
                FINISHED => {
                    let want = suite.verify_data(&secrets.server, &transcript.current());
                    if !constant_time_eq(&want, m.body()) {
                        return Err(invalid(HandshakeError(
                            "the server's Finished does not verify".into(),
                        )));
                    }
                    transcript.update(&m.raw);
                    if !flight.is_empty() {
                        return Err(invalid(HandshakeError(
                            "data after the server's Finished".into(),
                        )));
                    }
                    let leaf =
                        leaf.ok_or_else(|| invalid(HandshakeError("no certificate".into())))?;
                    let (stream, leftover, client_key, server_key) =
                        finish(records, &transcript, &secrets, &mut client_key).await?;
                    return Ok(Established {
                        stream,
                        leftover,
                        client_key,
                        server_key,
                        certificates,
                        leaf,
                        signature_valid,
                        alpn,
                        suite,
                        group,
                    });
                }
                _ => unreachable!("expected is one of the four above"),
            }
            transcript.update(&m.raw);
        }
    }
}

/// Our CCS and Finished; then the socket, the bytes read past the server's flight, and the
/// application keys (client, server).
async fn finish(
    mut records: Records,
    transcript: &Transcript,
    secrets: &HandshakeSecrets,
    client_key: &mut HandshakeKey,
) -> io::Result<(BoxStream, Vec<u8>, TrafficKey, TrafficKey)> {
    let suite = secrets.suite;
    let server_finished_hash = transcript.current();
    let verify_data = suite.verify_data(&secrets.client, &server_finished_hash);
    let mut finished = vec![FINISHED, 0, 0, verify_data.len() as u8];
    finished.extend_from_slice(&verify_data);
    // The middlebox-compatibility ChangeCipherSpec browsers send before their Finished.
    let mut out = vec![CONTENT_CHANGE_CIPHER_SPEC, 3, 3, 0, 1, 1];
    out.extend_from_slice(&client_key.seal(CONTENT_HANDSHAKE, &finished));
    records.stream.write_all(&out).await?;
    records.stream.flush().await?;
    let (client, server) = secrets.application(&server_finished_hash);
    Ok((
        records.stream,
        records.buf,
        suite.traffic_key(&client),
        suite.traffic_key(&server),
    ))
}

fn alert(body: &[u8]) -> io::Error {
    let description = body.get(1).copied().unwrap_or(0);
    io::Error::new(
        io::ErrorKind::ConnectionAborted,
        format!("TLS handshake: the server sent alert {description}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fingerprint::Fingerprint;
    use crate::tls13_client::messages::RETRY_RANDOM;

    /// Runs the client against a scripted server that reads the hello, then sends `reply`
    /// and closes; the client's outcome.
    async fn against(reply: Vec<u8>, echo_session_id: bool) -> io::Result<Established> {
        let (client_end, mut server_end) = tokio::net::UnixStream::pair().unwrap();
        let hello = Fingerprint::Chrome
            .client_hello(Some("example.com"), &[], [5; 32])
            .unwrap();
        let server = tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            let _ = server_end.read(&mut buf).await;
            let mut reply = reply;
            if echo_session_id {
                // Scripts below put a 32-byte session ID right after the random.
                reply[5 + 4 + 2 + 32 + 1..][..32].copy_from_slice(&[5; 32]);
            }
            let _ = server_end.write_all(&reply).await;
        });
        let out = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            handshake(Box::new(client_end), hello),
        )
        .await
        .expect("the handshake ends on its own");
        let _ = server.await;
        out
    }

    fn server_hello_record(random: [u8; 32], suite: u16, exts: &[u8]) -> Vec<u8> {
        let mut body = vec![3, 3];
        body.extend_from_slice(&random);
        body.push(32);
        body.extend_from_slice(&[0; 32]);
        body.extend_from_slice(&suite.to_be_bytes());
        body.push(0);
        body.extend_from_slice(&(exts.len() as u16).to_be_bytes());
        body.extend_from_slice(exts);
        let mut msg = vec![SERVER_HELLO];
        msg.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
        msg.extend_from_slice(&body);
        let mut record = vec![CONTENT_HANDSHAKE, 3, 3];
        record.extend_from_slice(&(msg.len() as u16).to_be_bytes());
        record.extend_from_slice(&msg);
        record
    }

    fn message(e: io::Error) -> String {
        e.to_string()
    }

    #[tokio::test]
    async fn hello_retry_request_fails_cleanly() {
        let exts = [0, 0x2b, 0, 2, 3, 4, 0, 0x33, 0, 2, 0, 0x17];
        let err = against(server_hello_record(RETRY_RANDOM, 0x1301, &exts), true)
            .await
            .err()
            .unwrap();
        assert!(message(err).contains("HelloRetryRequest"));
    }

    #[tokio::test]
    async fn a_tls12_server_is_refused() {
        let err = against(server_hello_record([1; 32], 0xc02f, &[]), true)
            .await
            .err()
            .unwrap();
        assert!(message(err).contains("TLS 1.3"));
    }

    #[tokio::test]
    async fn a_server_that_does_not_echo_the_session_id_is_refused() {
        let mut exts = vec![0, 0x2b, 0, 2, 3, 4, 0, 0x33, 0, 36, 0, 0x1d, 0, 32];
        exts.extend_from_slice(&[9; 32]);
        let err = against(server_hello_record([1; 32], 0x1301, &exts), false)
            .await
            .err()
            .unwrap();
        assert!(message(err).contains("session ID"));
    }

    #[tokio::test]
    async fn a_group_we_did_not_offer_and_a_closed_connection_are_errors() {
        let mut exts = vec![0, 0x2b, 0, 2, 3, 4, 0, 0x33, 0, 36, 0, 0x1e, 0, 32];
        exts.extend_from_slice(&[9; 32]);
        let err = against(server_hello_record([1; 32], 0x1301, &exts), true)
            .await
            .err()
            .unwrap();
        assert!(message(err).contains("did not offer"));
        // A valid ServerHello, then the server goes away: an error, not a hang.
        let mut exts = vec![0, 0x2b, 0, 2, 3, 4, 0, 0x33, 0, 36, 0, 0x1d, 0, 32];
        exts.extend_from_slice(&x25519::public_key(&x25519::generate_private()));
        let err = against(server_hello_record([1; 32], 0x1301, &exts), true)
            .await
            .err()
            .unwrap();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    }
}
