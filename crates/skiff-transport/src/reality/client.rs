//! The REALITY client (Xray's `security: "reality"` on an outbound), facts from Xray's
//! `transport/internet/reality/reality.go`:
//!
//! 1. A browser ClientHello ([`crate::fingerprint`]) whose 32-byte session ID is
//!    AES-256-GCM over (version x, y, z, 0, unix time u32, shortId padded to 8 bytes): the key
//!    is HKDF-SHA256 of X25519(our plain X25519 share's private key, the server's
//!    `publicKey`) with the hello random's first 20 bytes as salt and "REALITY" as info; the
//!    nonce is the random's last 12 bytes; the additional data is the whole ClientHello
//!    message with the session ID zeroed.
//! 2. Our own TLS 1.3 handshake ([`crate::tls13_client`]). The server is REALITY's when its
//!    leaf certificate has an Ed25519 key, its signature field equals HMAC-SHA512(auth key,
//!    that key), and CertificateVerify is a valid signature by that key.
//! 3. Otherwise we reached the real site (a probe in the path, or a server without our key):
//!    like Xray we act as a browser and crawl `spiderX` on that connection
//!    ([`super::client_spider`]), wait, and fail the outbound with a warning.

use std::io;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use skiff_core::{BoxFuture, BoxStream, ClientLayer};
use skiff_crypto::kdf::hmac_sha512;
use skiff_crypto::{AeadKey, AeadKind, TAG_LEN, constant_time_eq, x25519};

use crate::fingerprint::{Fingerprint, browser_alpn, hello::RANDOM_OFFSET};
use crate::tls13_client::{Established, handshake};

/// The client version the session ID claims: Xray's, since REALITY servers check it against
/// `minClientVer` (Xray 26's default minimum is 26.3.27) and we speak what Xray 26.7.28 does.
pub const CLAIMED_VERSION: [u8; 3] = [26, 7, 28];
/// Our whole handshake, Xray's time budget for a TLS handshake on an outbound.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(15);

/// What an outbound's `realitySettings` says, as runtime types.
#[derive(Clone)]
pub struct RealityClientOptions {
    /// The SNI sent (Xray: `serverName`, else the server address).
    pub server_name: String,
    /// The server's X25519 public key.
    pub public_key: [u8; 32],
    /// Up to 8 bytes; padded with zeros.
    pub short_id: Vec<u8>,
    /// The path the spider starts from when the server is not REALITY's.
    pub spider_x: String,
    /// Xray's `SpiderY` ranges (padding, concurrency, times, interval, return), each low/high.
    pub spider_y: [i64; 10],
    pub fingerprint: Fingerprint,
}

/// Never prints the key.
impl std::fmt::Debug for RealityClientOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RealityClientOptions")
            .field("server_name", &self.server_name)
            .field("fingerprint", &self.fingerprint)
            .finish_non_exhaustive()
    }
}

/// A REALITY client layer, cheap to share across connections.
#[derive(Debug, Clone)]
pub struct RealityClient {
    options: RealityClientOptions,
}

impl RealityClient {
    pub fn new(options: RealityClientOptions) -> Result<RealityClient, String> {
        if options.short_id.len() > 8 {
            return Err("REALITY shortId is longer than 8 bytes".into());
        }
        Ok(RealityClient { options })
    }

    /// Handshake on `stream`; the decrypted stream when the server proved it is REALITY's.
    pub async fn connect(&self, stream: BoxStream) -> io::Result<BoxStream> {
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, self.handshake(stream)).await {
            Ok(result) => result,
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "REALITY: handshake timed out",
            )),
        }
    }

    async fn handshake(&self, stream: BoxStream) -> io::Result<BoxStream> {
        let o = &self.options;
        let sni = (!o.server_name.is_empty() && o.server_name.parse::<std::net::IpAddr>().is_err())
            .then_some(o.server_name.as_str());
        let mut hello = o
            .fingerprint
            .client_hello(sni, &browser_alpn(), [0; 32])
            .ok_or_else(|| io::Error::other("REALITY: no key for the ClientHello"))?;
        let private = hello
            .shares
            .x25519
            .ok_or_else(|| io::Error::other("REALITY: the fingerprint has no X25519 share"))?;
        let shared = x25519::shared_secret(&private, &o.public_key)
            .ok_or_else(|| io::Error::other("REALITY: unusable publicKey"))?;
        let random: [u8; 32] = hello.random().try_into().expect("32-byte random");
        let auth_key = super::auth::reality_auth_key(&shared, &random);

        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs() as u32)
            .unwrap_or(0);
        let sealed = seal_session_id(&auth_key, &random, &hello.message, &o.short_id, now);
        hello.session_id_mut().copy_from_slice(&sealed);
        debug_assert_eq!(RANDOM_OFFSET, 6);

        let established = handshake(stream, hello).await?;
        if is_reality_server(&established, &auth_key) {
            return established.into_stream();
        }
        tracing::warn!(
            "REALITY: received real certificate (potential MITM or redirection) from {}",
            o.server_name
        );
        super::client_spider::crawl_then_wait(established, o).await;
        Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "REALITY: processed invalid connection",
        ))
    }
}

