//! The relay: moves bytes both ways between the inbound's stream and the outbound's stream
//! until both directions have ended, with half-close propagation, live counters and the
//! policy's idle timeouts. When both ends are raw TCP sockets it splices (Linux), otherwise
//! it copies through lazily allocated buffers.

mod copy;
#[cfg(target_os = "linux")]
mod splice;

use std::future::{Future, poll_fn};
use std::io;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::{Instant, Sleep};

use crate::stats::{Counter, DirectionCounters};
use crate::stream::BoxStream;
use copy::CopyState;

/// Xray's policy timeouts as the relay applies them.
#[derive(Clone, Copy, Debug)]
pub struct RelayPolicy {
    /// Both directions open and no byte moved for this long: close.
    pub conn_idle: Duration,
    /// The downlink has ended: the uplink may stay idle this long.
    pub uplink_only: Duration,
    /// The uplink has ended: the downlink may stay idle this long.
    pub downlink_only: Duration,
}

/// Where one connection's bytes are counted.
#[derive(Clone, Debug, Default)]
pub struct RelayCounters {
    pub uplink: DirectionCounters,
    pub downlink: DirectionCounters,
    pub spliced: Arc<Counter>,
    pub copied: Arc<Counter>,
}

#[derive(Debug)]
pub enum RelayEnd {
    /// Both directions reached EOF and were shut down.
    Finished,
    /// No traffic for the policy's timeout.
    IdleTimeout,
    /// One side failed (reset, broken pipe…); the other was dropped.
    Failed(io::Error),
}

#[derive(Debug)]
pub struct RelayOutcome {
    pub uplink_bytes: u64,
    pub downlink_bytes: u64,
    /// True when the bytes went through splice(2).
    pub spliced: bool,
    pub end: RelayEnd,
}

/// Relays `client` (the inbound side) and `server` (the outbound side) until both directions
/// are done, a timeout fires or an error occurs. Uplink is client → server.
pub async fn relay(
    mut client: BoxStream,
    mut server: BoxStream,
    policy: &RelayPolicy,
    counters: &RelayCounters,
) -> RelayOutcome {
    let tally = Tally::default();
    #[cfg(target_os = "linux")]
    if client.raw_tcp().is_some() && server.raw_tcp().is_some() {
        let end = splice_both(&mut client, &mut server, policy, counters, &tally).await;
        return tally.outcome(true, end);
    }
    let mut pump = CopyPump {
        client: &mut client,
        server: &mut server,
        up: CopyState::default(),
        down: CopyState::default(),
        counters,
        tally: &tally,
    };
    let end = drive(&mut pump, policy, &tally).await;
    tally.outcome(false, end)
}

#[derive(Default)]
struct Tally {
    up: AtomicU64,
    down: AtomicU64,
}

impl Tally {
    fn total(&self) -> u64 {
        self.up.load(Ordering::Relaxed) + self.down.load(Ordering::Relaxed)
    }

    fn outcome(&self, spliced: bool, end: RelayEnd) -> RelayOutcome {
        RelayOutcome {
            uplink_bytes: self.up.load(Ordering::Relaxed),
            downlink_bytes: self.down.load(Ordering::Relaxed),
            spliced,
            end,
        }
    }
}

/// The two directions of a relay, polled by [`drive`].
trait Pump {
    fn poll_uplink(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>>;
    fn poll_downlink(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>>;
}

/// Polls both directions and the idle watchdog. The watchdog does not reset a timer per
/// read: it wakes once per timeout period and checks whether the byte tally moved.
async fn drive<P: Pump>(pump: &mut P, policy: &RelayPolicy, tally: &Tally) -> RelayEnd {
    let mut up_done = false;
    let mut down_done = false;
    let mut timeout = policy.conn_idle;
    let mut seen = tally.total();
    let mut watchdog: Pin<&mut Sleep> = pin!(tokio::time::sleep(timeout));
    poll_fn(|cx| {
        loop {
            if !up_done && let Poll::Ready(result) = pump.poll_uplink(cx) {
                if let Err(e) = result {
                    return Poll::Ready(RelayEnd::Failed(e));
                }
                up_done = true;
                timeout = policy.downlink_only;
                watchdog.as_mut().reset(Instant::now() + timeout);
            }
            if !down_done && let Poll::Ready(result) = pump.poll_downlink(cx) {
                if let Err(e) = result {
                    return Poll::Ready(RelayEnd::Failed(e));
                }
                down_done = true;
                timeout = if up_done { timeout } else { policy.uplink_only };
                watchdog.as_mut().reset(Instant::now() + timeout);
            }
            if up_done && down_done {
                return Poll::Ready(RelayEnd::Finished);
            }
            if watchdog.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            let now_seen = tally.total();
            if now_seen == seen {
                return Poll::Ready(RelayEnd::IdleTimeout);
            }
            seen = now_seen;
            watchdog.as_mut().reset(Instant::now() + timeout);
        }
    })
    .await
}

struct CopyPump<'a> {
    client: &'a mut BoxStream,
    server: &'a mut BoxStream,
    up: CopyState,
    down: CopyState,
    counters: &'a RelayCounters,
    tally: &'a Tally,
}

impl Pump for CopyPump<'_> {
    fn poll_uplink(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.up.poll_copy(
            cx,
            &mut **self.client,
            &mut **self.server,
            &self.counters.uplink,
            &self.counters.copied,
            &self.tally.up,
        )
    }
    fn poll_downlink(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.down.poll_copy(
            cx,
            &mut **self.server,
            &mut **self.client,
            &self.counters.downlink,
            &self.counters.copied,
            &self.tally.down,
        )
    }
}

struct FuturePump<U, D> {
    up: Pin<Box<U>>,
    down: Pin<Box<D>>,
}

impl<U, D> Pump for FuturePump<U, D>
where
    U: Future<Output = io::Result<()>>,
    D: Future<Output = io::Result<()>>,
{
    fn poll_uplink(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.up.as_mut().poll(cx)
    }
    fn poll_downlink(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.down.as_mut().poll(cx)
    }
}

#[cfg(target_os = "linux")]
async fn splice_both(
    client: &mut BoxStream,
    server: &mut BoxStream,
    policy: &RelayPolicy,
    counters: &RelayCounters,
    tally: &Tally,
) -> RelayEnd {
    // Bytes a handshake read ahead go first, through user space, then the kernel takes over.
    let client_residue = client.take_read_residue();
    let server_residue = server.take_read_residue();
    let (Some(client_tcp), Some(server_tcp)) = (client.raw_tcp(), server.raw_tcp()) else {
        return RelayEnd::Failed(io::Error::other("splice needs two raw sockets"));
    };
    let up = async {
        if let Some(bytes) = client_residue {
            splice::write_all_raw(server_tcp, &bytes).await?;
            counters.uplink.add(bytes.len() as u64);
            tally.up.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        }
        splice::splice_direction(
            client_tcp,
            server_tcp,
            &counters.uplink,
            &counters.spliced,
            &tally.up,
        )
        .await
    };
    let down = async {
        if let Some(bytes) = server_residue {
            splice::write_all_raw(client_tcp, &bytes).await?;
            counters.downlink.add(bytes.len() as u64);
            tally.down.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        }
        splice::splice_direction(
            server_tcp,
            client_tcp,
            &counters.downlink,
            &counters.spliced,
            &tally.down,
        )
        .await
    };
    let mut pump = FuturePump {
        up: Box::pin(up),
        down: Box::pin(down),
    };
    drive(&mut pump, policy, tally).await
}
