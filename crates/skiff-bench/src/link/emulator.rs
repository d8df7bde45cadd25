//! The forwarder: one thread per direction reads packets from one TUN device, passes them through
//! that direction's [`Scheduler`] and writes them to the other device when they are due.
//!
//! One thread does both the reading and the writing of its direction, sleeping in ppoll(2) until
//! either a packet arrives or the head of the queue is due: the scheduler needs no lock, and a
//! TUN write never blocks (the kernel takes the packet into its receive path or drops it), so
//! writing can't hold up reading. The ppoll timeout is capped so the stop flag is seen promptly.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::schedule::{Offer, Scheduler};
use super::spec::LinkSpec;

/// Longest a direction thread sleeps before looking at the stop flag again.
const STOP_CHECK: Duration = Duration::from_millis(50);
/// Packets read per wake-up before releasing due ones, so a flood can't delay releases.
const READ_BURST: usize = 64;
/// Free buffers kept for reuse; beyond that they are freed (the queue bounds the rest).
const POOL_MAX: usize = 256;

/// What happened to the packets of one direction since the link came up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirectionCounters {
    /// Packets read from the sending side's TUN device.
    pub packets_in: u64,
    pub bytes_in: u64,
    /// Dropped by the random loss.
    pub dropped_loss: u64,
    /// Tail-dropped because the queue was full.
    pub dropped_queue: u64,
    /// Written to the receiving side's TUN device.
    pub forwarded: u64,
    pub bytes_forwarded: u64,
    /// Writes the kernel refused (device down, no memory); such packets are lost.
    pub write_errors: u64,
}

/// Counters of both directions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkCounters {
    /// Client side (B) to server side (C): uploads and requests.
    pub b_to_c: DirectionCounters,
    /// Server side (C) to client side (B): downloads and replies.
    pub c_to_b: DirectionCounters,
}

/// Live counters, updated by the direction thread, read at any time.
#[derive(Debug, Default)]
struct Stats {
    packets_in: AtomicU64,
    bytes_in: AtomicU64,
    dropped_loss: AtomicU64,
    dropped_queue: AtomicU64,
    forwarded: AtomicU64,
    bytes_forwarded: AtomicU64,
    write_errors: AtomicU64,
}

impl Stats {
    fn snapshot(&self) -> DirectionCounters {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        DirectionCounters {
            packets_in: get(&self.packets_in),
            bytes_in: get(&self.bytes_in),
            dropped_loss: get(&self.dropped_loss),
            dropped_queue: get(&self.dropped_queue),
            forwarded: get(&self.forwarded),
            bytes_forwarded: get(&self.bytes_forwarded),
            write_errors: get(&self.write_errors),
        }
    }

    fn add(a: &AtomicU64, n: u64) {
        a.fetch_add(n, Ordering::Relaxed);
    }
}

/// The two running directions; dropping it stops and joins them.
#[derive(Debug)]
pub struct Emulator {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    b_to_c: Arc<Stats>,
    c_to_b: Arc<Stats>,
}

impl Emulator {
    /// Starts forwarding between the two TUN fds (non-blocking, one IP packet per read/write).
    pub fn start(
        spec: &LinkSpec,
        tun_b: Arc<OwnedFd>,
        tun_c: Arc<OwnedFd>,
    ) -> io::Result<Emulator> {
        let mut emulator = Emulator {
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
            b_to_c: Arc::default(),
            c_to_b: Arc::default(),
        };
        let clock_seed = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let directions = [
            ("link b->c", &tun_b, &tun_c, &emulator.b_to_c),
            ("link c->b", &tun_c, &tun_b, &emulator.c_to_b),
        ];
        for (i, (name, input, output, stats)) in directions.into_iter().enumerate() {
            let direction = Direction {
                input: Arc::clone(input),
                output: Arc::clone(output),
                // Distinct seeds so the two directions lose independently.
                scheduler: Scheduler::new(spec, clock_seed ^ ((i as u64 + 1) << 56)),
                stats: Arc::clone(stats),
                stop: Arc::clone(&emulator.stop),
                buf_len: spec.mtu as usize,
            };
            // On failure `emulator` drops here, stopping the direction already started.
            let handle = std::thread::Builder::new()
                .name(name.into())
                .spawn(move || direction.run())?;
            emulator.threads.push(handle);
        }
        Ok(emulator)
    }

    pub fn counters(&self) -> LinkCounters {
        LinkCounters {
            b_to_c: self.b_to_c.snapshot(),
            c_to_b: self.c_to_b.snapshot(),
        }
    }

    /// Stops both directions (within [`STOP_CHECK`]) and waits for them; packets still queued are
    /// discarded.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for handle in self.threads.drain(..) {
            let _ = handle.join();
        }
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One packet buffer; `len` bytes of `buf` are the packet.
struct Packet {
    buf: Box<[u8]>,
    len: usize,
}

