//! REALITY interop: Xray-core 26.7 (XRAY_BIN, else `../shared/peers/bin/xray`) and sing-box
//! 1.13 (SING_BOX_BIN, else `../shared/peers/bin/sing-box`) as REALITY clients of Skiff's
//! REALITY server, whose target is a local nginx with its own certificate. Outside CI a
//! missing peer skips; under CI it fails.
//!
//! A (inner TLS 1.3 client) → B (peer: dokodemo-door / direct → VLESS + REALITY out) →
//! C (Skiff: VLESS + REALITY in → freedom) → D (inner TLS 1.3 server): the bytes each way
//! are SHA-256 checked; with Vision both sides must go direct and Skiff must splice. UDP goes
//! to a local echo. A client with an unknown short id, or outside `maxTimeDiff`, is relayed
//! to the target (the Xray client then fails: it meets nginx's real certificate).

mod common;
mod reality_common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use reality_common::*;
use sha2::{Digest, Sha256};
use skiff_transport::tls::{TlsClient, TlsClientOptions, TlsServer, TlsServerOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const VISION: &str = "xtls-rprx-vision";
const DEADLINE: Duration = Duration::from_secs(150);

fn xray() -> Option<PathBuf> {
    shared_peer("xray", "XRAY_BIN")
}

/// One case at a time: 2 cores, and large transfers.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Deterministic payload bytes (xorshift64*) for a seed.
fn fill(state: &mut u64, buf: &mut [u8]) {
    for chunk in buf.chunks_mut(8) {
        *state ^= *state >> 12;
        *state ^= *state << 25;
        *state ^= *state >> 27;
        let word = state.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes();
        chunk.copy_from_slice(&word[..chunk.len()]);
    }
}

fn digest(seed: u64, bulk: u64) -> [u8; 32] {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    for _ in 0..bulk / (1 << 16) {
        fill(&mut state, &mut buf);
        hasher.update(&buf);
    }
    hasher.finalize().into()
}

/// A short request/response (Vision goes direct on a write of whole inner records), then
/// `bulk` bytes of `seed` each way, hashing `bulk` bytes of what comes back (or less, at EOF).
async fn exchange(
    mut stream: skiff_core::BoxStream,
    seed: u64,
    asks: bool,
    bulk: u64,
) -> (u64, [u8; 32]) {
    let mut word = [0u8; 5];
    if asks {
        stream.write_all(b"hello").await.unwrap();
        stream.flush().await.unwrap();
        stream.read_exact(&mut word).await.unwrap();
        assert_eq!(&word, b"howdy");
        stream.write_all(b"ready").await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    } else {
        stream.read_exact(&mut word).await.unwrap();
        assert_eq!(&word, b"hello");
        stream.write_all(b"howdy").await.unwrap();
        stream.flush().await.unwrap();
        stream.read_exact(&mut word).await.unwrap();
        assert_eq!(&word, b"ready");
    }
    // Each side reads the known length, then closes: sing-box's client ends the whole
    // connection when one direction ends (its own REALITY server case shows the same), so
    // the ends must not rely on half-close.
    let (mut r, mut w) = tokio::io::split(stream);
    let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
    let send = tokio::spawn(async move {
        let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut buf = vec![0u8; 1 << 16];
        for _ in 0..bulk / (1 << 16) {
            fill(&mut state, &mut buf);
            w.write_all(&buf).await.unwrap();
        }
        // A TLS stream's write may return with records still queued while the socket is
        // full; without the flush the last ones waited here for a wake-up that only polls
        // `done_rx`, and the peer never got its last bytes (a CI hang under load).
        w.flush().await.unwrap();
        let _ = done_rx.await;
        let _ = w.shutdown().await;
        w
    });
    let mut hasher = Sha256::new();
    let mut total = 0u64;
    let mut buf = vec![0u8; 1 << 16];
    while total < bulk {
        let n = r.read(&mut buf).await.unwrap();
        if n == 0 {
            break;
        }
        total += n as u64;
        hasher.update(&buf[..n]);
    }
    let _ = done_tx.send(());
    drop(send.await.unwrap());
    (total, hasher.finalize().into())
}

/// Bytes received and their SHA-256.
type Measured = (u64, [u8; 32]);

/// The inner TLS pair's ends: A connects to `b_port`, D accepts on `d` and the two
/// exchange `bulk` bytes each way. Returns (what D received, what A received).
fn transfer(
    rt: &tokio::runtime::Runtime,
    d: tokio::net::TcpListener,
    b_port: u16,
    dir: &Path,
    bulk: u64,
) -> Result<(Measured, Measured), tokio::time::error::Elapsed> {
    let (cert, key) = certificate(dir);
    let pem = |p: &Path| std::fs::read_to_string(p).unwrap();
    let inner_server = TlsServer::new(&TlsServerOptions {
        certificates: vec![(pem(&cert), pem(&key))],
        ..Default::default()
    })
    .unwrap();
    let inner_client = TlsClient::new(&TlsClientOptions {
        server_name: "localhost".into(),
        allow_insecure: true,
        ..Default::default()
    })
    .unwrap();
    rt.block_on(async {
        tokio::time::timeout(DEADLINE, async {
            let target = tokio::spawn(async move {
                let (tcp, _) = d.accept().await.unwrap();
                let (stream, _) = inner_server.accept(Box::new(tcp)).await.unwrap();
                exchange(stream, 2, false, bulk).await
            });
            let tcp = tokio::net::TcpStream::connect(("127.0.0.1", b_port))
                .await
                .unwrap();
            let stream = inner_client.connect(Box::new(tcp)).await.unwrap();
            let down = exchange(stream, 1, true, bulk).await;
            (target.await.unwrap(), down)
        })
        .await
    })
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Which REALITY client drives B.
#[derive(Clone, Copy)]
enum Client {
    Xray,
    SingBox,
}

fn sing_box_client_config(
    listen: u16,
    target: u16,
    server: u16,
    flow: &str,
    public: &str,
) -> String {
    serde_json::json!({
        "log": { "level": "debug" },
        "inbounds": [{ "type": "direct", "listen": "127.0.0.1", "listen_port": listen,
            "override_address": "127.0.0.1", "override_port": target }],
        "outbounds": [{ "type": "vless", "server": "127.0.0.1", "server_port": server,
            "uuid": UUID, "flow": flow,
            "tls": { "enabled": true, "server_name": "localhost",
                "utls": { "enabled": true, "fingerprint": "chrome" },
                "reality": { "enabled": true, "public_key": public, "short_id": SHORT_ID } } }]
    })
    .to_string()
}

/// A TCP case: `bulk` bytes each way through the chain, checked; with Vision, the direct
/// switch both ways on Skiff's side and a spliced relay.
fn run_tcp(peer: &Path, client: Client, flow: &str, bulk: u64, name: &str) {
    run_tcp_against(peer, client, None, flow, bulk, name);
}

/// As [`run_tcp`], with Xray's REALITY server as C instead of Skiff's when `xray_server` is
/// given: the same harness against the reference, for a client's own quirks.
fn run_tcp_against(
    peer: &Path,
    client: Client,
    xray_server: Option<&Path>,
    flow: &str,
    bulk: u64,
    name: &str,
) {
    let Some(nginx) = nginx_binary() else { return };
    let dir = TempDir::new(name);
    let keys = keys();
    let (target_port, b_port, c_port) = (free_port(), free_port(), free_port());
    let (_nginx, _) = start_target(&nginx, dir.path(), target_port);
    let rt = runtime();
    let d = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let d_port = d.local_addr().unwrap().port();
    let c_log = dir.path().join("c-xray-format.log");
    let server = server_config(
        c_port,
        flow,
        server_reality(&keys, target_port, serde_json::json!({})),
        &c_log,
    );
    if let Some(xray) = xray_server {
        let (_c, _) = start_peer(xray, "xray", dir.path(), "c", &server, c_port, false);
        let b_log = dir.path().join("b.log");
        let config = sing_box_client_config(b_port, d_port, c_port, flow, &keys.public);
        let (_b, b_out) = start_peer(peer, "sing-box", dir.path(), "b", &config, b_port, false);
        let (up, down) = transfer(&rt, d, b_port, dir.path(), bulk).unwrap_or_else(|_| {
            panic!(
                "transfer deadline; peer log:\n{}",
                std::fs::read_to_string(&b_out).unwrap_or_default()
            )
        });
        let _ = b_log;
        assert_eq!(up, (bulk, digest(1, bulk)), "uplink length and SHA-256");
        assert_eq!(down, (bulk, digest(2, bulk)), "downlink length and SHA-256");
        return;
    }
    let (mut c, c_out) = start_skiff(dir.path(), "c", &server, &[c_port]);
    // Skiff writes its log where `log.error` says, as Xray does.
    let c_out = (c_out, c_log);
    let b_log = dir.path().join("b.log");
    let (_b, b_out) = match client {
        Client::Xray => {
            let config = xray_client_config(
                "tcp",
                Ports {
                    listen: b_port,
                    target: d_port,
                    server: c_port,
                },
                flow,
                &keys.public,
                SHORT_ID,
                &b_log,
            );
            start_peer(peer, "xray", dir.path(), "b", &config, b_port, false)
        }
        Client::SingBox => {
            let config = sing_box_client_config(b_port, d_port, c_port, flow, &keys.public);
            start_peer(peer, "sing-box", dir.path(), "b", &config, b_port, false)
        }
    };
    let result = transfer(&rt, d, b_port, dir.path(), bulk);
    let skiff_text = std::fs::read_to_string(&c_out.1).unwrap_or_default();
    let tail = |text: &str| text.lines().rev().take(40).collect::<Vec<_>>().join("\n");
    let (up, down) = result.unwrap_or_else(|_| {
        panic!(
            "transfer deadline; skiff log:\n{}\npeer log:\n{}",
            tail(&skiff_text),
            tail(&std::fs::read_to_string(&b_out).unwrap_or_default())
        )
    });
    assert_eq!(up, (bulk, digest(1, bulk)), "uplink length and SHA-256");
    assert_eq!(down, (bulk, digest(2, bulk)), "downlink length and SHA-256");
    std::thread::sleep(Duration::from_millis(300));
    let text = std::fs::read_to_string(&c_out.1).unwrap_or_default();
    assert!(
        text.contains("REALITY: authenticated"),
        "Skiff did not authenticate the client; log:\n{}",
        tail(&text)
    );
    if flow == VISION {
        assert_went_direct_and_spliced(&text, "Skiff's server");
    }
    assert_healthy(&mut c, &c_out.0);
}

/// Skiff's log `text` shows Vision leaving the outer TLS both ways and the relay splicing.
/// "failed" counts too: once the checked bytes are through, sing-box may reset rather than
/// close (it does with Xray's server as well).
fn assert_went_direct_and_spliced(text: &str, who: &str) {
    let tail = text.lines().rev().take(40).collect::<Vec<_>>().join("\n");
    assert!(
        text.contains("Vision: the peer went direct")
            && text.contains("Vision: inner TLS 1.3 application data"),
        "{who} did not go direct both ways; log:\n{tail}"
    );
    assert!(
        text.lines().any(|l| (l.contains("connection finished")
            || l.contains("connection failed"))
            && l.contains("spliced=true")),
        "{who} did not splice; log:\n{tail}"
    );
}

/// UDP from a dokodemo-door through Xray's REALITY client (XUDP under Vision, VLESS UDP
/// without) to a local echo: 200 datagrams back intact.
fn run_udp(xray: &Path, flow: &str, name: &str) {
    let Some(nginx) = nginx_binary() else { return };
    let dir = TempDir::new(name);
    let keys = keys();
    let (target_port, b_port, c_port) = (free_port(), free_port(), free_port());
    let (_nginx, _) = start_target(&nginx, dir.path(), target_port);
    let echo = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    echo.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let echo_port = echo.local_addr().unwrap().port();
    let echo_thread = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        for _ in 0..1000 {
            let Ok((n, from)) = echo.recv_from(&mut buf) else {
                return;
            };
            let _ = echo.send_to(&buf[..n], from);
        }
    });
    let c_log = dir.path().join("c-xray-format.log");
    let server = server_config(
        c_port,
        flow,
        server_reality(&keys, target_port, serde_json::json!({})),
        &c_log,
    );
    let (mut c, c_out) = start_skiff(dir.path(), "c", &server, &[c_port]);
    // Skiff writes its log where `log.error` says, as Xray does.
    let c_out = (c_out, c_log);
    let b_log = dir.path().join("b.log");
    let config = xray_client_config(
        "udp",
        Ports {
            listen: b_port,
            target: echo_port,
            server: c_port,
        },
        flow,
        &keys.public,
        SHORT_ID,
        &b_log,
    );
    let (_b, _) = start_peer(xray, "xray", dir.path(), "b", &config, b_port, true);
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    let mut echoed = 0;
    let mut buf = [0u8; 2048];
    for i in 0..200u32 {
        let datagram: Vec<u8> = (0..(1 + i * 7 % 1200)).map(|j| (i + j) as u8).collect();
        socket.send_to(&datagram, ("127.0.0.1", b_port)).unwrap();
        if let Ok(n) = socket.recv(&mut buf) {
            assert_eq!(&buf[..n], &datagram[..], "datagram {i} came back changed");
            echoed += 1;
        }
        assert!(
            i < 5 || echoed > 0,
            "no datagram came back; skiff log:\n{}",
            std::fs::read_to_string(&c_out.1).unwrap_or_default()
        );
    }
    assert_eq!(echoed, 200, "datagrams echoed intact");
    drop(socket);
    let _ = echo_thread;
    assert_healthy(&mut c, &c_out.0);
}

