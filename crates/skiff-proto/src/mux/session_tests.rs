//! The driver against hand-written frames (the spec's vectors) and against its own client end.

use super::*;
use skiff_core::datagram;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// Runs the server end on one side of a socket pair; sub-connections come out of the channel.
fn server(limits: Limits) -> (UnixStream, mpsc::UnboundedReceiver<Incoming>) {
    let (a, b) = UnixStream::pair().unwrap();
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let _ = serve(Box::new(a), limits, "test", move |incoming| {
            let _ = tx.send(incoming);
            Box::pin(async {})
        })
        .await;
    });
    (b, rx)
}

/// Reads exactly `want.len()` bytes (bounded in time) and compares.
async fn expect(peer: &mut UnixStream, want: &[u8]) {
    let mut got = vec![0u8; want.len()];
    tokio::time::timeout(Duration::from_secs(5), peer.read_exact(&mut got))
        .await
        .expect("in time")
        .unwrap();
    assert_eq!(got, want);
}

#[tokio::test]
async fn a_udp_session_round_trip() {
    let (mut peer, mut opened) = server(Limits::default());
    let mut wire = hex("0014 0000 01 01 02 4ee9 01 7f000001 0102030405060708 0003 6f6e65");
    wire.extend(hex("000c 0000 02 01 02 4ee9 01 7f000001 0003 74776f"));
    // A datagram to another destination on the same session (full cone): dropped.
    wire.extend(hex("000c 0000 02 01 02 4eea 01 7f000001 0001 78"));
    peer.write_all(&wire).await.unwrap();
    let Some(Incoming::Datagrams {
        destination,
        mut recv,
        mut send,
    }) = opened.recv().await
    else {
        panic!("no UDP session")
    };
    assert_eq!(destination, Address::Ip("127.0.0.1:20201".parse().unwrap()));
    let got = |x: Option<Bytes>| x.map(|b| b.to_vec());
    assert_eq!(
        got(datagram::recv(&mut recv).await.unwrap()),
        Some(b"one".to_vec())
    );
    assert_eq!(
        got(datagram::recv(&mut recv).await.unwrap()),
        Some(b"two".to_vec())
    );
    datagram::send(&mut send, b"back").await.unwrap();
    let mut want = hex("000c 0000 02 01 02 4ee9 01 7f000001 0004");
    want.extend_from_slice(b"back");
    expect(&mut peer, &want).await;
    peer.write_all(&hex("0004 0000 03 00")).await.unwrap();
    assert_eq!(got(datagram::recv(&mut recv).await.unwrap()), None);
    datagram::shutdown(&mut send).await.unwrap();
    expect(&mut peer, &hex("0004 0000 03 00")).await;
}

#[tokio::test]
async fn a_tcp_sub_connection_half_closes() {
    let (mut peer, mut opened) = server(Limits::default());
    peer.write_all(&hex(
        "000c 0001 01 01 01 4ee8 01 7f000001 000d 6d75782d7463702d68656c6c6f",
    ))
    .await
    .unwrap();
    let Some(Incoming::Stream {
        destination,
        mut stream,
    }) = opened.recv().await
    else {
        panic!("no TCP sub-connection")
    };
    assert_eq!(destination, Address::Ip("127.0.0.1:20200".parse().unwrap()));
    let mut hello = [0u8; 13];
    stream.read_exact(&mut hello).await.unwrap();
    assert_eq!(&hello, b"mux-tcp-hello");
    // The client ends its direction: our reads end, our writes go on.
    peer.write_all(&hex("0004 0001 03 00")).await.unwrap();
    let mut rest = Vec::new();
    stream.read_to_end(&mut rest).await.unwrap();
    assert!(rest.is_empty());
    stream.write_all(b"late answer").await.unwrap();
    stream.shutdown().await.unwrap();
    let mut want = hex("0004 0001 02 01 000b");
    want.extend_from_slice(b"late answer");
    want.extend(hex("0004 0001 03 00"));
    expect(&mut peer, &want).await;
}

#[tokio::test]
async fn an_error_end_resets_and_unknown_sessions_are_told_so() {
    let (mut peer, mut opened) = server(Limits::default());
    peer.write_all(&hex("000c 0001 01 00 01 4ee8 01 7f000001"))
        .await
        .unwrap();
    let Some(Incoming::Stream { mut stream, .. }) = opened.recv().await else {
        panic!("no TCP sub-connection")
    };
    peer.write_all(&hex("0004 0001 03 02")).await.unwrap();
    let mut buf = [0u8; 4];
    let err = stream.read(&mut buf).await.unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::ConnectionReset);
    drop(stream);
    // Data for a session nobody opened: an End back, as Xray answers.
    peer.write_all(&hex("0004 0009 02 01 0001 78"))
        .await
        .unwrap();
    // The dropped sub-connection's error End first (it never shut down), then session 9's.
    expect(&mut peer, &hex("0004 0001 03 02 0004 0009 03 00")).await;
}

