//! A Mux.Cool server connection fed any bytes: sub-connections opened, answered, ended,
//! refused past the bound, given up when they stall; nothing panics and it ends in time.
#![no_main]

use std::time::Duration;

use skiff_proto::mux::{Incoming, Limits, serve};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let Ok((ours, mut theirs)) = tokio::net::UnixStream::pair() else {
            return;
        };
        let limits = Limits {
            max_sessions: 4,
            session_buffer: 1024,
            stall: Duration::from_millis(1),
            idle: Duration::from_millis(5),
        };
        let served = serve(Box::new(ours), limits, "fuzz", |incoming| {
            Box::pin(async move {
                match incoming {
                    Incoming::Stream { mut stream, .. } => {
                        let mut buf = [0u8; 512];
                        if let Ok(n) = stream.read(&mut buf).await {
                            let _ = stream.write_all(&buf[..n]).await;
                        }
                        let _ = stream.shutdown().await;
                    }
                    Incoming::Datagrams {
                        mut recv, mut send, ..
                    } => {
                        if let Ok(Some(d)) = skiff_core::datagram::recv(&mut recv).await {
                            let _ = skiff_core::datagram::send(&mut send, &d).await;
                        }
                        let _ = skiff_core::datagram::shutdown(&mut send).await;
                    }
                }
            })
        });
        let input = data.to_vec();
        let client = async move {
            let _ = theirs.write_all(&input).await;
            let _ = theirs.shutdown().await;
            let mut sink = Vec::new();
            let _ = theirs.read_to_end(&mut sink).await;
        };
        let _ = tokio::time::timeout(Duration::from_secs(1), async {
            tokio::join!(served, client)
        })
        .await;
    });
});