/// A client Skiff must not take: the connection goes to nginx, so Xray's client meets a
/// certificate it cannot verify and the transfer fails; Skiff's log says why it forwarded.
fn run_refused(xray: &Path, extra: serde_json::Value, short_id: &str, why: &str, name: &str) {
    let Some(nginx) = nginx_binary() else { return };
    let dir = TempDir::new(name);
    let keys = keys();
    let (target_port, b_port, c_port) = (free_port(), free_port(), free_port());
    let (_nginx, _) = start_target(&nginx, dir.path(), target_port);
    let c_log = dir.path().join("c-xray-format.log");
    let server = server_config(
        c_port,
        VISION,
        server_reality(&keys, target_port, extra),
        &c_log,
    );
    let (mut c, c_out) = start_skiff(dir.path(), "c", &server, &[c_port]);
    // Skiff writes its log where `log.error` says, as Xray does.
    let c_out = (c_out, c_log);
    let b_log = dir.path().join("b.log");
    let config = xray_client_config(
        "tcp",
        Ports {
            listen: b_port,
            target: 9,
            server: c_port,
        },
        VISION,
        &keys.public,
        short_id,
        &b_log,
    );
    let (_b, _) = start_peer(xray, "xray", dir.path(), "b", &config, b_port, false);
    // Whatever the client does after failing, no payload comes back through the tunnel.
    let (answer, _) = exchange_bounded(b_port, b"ping");
    assert!(answer.is_empty(), "a refused client got {answer:?}");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut text = String::new();
    while std::time::Instant::now() < deadline {
        text = std::fs::read_to_string(&c_out.1).unwrap_or_default();
        if text.contains(why) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        text.contains(&format!("REALITY: {why}")),
        "Skiff did not forward for `{why}`; log:\n{text}"
    );
    assert!(!text.contains("REALITY: authenticated"), "log:\n{text}");
    assert_healthy(&mut c, &c_out.0);
}

