//! The async Shadowsocks adapters over real loopback sockets: `client::connect` ↔
//! `server::accept` for every method (multi-user and identity headers included), bulk both
//! ways with half-close, replayed salts and stale timestamps refused, probes drained without
//! a byte, and buffers released when idle.

use std::future::poll_fn;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};
use skiff_core::{Address, BoxStream, ProxyStream};
use skiff_proto::shadowsocks::client::{ClientConfig, connect};
use skiff_proto::shadowsocks::codec::{Encoder, random_salt};
use skiff_proto::shadowsocks::method::key_from_password;
use skiff_proto::shadowsocks::server::{ServerUser, ShadowsocksServer, accept};
use skiff_proto::shadowsocks::{Method, unix_now};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const LIMIT: Duration = Duration::from_secs(60);
const BULK: usize = 4 << 20;

fn psk(method: Method, seed: u8) -> String {
    let bytes: Vec<u8> = (0..method.key_len() as u8)
        .map(|i| i.wrapping_mul(7).wrapping_add(seed))
        .collect();
    base64(&bytes)
}

fn base64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in data.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn password(method: Method, seed: u8) -> String {
    if method.is_2022() {
        psk(method, seed)
    } else {
        format!("password-{seed}")
    }
}

fn user(method: Method, seed: u8) -> ServerUser {
    ServerUser {
        method,
        key: key_from_password(method, &password(method, seed)).unwrap(),
        email: Some(format!("user{seed}@example")),
        level: 0,
    }
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    let mut state = u64::from(seed) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

async fn pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (client, server) = tokio::join!(TcpStream::connect(addr), listener.accept());
    (client.unwrap(), server.unwrap().0)
}

/// Writes `data` then half-closes, while reading everything the other way; returns the
/// digest of what was read.
async fn exchange<S: ProxyStream>(stream: S, data: Vec<u8>) -> io::Result<Vec<u8>> {
    let (mut rx, mut tx) = tokio::io::split(stream);
    let writer = async move {
        for part in data.chunks(50_000) {
            tx.write_all(part).await?;
        }
        tx.shutdown().await?;
        io::Result::Ok(())
    };
    let reader = async move {
        let mut h = Sha256::new();
        let mut buf = vec![0u8; 40_000];
        loop {
            let n = rx.read(&mut buf).await?;
            if n == 0 {
                return io::Result::Ok(h.finalize().to_vec());
            }
            h.update(&buf[..n]);
        }
    };
    let (w, r) = tokio::join!(writer, reader);
    w?;
    r
}

fn digest(data: &[u8]) -> Vec<u8> {
    Sha256::digest(data).to_vec()
}

/// A client of `client_user` (with `identity` keys) talks to a server of `users`.
async fn round_trip(
    users: Vec<ServerUser>,
    identity_key: Option<Vec<u8>>,
    config: ClientConfig,
    expect_user: usize,
) {
    let server = Arc::new(ShadowsocksServer::new(users, identity_key));
    let target = Address::Domain("example.com".into(), 443);
    let (c, s) = pair().await;
    let up = pattern(1, BULK);
    let down = pattern(2, BULK);
    let server_side = {
        let server = server.clone();
        let down = down.clone();
        let target = target.clone();
        tokio::spawn(async move {
            let accepted = accept(Box::new(s), &server).await.unwrap();
            assert_eq!(accepted.destination, target);
            assert_eq!(accepted.user, expect_user);
            exchange(accepted.stream, down).await.unwrap()
        })
    };
    let stream = connect(Box::new(c), &config, &target).unwrap();
    let got_down = exchange(stream, up.clone()).await.unwrap();
    let got_up = server_side.await.unwrap();
    assert_eq!(got_up, digest(&up), "{:?} uplink", config.method);
    assert_eq!(got_down, digest(&down), "{:?} downlink", config.method);
}

#[tokio::test]
async fn every_method_round_trips_bulk_both_ways() {
    tokio::time::timeout(LIMIT, async {
        for method in Method::ALL {
            let config = ClientConfig {
                method,
                key: user(method, 3).key,
                identity_keys: Vec::new(),
            };
            round_trip(vec![user(method, 3)], None, config, 0).await;
        }
    })
    .await
    .unwrap();
}

