//! The REALITY server's relay for everything that is not an authenticated client: the
//! target's bytes read so far go to the client first, then both directions are copied (or
//! spliced, socket to socket) until either side ends, as REALITY's `io.Copy` pair does. The
//! client's bytes were already copied to the target as they were read.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use skiff_core::{
    BoxStream, Counter, DirectionCounters, Prefixed, RelayCounters, RelayPolicy, relay,
};

/// Idle limits of a relayed connection: Xray's default policy (5 minutes both ways open,
/// then 2 s for the uplink and 5 s for the downlink once the other direction has ended).
const CONN_IDLE: Duration = Duration::from_secs(300);
const UPLINK_ONLY: Duration = Duration::from_secs(2);
const DOWNLINK_ONLY: Duration = Duration::from_secs(5);

/// Spawns the relay between `client` and `target`; `from_target` goes to the client first.
pub(crate) fn forward(client: BoxStream, target: BoxStream, from_target: Vec<u8>) {
    let target: BoxStream = if from_target.is_empty() {
        target
    } else {
        Box::new(Prefixed::new(Bytes::from(from_target), target))
    };
    tokio::spawn(async move {
        let policy = RelayPolicy::timeouts(CONN_IDLE, UPLINK_ONLY, DOWNLINK_ONLY);
        let counters = RelayCounters {
            uplink: DirectionCounters::new(Vec::new()),
            downlink: DirectionCounters::new(Vec::new()),
            spliced: Arc::new(Counter::default()),
            copied: Arc::new(Counter::default()),
        };
        let outcome = relay(client, target, &policy, &counters).await;
        tracing::debug!(
            up = outcome.uplink_bytes,
            down = outcome.downlink_bytes,
            "REALITY: relay to the target ended"
        );
    });
}
