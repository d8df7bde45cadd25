//! The REALITY server: a TLS 1.3 server only for clients that prove, inside their
//! ClientHello, that they hold a configured short id and know the server's public key; for
//! everyone else a byte-for-byte relay to a real site (`target`).
//!
//! Per connection, as REALITY does (github.com/XTLS/REALITY `Server`):
//! 1. dial the target (with a PROXY header when configured) before reading anything;
//! 2. read the client's first bytes, copying each read to the target as it arrives, until a
//!    whole ClientHello is in (bounded: [`MAX_CLIENT_HELLO_BYTES`], [`PEEK_TIMEOUT`]). If the
//!    target speaks first, or the bytes are not a ClientHello, the connection is the target's;
//! 3. authenticate (see [`super::auth`]): TLS 1.3 offered, the SNI among `serverNames`, an
//!    X25519 share (alone or in X25519MLKEM768), the session ID opening under the derived key,
//!    the client version within bounds, the time within `maxTimeDiff`, a known short id; and,
//!    beyond REALITY, a ClientHello random not seen before (see [`super::server_replay`]);
//! 4. for an authenticated client, wait for the target's ServerHello (it got the same
//!    ClientHello) and answer with our own handshake using the target's cipher suite and key
//!    exchange group, and the temporary certificate ([`super::server_cert`]). A target that
//!    does not answer with a usable TLS 1.3 ServerHello makes the connection the target's;
//! 5. anything the target's: its bytes so far go to the client and the two are relayed until
//!    either ends ([`super::server_forward`]).
//!
//! The handshake of step 4 is rustls' server, not one of our own. A per-connection
//! `ServerConfig` (cheap: the shared parts are `Arc`s) pins the suite and group to the
//! target's, disables tickets and resumption as REALITY does, and resolves to the temporary
//! certificate. That keeps the TLS state machine the one already tested, and hands the
//! finished session to our record layer (`tls/records.rs`) exactly as the TLS inbound does,
//! so XTLS Vision's splice works over REALITY unchanged. What it gives up: REALITY pads its
//! encrypted handshake records to the target's record lengths, and sends empty records
//! shaped like the target's session tickets; rustls cannot, so our server's record lengths
//! after the ServerHello are rustls' own. A handshake of our own could match them; it is the
//! known gap of this choice.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::server::NoServerSessionStorage;
use skiff_core::{BoxFuture, BoxStream, Prefixed, ProxyStream};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::timeout;
use tokio_rustls::TlsAcceptor;

use super::auth::{SessionFields, open_session_id, reality_auth_key};
use super::server_cert::{OneCertificate, temporary_certificate};
use super::server_forward::forward;
use super::server_parse::{
    ClientHello, GROUP_X25519, GROUP_X25519_MLKEM768, HelloRead, MAX_CLIENT_HELLO_BYTES,
    TLS13_AES_128_GCM_SHA256, TLS13_AES_256_GCM_SHA384, TLS13_CHACHA20_POLY1305_SHA256,
    TargetChoice, TargetHello, parse_client_hello, read_client_hello, read_target_hello,
};
use super::server_replay::ReplayCache;
use crate::tls::read_ahead::ReadAhead;
use crate::tls::records;

/// How long the client has to send its ClientHello; after that the connection is relayed
/// to the target as it is (a silent client meets the target's own timeouts, not ours).
pub const PEEK_TIMEOUT: Duration = Duration::from_secs(3);
/// How long the target has to answer an authenticated client's ClientHello.
pub const TARGET_TIMEOUT: Duration = Duration::from_secs(5);
/// The most target bytes read while waiting for its ServerHello (REALITY's 8 KiB).
const MAX_TARGET_HELLO_BYTES: usize = 8192;

/// Connects to the target for one client: the app's dialer (TCP or unix socket), which
/// also writes the PROXY protocol header when `xver` asks for one.
pub trait TargetDialer: Send + Sync {
    fn dial<'a>(
        &'a self,
        source: Option<SocketAddr>,
        local: Option<SocketAddr>,
    ) -> BoxFuture<'a, io::Result<BoxStream>>;
}

/// The server's settings (Xray's `realitySettings` on an inbound, checked by the config).
#[derive(Clone)]
pub struct RealityServerOptions {
    /// SNIs an authenticated client may send (exact match, as REALITY).
    pub server_names: Vec<String>,
    pub private_key: [u8; 32],
    /// Client versions accepted, [major, minor, patch]; None = unbounded.
    pub min_client_ver: Option<[u8; 3]>,
    pub max_client_ver: Option<[u8; 3]>,
    /// None: the client's clock is not checked.
    pub max_time_diff: Option<Duration>,
    pub short_ids: Vec<[u8; 8]>,
    /// Xray's `show`: each decision at info level instead of debug (never key material).
    pub show: bool,
}

