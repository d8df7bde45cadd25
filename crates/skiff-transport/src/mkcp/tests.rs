//! Skiff's mKCP client and listener against each other on loopback.

use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, watch};

use super::dial::MkcpDialer;
use super::listener;
use skiff_kcp::mkcp::{HeaderKind, MkcpConfig};

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

async fn echo_both_ways(config: MkcpConfig) {
    let socket = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
    let addr = socket.local_addr().unwrap();
    let (stop_tx, stop) = watch::channel(false);
    let (conns_tx, mut conns) = mpsc::unbounded_channel();
    let on_conn = Arc::new(move |s, _| {
        let _ = conns_tx.send(s);
    });
    tokio::spawn(listener::serve(socket, config.clone(), on_conn, stop));
    let dialer = MkcpDialer::new(config);
    let mut client = dialer.connect(addr).await.unwrap();
    let up = pattern(1, 3 << 20);
    let down = pattern(2, 2 << 20);
    client.write_all(b"hello").await.unwrap();
    let mut server = conns.recv().await.unwrap();
    let mut hello = [0u8; 5];
    server.read_exact(&mut hello).await.unwrap();
    assert_eq!(&hello, b"hello");
    let (mut cr, mut cw) = tokio::io::split(client);
    let (mut sr, mut sw) = tokio::io::split(server);
    let up2 = up.clone();
    let down2 = down.clone();
    let a = tokio::spawn(async move {
        cw.write_all(&up2).await.unwrap();
        cw
    });
    let b = tokio::spawn(async move {
        sw.write_all(&down2).await.unwrap();
        sw
    });
    let mut got_up = vec![0u8; up.len()];
    let mut got_down = vec![0u8; down.len()];
    let (r1, r2) = tokio::join!(sr.read_exact(&mut got_up), cr.read_exact(&mut got_down));
    r1.unwrap();
    r2.unwrap();
    assert!(got_up == up && got_down == down);
    let (_cw, _sw) = (a.await.unwrap(), b.await.unwrap());
    let _ = stop_tx.send(true);
}

#[tokio::test]
async fn loopback_bulk() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        echo_both_ways(MkcpConfig::default()).await;
        echo_both_ways(MkcpConfig {
            header: HeaderKind::Srtp,
            seed: Some("seed".into()),
            ..MkcpConfig::default()
        })
        .await;
    })
    .await
    .unwrap();
}
