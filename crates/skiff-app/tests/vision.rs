//! XTLS Vision, Skiff client ↔ Skiff server in one process: 256 MiB each way, SHA-256
//! checked, with inner TLS 1.3 (both sides go direct and splice, counters move during the
//! transfer) and with inner plain TCP (everything stays inside the outer TLS).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::*;
use skiff_app::Running;
use skiff_core::{BoxStream, Network};
use skiff_proto::vless::vision::{DIRECT_READS, DIRECT_WRITES};
use skiff_transport::tls::{TlsClient, TlsClientOptions, TlsServer, TlsServerOptions};
use tokio::net::{TcpListener, TcpStream};

const BULK: u64 = 256 * MIB;
const UUID: &str = "b831381d-6324-4d53-ad4f-8cda48b30811";
const EMAIL: &str = "vision@x";
/// Counters on both instances: the server's for the user, the client's for its tunnel
/// inbound, which counts what the test's own end wrote and read (the bytes carried).
const STATS: &str = r#""stats": {}, "policy": {
    "levels": { "0": { "statsUserUplink": true, "statsUserDownlink": true } },
    "system": { "statsInboundUplink": true, "statsInboundDownlink": true } }"#;
const USER_UPLINK: &str = "user>>>vision@x>>>traffic>>>uplink";

struct Cert {
    cert_pem: String,
    key_pem: String,
}

fn cert(name: &str) -> Cert {
    let ck = rcgen::generate_simple_self_signed(vec![name.to_string()]).expect("rcgen");
    Cert {
        cert_pem: ck.cert.pem(),
        key_pem: ck.signing_key.serialize_pem(),
    }
}

fn pem_lines(pem: &str) -> String {
    let lines: Vec<String> = pem.lines().map(|l| format!("{l:?}")).collect();
    format!("[{}]", lines.join(", "))
}

/// The Vision server (VLESS + TLS → freedom) and client (tunnel → VLESS + TLS) instances;
/// with `fallback`, the server's VLESS settings hand non-VLESS visitors to that port.
async fn start_pair(target_port: u16, fallback: Option<u16>, sniff: bool) -> (Running, Running) {
    let outer = cert("vision.test");
    let sniffing = if sniff {
        r#", "sniffing": { "enabled": true, "destOverride": ["http", "tls"], "routeOnly": true }"#
    } else {
        ""
    };
    let fallbacks = match fallback {
        Some(port) => format!(r#", "fallbacks": [{{ "dest": {port} }}]"#),
        None => String::new(),
    };
    let server = start(&format!(
        r#"{{ "inbounds": [{{ "tag": "vision-in", "listen": "127.0.0.1", "port": {},
               "protocol": "vless",
               "settings": {{ "clients": [{{ "id": "{UUID}", "flow": "xtls-rprx-vision", "email": "{EMAIL}" }}],
                             "decryption": "none"{fallbacks} }},
               "streamSettings": {{ "network": "tcp", "security": "tls",
                 "tlsSettings": {{ "certificates": [{{ "certificate": {}, "key": {} }}] }} }}{sniffing} }}],
             "outbounds": [{{ "protocol": "freedom" }}], {STATS} }}"#,
        free_port(),
        pem_lines(&outer.cert_pem),
        pem_lines(&outer.key_pem),
    ))
    .await;
    let port = server.address_of("vision-in", Network::Tcp).unwrap().port();
    let client = start(&format!(
        r#"{{ "inbounds": [{{ "tag": "fwd", "listen": "127.0.0.1", "port": {},
               "protocol": "dokodemo-door",
               "settings": {{ "address": "127.0.0.1", "port": {target_port}, "network": "tcp" }}{sniffing} }}],
             "outbounds": [{{ "protocol": "vless", "settings": {{ "vnext": [{{
               "address": "127.0.0.1", "port": {port},
               "users": [{{ "id": "{UUID}", "encryption": "none", "flow": "xtls-rprx-vision" }}] }}] }},
               "streamSettings": {{ "network": "tcp", "security": "tls",
                 "tlsSettings": {{ "serverName": "vision.test", "allowInsecure": true }} }} }}],
             {STATS} }}"#,
        free_port(),
    ))
    .await;
    (server, client)
}

/// Sends `seed` and hashes what comes back over `stream` until EOF; both ends half-close.
async fn exchange(stream: BoxStream, seed: u64) -> (u64, [u8; 32]) {
    let (mut r, mut w) = tokio::io::split(stream);
    let send = tokio::spawn(async move {
        send_payload(&mut w, seed, BULK).await;
        w
    });
    let got = hash_until_eof(&mut r).await;
    drop(send.await.unwrap());
    got
}

/// Runs the transfer with inner TLS or not; returns the two instances afterwards and whether
/// spliced bytes were seen on both sides, and the user's uplink counter above zero and then
/// growing, while the transfer was still running.
async fn transfer(inner_tls: bool) -> (Running, Running, bool) {
    transfer_with(inner_tls, None, false).await
}