impl std::fmt::Debug for RealityServerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RealityServerOptions")
            .field("server_names", &self.server_names)
            .field("min_client_ver", &self.min_client_ver)
            .field("max_client_ver", &self.max_client_ver)
            .field("max_time_diff", &self.max_time_diff)
            .field("short_ids", &self.short_ids.len())
            .finish_non_exhaustive()
    }
}

/// A REALITY server, cheap to share across connections.
pub struct RealityServer {
    options: RealityServerOptions,
    target: Arc<dyn TargetDialer>,
    replay: ReplayCache,
    provider: Arc<CryptoProvider>,
}

/// An authenticated ClientHello.
struct Authenticated {
    auth_key: [u8; 32],
    hello: ClientHello,
}

/// What the first phase found.
enum Peeked {
    Hello(Vec<u8>),
    /// Why the connection is the target's.
    Target(&'static str),
}

impl RealityServer {
    pub fn new(
        options: RealityServerOptions,
        target: Arc<dyn TargetDialer>,
    ) -> Result<RealityServer, String> {
        if options.server_names.is_empty() || options.short_ids.is_empty() {
            return Err("REALITY needs serverNames and shortIds".into());
        }
        // Fail at startup, not per connection, if the Ed25519 key cannot be made.
        temporary_certificate(&[0; 32])?;
        Ok(RealityServer {
            options,
            target,
            replay: ReplayCache::default(),
            provider: crate::tls::provider(),
        })
    }

    /// Serves one connection. An authenticated client gets its TLS stream and the SNI it
    /// sent; anything else is handed to a relay task towards the target and this returns an
    /// error saying why (the client sees only the target).
    pub async fn accept(&self, mut client: BoxStream) -> io::Result<(BoxStream, String)> {
        let source = client.raw_tcp().and_then(|t| t.peer_addr().ok());
        let local = client.raw_tcp().and_then(|t| t.local_addr().ok());
        let mut target = self
            .target
            .dial(source, local)
            .await
            .map_err(|e| io::Error::other(format!("REALITY: failed to dial target: {e}")))?;
        let mut from_target = Vec::new();
        let mut from_client = Vec::new();
        let peeked = match timeout(
            PEEK_TIMEOUT,
            peek_hello(&mut client, &mut target, &mut from_client, &mut from_target),
        )
        .await
        {
            Ok(Ok(p)) => p,
            Ok(Err(e)) => return Err(e),
            Err(_) => Peeked::Target("no ClientHello in time"),
        };
        let authenticated = match peeked {
            Peeked::Hello(message) => self.authenticate(&message),
            Peeked::Target(why) => Err(why),
        };
        let auth = match authenticated {
            Ok(auth) => auth,
            Err(why) => return Err(self.forward(client, target, from_target, why, source)),
        };
        let choice =
            match timeout(TARGET_TIMEOUT, target_choice(&mut target, &mut from_target)).await {
                Ok(Ok(Some(choice))) if auth.hello.has_share(choice.group) => choice,
                Ok(Ok(_)) => {
                    return Err(self.forward(
                        client,
                        target,
                        from_target,
                        "the target did not answer with a TLS 1.3 ServerHello REALITY can copy",
                        source,
                    ));
                }
                Ok(Err(e)) => return Err(e),
                Err(_) => {
                    return Err(self.forward(
                        client,
                        target,
                        from_target,
                        "the target did not answer in time",
                        source,
                    ));
                }
            };
        // The target served its purpose; REALITY closes it here too.
        drop(target);
        self.log(
            source,
            "authenticated; handshake with the temporary certificate",
        );
        let config = self.config(choice, &auth.auth_key)?;
        let stream: BoxStream = Box::new(Prefixed::new(Bytes::from(from_client), client));
        let mut tls = TlsAcceptor::from(config)
            .accept(ReadAhead::new(stream))
            .await?;
        tls.flush().await?;
        let sni = auth.hello.server_name.unwrap_or_default();
        Ok((records::server_stream(tls)?, sni))
    }

