//! Skiff's gRPC client against its own server over loopback TCP: calls opened on one kept
//! connection, data both ways with the half-closes, and a call to another path refused with
//! gRPC-go's status.

use std::sync::Arc;
use std::time::Duration;

use skiff_core::tcp_tuning::TcpTuning;
use skiff_core::{Address, BoxStream, Dialer, LayerSession, Metadata, MultiplexServer, TunnelSink};
use skiff_transport::grpc::{GrpcClientOptions, GrpcDialer, GrpcServer, Windows};
use skiff_transport::tcp::TcpDialer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const LIMIT: Duration = Duration::from_secs(20);

/// A server whose every tunnel echoes what it reads, then ends its side at the client's end;
/// with `after_end`, it answers only once the client's side ended, all it read at once.
async fn echo_server(service: &str) -> (Address, Arc<std::sync::atomic::AtomicUsize>) {
    server(service, false).await
}

async fn server(service: &str, after_end: bool) -> (Address, Arc<std::sync::atomic::AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = Address::Ip(listener.local_addr().unwrap());
    let server = Arc::new(GrpcServer::new(service, Windows::new(0), None));
    let connections = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = connections.clone();
    tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let server = server.clone();
            let sink: TunnelSink = Arc::new(move |mut tunnel: BoxStream, _| {
                tokio::spawn(async move {
                    if after_end {
                        let mut all = Vec::new();
                        if tunnel.read_to_end(&mut all).await.is_ok() {
                            let _ = tunnel.write_all(&all).await;
                        }
                        let _ = tunnel.shutdown().await;
                        return;
                    }
                    let mut buf = vec![0u8; 70_000];
                    loop {
                        match tunnel.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => {
                                if tunnel.write_all(&buf[..n]).await.is_err() {
                                    return;
                                }
                            }
                        }
                    }
                    let _ = tunnel.shutdown().await;
                });
            });
            tokio::spawn(async move {
                let _ = server
                    .serve(Box::new(tcp), LayerSession::default(), sink)
                    .await;
            });
        }
    });
    (address, connections)
}

fn dialer(path: &str, multi_mode: bool) -> GrpcDialer {
    GrpcDialer::new(
        Arc::new(TcpDialer {
            tuning: TcpTuning::default(),
        }),
        GrpcClientOptions {
            path: path.into(),
            multi_mode,
            authority: None,
            user_agent: Some("skiff-test".into()),
            windows: Windows::new(0),
            keepalive: None,
            permit_without_stream: false,
        },
    )
}

fn meta() -> Metadata {
    let any = "127.0.0.1:1".parse().unwrap();
    Metadata::new("t".into(), any, any)
}

/// Writes `data`, half-closes, reads everything back.
async fn round_trip(mut tunnel: BoxStream, data: Vec<u8>) -> Vec<u8> {
    let (mut read, mut write) = tokio::io::split(&mut tunnel);
    let writer = async move {
        write.write_all(&data).await.unwrap();
        write.shutdown().await.unwrap();
    };
    let reader = async move {
        let mut back = Vec::new();
        read.read_to_end(&mut back).await.unwrap();
        back
    };
    tokio::time::timeout(LIMIT, async { tokio::join!(writer, reader).1 })
        .await
        .expect("round trip within the limit")
}

#[tokio::test]
async fn calls_share_one_connection_and_echo() {
    let (server, connections) = echo_server("svc").await;
    for (path, multi) in [("/svc/Tun", false), ("/svc/TunMulti", true)] {
        let dialer = dialer(path, multi);
        let mut calls = Vec::new();
        for i in 0..4u8 {
            let tunnel = dialer.dial(&server, &meta()).await.unwrap();
            let data: Vec<u8> = (0..300_000u32).map(|n| (n as u8) ^ i).collect();
            calls.push(tokio::spawn(async move {
                let back = round_trip(tunnel, data.clone()).await;
                assert!(back == data, "echo differs");
            }));
        }
        for call in calls {
            call.await.unwrap();
        }
    }
    // One connection per dialer, whatever the number of calls.
    assert_eq!(connections.load(std::sync::atomic::Ordering::SeqCst), 2);
}

