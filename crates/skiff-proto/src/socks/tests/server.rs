//! The handshake, in process: a client over an in-memory pipe (or loopback TCP) against
//! `handshake`, checking the exact bytes the client gets and what the dispatcher receives.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use skiff_core::{Accepted, Address, ConnectOutcome, ProxyStream, Reply};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream, ReadBuf};

use crate::socks::codec::SocksError;
use crate::socks::server::{
    HandshakeError, SocksServerConfig, handshake, write_reply, write_udp_associate_reply,
};

/// An in-memory stream the handshake accepts (ProxyStream is only implemented for real
/// sockets in skiff-core).
struct Pipe(DuplexStream);

impl AsyncRead for Pipe {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for Pipe {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl ProxyStream for Pipe {}

/// A connected (client, server) pair; `capacity` bytes may be in flight each way.
fn pipe(capacity: usize) -> (DuplexStream, Pipe) {
    let (client, server) = tokio::io::duplex(capacity);
    (client, Pipe(server))
}

fn no_auth() -> SocksServerConfig {
    SocksServerConfig::default()
}

fn with_account() -> SocksServerConfig {
    SocksServerConfig {
        accounts: vec![
            ("alice".into(), "wonderland".into()),
            ("bob".into(), "builder".into()),
        ],
        udp_enabled: false,
    }
}

async fn read_exact<const N: usize>(client: &mut DuplexStream) -> [u8; N] {
    let mut buf = [0; N];
    client.read_exact(&mut buf).await.unwrap();
    buf
}

/// Asserts the client reads nothing more: the server closed.
async fn assert_closed(client: &mut DuplexStream) {
    let mut rest = Vec::new();
    client.read_to_end(&mut rest).await.unwrap();
    assert!(rest.is_empty(), "unexpected bytes {rest:02x?}");
}

const CONNECT_EXAMPLE_COM: &[u8] = b"\x05\x01\x00\x03\x0bexample.com\x01\xbb";
const SUCCESS_UNSPECIFIED: [u8; 10] = [5, 0, 0, 1, 0, 0, 0, 0, 0, 0];

fn expect_stream(accepted: Accepted) -> (Address, skiff_core::BoxStream, Reply, Option<String>) {
    match accepted {
        Accepted::Stream {
            destination,
            stream,
            reply,
            user,
            ..
        } => (destination, stream, reply, user),
        _ => panic!("expected Accepted::Stream"),
    }
}

#[tokio::test]
async fn socks5_no_auth_connect_step_by_step() {
    let (mut client, server) = pipe(64);
    let config = no_auth();
    let server = tokio::spawn(async move { handshake(server, &config).await });

    client.write_all(&[5, 1, 0]).await.unwrap();
    assert_eq!(read_exact::<2>(&mut client).await, [5, 0]);
    client.write_all(CONNECT_EXAMPLE_COM).await.unwrap();

    let (destination, mut stream, reply, user) = expect_stream(server.await.unwrap().unwrap());
    assert_eq!(destination, Address::Domain("example.com".into(), 443));
    assert_eq!(reply, Reply::Socks5);
    assert_eq!(user, None);

    write_reply(
        &mut stream,
        reply,
        ConnectOutcome::Connected { bound: None },
    )
    .await
    .unwrap();
    assert_eq!(read_exact::<10>(&mut client).await, SUCCESS_UNSPECIFIED);

    // The stream carries data both ways.
    client.write_all(b"ping").await.unwrap();
    let mut got = [0; 4];
    stream.read_exact(&mut got).await.unwrap();
    assert_eq!(&got, b"ping");
    stream.write_all(b"pong").await.unwrap();
    assert_eq!(&read_exact::<4>(&mut client).await, b"pong");
}

#[tokio::test]
async fn socks5_pipelined_early_payload_is_preserved() {
    let (mut client, server) = pipe(4096);
    // Greeting, request and the start of the payload in one write, before any reply.
    let mut hello = vec![5, 1, 0];
    hello.extend_from_slice(CONNECT_EXAMPLE_COM);
    hello.extend_from_slice(b"GET / HTTP/1.1\r\n");
    client.write_all(&hello).await.unwrap();

    let accepted = handshake(server, &no_auth()).await.unwrap();
    let (_, mut stream, _, _) = expect_stream(accepted);
    client.write_all(b"Host: x\r\n\r\n").await.unwrap();
    drop(client);
    let mut all = Vec::new();
    stream.read_to_end(&mut all).await.unwrap();
    assert_eq!(all, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
}

#[tokio::test]
async fn socks5_early_payload_is_also_a_residue_for_splice() {
    let (mut client, server) = pipe(4096);
    let mut hello = vec![5, 1, 0];
    hello.extend_from_slice(CONNECT_EXAMPLE_COM);
    hello.extend_from_slice(b"early");
    client.write_all(&hello).await.unwrap();
    let (_, mut stream, _, _) = expect_stream(handshake(server, &no_auth()).await.unwrap());
    assert_eq!(stream.take_read_residue().as_deref(), Some(&b"early"[..]));
    assert_eq!(stream.take_read_residue(), None);
}

#[tokio::test]
async fn socks5_password_handshake() {
    let (mut client, server) = pipe(64);
    let config = with_account();
    let server = tokio::spawn(async move { handshake(server, &config).await });

    client.write_all(&[5, 2, 0, 2]).await.unwrap();
    assert_eq!(read_exact::<2>(&mut client).await, [5, 2]);
    client.write_all(b"\x01\x03bob\x07builder").await.unwrap();
    assert_eq!(read_exact::<2>(&mut client).await, [1, 0]);
    client
        .write_all(&[5, 1, 0, 1, 10, 0, 0, 1, 0, 80])
        .await
        .unwrap();

    let (destination, _, reply, user) = expect_stream(server.await.unwrap().unwrap());
    assert_eq!(destination, Address::Ip("10.0.0.1:80".parse().unwrap()));
    assert_eq!(reply, Reply::Socks5);
    assert_eq!(user.as_deref(), Some("bob"));
}

#[tokio::test]
async fn socks5_wrong_password_is_refused() {
    let (mut client, server) = pipe(64);
    let config = with_account();
    let server = tokio::spawn(async move { handshake(server, &config).await });

    client.write_all(&[5, 1, 2]).await.unwrap();
    assert_eq!(read_exact::<2>(&mut client).await, [5, 2]);
    client.write_all(b"\x01\x05alice\x07builder").await.unwrap();
    assert_eq!(read_exact::<2>(&mut client).await, [1, 1]);

    let err = server.await.unwrap().err().unwrap();
    assert!(
        matches!(err, HandshakeError::Socks(SocksError::AuthFailed)),
        "{err}"
    );
    assert_closed(&mut client).await;
}

#[tokio::test]
async fn socks5_bad_auth_version_gets_a_failure_status() {
    let (mut client, server) = pipe(64);
    client.write_all(&[5, 1, 2, 5, 1, 0, 1]).await.unwrap();
    let err = handshake(server, &with_account()).await.err().unwrap();
    assert!(
        matches!(err, HandshakeError::Socks(SocksError::BadAuthVersion(5))),
        "{err}"
    );
    assert_eq!(read_exact::<4>(&mut client).await, [5, 2, 1, 1]);
    assert_closed(&mut client).await;
}

#[tokio::test]
async fn socks5_no_acceptable_method() {
    // Accounts configured, client only offers "no auth".
    let (mut client, server) = pipe(64);
    client.write_all(&[5, 1, 0]).await.unwrap();
    let err = handshake(server, &with_account()).await.err().unwrap();
    assert!(matches!(
        err,
        HandshakeError::Socks(SocksError::NoAcceptableMethod)
    ));
    assert_eq!(read_exact::<2>(&mut client).await, [5, 0xFF]);
    assert_closed(&mut client).await;

    // No accounts, client only offers username/password (or nothing at all).
    for greeting in [&[5, 1, 2][..], &[5, 0][..]] {
        let (mut client, server) = pipe(64);
        client.write_all(greeting).await.unwrap();
        let err = handshake(server, &no_auth()).await.err().unwrap();
        assert!(matches!(
            err,
            HandshakeError::Socks(SocksError::NoAcceptableMethod)
        ));
        assert_eq!(read_exact::<2>(&mut client).await, [5, 0xFF]);
    }
}

#[tokio::test]
async fn socks5_longest_credentials_pipelined_with_payload() {
    // 3 + 513 + 10 bytes of handshake plus payload, in one write: exercises the buffer
    // refilling after the largest message.
    let user = "u".repeat(255);
    let pass = "p".repeat(255);
    let config = SocksServerConfig {
        accounts: vec![(user.clone(), pass.clone())],
        udp_enabled: false,
    };
    let mut hello = vec![5, 1, 2, 1, 255];
    hello.extend_from_slice(user.as_bytes());
    hello.push(255);
    hello.extend_from_slice(pass.as_bytes());
    hello.extend_from_slice(&[5, 1, 0, 1, 1, 2, 3, 4, 0, 80]);
    hello.extend_from_slice(&[b'x'; 1000]);

    let (mut client, server) = pipe(8192);
    client.write_all(&hello).await.unwrap();
    // Half-close: the server still writes its replies (dropping would make them fail).
    client.shutdown().await.unwrap();
    let (destination, mut stream, _, got_user) =
        expect_stream(handshake(server, &config).await.unwrap());
    assert_eq!(destination, Address::Ip("1.2.3.4:80".parse().unwrap()));
    assert_eq!(got_user, Some(user));
    let mut payload = Vec::new();
    stream.read_to_end(&mut payload).await.unwrap();
    assert_eq!(payload, vec![b'x'; 1000]);
    assert_eq!(read_exact::<4>(&mut client).await, [5, 2, 1, 0]);
}

#[tokio::test]
async fn socks5_one_byte_at_a_time() {
    // A pipe of capacity 1: the server sees every message split at every point.
    let (mut client, server) = pipe(1);
    let config = with_account();
    let server = tokio::spawn(async move { handshake(server, &config).await });
    let client_side = async move {
        client.write_all(&[5, 2, 0, 2]).await.unwrap();
        assert_eq!(read_exact::<2>(&mut client).await, [5, 2]);
        client
            .write_all(b"\x01\x05alice\x0awonderland")
            .await
            .unwrap();
        assert_eq!(read_exact::<2>(&mut client).await, [1, 0]);
        client.write_all(CONNECT_EXAMPLE_COM).await.unwrap();
        client
    };
    let (mut client, accepted) = tokio::join!(client_side, server);
    let (destination, mut stream, _, user) = expect_stream(accepted.unwrap().unwrap());
    assert_eq!(destination, Address::Domain("example.com".into(), 443));
    assert_eq!(user.as_deref(), Some("alice"));
    // The pipe holds one byte: write the rest while the other side reads.
    let writer = tokio::spawn(async move {
        client.write_all(b"after").await.unwrap();
        client.shutdown().await.unwrap();
    });
    let mut rest = Vec::new();
    stream.read_to_end(&mut rest).await.unwrap();
    writer.await.unwrap();
    assert_eq!(rest, b"after");
}

#[tokio::test]
async fn socks5_failed_connect_replies() {
    let cases = [
        (io::ErrorKind::ConnectionRefused, 0x05),
        (io::ErrorKind::HostUnreachable, 0x04),
        (io::ErrorKind::NetworkUnreachable, 0x03),
        (io::ErrorKind::TimedOut, 0x04),
        (io::ErrorKind::Other, 0x01),
    ];
    for (kind, code) in cases {
        let (mut client, mut server) = pipe(64);
        let error = io::Error::from(kind);
        write_reply(&mut server, Reply::Socks5, ConnectOutcome::Failed(&error))
            .await
            .unwrap();
        assert_eq!(
            read_exact::<10>(&mut client).await,
            [5, code, 0, 1, 0, 0, 0, 0, 0, 0]
        );
    }
}

#[tokio::test]
async fn socks5_success_reply_carries_the_bound_address() {
    let (mut client, mut server) = pipe(64);
    let bound: SocketAddr = "192.0.2.7:40000".parse().unwrap();
    let outcome = ConnectOutcome::Connected { bound: Some(bound) };
    write_reply(&mut server, Reply::Socks5, outcome)
        .await
        .unwrap();
    assert_eq!(
        read_exact::<10>(&mut client).await,
        [5, 0, 0, 1, 192, 0, 2, 7, 0x9c, 0x40]
    );

    // IPv4-mapped goes out as IPv4; real IPv6 as IPv6.
    let mapped: SocketAddr = "[::ffff:192.0.2.7]:40000".parse().unwrap();
    let outcome = ConnectOutcome::Connected {
        bound: Some(mapped),
    };
    write_reply(&mut server, Reply::Socks5, outcome)
        .await
        .unwrap();
    assert_eq!(
        read_exact::<10>(&mut client).await,
        [5, 0, 0, 1, 192, 0, 2, 7, 0x9c, 0x40]
    );
    let v6: SocketAddr = "[2001:db8::2]:1".parse().unwrap();
    write_reply(
        &mut server,
        Reply::Socks5,
        ConnectOutcome::Connected { bound: Some(v6) },
    )
    .await
    .unwrap();
    let reply = read_exact::<22>(&mut client).await;
    assert_eq!(reply[..4], [5, 0, 0, 4]);
    assert_eq!(reply[20..], [0, 1]);

    // Nothing for Reply::None; HTTP is not ours to write.
    write_reply(
        &mut server,
        Reply::None,
        ConnectOutcome::Connected { bound: None },
    )
    .await
    .unwrap();
    let http = write_reply(
        &mut server,
        Reply::HttpConnect,
        ConnectOutcome::Connected { bound: None },
    );
    assert_eq!(http.await.unwrap_err().kind(), io::ErrorKind::InvalidInput);
    drop(server);
    assert_closed(&mut client).await;
}

#[tokio::test]
async fn socks5_bind_is_not_supported() {
    let (mut client, server) = pipe(64);
    client
        .write_all(&[5, 1, 0, 5, 2, 0, 1, 0, 0, 0, 0, 0, 0])
        .await
        .unwrap();
    let err = handshake(server, &no_auth()).await.err().unwrap();
    assert!(matches!(
        err,
        HandshakeError::Socks(SocksError::UnsupportedCommand(2))
    ));
    assert_eq!(
        read_exact::<12>(&mut client).await,
        [5, 0, 5, 7, 0, 1, 0, 0, 0, 0, 0, 0]
    );
    assert_closed(&mut client).await;
}

#[tokio::test]
async fn socks5_udp_associate_when_disabled_is_not_supported() {
    let (mut client, server) = pipe(64);
    client
        .write_all(&[5, 1, 0, 5, 3, 0, 1, 0, 0, 0, 0, 0, 0])
        .await
        .unwrap();
    let err = handshake(server, &no_auth()).await.err().unwrap();
    assert!(matches!(
        err,
        HandshakeError::Socks(SocksError::UnsupportedCommand(3))
    ));
    assert_eq!(
        read_exact::<12>(&mut client).await,
        [5, 0, 5, 7, 0, 1, 0, 0, 0, 0, 0, 0]
    );
}

#[tokio::test]
async fn socks5_udp_associate() {
    let (mut client, server) = pipe(64);
    let config = SocksServerConfig {
        udp_enabled: true,
        ..with_account()
    };
    let mut hello = vec![5, 1, 2];
    hello.extend_from_slice(b"\x01\x05alice\x0awonderland");
    hello.extend_from_slice(&[5, 3, 0, 1, 192, 168, 0, 9, 0x13, 0x88]);
    client.write_all(&hello).await.unwrap();

    let Accepted::UdpAssociate {
        mut control,
        client_hint,
        user,
    } = handshake(server, &config).await.unwrap()
    else {
        panic!("expected UdpAssociate");
    };
    assert_eq!(
        client_hint,
        Address::Ip("192.168.0.9:5000".parse().unwrap())
    );
    assert_eq!(user.as_deref(), Some("alice"));
    assert_eq!(read_exact::<4>(&mut client).await, [5, 2, 1, 0]);

    write_udp_associate_reply(&mut control, "127.0.0.1:53000".parse().unwrap())
        .await
        .unwrap();
    assert_eq!(
        read_exact::<10>(&mut client).await,
        [5, 0, 0, 1, 127, 0, 0, 1, 0xcf, 0x08]
    );
}

#[tokio::test]
async fn socks5_bad_address_type_and_bad_domain_replies() {
    let (mut client, server) = pipe(64);
    client.write_all(&[5, 1, 0, 5, 1, 0, 9]).await.unwrap();
    let err = handshake(server, &no_auth()).await.err().unwrap();
    assert!(matches!(
        err,
        HandshakeError::Socks(SocksError::BadAddressType(9))
    ));
    assert_eq!(
        read_exact::<12>(&mut client).await,
        [5, 0, 5, 8, 0, 1, 0, 0, 0, 0, 0, 0]
    );

    let (mut client, server) = pipe(64);
    client.write_all(&[5, 1, 0, 5, 1, 0, 3, 0]).await.unwrap();
    let err = handshake(server, &no_auth()).await.err().unwrap();
    assert!(matches!(
        err,
        HandshakeError::Socks(SocksError::EmptyDomain)
    ));
    assert_eq!(
        read_exact::<12>(&mut client).await,
        [5, 0, 5, 1, 0, 1, 0, 0, 0, 0, 0, 0]
    );
}

#[tokio::test]
async fn socks_not_socks_is_refused_silently() {
    let (mut client, server) = pipe(64);
    client.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
    let err = handshake(server, &no_auth()).await.err().unwrap();
    assert!(matches!(
        err,
        HandshakeError::Socks(SocksError::BadVersion(b'G'))
    ));
    assert_closed(&mut client).await;
}

#[tokio::test]
async fn socks_client_closing_mid_handshake_is_an_io_error() {
    for sent in [
        &[][..],
        &[5][..],
        &[5, 1, 0, 5, 1, 0, 3, 11, b'e'][..],
        &[4, 1, 0][..],
    ] {
        let (mut client, server) = pipe(64);
        client.write_all(sent).await.unwrap();
        client.shutdown().await.unwrap();
        let err = handshake(server, &no_auth()).await.err().unwrap();
        match err {
            HandshakeError::Io(e) => assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof),
            other => panic!("expected EOF, got {other}"),
        }
        let as_io: io::Error = HandshakeError::Socks(SocksError::AuthFailed).into();
        assert_eq!(as_io.kind(), io::ErrorKind::InvalidData);
    }
}

#[tokio::test]
async fn socks4_connect_with_early_payload() {
    let (mut client, server) = pipe(256);
    let mut hello = vec![4, 1, 0, 80, 10, 0, 0, 1];
    hello.extend_from_slice(b"Fred\0payload");
    client.write_all(&hello).await.unwrap();
    drop(client);
    let (destination, mut stream, reply, user) =
        expect_stream(handshake(server, &no_auth()).await.unwrap());
    assert_eq!(destination, Address::Ip("10.0.0.1:80".parse().unwrap()));
    assert_eq!(reply, Reply::Socks4);
    assert_eq!(user, None);
    let mut rest = Vec::new();
    stream.read_to_end(&mut rest).await.unwrap();
    assert_eq!(rest, b"payload");
}

#[tokio::test]
async fn socks4a_connect_and_replies() {
    let (mut client, server) = pipe(256);
    client
        .write_all(b"\x04\x01\x01\xbb\x00\x00\x00\x01\x00example.org\x00")
        .await
        .unwrap();
    let (destination, mut stream, reply, _) =
        expect_stream(handshake(server, &no_auth()).await.unwrap());
    assert_eq!(destination, Address::Domain("example.org".into(), 443));
    let bound = Some("10.9.8.7:258".parse().unwrap());
    write_reply(&mut stream, reply, ConnectOutcome::Connected { bound })
        .await
        .unwrap();
    assert_eq!(
        read_exact::<8>(&mut client).await,
        [0, 0x5A, 1, 2, 10, 9, 8, 7]
    );
    let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
    write_reply(&mut stream, reply, ConnectOutcome::Failed(&refused))
        .await
        .unwrap();
    assert_eq!(
        read_exact::<8>(&mut client).await,
        [0, 0x5B, 0, 0, 0, 0, 0, 0]
    );
}

#[tokio::test]
async fn socks4_refused_when_accounts_are_configured_or_bind() {
    let (mut client, server) = pipe(64);
    client
        .write_all(b"\x04\x01\x00\x50\x01\x02\x03\x04\x00")
        .await
        .unwrap();
    let err = handshake(server, &with_account()).await.err().unwrap();
    assert!(matches!(
        err,
        HandshakeError::Socks(SocksError::Socks4AuthRequired)
    ));
    assert_eq!(
        read_exact::<8>(&mut client).await,
        [0, 0x5B, 0, 0, 0, 0, 0, 0]
    );
    assert_closed(&mut client).await;

    let (mut client, server) = pipe(64);
    client
        .write_all(b"\x04\x02\x00\x50\x01\x02\x03\x04\x00")
        .await
        .unwrap();
    let err = handshake(server, &no_auth()).await.err().unwrap();
    assert!(matches!(
        err,
        HandshakeError::Socks(SocksError::UnsupportedCommand(2))
    ));
    assert_eq!(
        read_exact::<8>(&mut client).await,
        [0, 0x5B, 0, 0, 0, 0, 0, 0]
    );
}

#[tokio::test]
async fn socks4_overlong_user_id_is_rejected() {
    let (mut client, server) = pipe(2048);
    let mut hello = vec![4, 1, 0, 80, 1, 2, 3, 4];
    hello.extend_from_slice(&[b'u'; 600]);
    client.write_all(&hello).await.unwrap();
    let err = handshake(server, &no_auth()).await.err().unwrap();
    assert!(matches!(
        err,
        HandshakeError::Socks(SocksError::FieldTooLong)
    ));
    assert_eq!(
        read_exact::<8>(&mut client).await,
        [0, 0x5B, 0, 0, 0, 0, 0, 0]
    );
}

#[tokio::test]
async fn socks5_over_loopback_tcp_keeps_the_raw_socket() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let client = tokio::spawn(async move {
        let mut client = tokio::net::TcpStream::connect(addr).await.unwrap();
        client.write_all(&[5, 1, 0]).await.unwrap();
        let mut two = [0; 2];
        client.read_exact(&mut two).await.unwrap();
        assert_eq!(two, [5, 0]);
        let mut request = CONNECT_EXAMPLE_COM.to_vec();
        request.extend_from_slice(b"early");
        client.write_all(&request).await.unwrap();
        let mut reply = [0; 10];
        client.read_exact(&mut reply).await.unwrap();
        assert_eq!(reply, SUCCESS_UNSPECIFIED);
        client
    });
    let (server, _) = listener.accept().await.unwrap();
    let (destination, mut stream, reply, _) =
        expect_stream(handshake(server, &no_auth()).await.unwrap());
    assert_eq!(destination, Address::Domain("example.com".into(), 443));
    write_reply(
        &mut stream,
        reply,
        ConnectOutcome::Connected { bound: None },
    )
    .await
    .unwrap();
    let _client = client.await.unwrap();
    // The relay can still splice the socket once it has sent the early bytes on. (The early
    // bytes may or may not have arrived with the request, depending on TCP timing.)
    assert!(stream.raw_tcp().is_some());
    let mut early = stream
        .take_read_residue()
        .map(|b| b.to_vec())
        .unwrap_or_default();
    while early.len() < 5 {
        let mut buf = [0; 16];
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0);
        early.extend_from_slice(&buf[..n]);
    }
    assert_eq!(early, b"early");
}