    /// Checks a ClientHello as REALITY does; Err says why it is not ours.
    fn authenticate(&self, message: &[u8]) -> Result<Authenticated, &'static str> {
        let hello = parse_client_hello(message).ok_or("not a ClientHello Go would accept")?;
        if !hello.offers_tls13 {
            return Err("the client does not offer TLS 1.3");
        }
        let name = hello.server_name.as_deref().unwrap_or("");
        if !self.options.server_names.iter().any(|n| n == name) {
            return Err("server name not in serverNames");
        }
        let public = hello.x25519_public().ok_or("no X25519 key share")?;
        let shared = skiff_crypto::x25519::shared_secret(&self.options.private_key, &public)
            .ok_or("a low-order X25519 key share")?;
        let auth_key = reality_auth_key(&shared, &hello.random);
        let fields = open_session_id(&auth_key, message).ok_or("session ID does not open")?;
        self.check_fields(&fields)?;
        if !self.replay.first_sight(&hello.random) {
            return Err("a replayed ClientHello");
        }
        Ok(Authenticated { auth_key, hello })
    }

    fn check_fields(&self, fields: &SessionFields) -> Result<(), &'static str> {
        let version = |v: [u8; 3]| u32::from_be_bytes([0, v[0], v[1], v[2]]);
        if self
            .options
            .min_client_ver
            .is_some_and(|min| version(fields.version) < version(min))
        {
            return Err("client version below minClientVer");
        }
        if self
            .options
            .max_client_ver
            .is_some_and(|max| version(fields.version) > version(max))
        {
            return Err("client version above maxClientVer");
        }
        if let Some(max) = self.options.max_time_diff {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default();
            let then = Duration::from_secs(u64::from(fields.unix_time));
            let diff = now.abs_diff(then);
            if diff > max {
                return Err("client time outside maxTimeDiff");
            }
        }
        // Constant time over every configured id: which one matched must not show.
        let known = self.options.short_ids.iter().fold(false, |found, id| {
            found | skiff_crypto::constant_time_eq(id, &fields.short_id)
        });
        if !known {
            return Err("unknown short id");
        }
        Ok(())
    }

    /// The per-connection rustls configuration: TLS 1.3 only, the target's suite and group,
    /// no ALPN, no tickets, no resumption (REALITY's server settings).
    fn config(&self, choice: TargetChoice, auth_key: &[u8; 32]) -> io::Result<Arc<ServerConfig>> {
        use rustls::crypto::aws_lc_rs::{cipher_suite, kx_group};
        let suite = match choice.cipher_suite {
            TLS13_AES_128_GCM_SHA256 => cipher_suite::TLS13_AES_128_GCM_SHA256,
            TLS13_AES_256_GCM_SHA384 => cipher_suite::TLS13_AES_256_GCM_SHA384,
            TLS13_CHACHA20_POLY1305_SHA256 => cipher_suite::TLS13_CHACHA20_POLY1305_SHA256,
            _ => return Err(io::Error::other("REALITY: unexpected cipher suite")),
        };
        let group = match choice.group {
            GROUP_X25519 => kx_group::X25519,
            GROUP_X25519_MLKEM768 => kx_group::X25519MLKEM768,
            _ => return Err(io::Error::other("REALITY: unexpected key exchange group")),
        };
        let provider = CryptoProvider {
            cipher_suites: vec![suite],
            kx_groups: vec![group],
            ..(*self.provider).clone()
        };
        let certificate = temporary_certificate(auth_key).map_err(io::Error::other)?;
        let mut config = ServerConfig::builder_with_provider(Arc::new(provider))
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(io::Error::other)?
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(OneCertificate(certificate)));
        config.send_tls13_tickets = 0;
        config.session_storage = Arc::new(NoServerSessionStorage {});
        config.enable_secret_extraction = true;
        Ok(Arc::new(config))
    }

    /// Hands the connection to the target and returns the error `accept` reports.
    fn forward(
        &self,
        client: BoxStream,
        target: BoxStream,
        from_target: Vec<u8>,
        why: &'static str,
        source: Option<SocketAddr>,
    ) -> io::Error {
        self.log(source, why);
        forward(client, target, from_target);
        io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("REALITY: forwarded to the target ({why})"),
        )
    }

    fn log(&self, source: Option<SocketAddr>, what: &str) {
        let source = source.map(|s| s.to_string()).unwrap_or_default();
        if self.options.show {
            tracing::info!(%source, "REALITY: {what}");
        } else {
            tracing::debug!(%source, "REALITY: {what}");
        }
    }
}