/// Writes `bytes` to 127.0.0.1:`port` and reads until close or 10 s of silence.
fn exchange_bounded(port: u16, bytes: &[u8]) -> (Vec<u8>, bool) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = s.write_all(bytes);
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return (answer, true),
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(_) => return (answer, false),
        }
    }
}

#[test]
fn xray_client_skiff_server_reality_vision() {
    let _serial = one_at_a_time();
    if let Some(xray) = xray() {
        run_tcp(&xray, Client::Xray, VISION, 32 << 20, "reality-xray-vision");
    }
}

#[test]
fn xray_client_skiff_server_reality_plain_vless() {
    let _serial = one_at_a_time();
    if let Some(xray) = xray() {
        run_tcp(&xray, Client::Xray, "", 16 << 20, "reality-xray-plain");
    }
}

#[test]
fn xray_client_skiff_server_reality_vision_udp() {
    let _serial = one_at_a_time();
    if let Some(xray) = xray() {
        run_udp(&xray, VISION, "reality-xray-vision-udp");
    }
}

#[test]
fn xray_client_skiff_server_reality_udp() {
    let _serial = one_at_a_time();
    if let Some(xray) = xray() {
        run_udp(&xray, "", "reality-xray-udp");
    }
}

#[test]
fn sing_box_client_skiff_server_reality_vision() {
    let _serial = one_at_a_time();
    if let Some(sing_box) = shared_peer("sing-box", "SING_BOX_BIN") {
        run_tcp(
            &sing_box,
            Client::SingBox,
            VISION,
            16 << 20,
            "reality-singbox-vision",
        );
    }
}