/// The sealed session ID for a ClientHello `message` whose session ID is still all zeros.
pub fn seal_session_id(
    auth_key: &[u8; 32],
    random: &[u8; 32],
    message: &[u8],
    short_id: &[u8],
    unix_time: u32,
) -> [u8; 32] {
    let mut session_id = [0u8; 32];
    session_id[..3].copy_from_slice(&CLAIMED_VERSION);
    session_id[4..8].copy_from_slice(&unix_time.to_be_bytes());
    let n = short_id.len().min(8);
    session_id[8..8 + n].copy_from_slice(&short_id[..n]);
    let key = AeadKey::new(AeadKind::Aes256Gcm, auth_key).expect("32-byte key");
    debug_assert_eq!(16 + TAG_LEN, 32);
    key.seal_in_place(&random[20..], message, &mut session_id);
    session_id
}

/// REALITY's proof: the leaf's signature field is the HMAC of its Ed25519 key under our auth
/// key, and the server signed the handshake with that key.
fn is_reality_server(established: &Established, auth_key: &[u8; 32]) -> bool {
    let Some(key) = established.leaf.ed25519_key else {
        return false;
    };
    constant_time_eq(&hmac_sha512(auth_key, &[&key]), &established.leaf.signature)
        && established.signature_valid
}

impl ClientLayer for RealityClient {
    fn connect<'a>(&'a self, stream: BoxStream) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(RealityClient::connect(self, stream))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The session ID opens with the same key, nonce and additional data, as a REALITY
    /// server opens it, and carries version, time and shortId in order.
    #[test]
    fn session_id_opens_to_version_time_and_short_id() {
        let key = [7u8; 32];
        let mut random = [0u8; 32];
        random[20..].copy_from_slice(&[9; 12]);
        let message = vec![1u8; 300];
        let mut sealed = seal_session_id(&key, &random, &message, &[0xab, 0xcd], 0x0102_0304);
        let aead = AeadKey::new(AeadKind::Aes256Gcm, &key).unwrap();
        let plain = aead
            .open_in_place(&random[20..], &message, &mut sealed)
            .unwrap();
        assert_eq!(&plain[..8], &[26, 7, 28, 0, 1, 2, 3, 4]);
        assert_eq!(&plain[8..16], &[0xab, 0xcd, 0, 0, 0, 0, 0, 0]);
        // A different hello (the AAD) no longer opens.
        let mut sealed = seal_session_id(&key, &random, &message, &[], 5);
        assert!(
            aead.open_in_place(&random[20..], &[2u8; 300], &mut sealed)
                .is_err()
        );
    }

    /// The server side's opener (`reality/auth.rs`) reads what this side seals, in a real
    /// ClientHello.
    #[test]
    fn the_server_side_opens_our_session_id() {
        let mut hello = Fingerprint::Chrome
            .client_hello(Some("example.com"), &browser_alpn(), [0; 32])
            .unwrap();
        let random: [u8; 32] = hello.random().try_into().unwrap();
        let key = super::super::auth::reality_auth_key(&[3; 32], &random);
        let sealed = seal_session_id(&key, &random, &hello.message, &[0xab], 77);
        hello.session_id_mut().copy_from_slice(&sealed);
        let fields = super::super::auth::open_session_id(&key, &hello.message).unwrap();
        assert_eq!(fields.version, CLAIMED_VERSION);
        assert_eq!(fields.unix_time, 77);
        assert_eq!(fields.short_id, [0xab, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn short_ids_over_eight_bytes_are_refused() {
        let options = RealityClientOptions {
            server_name: "example.com".into(),
            public_key: [1; 32],
            short_id: vec![0; 9],
            spider_x: "/".into(),
            spider_y: [0; 10],
            fingerprint: Fingerprint::Chrome,
        };
        assert!(RealityClient::new(options).is_err());
    }
}
