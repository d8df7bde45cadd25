//! The gap between packet-up uploads, kept to the microsecond as Xray's client keeps it.
//!
//! `scMinPostsIntervalMs` bounds how often a client may post, so at its default (one post of
//! at most 1 MB per 30 ms) it bounds packet-up's upload outright. tokio's timers tick in
//! whole milliseconds and wake on the tick after the deadline, which stretched every 30 ms gap
//! to about 31 and cost 3–4 % of that bound; Go's sleep, which Xray uses, overshoots by tens of
//! microseconds. On Linux each pacer holds a timerfd (one per uploading tunnel) armed with the
//! absolute deadline; elsewhere, and if the timerfd cannot be made, tokio's sleep.

use std::time::Instant;

pub struct Pacer {
    #[cfg(target_os = "linux")]
    timer: Option<tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>>,
}

impl Pacer {
    pub fn new() -> Pacer {
        Pacer {
            #[cfg(target_os = "linux")]
            timer: linux::timerfd().ok(),
        }
    }

    /// Returns once `deadline` has passed.
    pub async fn sleep_until(&mut self, deadline: Instant) {
        let Some(wait) = deadline.checked_duration_since(Instant::now()) else {
            return;
        };
        #[cfg(target_os = "linux")]
        if let Some(timer) = &self.timer
            && linux::wait(timer, wait).await.is_ok()
        {
            return;
        }
        tokio::time::sleep(wait).await;
    }
}

impl Default for Pacer {
    fn default() -> Self {
        Pacer::new()
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::time::Duration;

    use tokio::io::unix::AsyncFd;

    pub fn timerfd() -> io::Result<AsyncFd<OwnedFd>> {
        // SAFETY: plain syscall; a valid descriptor is owned below, an error is -1.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created and nothing else owns it.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: the `OwnedFd` keeps its descriptor open and the same until the `AsyncFd`
        // that owns it is dropped.
        Ok(unsafe { AsyncFd::register(owned) }?)
    }

    /// Arms the timer `wait` from now and waits for it to fire.
    pub async fn wait(timer: &AsyncFd<OwnedFd>, wait: Duration) -> io::Result<()> {
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: wait.as_secs() as libc::time_t,
                // A zero value would disarm it: at least a nanosecond.
                tv_nsec: (wait.subsec_nanos().max(1)) as libc::c_long,
            },
        };
        // SAFETY: a valid timerfd and a fully initialised itimerspec; no old value wanted.
        let set =
            unsafe { libc::timerfd_settime(timer.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
        if set < 0 {
            return Err(io::Error::last_os_error());
        }
        loop {
            let mut guard = timer.readable().await?;
            let mut expirations = [0u8; 8];
            // SAFETY: reading 8 bytes into an 8-byte buffer from a valid descriptor.
            let n = unsafe {
                libc::read(
                    timer.as_raw_fd(),
                    expirations.as_mut_ptr().cast(),
                    expirations.len(),
                )
            };
            if n == 8 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::WouldBlock {
                return Err(e);
            }
            guard.clear_ready();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Never early (the interval is a minimum). How late it wakes is the bench's to show:
    /// packet-up's upload row runs at the bound the interval sets.
    #[tokio::test]
    async fn never_wakes_before_the_deadline() {
        let mut pacer = Pacer::new();
        for micros in [1, 300, 2_300, 31_000] {
            let deadline = Instant::now() + Duration::from_micros(micros);
            pacer.sleep_until(deadline).await;
            assert!(Instant::now() >= deadline, "woke early ({micros} µs)");
        }
        // A deadline already passed returns at once.
        pacer
            .sleep_until(Instant::now() - Duration::from_millis(1))
            .await;
    }
}