/// The same sing-box client against Xray's own REALITY server: the reference for what the
/// Skiff case expects.
#[test]
fn sing_box_client_xray_server_reality_vision() {
    let _serial = one_at_a_time();
    if let (Some(sing_box), Some(xray)) = (shared_peer("sing-box", "SING_BOX_BIN"), xray()) {
        run_tcp_against(
            &sing_box,
            Client::SingBox,
            Some(&xray),
            VISION,
            16 << 20,
            "reality-singbox-xray-vision",
        );
    }
}

/// Skiff's REALITY client (B) against Xray's REALITY server (C), Vision with a TLS 1.3
/// payload: besides the checked bytes, Skiff's client must leave the outer TLS in both
/// directions and splice, over REALITY as over TLS. (Skiff's server side is checked by the
/// Xray-client cases above.)
#[test]
fn skiff_client_xray_server_reality_vision_splices_both_ways() {
    let _serial = one_at_a_time();
    let Some(xray) = xray() else { return };
    let Some(nginx) = nginx_binary() else { return };
    let bulk = 16 << 20;
    let dir = TempDir::new("reality-skiff-client-vision");
    let keys = keys();
    let (target_port, b_port, c_port) = (free_port(), free_port(), free_port());
    let (_nginx, _) = start_target(&nginx, dir.path(), target_port);
    let rt = runtime();
    let d = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let d_port = d.local_addr().unwrap().port();
    let server = server_config(
        c_port,
        VISION,
        server_reality(&keys, target_port, serde_json::json!({})),
        &dir.path().join("c-xray.log"),
    );
    let (_c, _) = start_peer(&xray, "xray", dir.path(), "c", &server, c_port, false);
    let b_log = dir.path().join("b-skiff.log");
    let client = xray_client_config(
        "tcp",
        Ports {
            listen: b_port,
            target: d_port,
            server: c_port,
        },
        VISION,
        &keys.public,
        SHORT_ID,
        &b_log,
    );
    let (mut b, b_out) = start_skiff(dir.path(), "b", &client, &[b_port]);
    let result = transfer(&rt, d, b_port, dir.path(), bulk);
    let tail = |p: &Path| {
        let text = std::fs::read_to_string(p).unwrap_or_default();
        text.lines().rev().take(40).collect::<Vec<_>>().join("\n")
    };
    let (up, down) =
        result.unwrap_or_else(|_| panic!("transfer deadline; skiff log:\n{}", tail(&b_log)));
    assert_eq!(up, (bulk, digest(1, bulk)), "uplink length and SHA-256");
    assert_eq!(down, (bulk, digest(2, bulk)), "downlink length and SHA-256");
    std::thread::sleep(Duration::from_millis(300));
    let text = std::fs::read_to_string(&b_log).unwrap_or_default();
    assert_went_direct_and_spliced(&text, "Skiff's client");
    assert_healthy(&mut b, &b_out);
}

