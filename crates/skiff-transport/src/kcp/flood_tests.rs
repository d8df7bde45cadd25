//! A kcptun server under a flood of forged peers: sessions stay within the per-source cap,
//! garbled, truncated and replayed datagrams start nothing extra, silent sessions expire and
//! give their slots back, and a real client is served throughout.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use skiff_core::Address;
use skiff_kcp::smux::SmuxConfig;
use skiff_kcp::{Crypt, KcpConfig, KcpSession};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UdpSocket;
use tokio::sync::watch;

use super::TunnelParams;
use super::client::KcpClient;
use super::server;
use crate::udp_sessions::Limits;

const LIMITS: Limits = Limits {
    sessions: 64,
    per_source: 16,
    queue: 8,
    queued_bytes: 64 * 1024,
};
/// The server drops a session that heard nothing for this long.
const SILENCE_MS: u32 = 600;

fn params(client: bool) -> TunnelParams {
    let mut kcp = KcpConfig::kcptun_default(client);
    kcp.crypt = Crypt::Aes;
    kcp.key = "flood".into();
    let mut smux = SmuxConfig::kcptun(1);
    smux.keepalive_timeout_ms = SILENCE_MS;
    smux.keepalive_interval_ms = 100;
    TunnelParams {
        kcp,
        smux,
        compress: false,
        dscp: 0,
        sockbuf: 1 << 20,
    }
}

/// A valid first datagram of conversation `conv`: one KCP segment carrying an smux v1 SYN
/// for stream 1, sealed with the right key, as a forger who knows the key would send it.
fn forged_syn(conv: u32) -> Vec<u8> {
    let mut session = KcpSession::new(conv, &params(true).kcp).unwrap();
    let syn = [1u8, 0, 0, 0, 1, 0, 0, 0];
    assert_eq!(session.send(&syn), syn.len());
    session.update(0);
    let mut datagram = Vec::new();
    assert!(session.poll_datagram(&mut datagram));
    datagram
}

/// Sends one forged SYN from each of `sources` fresh sockets on 127.0.0.2, with garbled,
/// truncated and replayed copies around it; returns the sockets (kept open).
async fn flood(server: std::net::SocketAddr, sources: u32, first_conv: u32) -> Vec<UdpSocket> {
    let mut sockets = Vec::new();
    for i in 0..sources {
        let socket = UdpSocket::bind("127.0.0.2:0").await.unwrap();
        let syn = forged_syn(first_conv + i);
        for cut in [0, 1, 20, 27, syn.len() / 2, syn.len() - 1] {
            socket.send_to(&syn[..cut], server).await.unwrap();
        }
        let mut garbled = syn.clone();
        garbled[syn.len() / 2] ^= 0x40;
        socket.send_to(&garbled, server).await.unwrap();
        for _ in 0..3 {
            socket.send_to(&syn, server).await.unwrap();
        }
        // More conversation IDs from the same address go to its one session and are dropped.
        for extra in 1..=5 {
            socket
                .send_to(&forged_syn(first_conv + 10_000 * extra + i), server)
                .await
                .unwrap();
        }
        sockets.push(socket);
    }
    sockets
}

async fn wait_for(count: &AtomicUsize, at_least: usize) -> usize {
    for _ in 0..100 {
        if count.load(Ordering::SeqCst) >= at_least {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Give stragglers a moment: the cap, not timing, must hold the count.
    tokio::time::sleep(Duration::from_millis(100)).await;
    count.load(Ordering::SeqCst)
}

#[tokio::test]
async fn forged_peers_are_capped_and_expire() {
    let socket = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
    let addr = socket.local_addr().unwrap();
    let (stop_tx, stop) = watch::channel(false);
    let forged = Arc::new(AtomicUsize::new(0));
    let counted = forged.clone();
    let on_stream = Arc::new(
        move |stream: super::stream::KcpStream, from: std::net::SocketAddr| {
            if from.ip() == std::net::IpAddr::from([127, 0, 0, 2]) {
                counted.fetch_add(1, Ordering::SeqCst);
                return;
            }
            tokio::spawn(async move {
                let (mut r, mut w) = tokio::io::split(stream);
                let _ = tokio::io::copy(&mut r, &mut w).await;
                let _ = w.shutdown().await;
            });
        },
    );
    tokio::spawn(server::serve_with_limits(
        socket,
        params(false),
        on_stream,
        stop,
        LIMITS,
    ));

    let first = flood(addr, 40, 1).await;
    let admitted = wait_for(&forged, LIMITS.per_source).await;
    assert_eq!(admitted, LIMITS.per_source, "40 forged sources, one IP");

    // A real client from another address is served while the flood's sessions hold their slots.
    let client = KcpClient::new(params(true), Address::Ip(addr), 1);
    let stream = client.open().await.unwrap();
    let (mut r, mut w) = tokio::io::split(stream);
    let data: Vec<u8> = (0..1 << 20).map(|i: u32| (i * 31 % 253) as u8).collect();
    let sent = data.clone();
    let writer = tokio::spawn(async move {
        w.write_all(&sent).await.unwrap();
        w
    });
    let mut back = vec![0u8; data.len()];
    tokio::time::timeout(Duration::from_secs(30), r.read_exact(&mut back))
        .await
        .expect("echo within 30 s")
        .unwrap();
    assert!(back == data, "echo intact during the flood");
    drop((writer.await.unwrap(), r));

    // The forged sessions never answer: after the silence timeout their slots come back.
    tokio::time::sleep(Duration::from_millis(u64::from(SILENCE_MS) * 2)).await;
    let second = flood(addr, 40, 100_000).await;
    let total = wait_for(&forged, 2 * LIMITS.per_source).await;
    assert_eq!(
        total,
        2 * LIMITS.per_source,
        "expired sessions reclaimed once"
    );
    drop((first, second));
    let _ = stop_tx.send(true);
}
