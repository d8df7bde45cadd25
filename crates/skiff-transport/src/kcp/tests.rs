//! Client and server drivers against each other on loopback: bytes arrive intact both ways,
//! FIN reaches the other side, for each smux version with and without snappy.

use std::sync::Arc;

use skiff_core::Address;
use skiff_kcp::smux::SmuxConfig;
use skiff_kcp::{Crypt, KcpConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UdpSocket;
use tokio::sync::watch;

use super::TunnelParams;
use super::client::KcpClient;
use super::server;

fn params(client: bool, version: u8, compress: bool) -> TunnelParams {
    let mut kcp = KcpConfig::kcptun_default(client);
    kcp.crypt = Crypt::Salsa20;
    kcp.key = "test".into();
    TunnelParams {
        kcp,
        smux: SmuxConfig::kcptun(version),
        compress,
        dscp: 0,
        sockbuf: 1 << 20,
    }
}

async fn echo_round_trip(version: u8, compress: bool, size: usize) {
    let socket = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
    let addr = socket.local_addr().unwrap();
    let (stop_tx, stop) = watch::channel(false);
    // The server echoes every stream, then closes its side after the client's FIN.
    let on_stream = Arc::new(|stream: super::stream::KcpStream, _| {
        tokio::spawn(async move {
            let (mut r, mut w) = tokio::io::split(stream);
            let _ = tokio::io::copy(&mut r, &mut w).await;
            let _ = w.shutdown().await;
        });
    });
    tokio::spawn(server::serve(
        socket,
        params(false, version, compress),
        on_stream,
        stop,
    ));
    let client = KcpClient::new(params(true, version, compress), Address::Ip(addr), 1);
    let stream = client.open().await.unwrap();
    let (mut r, mut w) = tokio::io::split(stream);
    let data: Vec<u8> = (0..size).map(|i| (i * 7 % 251) as u8).collect();
    let sent = data.clone();
    let writer = tokio::spawn(async move {
        w.write_all(&sent).await.unwrap();
        w
    });
    let mut back = vec![0u8; data.len()];
    tokio::time::timeout(std::time::Duration::from_secs(60), r.read_exact(&mut back))
        .await
        .expect("echo within 60 s")
        .unwrap();
    assert!(back == data);
    // smux has no half-close, so FIN only after the echo; the server's FIN follows.
    let mut w = writer.await.unwrap();
    w.shutdown().await.unwrap();
    let mut rest = Vec::new();
    r.read_to_end(&mut rest).await.unwrap();
    assert!(rest.is_empty());
    let _ = stop_tx.send(true);
}

#[tokio::test]
async fn v1_snappy_echo() {
    echo_round_trip(1, true, 3 << 20).await;
}

#[tokio::test]
async fn v2_plain_echo() {
    echo_round_trip(2, false, 3 << 20).await;
}

/// Two clients (two peers to the demultiplexer), two sessions each, three streams per
/// session, all at once: every stream gets its own bytes back.
#[tokio::test]
async fn many_peers_and_streams_at_once() {
    let socket = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
    let addr = socket.local_addr().unwrap();
    let (stop_tx, stop) = watch::channel(false);
    let on_stream = Arc::new(|stream: super::stream::KcpStream, _| {
        tokio::spawn(async move {
            let (mut r, mut w) = tokio::io::split(stream);
            let _ = tokio::io::copy(&mut r, &mut w).await;
            let _ = w.shutdown().await;
        });
    });
    tokio::spawn(server::serve(
        socket,
        params(false, 2, true),
        on_stream,
        stop,
    ));
    let clients: Vec<Arc<KcpClient>> = (0..2)
        .map(|_| Arc::new(KcpClient::new(params(true, 2, true), Address::Ip(addr), 2)))
        .collect();
    let mut tasks = Vec::new();
    for (c, client) in clients.iter().enumerate() {
        for s in 0..6u8 {
            let client = client.clone();
            tasks.push(tokio::spawn(async move {
                let stream = client.open().await.unwrap();
                let (mut r, mut w) = tokio::io::split(stream);
                let data: Vec<u8> = (0..256 * 1024)
                    .map(|i| (i as u8) ^ s ^ (c as u8 * 16))
                    .collect();
                let sent = data.clone();
                let writer = tokio::spawn(async move {
                    w.write_all(&sent).await.unwrap();
                    w
                });
                let mut back = vec![0u8; data.len()];
                r.read_exact(&mut back).await.unwrap();
                assert!(back == data, "stream {c}/{s} differs");
                writer.await.unwrap().shutdown().await.unwrap();
                let mut rest = Vec::new();
                r.read_to_end(&mut rest).await.unwrap();
                assert!(rest.is_empty());
            }));
        }
    }
    for t in tasks {
        tokio::time::timeout(std::time::Duration::from_secs(60), t)
            .await
            .expect("within 60 s")
            .unwrap();
    }
    let _ = stop_tx.send(true);
}

/// Garbage datagrams (random bytes, wrong key) start no session and harm none.
#[tokio::test]
async fn garbage_starts_nothing() {
    let socket = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
    let addr = socket.local_addr().unwrap();
    let (stop_tx, stop) = watch::channel(false);
    let streams = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = streams.clone();
    let on_stream = Arc::new(move |_stream: super::stream::KcpStream, _| {
        counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    });
    tokio::spawn(server::serve(
        socket,
        params(false, 1, true),
        on_stream,
        stop,
    ));
    let prober = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for len in [0usize, 1, 19, 20, 24, 28, 100, 1400, 1500] {
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed as u8
            })
            .collect();
        prober.send_to(&bytes, addr).await.unwrap();
    }
    // A real client with the wrong key: its datagrams fail the checksum.
    let mut wrong = params(true, 1, true);
    wrong.kcp.key = "not the key".into();
    let client = KcpClient::new(wrong, Address::Ip(addr), 1);
    let stream = client.open().await.unwrap();
    let (_r, mut w) = tokio::io::split(stream);
    w.write_all(b"hello").await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(streams.load(std::sync::atomic::Ordering::SeqCst), 0);
    let _ = stop_tx.send(true);
}