/// Rewrites a VLESS config's `streamSettings` (its first inbound's and first outbound's
/// alike) to carry `network` with `settings` under REALITY, for the transports that are not
/// raw TCP.
fn over_network(config: &str, network: &str, settings: serde_json::Value) -> String {
    let mut value: serde_json::Value = serde_json::from_str(config).unwrap();
    for list in ["inbounds", "outbounds"] {
        for entry in value[list].as_array_mut().into_iter().flatten() {
            if let Some(stream) = entry.get_mut("streamSettings") {
                stream["network"] = network.into();
                stream[format!("{network}Settings")] = settings.clone();
            }
        }
    }
    value.to_string()
}

/// gRPC and XHTTP under REALITY, both ways: Xray's client to Skiff's REALITY server, and
/// Skiff's client to Xray's; `bulk` bytes each way in a TLS payload, checked. (No Vision:
/// Xray allows it on raw TCP only.)
fn run_transport_under_reality(network: &str, settings: serde_json::Value, name: &str) {
    let _serial = one_at_a_time();
    let Some(xray) = xray() else { return };
    let Some(nginx) = nginx_binary() else { return };
    let bulk = 8 << 20;
    for skiff_serves in [true, false] {
        let dir = TempDir::new(&format!("{name}-{skiff_serves}"));
        let keys = keys();
        let (target_port, b_port, c_port) = (free_port(), free_port(), free_port());
        let (_nginx, _) = start_target(&nginx, dir.path(), target_port);
        let rt = runtime();
        let d = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let d_port = d.local_addr().unwrap().port();
        let (c_log, b_log) = (dir.path().join("c-err.log"), dir.path().join("b-err.log"));
        let server = over_network(
            &server_config(
                c_port,
                "",
                server_reality(&keys, target_port, serde_json::json!({})),
                &c_log,
            ),
            network,
            settings.clone(),
        );
        let ports = Ports {
            listen: b_port,
            target: d_port,
            server: c_port,
        };
        let client = over_network(
            &xray_client_config("tcp", ports, "", &keys.public, SHORT_ID, &b_log),
            network,
            settings.clone(),
        );
        let (_c, _b, skiff_log) = if skiff_serves {
            let (c, _) = start_skiff(dir.path(), "c", &server, &[c_port]);
            let (b, _) = start_peer(&xray, "xray", dir.path(), "b", &client, b_port, false);
            (c, b, c_log)
        } else {
            let (c, _) = start_peer(&xray, "xray", dir.path(), "c", &server, c_port, false);
            let (b, _) = start_skiff(dir.path(), "b", &client, &[b_port]);
            (c, b, b_log)
        };
        let who = format!("{network} under REALITY, Skiff serving: {skiff_serves}");
        let (up, down) = transfer(&rt, d, b_port, dir.path(), bulk).unwrap_or_else(|_| {
            panic!(
                "{who}: transfer deadline; skiff log:\n{}",
                std::fs::read_to_string(&skiff_log).unwrap_or_default()
            )
        });
        assert_eq!(
            up,
            (bulk, digest(1, bulk)),
            "{who}: uplink length and SHA-256"
        );
        assert_eq!(
            down,
            (bulk, digest(2, bulk)),
            "{who}: downlink length and SHA-256"
        );
        if skiff_serves {
            let text = std::fs::read_to_string(&skiff_log).unwrap_or_default();
            assert!(text.contains("REALITY: authenticated"), "{who}: {text}");
        }
    }
}

