//! Gives memory back to the OS after a burst. glibc keeps freed chunks in per-thread arenas,
//! so after 10 000 connections come and go the RSS would stay near its peak; a trim once many
//! connections have ended returns it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{Semaphore, watch};

const CHECK_EVERY: Duration = Duration::from_secs(1);
/// Trim once at least this many connections have ended since the last trim…
const TRIM_AFTER_CLOSED: u64 = 256;

/// `accepted` counts every connection the listeners took; `live` ones hold a permit.
pub async fn trim_after_bursts(
    accepted: Arc<AtomicU64>,
    permits: Arc<Semaphore>,
    max: usize,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut closed_at_last_trim = 0u64;
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = tokio::time::sleep(CHECK_EVERY) => {}
        }
        let live = (max - permits.available_permits()) as u64;
        let closed = accepted.load(Ordering::Relaxed).saturating_sub(live);
        let closed_since = closed - closed_at_last_trim.min(closed);
        // …and at least as many ended as are still open: the burst is over.
        if closed_since >= TRIM_AFTER_CLOSED && live <= closed_since {
            trim();
            closed_at_last_trim = closed;
        }
    }
}

/// Returns freed heap pages to the OS (glibc only; elsewhere nothing to do).
pub fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory; it is safe to call at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}