/// A relay reads 64 KiB at a time and sends what each read returned, so a read should hand
/// over as close to 64 KiB of payload as the transport holds: 3 × 64 KiB written come out in
/// reads of (nearly) 64 KiB, not in 49 KiB pieces.
#[tokio::test]
async fn relay_sized_reads_take_close_to_64_kib_each() {
    tokio::time::timeout(LIMIT, async {
        for method in [Method::Aes128Gcm, Method::ChaCha20Poly1305] {
            let server = ShadowsocksServer::new(vec![user(method, 4)], None);
            let config = ClientConfig {
                method,
                key: user(method, 4).key,
                identity_keys: Vec::new(),
            };
            // A Unix socket holds all of it (3 × 64 KiB and the chunks' overhead) at once,
            // so the reads below do not depend on timing.
            let (c, s) = tokio::net::UnixStream::pair().unwrap();
            let target = Address::Domain("example.com".into(), 443);
            let mut client = connect(Box::new(c), &config, &target).unwrap();
            let data = pattern(5, 3 * 65_536);
            for part in data.chunks(65_536) {
                client.write_all(part).await.unwrap();
            }
            client.flush().await.unwrap();
            let mut stream = accept(Box::new(s), &server).await.unwrap().stream;
            let mut buf = vec![0u8; 65_536];
            let (mut got, mut sizes) = (Vec::new(), Vec::new());
            while got.len() < data.len() {
                let n = stream.read(&mut buf).await.unwrap();
                assert!(n > 0);
                sizes.push(n);
                got.extend_from_slice(&buf[..n]);
            }
            assert_eq!(got, data, "{method:?}");
            // Every read but the last near 64 KiB (before: 49 134, 49 168, 49 153, 49 153).
            assert!(
                sizes.iter().rev().skip(1).all(|&n| n > 60_000) && sizes.len() <= 4,
                "{method:?}: read sizes {sizes:?}"
            );
        }
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn multi_user_2017_finds_the_user_across_methods() {
    tokio::time::timeout(LIMIT, async {
        let users = vec![
            user(Method::Aes128Gcm, 1),
            user(Method::ChaCha20Poly1305, 2),
            user(Method::Aes256Gcm, 3),
        ];
        for (i, u) in users.iter().enumerate() {
            let config = ClientConfig {
                method: u.method,
                key: u.key.clone(),
                identity_keys: Vec::new(),
            };
            round_trip(users.clone(), None, config, i).await;
        }
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn multi_user_2022_with_identity_headers() {
    tokio::time::timeout(LIMIT, async {
        for method in [Method::Blake3Aes128Gcm, Method::Blake3Aes256Gcm] {
            let ipsk = key_from_password(method, &psk(method, 100)).unwrap();
            let users = vec![user(method, 1), user(method, 2)];
            let config = ClientConfig {
                method,
                key: users[1].key.clone(),
                identity_keys: vec![ipsk.clone()],
            };
            round_trip(users, Some(ipsk), config, 1).await;
        }
    })
    .await
    .unwrap();
}

/// The raw first bytes a client sends: salt, headers, `payload`, with timestamp `ts`.
fn request_bytes(method: Method, key: &[u8], ts: u64, payload: &[u8]) -> Vec<u8> {
    let target = Address::Ip("127.0.0.1:9".parse().unwrap());
    let mut enc = Encoder::client(method, key, &[], random_salt(method), &target, 10).unwrap();
    let mut out = vec![0u8; enc.max_output(payload.len())];
    let (_, n) = enc.encode(payload, &mut out, ts);
    out.truncate(n);
    out
}

/// Sends `bytes` to a fresh connection into `server`; returns what accept said and whether
/// the server sent anything or closed before we did (it must do neither when refusing).
async fn probe(server: &Arc<ShadowsocksServer>, bytes: &[u8]) -> (io::Result<()>, bool) {
    let (mut c, s) = pair().await;
    let server = server.clone();
    let task =
        tokio::spawn(async move { accept(Box::new(s) as BoxStream, &server).await.map(|_| ()) });
    c.write_all(bytes).await.unwrap();
    // A refused request is drained: no byte, no close, for as long as we keep sending.
    let mut one = [0u8; 1];
    let quiet = tokio::time::timeout(Duration::from_millis(300), c.read(&mut one))
        .await
        .is_err();
    c.write_all(b"more bytes from the prober").await.unwrap();
    drop(c);
    let result = tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("accept ends once the client closes")
        .unwrap();
    (result, quiet)
}

#[tokio::test]
async fn replayed_salts_and_stale_timestamps_are_refused() {
    tokio::time::timeout(LIMIT, async {
        for method in [
            Method::Blake3Aes128Gcm,
            Method::Blake3ChaCha20Poly1305,
            Method::Aes128Gcm,
        ] {
            let u = user(method, 5);
            let server = Arc::new(ShadowsocksServer::new(vec![u.clone()], None));
            let first = request_bytes(method, &u.key, unix_now(), b"hello");
            let (accepted, _) = probe(&server, &first).await;
            assert!(
                accepted.is_ok(),
                "{method}: first use refused: {accepted:?}"
            );
            let (replayed, quiet) = probe(&server, &first).await;
            let e = replayed.unwrap_err();
            assert!(e.to_string().contains("replayed"), "{method}: {e}");
            assert!(quiet, "{method}: a replay got an answer or a close");
            if method.is_2022() {
                for skew in [-31i64, 31, -3600] {
                    let ts = unix_now().saturating_add_signed(skew);
                    let stale = request_bytes(method, &u.key, ts, b"hello");
                    let (refused, quiet) = probe(&server, &stale).await;
                    let e = refused.unwrap_err();
                    assert!(e.to_string().contains("timestamp"), "{method} {skew}: {e}");
                    assert!(quiet);
                }
                let fine = request_bytes(method, &u.key, unix_now() - 20, b"hello");
                assert!(probe(&server, &fine).await.0.is_ok());
            }
        }
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn wrong_keys_and_garbage_are_drained_silently() {
    tokio::time::timeout(LIMIT, async {
        for method in [Method::Aes256Gcm, Method::Blake3Aes256Gcm] {
            let server = Arc::new(ShadowsocksServer::new(vec![user(method, 1)], None));
            let wrong = request_bytes(method, &user(method, 2).key, unix_now(), b"x");
            let (refused, quiet) = probe(&server, &wrong).await;
            assert!(refused.is_err() && quiet, "{method}: wrong key");
            let (refused, quiet) = probe(&server, &pattern(9, 700)).await;
            assert!(refused.is_err() && quiet, "{method}: garbage");
            let (refused, quiet) = probe(&server, b"GET / HTTP/1.1\r\n\r\n").await;
            assert!(refused.is_err() && quiet, "{method}: short probe");
        }
        // A multi-user 2022 server refuses a client without an identity header.
        let method = Method::Blake3Aes128Gcm;
        let ipsk = key_from_password(method, &psk(method, 100)).unwrap();
        let server = Arc::new(ShadowsocksServer::new(vec![user(method, 1)], Some(ipsk)));
        let bare = request_bytes(method, &user(method, 1).key, unix_now(), b"x");
        assert!(probe(&server, &bare).await.0.is_err());
    })
    .await
    .unwrap();
}

/// After a burst, an idle connection holds no buffers on either side.
#[tokio::test]
async fn idle_connections_release_their_buffers() {
    tokio::time::timeout(LIMIT, async {
        let method = Method::ChaCha20Poly1305;
        let u = user(method, 4);
        let server = Arc::new(ShadowsocksServer::new(vec![u.clone()], None));
        let (c, s) = pair().await;
        let target = Address::Ip("127.0.0.1:9".parse().unwrap());
        let config = ClientConfig {
            method,
            key: u.key.clone(),
            identity_keys: Vec::new(),
        };
        let mut client = connect(Box::new(c), &config, &target).unwrap();
        client.write_all(&pattern(3, 200_000)).await.unwrap();
        client.flush().await.unwrap();
        let mut accepted = accept(Box::new(s), &server).await.unwrap();
        let mut got = vec![0u8; 200_000];
        accepted.stream.read_exact(&mut got).await.unwrap();
        assert_eq!(got, pattern(3, 200_000));
        accepted.stream.write_all(b"pong").await.unwrap();
        accepted.stream.flush().await.unwrap();
        let mut pong = [0u8; 4];
        client.read_exact(&mut pong).await.unwrap();
        // One more read attempt that finds nothing: the receive buffers go.
        for stream in [&mut client, &mut accepted.stream] {
            let pending = poll_fn(|cx| {
                let mut b = [0u8; 1];
                let mut rb = tokio::io::ReadBuf::new(&mut b);
                std::task::Poll::Ready(
                    std::pin::Pin::new(&mut *stream)
                        .poll_read(cx, &mut rb)
                        .is_pending(),
                )
            })
            .await;
            assert!(pending);
            assert_eq!(stream.buffered_capacity(), 0);
        }
    })
    .await
    .unwrap();
}

/// A client that only reads (server speaks first) still sends its request.
#[tokio::test]
async fn a_reading_client_sends_its_request_alone() {
    tokio::time::timeout(LIMIT, async {
        for method in [Method::Aes128Gcm, Method::Blake3Aes128Gcm] {
            let u = user(method, 6);
            let server = Arc::new(ShadowsocksServer::new(vec![u.clone()], None));
            let (c, s) = pair().await;
            let target = Address::Domain("smtp.example".into(), 25);
            let config = ClientConfig {
                method,
                key: u.key.clone(),
                identity_keys: Vec::new(),
            };
            let mut client = connect(Box::new(c), &config, &target).unwrap();
            let server_task = tokio::spawn(async move {
                let mut accepted = accept(Box::new(s), &server).await.unwrap();
                assert_eq!(
                    accepted.destination,
                    Address::Domain("smtp.example".into(), 25)
                );
                accepted.stream.write_all(b"220 hello\r\n").await.unwrap();
                accepted.stream.shutdown().await.unwrap();
            });
            let mut banner = Vec::new();
            client.read_to_end(&mut banner).await.unwrap();
            assert_eq!(banner, b"220 hello\r\n");
            server_task.await.unwrap();
        }
    })
    .await
    .unwrap();
}
