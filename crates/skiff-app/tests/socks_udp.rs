//! SOCKS5 UDP ASSOCIATE to a local UDP echo server: 1000 datagrams of sizes 1..1400 come back
//! intact, in order, each with the echo server's address in its header.

mod common;

use std::time::Duration;

use common::*;
use skiff_core::Network;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousand_datagrams_echo_intact() {
    tokio::time::timeout(TEST_DEADLINE, async {
        let echo = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let echo_addr = echo.local_addr().unwrap();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 2048];
            for _ in 0..2000 {
                let Ok((n, from)) = echo.recv_from(&mut buf).await else {
                    break;
                };
                let _ = echo.send_to(&buf[..n], from).await;
            }
        });
        let running = start(&format!(
            r#"{{ "inbounds": [{{ "tag": "socks-in", "listen": "127.0.0.1", "port": {},
                   "protocol": "socks", "settings": {{ "udp": true }} }}],
                 "outbounds": [{{ "protocol": "freedom" }}] }}"#,
            free_port()
        ))
        .await;
        let proxy = running.address_of("socks-in", Network::Tcp).unwrap();
        let mut control = TcpStream::connect(proxy).await.unwrap();
        control.write_all(&[5, 1, 0]).await.unwrap();
        let mut method = [0u8; 2];
        control.read_exact(&mut method).await.unwrap();
        assert_eq!(method, [5, 0]);
        control
            .write_all(&[5, 3, 0, 1, 0, 0, 0, 0, 0, 0])
            .await
            .unwrap();
        let mut reply = [0u8; 10];
        control.read_exact(&mut reply).await.unwrap();
        assert_eq!(&reply[..4], &[5, 0, 0, 1], "UDP ASSOCIATE reply");
        let relay = std::net::SocketAddr::from((
            [reply[4], reply[5], reply[6], reply[7]],
            u16::from_be_bytes([reply[8], reply[9]]),
        ));

        let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let mut header = vec![0, 0, 0, 1];
        header.extend_from_slice(&[127, 0, 0, 1]);
        header.extend_from_slice(&echo_addr.port().to_be_bytes());
        let mut payload = Payload::new(99, u64::MAX);
        let mut back = vec![0u8; 4096];
        for i in 0..1000usize {
            let size = i % 1400 + 1;
            let mut datagram = header.clone();
            let start = datagram.len();
            datagram.resize(start + size, 0);
            payload.fill(&mut datagram[start..]);
            client.send_to(&datagram, relay).await.unwrap();
            let n = tokio::time::timeout(Duration::from_secs(5), client.recv(&mut back))
                .await
                .unwrap_or_else(|_| panic!("datagram {i} of {size} bytes did not come back"))
                .unwrap();
            assert_eq!(&back[..n], &datagram[..], "datagram {i}");
        }
        drop(control);
    })
    .await
    .expect("test deadline");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tunnel_udp_sessions_reach_the_fixed_destination() {
    tokio::time::timeout(TEST_DEADLINE, async {
        let echo = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let echo_addr = echo.local_addr().unwrap();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 2048];
            for _ in 0..200 {
                let Ok((n, from)) = echo.recv_from(&mut buf).await else {
                    break;
                };
                let _ = echo.send_to(&buf[..n], from).await;
            }
        });
        let running = start(&format!(
            r#"{{ "inbounds": [{{ "tag": "fwd", "listen": "127.0.0.1", "port": {},
                   "protocol": "dokodemo-door",
                   "settings": {{ "address": "127.0.0.1", "port": {}, "network": "udp" }} }}],
                 "outbounds": [{{ "protocol": "freedom" }}] }}"#,
            free_port(),
            echo_addr.port()
        ))
        .await;
        let entry = running.address_of("fwd", Network::Udp).unwrap();
        // Two clients get two independent sessions.
        for client_no in 0..2u8 {
            let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
            for i in 0..50u8 {
                let msg = [client_no, i, 0xAB, 0xCD];
                client.send_to(&msg, entry).await.unwrap();
                let mut back = [0u8; 16];
                let n = tokio::time::timeout(Duration::from_secs(5), client.recv(&mut back))
                    .await
                    .expect("echo within 5 s")
                    .unwrap();
                assert_eq!(&back[..n], &msg);
            }
        }
    })
    .await
    .expect("test deadline");
}
