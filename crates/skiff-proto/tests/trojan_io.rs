//! The async Trojan adapters over real loopback sockets: `server::accept` ↔ `client::connect`,
//! fallback replay of everything read, and UDP packets carrying many addresses on one stream.

use std::net::SocketAddr;
use std::time::Duration;

use skiff_core::{Address, BoxStream};
use skiff_proto::trojan::client;
use skiff_proto::trojan::codec::{Command, PasswordHash};
use skiff_proto::trojan::packet::TrojanPacketStream;
use skiff_proto::trojan::server::{TrojanAccept, TrojanServer, TrojanUser, accept};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const LIMIT: Duration = Duration::from_secs(30);

fn server() -> TrojanServer {
    TrojanServer::new([
        (
            PasswordHash::of("someone else"),
            TrojanUser {
                email: Some("other@example".into()),
            },
        ),
        (
            PasswordHash::of("password"),
            TrojanUser {
                email: Some("me@example".into()),
            },
        ),
        // Same password again: the first listed wins.
        (
            PasswordHash::of("password"),
            TrojanUser {
                email: Some("second@example".into()),
            },
        ),
    ])
}

async fn pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let (client, server) = tokio::join!(TcpStream::connect(addr), listener.accept());
    (client.unwrap(), server.unwrap().0)
}

async fn bounded<T>(future: impl Future<Output = T>) -> T {
    tokio::time::timeout(LIMIT, future)
        .await
        .expect("test timed out")
}

#[tokio::test]
async fn connect_relays_both_ways_with_the_header_in_the_first_write() {
    bounded(async {
        let (c, s) = pair().await;
        let destination = Address::Domain("example.com".into(), 443);
        let mut client = client::connect(
            Box::new(c),
            &PasswordHash::of("password"),
            &destination,
            Command::Connect,
        );
        client.write_all(b"hello trojan").await.unwrap();
        client.flush().await.unwrap();
        let TrojanAccept::Stream {
            destination: got,
            mut stream,
            user,
        } = accept(s, &server()).await.unwrap()
        else {
            panic!("not a stream");
        };
        assert_eq!(got, destination);
        assert_eq!(user.as_deref(), Some("me@example"));
        let mut buf = [0u8; 12];
        stream.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"hello trojan");
        stream.write_all(b"answer").await.unwrap();
        stream.shutdown().await.unwrap();
        let mut back = Vec::new();
        client.read_to_end(&mut back).await.unwrap();
        assert_eq!(back, b"answer");
    })
    .await;
}

#[tokio::test]
async fn a_reading_client_still_sends_its_header() {
    bounded(async {
        let (c, s) = pair().await;
        let mut client = client::connect(
            Box::new(c),
            &PasswordHash::of("password"),
            &Address::Ip("127.0.0.1:25".parse().unwrap()),
            Command::Connect,
        );
        let server_side = tokio::spawn(async move {
            let Ok(TrojanAccept::Stream { mut stream, .. }) = accept(s, &server()).await else {
                panic!("not a stream");
            };
            stream.write_all(b"220 ready\r\n").await.unwrap();
            stream.shutdown().await.unwrap();
        });
        let mut got = Vec::new();
        client.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"220 ready\r\n");
        server_side.await.unwrap();
    })
    .await;
}

async fn fallback_replays(first: &[u8], then: &[u8]) {
    let (mut c, s) = pair().await;
    c.write_all(first).await.unwrap();
    let expected = [first, then].concat();
    let writer = tokio::spawn({
        let then = then.to_vec();
        async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            c.write_all(&then).await.unwrap();
            c.shutdown().await.unwrap();
            c
        }
    });
    let TrojanAccept::Fallback { mut stream } = accept(s, &server()).await.unwrap() else {
        panic!(
            "expected a fallback for {:?}",
            String::from_utf8_lossy(first)
        );
    };
    let mut all = Vec::new();
    stream.read_to_end(&mut all).await.unwrap();
    assert_eq!(all, expected);
    drop(writer.await.unwrap());
}

#[tokio::test]
async fn anything_else_falls_back_with_every_byte_replayed() {
    bounded(async {
        // Plain HTTP.
        fallback_replays(
            b"GET /index.html HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n",
            b"more",
        )
        .await;
        // A well-formed request with the wrong password.
        let mut wrong = PasswordHash::of("wrong").as_bytes().to_vec();
        wrong.extend_from_slice(b"\r\n\x01\x01\x7f\x00\x00\x01\x00\x50\r\n");
        fallback_replays(&wrong, b"payload").await;
        // The right password, then garbage (trojan-gfw falls back here too).
        let mut bad = PasswordHash::of("password").as_bytes().to_vec();
        bad.extend_from_slice(b"\r\n\x05junk");
        fallback_replays(&bad, b"").await;
        // Shorter than a hash, then the end of the stream.
        fallback_replays(b"short", b"").await;
    })
    .await;
}

#[tokio::test]
async fn udp_packets_carry_many_addresses_on_one_stream() {
    bounded(async {
        let (c, s) = pair().await;
        let first = Address::Ip("127.0.0.1:53".parse().unwrap());
        let client: BoxStream = client::connect(
            Box::new(c),
            &PasswordHash::of("password"),
            &first,
            Command::UdpAssociate,
        );
        let (mut c_rx, mut c_tx) = TrojanPacketStream::new(client).into_split();
        let destinations = [
            first.clone(),
            Address::Domain("example.com".into(), 443),
            Address::Ip("[2001:db8::1]:5353".parse().unwrap()),
        ];
        let big = vec![0x5a; 9000];
        for (i, d) in destinations.iter().enumerate() {
            let payload = if i == 1 { &big[..] } else { &b"dns"[..] };
            c_tx.send(d, payload).await.unwrap();
        }
        let TrojanAccept::Udp {
            destination,
            stream,
            user,
        } = accept(s, &server()).await.unwrap()
        else {
            panic!("not UDP");
        };
        assert_eq!(destination, first);
        assert_eq!(user.as_deref(), Some("me@example"));
        let (mut s_rx, mut s_tx) = TrojanPacketStream::new(stream).into_split();
        for (i, d) in destinations.iter().enumerate() {
            let (address, payload) = s_rx.recv_packet().await.unwrap().unwrap();
            assert_eq!(&address, d);
            assert_eq!(payload.len(), if i == 1 { 9000 } else { 3 });
            s_tx.send(&address, &payload).await.unwrap();
        }
        for d in &destinations {
            let (address, _) = c_rx.recv_packet().await.unwrap().unwrap();
            assert_eq!(&address, d);
        }
        c_tx.shutdown().await.unwrap();
        assert!(s_rx.recv_packet().await.unwrap().is_none());
    })
    .await;
}