struct Direction {
    input: Arc<OwnedFd>,
    output: Arc<OwnedFd>,
    scheduler: Scheduler<Packet>,
    stats: Arc<Stats>,
    stop: Arc<AtomicBool>,
    buf_len: usize,
}

impl Direction {
    fn run(mut self) {
        // The default 50 µs timer slack would be added to every sleep; the rate limiter paces
        // packets microseconds apart, so ask for precise wake-ups.
        // SAFETY: prctl with integer arguments only affects this thread.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
        run_as_the_wire();
        let epoch = Instant::now();
        let now_ns = || epoch.elapsed().as_nanos() as u64;
        let (input, output) = (self.input.as_raw_fd(), self.output.as_raw_fd());
        let mut pool: Vec<Packet> = Vec::new();
        while !self.stop.load(Ordering::Relaxed) {
            let now = now_ns();
            let wait = match self.scheduler.next_release() {
                Some(t) => Duration::from_nanos(t.saturating_sub(now)).min(STOP_CHECK),
                None => STOP_CHECK,
            };
            match wait_readable(input, wait) {
                Ok(()) => {}
                Err(e) => {
                    eprintln!(
                        "skiff bench link: polling the TUN device failed, direction stops: {e}"
                    );
                    return;
                }
            }
            for _ in 0..READ_BURST {
                let mut packet = pool.pop().unwrap_or_else(|| Packet {
                    buf: vec![0; self.buf_len].into_boxed_slice(),
                    len: 0,
                });
                // SAFETY: reading into a buffer we own, of the length we pass.
                let n =
                    unsafe { libc::read(input, packet.buf.as_mut_ptr().cast(), packet.buf.len()) };
                if n <= 0 {
                    // Take errno before anything else can change it.
                    let e = io::Error::last_os_error();
                    pool.push(packet);
                    match e.kind() {
                        _ if n == 0 => break,
                        io::ErrorKind::WouldBlock => break,
                        io::ErrorKind::Interrupted => continue,
                        _ => {
                            eprintln!(
                                "skiff bench link: reading the TUN device failed, direction stops: {e}"
                            );
                            return;
                        }
                    }
                }
                packet.len = n as usize;
                Stats::add(&self.stats.packets_in, 1);
                Stats::add(&self.stats.bytes_in, n as u64);
                match self.scheduler.offer(now_ns(), packet.len, packet) {
                    Offer::Queued => {}
                    Offer::Lost(p) => {
                        Stats::add(&self.stats.dropped_loss, 1);
                        pool.push(p);
                    }
                    Offer::QueueFull(p) => {
                        Stats::add(&self.stats.dropped_queue, 1);
                        pool.push(p);
                    }
                }
            }
            let now = now_ns();
            while let Some(packet) = self.scheduler.pop_due(now) {
                // SAFETY: writing `len` initialised bytes of a buffer we own.
                let n = unsafe { libc::write(output, packet.buf.as_ptr().cast(), packet.len) };
                if n == packet.len as isize {
                    Stats::add(&self.stats.forwarded, 1);
                    Stats::add(&self.stats.bytes_forwarded, packet.len as u64);
                } else {
                    Stats::add(&self.stats.write_errors, 1);
                }
                if pool.len() < POOL_MAX {
                    pool.push(packet);
                }
            }
        }
    }
}

/// Sleeps until `fd` is readable or `timeout` passed (EINTR counts as a timeout: the caller loops).
pub(super) fn wait_readable(fd: RawFd, timeout: Duration) -> io::Result<()> {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: one valid pollfd, a valid timespec, no signal mask change.
    let r = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
    if r < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok(())
        } else {
            Err(e)
        };
    }
    if r > 0 && pfd.revents & (libc::POLLERR | libc::POLLNVAL) != 0 {
        return Err(io::Error::other(format!("poll revents {:#x}", pfd.revents)));
    }
    Ok(())
}

/// Puts the calling direction thread under SCHED_FIFO at the lowest real-time priority, when
/// the process may (root or CAP_SYS_NICE, which the link's namespaces need anyway), so that the
/// link keeps its delays while the proxies under test load both cores: a wire does not wait for
/// the CPU, and netem, which this stands in for, runs in softirq ahead of every process. The
/// thread sleeps in ppoll between packets, and the kernel's real-time throttling (95 % of each
/// second by default) bounds it if it ever spins. Without the privilege it stays as it was.
fn run_as_the_wire() {
    let param = libc::sched_param { sched_priority: 1 };
    // SAFETY: pid 0 is the calling thread; the parameter outlives the call.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
}