#[test]
fn grpc_under_reality_both_ways() {
    run_transport_under_reality(
        "grpc",
        serde_json::json!({ "serviceName": "reality-gun" }),
        "reality-grpc",
    );
}

#[test]
fn xhttp_under_reality_both_ways() {
    run_transport_under_reality(
        "xhttp",
        serde_json::json!({ "path": "/reality-xhttp", "mode": "stream-one" }),
        "reality-xhttp",
    );
}

#[test]
fn unknown_short_id_goes_to_the_target() {
    let _serial = one_at_a_time();
    if let Some(xray) = xray() {
        run_refused(
            &xray,
            serde_json::json!({ "shortIds": ["aa"] }),
            SHORT_ID,
            "unknown short id",
            "reality-xray-shortid",
        );
    }
}

#[test]
fn client_outside_max_time_diff_goes_to_the_target() {
    let _serial = one_at_a_time();
    if let Some(xray) = xray() {
        // The session ID carries whole seconds, so 1 ms of tolerance fails unless the
        // connection falls in the first millisecond of a second (1 run in 1000).
        run_refused(
            &xray,
            serde_json::json!({ "maxTimeDiff": 1 }),
            SHORT_ID,
            "client time outside maxTimeDiff",
            "reality-xray-time",
        );
    }
}

#[test]
fn client_below_min_client_ver_goes_to_the_target() {
    let _serial = one_at_a_time();
    if let Some(xray) = xray() {
        run_refused(
            &xray,
            serde_json::json!({ "minClientVer": "99.0.0" }),
            SHORT_ID,
            "client version below minClientVer",
            "reality-xray-minver",
        );
    }
}
