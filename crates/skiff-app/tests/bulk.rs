//! 256 MiB each way at once through tunnel→freedom and socks→freedom, SHA-256 checked, with
//! the client half-closing; and proof that the splice path carried it.

mod common;

use common::*;
use skiff_core::Network;
use tokio::net::TcpStream;

const BULK: u64 = 256 * MIB;

async fn both_ways(stream: TcpStream, server: tokio::task::JoinHandle<(u64, [u8; 32])>) {
    let (mut r, mut w) = stream.into_split();
    let upload = tokio::spawn(async move { send_payload(&mut w, 1, BULK).await });
    let (down_len, down_digest) = hash_until_eof(&mut r).await;
    upload.await.unwrap();
    let (up_len, up_digest) = server.await.unwrap();
    assert_eq!(up_len, BULK, "uplink length");
    assert_eq!(down_len, BULK, "downlink length");
    assert_eq!(up_digest, Payload::digest(1, BULK), "uplink SHA-256");
    assert_eq!(down_digest, Payload::digest(2, BULK), "downlink SHA-256");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tunnel_to_freedom_carries_256_mib_each_way_by_splice() {
    tokio::time::timeout(TEST_DEADLINE, async {
        let (target, server) = source_sink(2, BULK).await;
        let running = start(&format!(
            r#"{{ "inbounds": [{{ "tag": "fwd", "listen": "127.0.0.1", "port": {},
                   "protocol": "dokodemo-door",
                   "settings": {{ "address": "127.0.0.1", "port": {}, "network": "tcp" }} }}],
                 "outbounds": [{{ "tag": "direct", "protocol": "freedom" }}] }}"#,
            free_port(),
            target.port()
        ))
        .await;
        let entry = running.address_of("fwd", Network::Tcp).unwrap();
        both_ways(TcpStream::connect(entry).await.unwrap(), server).await;
        let stats = running.stats();
        // Both directions went through splice(2), and the live counters saw every byte.
        assert!(
            stats.spliced().get() >= 2 * BULK,
            "spliced {}",
            stats.spliced().get()
        );
        assert_eq!(stats.copied().get(), 0);
        assert_eq!(stats.get("inbound>>>fwd>>>traffic>>>uplink"), Some(BULK));
        assert_eq!(stats.get("inbound>>>fwd>>>traffic>>>downlink"), Some(BULK));
        assert_eq!(
            stats.get("outbound>>>direct>>>traffic>>>downlink"),
            Some(BULK)
        );
    })
    .await
    .expect("test deadline");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socks_to_freedom_carries_256_mib_each_way() {
    tokio::time::timeout(TEST_DEADLINE, async {
        let (target, server) = source_sink(2, BULK).await;
        let running = start(&format!(
            r#"{{ "inbounds": [{{ "tag": "socks-in", "listen": "127.0.0.1", "port": {},
                   "protocol": "socks", "settings": {{ "auth": "noauth" }} }}],
                 "outbounds": [{{ "tag": "direct", "protocol": "freedom" }}] }}"#,
            free_port()
        ))
        .await;
        let entry = running.address_of("socks-in", Network::Tcp).unwrap();
        let stream = socks5_connect(entry, "127.0.0.1", target.port()).await;
        both_ways(stream, server).await;
        assert!(running.stats().spliced().get() >= 2 * BULK);
    })
    .await
    .expect("test deadline");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_closed_client_still_gets_the_whole_answer() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    tokio::time::timeout(TEST_DEADLINE, async {
        // The server answers only after the request has ended (EOF), like a batch job.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let target = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut request = Vec::new();
            s.read_to_end(&mut request).await.unwrap();
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            send_payload(&mut s, 7, 16 * MIB).await;
            request.len()
        });
        let running = start(&format!(
            r#"{{ "inbounds": [{{ "tag": "fwd", "listen": "127.0.0.1", "port": {},
                   "protocol": "tunnel", "settings": {{ "address": "127.0.0.1", "port": {} }} }}],
                 "outbounds": [{{ "protocol": "freedom" }}] }}"#,
            free_port(),
            target.port()
        ))
        .await;
        let mut client = TcpStream::connect(running.address_of("fwd", Network::Tcp).unwrap())
            .await
            .unwrap();
        client
            .write_all(b"please answer after my EOF")
            .await
            .unwrap();
        client.shutdown().await.unwrap();
        let (len, digest) = hash_until_eof(&mut client).await;
        assert_eq!(server.await.unwrap(), 26);
        assert_eq!(len, 16 * MIB);
        assert_eq!(digest, Payload::digest(7, 16 * MIB));
    })
    .await
    .expect("test deadline");
}

/// VLESS over raw TCP: once the request header is written and the response header stripped,
/// both sides splice in both directions; only the first chunks go through user space.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vless_over_raw_tcp_splices_both_ways_on_both_sides() {
    const UUID: &str = "27848739-7e62-4138-9fd3-098a63964b6b";
    tokio::time::timeout(TEST_DEADLINE, async {
        let (target, server) = source_sink(2, BULK).await;
        let server_side = start(&format!(
            r#"{{ "inbounds": [{{ "tag": "vless-in", "listen": "127.0.0.1", "port": {},
                   "protocol": "vless",
                   "settings": {{ "clients": [{{ "id": "{UUID}" }}], "decryption": "none" }} }}],
                 "outbounds": [{{ "protocol": "freedom" }}] }}"#,
            free_port()
        ))
        .await;
        let vless_port = server_side
            .address_of("vless-in", Network::Tcp)
            .unwrap()
            .port();
        let client_side = start(&format!(
            r#"{{ "inbounds": [{{ "tag": "fwd", "listen": "127.0.0.1", "port": {},
                   "protocol": "dokodemo-door",
                   "settings": {{ "address": "127.0.0.1", "port": {}, "network": "tcp" }} }}],
                 "outbounds": [{{ "protocol": "vless", "settings": {{ "vnext": [{{
                   "address": "127.0.0.1", "port": {vless_port},
                   "users": [{{ "id": "{UUID}", "encryption": "none" }}] }}] }} }}] }}"#,
            free_port(),
            target.port()
        ))
        .await;
        let entry = client_side.address_of("fwd", Network::Tcp).unwrap();
        both_ways(TcpStream::connect(entry).await.unwrap(), server).await;
        for (side, running) in [("client", &client_side), ("server", &server_side)] {
            let (spliced, copied) = (
                running.stats().spliced().get(),
                running.stats().copied().get(),
            );
            assert_eq!(
                spliced + copied,
                2 * BULK,
                "{side}: every byte relayed once"
            );
            // The first buffers go through user space until each direction turns raw (how
            // many depends on scheduling: up to ~7 MiB seen on a loaded machine), then the
            // kernel carries the rest.
            assert!(
                copied <= 32 * MIB,
                "{side}: {copied} bytes copied, {spliced} spliced"
            );
        }
    })
    .await
    .expect("test deadline");
}