/// Fuzz entry point: any bytes as the client's first flight (reassembly, parsing and
/// authentication, including a session ID re-sealed with the right key so the checks after
/// the AEAD run too) and as the target's first record. Never panics.
#[doc(hidden)]
pub fn fuzz_reality(data: &[u8]) {
    use super::auth::seal_session_id;
    struct NoTarget;
    impl TargetDialer for NoTarget {
        fn dial<'a>(
            &'a self,
            _: Option<SocketAddr>,
            _: Option<SocketAddr>,
        ) -> BoxFuture<'a, io::Result<BoxStream>> {
            Box::pin(async { Err(io::Error::other("no target while fuzzing")) })
        }
    }
    static SERVER: std::sync::OnceLock<RealityServer> = std::sync::OnceLock::new();
    let server = SERVER.get_or_init(|| {
        let options = RealityServerOptions {
            server_names: vec!["a.test".into(), String::new()],
            private_key: [7; 32],
            min_client_ver: Some([1, 0, 0]),
            max_client_ver: Some([200, 0, 0]),
            max_time_diff: Some(Duration::from_secs(3600 * 24 * 365 * 100)),
            short_ids: vec![[0; 8], [1, 2, 0, 0, 0, 0, 0, 0]],
            show: false,
        };
        RealityServer::new(options, Arc::new(NoTarget)).expect("fuzz server")
    });
    let _ = read_target_hello(data);
    let message = match read_client_hello(data) {
        HelloRead::Complete(message, used) => {
            assert!(used <= data.len());
            message
        }
        _ => data.to_vec(),
    };
    let _ = server.authenticate(&message);
    // The same message with a session ID a client holding the key would send, its fields
    // taken from the message's own random.
    let Some(hello) = parse_client_hello(&message) else {
        return;
    };
    let Some(public) = hello.x25519_public() else {
        return;
    };
    let Some(shared) = skiff_crypto::x25519::shared_secret(&server.options.private_key, &public)
    else {
        return;
    };
    let fields = SessionFields {
        version: [hello.random[0], hello.random[1], hello.random[2]],
        unix_time: u32::from_be_bytes([
            hello.random[3],
            hello.random[4],
            hello.random[5],
            hello.random[6],
        ]),
        short_id: [hello.random[7] & 3, hello.random[8] & 2, 0, 0, 0, 0, 0, 0],
    };
    let mut sealed = message.clone();
    seal_session_id(
        &reality_auth_key(&shared, &hello.random),
        &fields,
        &mut sealed,
    );
    let _ = server.authenticate(&sealed);
}

/// Phase 1: the client's bytes until a whole ClientHello, each read copied to the target
/// at once. The target speaking first ends it (REALITY starts relaying then).
async fn peek_hello(
    client: &mut BoxStream,
    target: &mut BoxStream,
    from_client: &mut Vec<u8>,
    from_target: &mut Vec<u8>,
) -> io::Result<Peeked> {
    let mut chunk = vec![0u8; 16 * 1024];
    let mut target_chunk = [0u8; 2048];
    loop {
        match read_client_hello(from_client) {
            HelloRead::Complete(message, _) => return Ok(Peeked::Hello(message)),
            HelloRead::NotHello => return Ok(Peeked::Target("not a TLS ClientHello")),
            HelloRead::Incomplete if from_client.len() >= MAX_CLIENT_HELLO_BYTES => {
                return Ok(Peeked::Target("ClientHello too large"));
            }
            HelloRead::Incomplete => {}
        }
        tokio::select! {
            read = client.read(&mut chunk) => {
                let n = read?;
                if n == 0 {
                    return Ok(Peeked::Target("closed before a whole ClientHello"));
                }
                target.write_all(&chunk[..n]).await?;
                from_client.extend_from_slice(&chunk[..n]);
            }
            read = target.read(&mut target_chunk) => {
                let n = read?;
                from_target.extend_from_slice(&target_chunk[..n]);
                return Ok(Peeked::Target("the target spoke before the ClientHello was whole"));
            }
        }
    }
}

