//! The relay: moves bytes both ways between the inbound's stream and the outbound's stream
//! until both directions have ended, with half-close propagation, live counters and the
//! policy's idle timeouts. Each direction copies through a lazily allocated buffer until both
//! of its ends are raw TCP sockets, then splices (Linux). Ends that are raw from the start
//! (tunnel → freedom) splice from the first byte; a protocol wrapper that becomes transparent
//! once its header is written or stripped (a VLESS client over raw TCP) switches mid-way.

mod copy;
#[cfg(target_os = "linux")]
mod splice;

use std::future::poll_fn;
use std::io;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::{Instant, Sleep};

use crate::stats::{Counter, DirectionCounters};
use crate::stream::BoxStream;
use copy::{CopyEnd, CopyState};

/// Xray's policy timeouts as the relay applies them, and the instance's cut signal.
#[derive(Clone, Debug)]
pub struct RelayPolicy {
    /// Both directions open and no byte moved for this long: close.
    pub conn_idle: Duration,
    /// The downlink has ended: the uplink may stay idle this long.
    pub uplink_only: Duration,
    /// The uplink has ended: the downlink may stay idle this long.
    pub downlink_only: Duration,
    /// When this turns true (the end of a shutdown's grace period) the relay stops at once
    /// and both ends are reset, not closed: a client must not take a cut download for a
    /// complete one. None: never cut.
    pub cut: Option<watch::Receiver<bool>>,
}

impl RelayPolicy {
    /// Timeouts only, never cut.
    pub fn timeouts(conn_idle: Duration, uplink_only: Duration, downlink_only: Duration) -> Self {
        RelayPolicy {
            conn_idle,
            uplink_only,
            downlink_only,
            cut: None,
        }
    }
}

/// Resolves once `cut` turns true; never when its sender is gone without cutting.
async fn cut_fired(cut: &mut watch::Receiver<bool>) {
    if cut.wait_for(|c| *c).await.is_err() {
        std::future::pending::<()>().await;
    }
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
    /// Cut by the policy's cut signal; both ends were set to reset on close.
    Cut,
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
    let mut pump = HybridPump {
        client: &mut client,
        server: &mut server,
        up: Direction::default(),
        down: Direction::default(),
        counters,
        tally: &tally,
    };
    let end = match policy.cut.clone() {
        Some(mut cut) => tokio::select! {
            end = drive(&mut pump, policy, &tally) => end,
            () = cut_fired(&mut cut) => RelayEnd::Cut,
        },
        None => drive(&mut pump, policy, &tally).await,
    };
    let spliced = pump.up.is_splicing() || pump.down.is_splicing();
    if matches!(end, RelayEnd::Cut) {
        client.reset_on_close();
        server.reset_on_close();
    }
    tally.outcome(spliced, end)
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

/// `now + after`, or a far-future instant when that would overflow: a policy may say "never"
/// with a huge number of seconds, and `Instant + Duration` panics past the clock's range.
pub fn deadline_after(after: Duration) -> Instant {
    const FAR: Duration = Duration::from_secs(86_400 * 365 * 30);
    let now = Instant::now();
    now.checked_add(after.min(FAR))
        .or_else(|| now.checked_add(FAR))
        .unwrap_or(now)
}

/// Polls both directions and the idle watchdog. The watchdog does not reset a timer per
/// read: it wakes once per timeout period and checks whether the byte tally moved.
async fn drive<P: Pump>(pump: &mut P, policy: &RelayPolicy, tally: &Tally) -> RelayEnd {
    let mut up_done = false;
    let mut down_done = false;
    let mut timeout = policy.conn_idle;
    let mut seen = tally.total();
    let mut watchdog: Pin<&mut Sleep> = pin!(tokio::time::sleep_until(deadline_after(timeout)));
    poll_fn(|cx| {
        loop {
            if !up_done && let Poll::Ready(result) = pump.poll_uplink(cx) {
                if let Err(e) = result {
                    return Poll::Ready(RelayEnd::Failed(e));
                }
                up_done = true;
                timeout = policy.downlink_only;
                watchdog.as_mut().reset(deadline_after(timeout));
            }
            if !down_done && let Poll::Ready(result) = pump.poll_downlink(cx) {
                if let Err(e) = result {
                    return Poll::Ready(RelayEnd::Failed(e));
                }
                down_done = true;
                timeout = if up_done { timeout } else { policy.uplink_only };
                watchdog.as_mut().reset(deadline_after(timeout));
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
            watchdog.as_mut().reset(deadline_after(timeout));
        }
    })
    .await
}

/// One direction's way of moving bytes.
enum Direction {
    Copy(CopyState),
    #[cfg(target_os = "linux")]
    Splice(splice::SpliceState),
}

impl Default for Direction {
    fn default() -> Self {
        Direction::Copy(CopyState::default())
    }
}

impl Direction {
    fn is_splicing(&self) -> bool {
        match self {
            Direction::Copy(_) => false,
            #[cfg(target_os = "linux")]
            Direction::Splice(_) => true,
        }
    }

    fn poll(
        &mut self,
        cx: &mut Context<'_>,
        reader: &mut BoxStream,
        writer: &mut BoxStream,
        counters: &DirectionCounters,
        all: &RelayCounters,
        tally: &AtomicU64,
    ) -> Poll<io::Result<()>> {
        loop {
            match self {
                Direction::Copy(state) => {
                    let stop_when_raw = cfg!(target_os = "linux");
                    let end = ready!(state.poll_copy(
                        cx,
                        &mut **reader,
                        &mut **writer,
                        counters,
                        &all.copied,
                        tally,
                        stop_when_raw,
                    ))?;
                    if end == CopyEnd::Finished {
                        return Poll::Ready(Ok(()));
                    }
                    // Bytes a handshake read ahead go first, through user space; the kernel
                    // takes over once the buffer is empty again.
                    if let Some(residue) = reader.take_read_residue() {
                        state.load(&residue);
                        continue;
                    }
                    #[cfg(target_os = "linux")]
                    {
                        *self = Direction::Splice(splice::SpliceState::default());
                    }
                }
                #[cfg(target_os = "linux")]
                Direction::Splice(state) => {
                    let (Some(from), Some(to)) = (reader.raw_tcp_read(), writer.raw_tcp_write())
                    else {
                        return Poll::Ready(Err(io::Error::other(
                            "a spliced stream stopped being a raw socket",
                        )));
                    };
                    return state.poll_splice(cx, from, to, counters, &all.spliced, tally);
                }
            }
        }
    }
}

/// Both directions of a relay over the two streams.
struct HybridPump<'a> {
    client: &'a mut BoxStream,
    server: &'a mut BoxStream,
    up: Direction,
    down: Direction,
    counters: &'a RelayCounters,
    tally: &'a Tally,
}

impl Pump for HybridPump<'_> {
    fn poll_uplink(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.up.poll(
            cx,
            self.client,
            self.server,
            &self.counters.uplink,
            self.counters,
            &self.tally.up,
        )
    }
    fn poll_downlink(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.down.poll(
            cx,
            self.server,
            self.client,
            &self.counters.downlink,
            self.counters,
            &self.tally.down,
        )
    }
}

#[cfg(test)]
mod tests;