/// A client that hangs up in the middle of a download stops the server's writer: smux has no
/// half-close, so the server does not go on pushing the rest into a stream nobody reads.
#[tokio::test]
async fn hang_up_stops_the_servers_writer() {
    let socket = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
    let addr = socket.local_addr().unwrap();
    let (stop_tx, stop) = watch::channel(false);
    let (done_tx, done) = tokio::sync::oneshot::channel::<usize>();
    let done_tx = std::sync::Mutex::new(Some(done_tx));
    let on_stream = Arc::new(move |mut stream: super::stream::KcpStream, _| {
        let Some(done_tx) = done_tx.lock().unwrap().take() else {
            return;
        };
        tokio::spawn(async move {
            let chunk = vec![0x33u8; 64 * 1024];
            let mut written = 0;
            // Bounded: 1 GiB would take far longer than the test allows.
            while written < 1 << 30 {
                match stream.write(&chunk).await {
                    Ok(n) => written += n,
                    Err(_) => break,
                }
            }
            let _ = done_tx.send(written);
        });
    });
    tokio::spawn(server::serve(
        socket,
        params(false, 1, false),
        on_stream,
        stop,
    ));
    let client = KcpClient::new(params(true, 1, false), Address::Ip(addr), 1);
    let mut stream = client.open().await.unwrap();
    stream.write_all(b"GET").await.unwrap();
    let mut got = vec![0u8; 1 << 20];
    stream.read_exact(&mut got).await.unwrap();
    drop(stream);
    let written = tokio::time::timeout(std::time::Duration::from_secs(10), done)
        .await
        .expect("the server's writer fails within 10 s of the hang-up")
        .unwrap();
    assert!(
        written < 256 << 20,
        "server wrote {written} bytes after a 1 MiB read"
    );
    let _ = stop_tx.send(true);
}
