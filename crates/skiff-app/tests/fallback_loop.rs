//! A fallback that leads back to its own inbound (directly, or through another inbound that
//! falls back again) is refused by `check`; these build such a loop past the check, as a
//! name or address the check cannot see through would, and send the 27-byte probe of the
//! adversarial review. The instance must close the probe after at most one trip round the
//! loop instead of opening connections until its descriptors run out.

mod common;

use std::time::Duration;

use common::*;
use skiff_app::Running;
use skiff_config::{FallbackDest, InboundProtocol, Source};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const UUID: &str = "b831381d-6324-4d53-ad4f-8cda48b30811";
const PROBE: &[u8] = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";

/// VLESS inbounds on the given ports, each falling back to a placeholder port, then rewired
/// so that inbound i falls back to `dests[i]`.
async fn start_rewired(ports: &[u16], dests: &[u16]) -> Running {
    let inbounds: Vec<String> = ports
        .iter()
        .enumerate()
        .map(|(i, port)| {
            format!(
                r#"{{"tag": "in{i}", "listen": "127.0.0.1", "port": {port}, "protocol": "vless",
                    "settings": {{"clients": [{{"id": "{UUID}"}}], "decryption": "none",
                                  "fallbacks": [{{"dest": 1}}]}}}}"#
            )
        })
        .collect();
    let json = format!(
        r#"{{"inbounds": [{}], "outbounds": [{{"protocol": "freedom"}}]}}"#,
        inbounds.join(",")
    );
    let mut loaded = skiff_config::load_sources(&[Source {
        name: "loop.json".into(),
        text: json,
    }])
    .expect("the config without the loop is valid");
    for (inbound, dest) in loaded.plan.inbounds.iter_mut().zip(dests) {
        let InboundProtocol::Vless(vless) = &mut inbound.protocol else {
            unreachable!("built as VLESS")
        };
        vless.fallbacks[0].dest = FallbackDest::Port(*dest);
    }
    Running::start(&loaded.plan).await.expect("instance starts")
}

/// Sends the probe to `port`, expects the connection to be closed without an answer, and the
/// instance to be back to no live connections soon after; returns the most live
/// connections seen meanwhile.
async fn probe(running: &Running, port: u16) -> usize {
    let mut most = 0;
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    stream.write_all(PROBE).await.unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer));
    tokio::pin!(read);
    // Sample the instance while the probe is in flight (bounded: 10 s in 5 ms steps).
    let ended = loop {
        most = most.max(running.live_connections());
        tokio::select! {
            r = &mut read => break r,
            () = tokio::time::sleep(Duration::from_millis(5)) => {}
        }
    };
    let result = ended.expect("the probe was closed within 10 s");
    assert!(
        result.is_ok() || answer.is_empty(),
        "the probe got an answer: {answer:?}"
    );
    assert!(answer.is_empty(), "the probe got an answer: {answer:?}");
    drop(stream);
    for _ in 0..200 {
        if running.live_connections() == 0 {
            return most;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!(
        "{} connections still open 2 s after the probe left",
        running.live_connections()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fallback_to_its_own_listener_does_not_recurse() {
    tokio::time::timeout(TEST_DEADLINE, async {
        let port = free_port();
        let running = start_rewired(&[port], &[port]).await;
        let most = probe(&running, port).await;
        // The probe itself and one trip back through the fallback.
        assert!(most <= 2, "{most} connections at once for one probe");
    })
    .await
    .expect("test deadline");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fallback_loop_through_another_inbound_does_not_recurse() {
    tokio::time::timeout(TEST_DEADLINE, async {
        let (a, b) = (free_port(), free_port());
        let running = start_rewired(&[a, b], &[b, a]).await;
        let most = probe(&running, a).await;
        assert!(most <= 3, "{most} connections at once for one probe");
    })
    .await
    .expect("test deadline");
}
