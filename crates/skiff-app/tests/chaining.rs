//! Chaining (`proxySettings.tag`): an outbound that reaches its server through another
//! outbound. Here VLESS to server 1 rides inside VLESS to server 2 (server 2 dials server 1,
//! server 1 dials the sink); 32 MiB each way, SHA-256 checked, and both servers' inbounds
//! must have seen the bytes, so the chain was really taken.

mod common;

use common::*;
use skiff_core::Network;
use tokio::net::TcpStream;

const BULK: u64 = 32 * MIB;
const UUID: &str = "b831381d-6324-4d53-ad4f-8cda48b30811";

async fn vless_server(tag: &str) -> (skiff_app::Running, u16) {
    let running = start(&format!(
        r#"{{ "inbounds": [{{ "tag": "{tag}", "listen": "127.0.0.1", "port": {},
               "protocol": "vless",
               "settings": {{ "clients": [{{ "id": "{UUID}" }}], "decryption": "none" }} }}],
             "outbounds": [{{ "protocol": "freedom" }}] }}"#,
        free_port()
    ))
    .await;
    let port = running.address_of(tag, Network::Tcp).unwrap().port();
    (running, port)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outbound_reaches_its_server_through_another_outbound() {
    tokio::time::timeout(TEST_DEADLINE, async {
        let (target, sink) = source_sink(2, BULK).await;
        let (first, first_port) = vless_server("first").await;
        let (second, second_port) = vless_server("second").await;
        let client = start(&format!(
            r#"{{ "inbounds": [{{ "tag": "fwd", "listen": "127.0.0.1", "port": {},
                   "protocol": "dokodemo-door",
                   "settings": {{ "address": "127.0.0.1", "port": {}, "network": "tcp" }} }}],
                 "outbounds": [
                   {{ "tag": "to-first", "protocol": "vless",
                      "settings": {{ "vnext": [{{ "address": "127.0.0.1", "port": {first_port},
                        "users": [{{ "id": "{UUID}", "encryption": "none" }}] }}] }},
                      "proxySettings": {{ "tag": "to-second" }} }},
                   {{ "tag": "to-second", "protocol": "vless",
                      "settings": {{ "vnext": [{{ "address": "127.0.0.1", "port": {second_port},
                        "users": [{{ "id": "{UUID}", "encryption": "none" }}] }}] }} }}] }}"#,
            free_port(),
            target.port()
        ))
        .await;
        let entry = client.address_of("fwd", Network::Tcp).unwrap();
        let (mut r, mut w) = TcpStream::connect(entry).await.unwrap().into_split();
        let upload = tokio::spawn(async move { send_payload(&mut w, 1, BULK).await });
        let (down_len, down_digest) = hash_until_eof(&mut r).await;
        upload.await.unwrap();
        let (up_len, up_digest) = sink.await.unwrap();
        assert_eq!((up_len, down_len), (BULK, BULK), "lengths");
        assert_eq!(up_digest, Payload::digest(1, BULK), "uplink SHA-256");
        assert_eq!(down_digest, Payload::digest(2, BULK), "downlink SHA-256");
        for (name, running, tag) in [("first", &first, "first"), ("second", &second, "second")] {
            let up = running
                .stats()
                .get(&format!("inbound>>>{tag}>>>traffic>>>uplink"))
                .unwrap_or(0);
            assert!(up >= BULK, "{name} server's inbound saw {up} bytes up");
        }
    })
    .await
    .expect("test deadline");
}
