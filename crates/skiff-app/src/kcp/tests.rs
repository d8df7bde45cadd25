//! Client and server drivers against each other on loopback: bytes arrive intact both ways,
//! half-close reaches the other side, for each smux version with and without snappy.

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
        w.shutdown().await.unwrap();
        w
    });
    let mut back = Vec::new();
    tokio::time::timeout(std::time::Duration::from_secs(60), r.read_to_end(&mut back))
        .await
        .expect("echo within 60 s")
        .unwrap();
    assert_eq!(back.len(), data.len());
    assert!(back == data);
    drop(writer.await.unwrap());
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