async fn transfer_with(
    inner_tls: bool,
    fallback: Option<u16>,
    sniff: bool,
) -> (Running, Running, bool) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let target_port = listener.local_addr().unwrap().port();
    let (server, client) = start_pair(target_port, fallback, sniff).await;
    let inner = cert("inner.test");
    let inner_server = TlsServer::new(&TlsServerOptions {
        certificates: vec![(inner.cert_pem.clone(), inner.key_pem.clone())],
        ..Default::default()
    })
    .unwrap();
    let inner_client = TlsClient::new(&TlsClientOptions {
        server_name: "inner.test".into(),
        allow_insecure: true,
        ..Default::default()
    })
    .unwrap();
    let target = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let stream: BoxStream = if inner_tls {
            inner_server.accept(Box::new(tcp)).await.unwrap().0
        } else {
            Box::new(tcp)
        };
        exchange(stream, 2).await
    });
    let entry = client.address_of("fwd", Network::Tcp).unwrap();
    let tcp = TcpStream::connect(entry).await.unwrap();
    let stream: BoxStream = if inner_tls {
        inner_client.connect(Box::new(tcp)).await.unwrap()
    } else {
        Box::new(tcp)
    };

    // Watch the splice counters while the bytes move.
    let done = Arc::new(AtomicBool::new(false));
    let (server_stats, client_stats) = (server.stats().clone(), client.stats().clone());
    let watcher = {
        let done = done.clone();
        tokio::spawn(async move {
            for _ in 0..100_000 {
                if done.load(Ordering::Relaxed) {
                    return false;
                }
                if server_stats.spliced().get() > 0 && client_stats.spliced().get() > 0 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            // The user's counter, read mid-transfer: already counting, and counting on.
            let first = server_stats.get(USER_UPLINK).unwrap_or_default();
            for _ in 0..100_000 {
                if done.load(Ordering::Relaxed) {
                    return false;
                }
                let now = server_stats.get(USER_UPLINK).unwrap_or_default();
                if first > 0 && now > first {
                    eprintln!("user uplink mid-transfer: {first} then {now}");
                    return true;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            false
        })
    };
    let (down_len, down_digest) = exchange(stream, 1).await;
    let (up_len, up_digest) = target.await.unwrap();
    done.store(true, Ordering::Relaxed);
    let live = watcher.await.unwrap();
    assert_eq!((up_len, down_len), (BULK, BULK), "lengths");
    assert_eq!(up_digest, Payload::digest(1, BULK), "uplink SHA-256");
    assert_eq!(down_digest, Payload::digest(2, BULK), "downlink SHA-256");
    (server, client, live)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vision_with_inner_tls13_goes_direct_and_splices_both_ways() {
    tokio::time::timeout(TEST_DEADLINE, async {
        let (server, client, live) = transfer(true).await;
        assert_direct_and_spliced(&server, &client, live);
    })
    .await
    .expect("test deadline");
}

/// A Vision server with fallbacks reads a client's first bytes ahead (to send short probes to
/// the fallback at once); its Vision clients must still go direct and splice both ways.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vision_with_fallbacks_goes_direct_and_splices_both_ways() {
    tokio::time::timeout(TEST_DEADLINE, async {
        let web = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let web_port = web.local_addr().unwrap().port();
        let (server, client, live) = transfer_with(true, Some(web_port), false).await;
        assert_direct_and_spliced(&server, &client, live);
        drop(web);
    })
    .await
    .expect("test deadline");
}

/// Sniffing on both inbounds (the client's tunnel and the Vision server) reads the inner
/// ClientHello before routing and replays it; Vision must still go direct and both sides
/// splice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vision_with_sniffing_goes_direct_and_splices_both_ways() {
    tokio::time::timeout(TEST_DEADLINE, async {
        let (server, client, live) = transfer_with(true, None, true).await;
        assert_direct_and_spliced(&server, &client, live);
    })
    .await
    .expect("test deadline");
}

/// Both sides went direct both ways: every byte but the handshake's and the first records'
/// was spliced on each side (per instance, so tests running beside each other do not blur it;
/// the process-wide DIRECT_* counters only say that some reader and writer switched).
fn assert_direct_and_spliced(server: &Running, client: &Running, live: bool) {
    // The user's counters on the server against the bytes carried (the inner TLS records,
    // counted by the client's tunnel inbound where the test's end wrote and read them):
    // within 0.1 %, spliced bytes included.
    for direction in ["uplink", "downlink"] {
        let user = server
            .stats()
            .get(&format!("user>>>{EMAIL}>>>traffic>>>{direction}"))
            .unwrap_or_default();
        let carried = client
            .stats()
            .get(&format!("inbound>>>fwd>>>traffic>>>{direction}"))
            .unwrap_or_default();
        eprintln!("{direction}: user counter {user}, bytes carried {carried}");
        assert!(carried >= BULK, "{direction}: carried {carried}");
        assert!(
            user.abs_diff(carried) * 1000 <= carried,
            "{direction}: user counter {user} against {carried} carried"
        );
    }
    assert!(
        DIRECT_READS.load(Ordering::Relaxed) >= 2,
        "readers went direct"
    );
    assert!(
        DIRECT_WRITES.load(Ordering::Relaxed) >= 2,
        "writers went direct"
    );
    assert!(
        live,
        "spliced counters moved on both sides, and the user's grew, before the transfer ended"
    );
    for (side, running) in [("server", server), ("client", client)] {
        let spliced = running.stats().spliced().get();
        let copied = running.stats().copied().get();
        eprintln!("{side}: {spliced} bytes spliced, {copied} copied");
        // Only the handshake and the first records pass through user space.
        assert!(
            spliced >= 2 * BULK - 32 * MIB,
            "{side}: {spliced} spliced, {copied} copied"
        );
        assert!(spliced + copied >= 2 * BULK, "{side}: every byte counted");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vision_with_plain_inner_traffic_stays_inside_the_outer_tls() {
    tokio::time::timeout(TEST_DEADLINE, async {
        let (server, client, live) = transfer(false).await;
        assert!(!live);
        for (side, running) in [("server", &server), ("client", &client)] {
            assert_eq!(running.stats().spliced().get(), 0, "{side}");
            assert!(running.stats().copied().get() >= 2 * BULK, "{side}");
        }
    })
    .await
    .expect("test deadline");
}