/// Phase 2: the target's first record, for its suite and group. None: not usable.
async fn target_choice(
    target: &mut BoxStream,
    from_target: &mut Vec<u8>,
) -> io::Result<Option<TargetChoice>> {
    let mut chunk = [0u8; 4096];
    loop {
        match read_target_hello(from_target) {
            TargetHello::Usable(choice, _) => return Ok(Some(choice)),
            TargetHello::Unusable => return Ok(None),
            TargetHello::Incomplete if from_target.len() >= MAX_TARGET_HELLO_BYTES => {
                return Ok(None);
            }
            TargetHello::Incomplete => {}
        }
        let n = target.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        from_target.extend_from_slice(&chunk[..n]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reality::auth::seal_session_id;
    use crate::reality::server_parse::tests::client_hello_record;

    struct NoTarget;
    impl TargetDialer for NoTarget {
        fn dial<'a>(
            &'a self,
            _: Option<SocketAddr>,
            _: Option<SocketAddr>,
        ) -> BoxFuture<'a, io::Result<BoxStream>> {
            Box::pin(async { Err(io::Error::other("no target")) })
        }
    }

    const SERVER_PRIVATE: [u8; 32] = [0x42; 32];

    fn server(max_time_diff: Option<Duration>) -> RealityServer {
        RealityServer::new(
            RealityServerOptions {
                server_names: vec!["a.test".into()],
                private_key: SERVER_PRIVATE,
                min_client_ver: Some([26, 3, 27]),
                max_client_ver: None,
                max_time_diff,
                short_ids: vec![[0xab, 0, 0, 0, 0, 0, 0, 0]],
                show: false,
            },
            Arc::new(NoTarget),
        )
        .unwrap()
    }

    fn now() -> u32 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs() as u32
    }

    /// A hello for `sni` sealed as a client with `fields` would seal it.
    fn hello(sni: &str, fields: SessionFields, random: u8) -> Vec<u8> {
        let client_private = [0x11; 32];
        let share = skiff_crypto::x25519::public_key(&client_private);
        let record =
            client_hello_record(Some(sni), &[(GROUP_X25519, share.to_vec())], [random; 32]);
        let HelloRead::Complete(mut message, _) = read_client_hello(&record) else {
            panic!()
        };
        let server_public = skiff_crypto::x25519::public_key(&SERVER_PRIVATE);
        let shared = skiff_crypto::x25519::shared_secret(&client_private, &server_public).unwrap();
        seal_session_id(
            &reality_auth_key(&shared, &[random; 32]),
            &fields,
            &mut message,
        );
        message
    }

    fn fields(version: [u8; 3], unix_time: u32, short_id: u8) -> SessionFields {
        SessionFields {
            version,
            unix_time,
            short_id: [short_id, 0, 0, 0, 0, 0, 0, 0],
        }
    }

    fn why(server: &RealityServer, message: &[u8]) -> Result<(), &'static str> {
        server.authenticate(message).map(|_| ())
    }

    #[test]
    fn each_check_refuses_with_its_reason() {
        let s = server(Some(Duration::from_secs(60)));
        let good = fields([26, 7, 28], now(), 0xab);
        assert_eq!(why(&s, &hello("a.test", good, 1)), Ok(()));
        assert_eq!(
            why(&s, &hello("a.test", good, 1)),
            Err("a replayed ClientHello")
        );
        assert_eq!(
            why(&s, &hello("b.test", good, 2)),
            Err("server name not in serverNames")
        );
        assert_eq!(
            why(&s, &hello("a.test", fields([26, 7, 28], now(), 0xac), 3)),
            Err("unknown short id")
        );
        assert_eq!(
            why(&s, &hello("a.test", fields([26, 3, 26], now(), 0xab), 4)),
            Err("client version below minClientVer")
        );
        assert_eq!(
            why(
                &s,
                &hello("a.test", fields([26, 7, 28], now() - 120, 0xab), 5)
            ),
            Err("client time outside maxTimeDiff")
        );
        // Without maxTimeDiff the clock is not checked.
        let lenient = server(None);
        assert_eq!(
            why(&lenient, &hello("a.test", fields([26, 7, 28], 0, 0xab), 6)),
            Ok(())
        );
        // Sealed for another server key: the session ID does not open.
        let mut other = hello("a.test", good, 7);
        other[50] ^= 1;
        assert_eq!(why(&s, &other), Err("session ID does not open"));
    }

    #[test]
    fn the_fuzz_entry_reaches_an_accepted_hello() {
        // Shape a hello the fuzz entry re-seals into an accepted one: random bytes give a
        // version within bounds, a time, and short id 0.
        let client_private = [0x22; 32];
        let share = skiff_crypto::x25519::public_key(&client_private);
        let mut random = [0u8; 32];
        random[0] = 26;
        let record = client_hello_record(Some("a.test"), &[(GROUP_X25519, share.to_vec())], random);
        fuzz_reality(&record);
        fuzz_reality(&record);
        fuzz_reality(&[]);
        fuzz_reality(&record[..record.len() / 2]);
    }
}