#[tokio::test]
async fn the_answer_may_start_after_the_client_ended() {
    let (server, _) = server("svc", true).await;
    let tunnel = dialer("/svc/Tun", false)
        .dial(&server, &meta())
        .await
        .unwrap();
    let data: Vec<u8> = (0..1_000_000u32).map(|n| (n % 251) as u8).collect();
    assert!(round_trip(tunnel, data.clone()).await == data);
}

#[tokio::test]
async fn another_path_is_refused_with_grpc_status() {
    let (server, _) = echo_server("svc").await;
    let tunnel = dialer("/other/Tun", false)
        .dial(&server, &meta())
        .await
        .unwrap();
    let mut tunnel = tunnel;
    let mut buf = [0u8; 16];
    let err = tokio::time::timeout(LIMIT, tunnel.read(&mut buf))
        .await
        .unwrap()
        .unwrap_err();
    assert!(
        err.to_string().contains("status 12: unknown service other"),
        "{err}"
    );
}

/// A peer that starts large messages on many calls and never finishes them: once the
/// connection's calls hold more than the limit, the calls that grow it fail, so the
/// connection never holds much more than `CONNECTION_HELD_LIMIT`.
#[tokio::test]
async fn unfinished_messages_are_bounded_per_connection() {
    use skiff_transport::grpc::stream::{CONNECTION_HELD_LIMIT, MAX_MESSAGE};
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let failed = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = failed.clone();
    tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let server = GrpcServer::new("svc", Windows::new(0), None);
        let sink: TunnelSink = Arc::new(move |mut tunnel: BoxStream, _| {
            let counted = counted.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                if tunnel.read(&mut buf).await.is_err() {
                    counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
            });
        });
        let _ = server
            .serve(Box::new(tcp), LayerSession::default(), sink)
            .await;
    });
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let (sender, connection) = h2::client::Builder::new()
        .initial_connection_window_size(1 << 30)
        .handshake::<_, bytes::Bytes>(tcp)
        .await
        .unwrap();
    tokio::spawn(connection);
    let calls = CONNECTION_HELD_LIMIT / (MAX_MESSAGE - 1024) + 2;
    let mut streams = Vec::new();
    for _ in 0..calls {
        let mut sender = sender.clone().ready().await.unwrap();
        let request = http::Request::post("http://x/svc/Tun")
            .header("content-type", "application/grpc")
            .body(())
            .unwrap();
        let (_response, mut send) = sender.send_request(request, false).unwrap();
        // A message announced at the limit, all but its last KiB sent.
        let mut body = vec![0u8; MAX_MESSAGE - 1024];
        body[1..5].copy_from_slice(&(MAX_MESSAGE as u32).to_be_bytes());
        send.reserve_capacity(body.len());
        send.send_data(body.into(), false).unwrap();
        streams.push((send, _response));
    }
    let deadline = tokio::time::Instant::now() + LIMIT;
    while failed.load(std::sync::atomic::Ordering::SeqCst) == 0 {
        assert!(tokio::time::Instant::now() < deadline, "no call failed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A server with keepalive closes a connection whose peer stops answering PINGs, and says
/// why; without keepalive, the same silent peer would be kept.
#[tokio::test]
async fn keepalive_closes_a_silent_peer() {
    use skiff_transport::grpc::Keepalive;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let served = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let keepalive = Keepalive {
            interval: Duration::from_millis(300),
            timeout: Duration::from_millis(300),
        };
        let server = GrpcServer::new("svc", Windows::new(0), Some(keepalive));
        let sink: TunnelSink = Arc::new(|_, _| {});
        server
            .serve(Box::new(tcp), LayerSession::default(), sink)
            .await
    });
    let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    // HTTP/2's preface and an empty SETTINGS, then silence: no ACK, no PING answer.
    tcp.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .await
        .unwrap();
    let mut sink = Vec::new();
    let read = tokio::time::timeout(LIMIT, tcp.read_to_end(&mut sink)).await;
    assert!(read.is_ok(), "the server kept the silent peer");
    let ended = served.await.unwrap().unwrap_err();
    assert_eq!(ended.kind(), std::io::ErrorKind::TimedOut, "{ended}");
}
