//! Helpers shared by the data-path tests: start an instance from JSON, deterministic payloads,
//! a source/sink server that hashes what it gets, and a minimal SOCKS5 client.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::Duration;

use sha2::{Digest, Sha256};
use skiff_app::Running;
use skiff_config::Source;
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub const MIB: u64 = 1024 * 1024;

/// Every test ends within this, whatever goes wrong.
pub const TEST_DEADLINE: Duration = Duration::from_secs(120);

pub async fn start(json: &str) -> Running {
    let loaded = skiff_config::load_sources(&[Source {
        name: "test.json".into(),
        text: json.into(),
    }])
    .unwrap_or_else(|errors| {
        panic!(
            "config rejected: {}",
            errors
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        )
    });
    // The tests read inbound and outbound counters, which only the system policy lists.
    let mut plan = loaded.plan;
    plan.policy.system = skiff_config::SystemPolicy {
        stats_inbound_uplink: true,
        stats_inbound_downlink: true,
        stats_outbound_uplink: true,
        stats_outbound_downlink: true,
    };
    Running::start(&plan).await.expect("instance starts")
}

/// A port that was free a moment ago on 127.0.0.1.
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// Deterministic pseudo-random bytes (xorshift64*): as good as random for catching
/// reordering or corruption, and reproducible from a seed.
pub struct Payload {
    state: u64,
    remaining: u64,
}

impl Payload {
    pub fn new(seed: u64, len: u64) -> Payload {
        Payload {
            state: seed | 1,
            remaining: len,
        }
    }

    /// Fills `buf` with the next bytes; returns how many (0 at the end).
    pub fn fill(&mut self, buf: &mut [u8]) -> usize {
        let n = (buf.len() as u64).min(self.remaining) as usize;
        for chunk in buf[..n].chunks_mut(8) {
            self.state ^= self.state >> 12;
            self.state ^= self.state << 25;
            self.state ^= self.state >> 27;
            let v = self.state.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
        self.remaining -= n as u64;
        n
    }

    pub fn digest(seed: u64, len: u64) -> [u8; 32] {
        let mut p = Payload::new(seed, len);
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 256 * 1024];
        loop {
            let n = p.fill(&mut buf);
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
        }
        hasher.finalize().into()
    }
}

/// Writes the payload, then shuts down the write side.
pub async fn send_payload<W: AsyncWrite + Unpin>(w: &mut W, seed: u64, len: u64) {
    let mut p = Payload::new(seed, len);
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = p.fill(&mut buf);
        if n == 0 {
            break;
        }
        w.write_all(&buf[..n]).await.expect("write payload");
    }
    w.shutdown().await.expect("shutdown write");
}

/// Reads to EOF, returning (bytes, SHA-256).
pub async fn hash_until_eof<R: tokio::io::AsyncRead + Unpin>(r: &mut R) -> (u64, [u8; 32]) {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut total = 0u64;
    loop {
        let n = r.read(&mut buf).await.expect("read payload");
        if n == 0 {
            break;
        }
        total += n as u64;
        hasher.update(&buf[..n]);
    }
    (total, hasher.finalize().into())
}

/// A server for one connection that, at the same time, hashes everything it receives and
/// sends `len` bytes of payload `seed`. Returns its address and a handle to (bytes, digest).
pub async fn source_sink(
    seed: u64,
    len: u64,
) -> (SocketAddr, tokio::task::JoinHandle<(u64, [u8; 32])>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let handle = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let (mut r, mut w) = stream.into_split();
        let sender = tokio::spawn(async move { send_payload(&mut w, seed, len).await });
        let got = hash_until_eof(&mut r).await;
        sender.await.unwrap();
        got
    });
    (addr, handle)
}

/// Minimal SOCKS5 CONNECT (no auth) by hand, so the test does not trust our own codec.
pub async fn socks5_connect(proxy: SocketAddr, host: &str, port: u16) -> TcpStream {
    let mut s = TcpStream::connect(proxy).await.unwrap();
    s.write_all(&[5, 1, 0]).await.unwrap();
    let mut reply = [0u8; 2];
    s.read_exact(&mut reply).await.unwrap();
    assert_eq!(reply, [5, 0]);
    let mut req = vec![5, 1, 0, 3, host.len() as u8];
    req.extend_from_slice(host.as_bytes());
    req.extend_from_slice(&port.to_be_bytes());
    s.write_all(&req).await.unwrap();
    let mut head = [0u8; 4];
    s.read_exact(&mut head).await.unwrap();
    assert_eq!(head[1], 0, "SOCKS5 reply code");
    let rest = match head[3] {
        1 => 4 + 2,
        4 => 16 + 2,
        _ => panic!("unexpected bound address type {}", head[3]),
    };
    let mut skip = vec![0u8; rest];
    s.read_exact(&mut skip).await.unwrap();
    s
}