#[tokio::test]
async fn sessions_past_the_bound_are_refused_and_the_others_go_on() {
    let limits = Limits {
        max_sessions: 2,
        ..Limits::default()
    };
    let (mut peer, mut opened) = server(limits);
    for id in ["0001", "0002", "0003"] {
        peer.write_all(&hex(&format!("000c {id} 01 00 01 4ee8 01 7f000001")))
            .await
            .unwrap();
    }
    expect(&mut peer, &hex("0004 0003 03 02")).await;
    let mut streams = Vec::new();
    for _ in 0..2 {
        let Some(Incoming::Stream { stream, .. }) = opened.recv().await else {
            panic!("no TCP sub-connection")
        };
        streams.push(stream);
    }
    peer.write_all(&hex("0004 0002 02 01 0002 6f6b"))
        .await
        .unwrap();
    let mut ok = [0u8; 2];
    streams[1].read_exact(&mut ok).await.unwrap();
    assert_eq!(&ok, b"ok");
}

#[tokio::test]
async fn a_destination_that_stops_reading_loses_only_its_sub_connection() {
    let limits = Limits {
        session_buffer: 16,
        stall: Duration::from_millis(100),
        ..Limits::default()
    };
    let (mut peer, mut opened) = server(limits);
    peer.write_all(&hex("000c 0001 01 00 01 4ee8 01 7f000001"))
        .await
        .unwrap();
    let Some(Incoming::Stream { stream: stuck, .. }) = opened.recv().await else {
        panic!("no TCP sub-connection")
    };
    // 30 bytes for a 16-byte buffer nobody reads: the second frame waits, then the
    // sub-connection is given up (error End), and session 2 is served after it.
    let ten = "000a 00000000 00000000 0000";
    peer.write_all(&hex(&format!(
        "0004 0001 02 01 {ten} 0004 0001 02 01 {ten}"
    )))
    .await
    .unwrap();
    peer.write_all(&hex("000c 0002 01 01 01 4ee8 01 7f000001 0002 6869"))
        .await
        .unwrap();
    expect(&mut peer, &hex("0004 0001 03 02")).await;
    let Some(Incoming::Stream { mut stream, .. }) = opened.recv().await else {
        panic!("no second sub-connection")
    };
    let mut hi = [0u8; 2];
    stream.read_exact(&mut hi).await.unwrap();
    assert_eq!(&hi, b"hi");
    drop(stuck);
}

#[tokio::test]
async fn client_and_server_ends_carry_streams_both_ways() {
    let (a, b) = UnixStream::pair().unwrap();
    let (tx, mut opened) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let _ = serve(Box::new(b), Limits::default(), "test", move |incoming| {
            let _ = tx.send(incoming);
            Box::pin(async {})
        })
        .await;
    });
    let (client, run) = MuxClient::start(Box::new(a), Limits::default());
    tokio::spawn(run);
    let target = Address::Domain("example.com".into(), 80);
    let mut streams = Vec::new();
    for _ in 0..3 {
        streams.push(client.open_stream(&target).await.unwrap());
    }
    assert_eq!(client.open_now(), 3);
    assert!(client.is_full(3, 128));
    let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    for (i, s) in streams.iter_mut().enumerate() {
        s.write_all(&big[..(i + 1) * 50_000]).await.unwrap();
        s.shutdown().await.unwrap();
    }
    for i in 0..3 {
        let Some(Incoming::Stream {
            destination,
            mut stream,
        }) = opened.recv().await
        else {
            panic!("no sub-connection")
        };
        assert_eq!(destination, target);
        let mut got = Vec::new();
        stream.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, &big[..(i + 1) * 50_000]);
        stream.write_all(&got[..1000]).await.unwrap();
        stream.shutdown().await.unwrap();
    }
    for (i, s) in streams.iter_mut().enumerate() {
        let mut back = Vec::new();
        s.read_to_end(&mut back).await.unwrap();
        assert_eq!(back, &big[..1000], "stream {i}");
    }
    drop(streams);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(client.open_now(), 0);
}

#[tokio::test]
async fn keep_alives_are_skipped_and_an_idle_connection_closes() {
    let limits = Limits {
        idle: Duration::from_millis(200),
        ..Limits::default()
    };
    let (mut peer, mut opened) = server(limits);
    // A KeepAlive, with and without data, then a sub-connection: it is served.
    peer.write_all(&hex(
        "0004 0000 04 00 0004 0000 04 01 0003 616263 000c 0005 01 01 01 4ee8 01 7f000001 0001 7a",
    ))
    .await
    .unwrap();
    let Some(Incoming::Stream { mut stream, .. }) = opened.recv().await else {
        panic!("no TCP sub-connection")
    };
    let mut z = [0u8; 1];
    stream.read_exact(&mut z).await.unwrap();
    assert_eq!(&z, b"z");
    stream.shutdown().await.unwrap();
    peer.write_all(&hex("0004 0005 03 00")).await.unwrap();
    drop(stream);
    expect(&mut peer, &hex("0004 0005 03 00")).await;
    // Without sub-connections the server closes after `idle`.
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), peer.read_to_end(&mut rest))
        .await
        .expect("closed after idle")
        .unwrap();
    assert!(rest.is_empty());
}
