//! Measurements across a [`Link`] with no proxy in between: a ping-like UDP probe for what the
//! link does to a round trip, and a bulk TCP transfer for what it does to a congestion control.
//! The bench reports these next to the proxy rows as the link's own baseline.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::emulator::wait_readable;
use super::{Link, interrupted};

/// How often blocked loops look at their deadline, stop flag and [`interrupted`].
const TICK: Duration = Duration::from_millis(100);
/// Probe datagram size: a ping's.
const PROBE_LEN: usize = 64;
/// Transfer chunk size.
const CHUNK: usize = 256 * 1024;
/// What [`tcp_download`] allows before giving up.
pub const DEFAULT_TRANSFER_TIMEOUT: Duration = Duration::from_secs(120);

fn interrupted_error() -> io::Error {
    io::Error::new(io::ErrorKind::Interrupted, "interrupted by SIGINT/SIGTERM")
}

fn timed_out(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// What `count` probes saw.
#[derive(Clone, Debug, PartialEq)]
pub struct PingStats {
    pub sent: u32,
    pub received: u32,
    /// Round-trip times of the answered probes, ascending.
    pub rtts: Vec<Duration>,
}

impl PingStats {
    /// Round-trip loss in 0..=1.
    pub fn loss(&self) -> f64 {
        if self.sent == 0 {
            return 0.0;
        }
        1.0 - self.received as f64 / self.sent as f64
    }

    pub fn min(&self) -> Option<Duration> {
        self.rtts.first().copied()
    }

    pub fn max(&self) -> Option<Duration> {
        self.rtts.last().copied()
    }

    pub fn median(&self) -> Option<Duration> {
        let n = self.rtts.len();
        match n {
            0 => None,
            _ if n % 2 == 1 => Some(self.rtts[n / 2]),
            _ => Some((self.rtts[n / 2 - 1] + self.rtts[n / 2]) / 2),
        }
    }

    pub fn mean(&self) -> Option<Duration> {
        let n = u32::try_from(self.rtts.len()).ok().filter(|&n| n > 0)?;
        Some(self.rtts.iter().sum::<Duration>() / n)
    }
}

impl fmt::Display for PingStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} sent, {} received, {:.1}% loss",
            self.sent,
            self.received,
            self.loss() * 100.0
        )?;
        if let (Some(min), Some(med), Some(mean), Some(max)) =
            (self.min(), self.median(), self.mean(), self.max())
        {
            let ms = |d: Duration| d.as_secs_f64() * 1e3;
            write!(
                f,
                ", rtt min/median/mean/max = {:.2}/{:.2}/{:.2}/{:.2} ms",
                ms(min),
                ms(med),
                ms(mean),
                ms(max)
            )?;
        }
        Ok(())
    }
}

/// Sends `count` UDP probes from B to an echo in C, one every `interval` (like `ping -i`), and
/// waits up to `wait` after the last for stragglers. A probe answered later than that counts as
/// lost. Takes about `count * interval + wait`.
pub fn udp_ping(
    link: &Link,
    count: u32,
    interval: Duration,
    wait: Duration,
) -> io::Result<PingStats> {
    let echo = link.run_in_c(|| UdpSocket::bind((link.addr_c(), 0)))??;
    let echo_addr = echo.local_addr()?;
    let probe = link.run_in_b(|| UdpSocket::bind((link.addr_b(), 0)))??;
    probe.connect(echo_addr)?;
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| run_echo(&echo, &stop));
        let result = run_probes(&probe, count, interval, wait);
        stop.store(true, Ordering::Relaxed);
        result
    })
}

/// Returns each datagram to its sender until `stop`.
fn run_echo(socket: &UdpSocket, stop: &AtomicBool) {
    let _ = socket.set_read_timeout(Some(TICK));
    let mut buf = [0u8; 2048];
    while !stop.load(Ordering::Relaxed) {
        if let Ok((n, from)) = socket.recv_from(&mut buf) {
            let _ = socket.send_to(&buf[..n], from);
        }
    }
}

fn run_probes(
    socket: &UdpSocket,
    count: u32,
    interval: Duration,
    wait: Duration,
) -> io::Result<PingStats> {
    // A per-run token in every probe, so nothing else can pass for an answer.
    let clock = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let token = clock.as_nanos() as u64 ^ (u64::from(std::process::id()) << 32);
    let mut sent_at: Vec<Instant> = Vec::with_capacity(count as usize);
    let mut rtts: Vec<Option<Duration>> = vec![None; count as usize];
    let start = Instant::now();
    let mut buf = [0u8; PROBE_LEN];
    let mut last_deadline = None;
    loop {
        if interrupted() {
            return Err(interrupted_error());
        }
        let now = Instant::now();
        let next = sent_at.len() as u32;
        let wake = if next < count {
            let due = start + interval * next;
            if now >= due {
                let mut probe = [0u8; PROBE_LEN];
                probe[..8].copy_from_slice(&token.to_be_bytes());
                probe[8..12].copy_from_slice(&next.to_be_bytes());
                sent_at.push(Instant::now());
                // A refused send (ENOBUFS) is a lost probe, not a failed measurement.
                let _ = socket.send(&probe);
                continue;
            }
            due
        } else {
            let deadline = *last_deadline.get_or_insert(now + wait);
            if now >= deadline || rtts.iter().all(Option::is_some) {
                break;
            }
            deadline
        };
        socket.set_read_timeout(Some((wake - now).clamp(Duration::from_micros(100), TICK)))?;
        match socket.recv(&mut buf) {
            Ok(n) => {
                let arrived = Instant::now();
                if n != PROBE_LEN || buf[..8] != token.to_be_bytes() {
                    continue;
                }
                let seq = u32::from_be_bytes([buf[8], buf[9], buf[10], buf[11]]) as usize;
                if let (Some(slot), Some(&t0)) = (rtts.get_mut(seq), sent_at.get(seq)) {
                    slot.get_or_insert(arrived - t0);
                }
            }
            Err(e) if timed_out(&e) || e.kind() == io::ErrorKind::Interrupted => {}
            // ICMP errors surface as ECONNREFUSED on a connected socket; the probe is lost.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
            Err(e) => return Err(e),
        }
    }
    let mut rtts: Vec<Duration> = rtts.into_iter().flatten().collect();
    rtts.sort();
    Ok(PingStats {
        sent: count,
        received: rtts.len() as u32,
        rtts,
    })
}

/// Which way the bytes of a TCP transfer flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransferDirection {
    /// B (client side) sends to C.
    Upload,
    /// C (server side) sends to B.
    Download,
}

/// One bulk TCP transfer across the link; B always connects to a listener in C.
#[derive(Clone, Debug)]
pub struct TcpTransfer {
    pub direction: TransferDirection,
    pub bytes: u64,
    /// TCP_CONGESTION of the sending socket, e.g. "cubic" or "bbr"; `None` = system default.
    pub congestion: Option<String>,
    /// The whole transfer, connect included, must end within this.
    pub timeout: Duration,
}

/// Downloads `bytes` from C to B with `congestion` on C's sending socket; the time runs from the
/// connect to the last byte at B (what a client sees). Gives up after
/// [`DEFAULT_TRANSFER_TIMEOUT`] with a `TimedOut` error saying how much arrived.
pub fn tcp_download(link: &Link, bytes: u64, congestion: &str) -> io::Result<Duration> {
    tcp_transfer(
        link,
        &TcpTransfer {
            direction: TransferDirection::Download,
            bytes,
            congestion: Some(congestion.to_string()),
            timeout: DEFAULT_TRANSFER_TIMEOUT,
        },
    )
}

/// Runs one transfer and returns the time from connect to the receiver's last byte.
pub fn tcp_transfer(link: &Link, transfer: &TcpTransfer) -> io::Result<Duration> {
    let deadline = Instant::now() + transfer.timeout;
    let listener = link.run_in_c(|| TcpListener::bind((link.addr_c(), 0)))??;
    listener.set_nonblocking(true)?;
    let server_addr = listener.local_addr()?;
    let stop = Arc::new(AtomicBool::new(false));
    let what = format!("TCP {:?} of {} bytes", transfer.direction, transfer.bytes);
    let download = transfer.direction == TransferDirection::Download;
    std::thread::scope(|scope| {
        // C's side: accept, then send (download) or receive (upload).
        let server = scope.spawn(|| {
            let result = accept_until(&listener, deadline, &stop).and_then(|stream| {
                if download {
                    set_congestion(&stream, transfer.congestion.as_deref())?;
                    send(stream, transfer.bytes, deadline, &stop).map(|()| None)
                } else {
                    receive(stream, transfer.bytes, deadline, &stop).map(Some)
                }
            });
            if result.is_err() {
                stop.store(true, Ordering::Relaxed); // unblocks the client within a TICK
            }
            result
        });
        // B's side, on this thread.
        let start = Instant::now();
        let client = connect_from_b(link, server_addr, deadline).and_then(|stream| {
            if download {
                receive(stream, transfer.bytes, deadline, &stop).map(Some)
            } else {
                set_congestion(&stream, transfer.congestion.as_deref())?;
                send(stream, transfer.bytes, deadline, &stop).map(|()| None)
            }
        });
        if client.is_err() {
            stop.store(true, Ordering::Relaxed); // unblocks the server within a TICK
        }
        let server = server
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        let end = match (client, server) {
            (Err(e), _) | (_, Err(e)) => {
                return Err(io::Error::new(e.kind(), format!("{what}: {e}")));
            }
            (Ok(Some(end)), _) | (_, Ok(Some(end))) => end,
            (Ok(None), Ok(None)) => unreachable!("one side always receives"),
        };
        Ok(end - start)
    })
}

fn connect_from_b(link: &Link, to: SocketAddr, deadline: Instant) -> io::Result<TcpStream> {
    // A lost SYN costs a 1 s retransmission; allow a few, within the overall deadline.
    let limit = deadline
        .saturating_duration_since(Instant::now())
        .min(Duration::from_secs(15))
        .max(Duration::from_millis(1));
    link.run_in_b(|| TcpStream::connect_timeout(&to, limit))?
        .map_err(|e| io::Error::new(e.kind(), format!("connecting to {to}: {e}")))
}

fn accept_until(
    listener: &TcpListener,
    deadline: Instant,
    stop: &AtomicBool,
) -> io::Result<TcpStream> {
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                stream.set_nonblocking(false)?;
                return Ok(stream);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
        check(deadline, stop, "waiting for the connection")?;
        wait_readable(listener.as_fd().as_raw_fd(), TICK)?;
    }
}

/// Errors out once the deadline passed, the other side failed, or a signal came.
fn check(deadline: Instant, stop: &AtomicBool, doing: &str) -> io::Result<()> {
    if interrupted() {
        return Err(interrupted_error());
    }
    if stop.load(Ordering::Relaxed) {
        return Err(io::Error::other(format!(
            "stopped while {doing}: the other side failed"
        )));
    }
    if Instant::now() >= deadline {
        return Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("timed out {doing}"),
        ));
    }
    Ok(())
}

fn send(mut stream: TcpStream, bytes: u64, deadline: Instant, stop: &AtomicBool) -> io::Result<()> {
    let result = (|| {
        stream.set_write_timeout(Some(TICK))?;
        let chunk = vec![0x5a_u8; CHUNK];
        let mut left = bytes;
        while left > 0 {
            check(
                deadline,
                stop,
                &format!("sending, {} bytes sent", bytes - left),
            )?;
            let n = left.min(CHUNK as u64) as usize;
            match stream.write(&chunk[..n]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(written) => left -= written as u64,
                Err(e) if timed_out(&e) || e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        stream.shutdown(std::net::Shutdown::Write)
    })();
    if result.is_err() {
        stop.store(true, Ordering::Relaxed);
    }
    result
}

/// Reads until `bytes` arrived; returns when the last one did.
fn receive(
    mut stream: TcpStream,
    bytes: u64,
    deadline: Instant,
    stop: &AtomicBool,
) -> io::Result<Instant> {
    let result = (|| {
        stream.set_read_timeout(Some(TICK))?;
        let mut buf = vec![0u8; CHUNK];
        let mut got = 0u64;
        while got < bytes {
            check(
                deadline,
                stop,
                &format!("receiving, {got} of {bytes} bytes arrived"),
            )?;
            match stream.read(&mut buf) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!("sender closed after {got} of {bytes} bytes"),
                    ));
                }
                Ok(n) => got += n as u64,
                Err(e) if timed_out(&e) || e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(Instant::now())
    })();
    if result.is_err() {
        stop.store(true, Ordering::Relaxed);
    }
    result
}

/// Sets TCP_CONGESTION on the sending socket before its first byte and reads it back.
fn set_congestion(stream: &TcpStream, name: Option<&str>) -> io::Result<()> {
    let Some(name) = name else {
        return Ok(());
    };
    let fd = stream.as_raw_fd();
    // SAFETY: setsockopt reads `name.len()` bytes from a live str.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    };
    if r != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!(
                "congestion control `{name}` unavailable ({e}); see \
                 /proc/sys/net/ipv4/tcp_available_congestion_control"
            ),
        ));
    }
    let mut got = [0u8; 16]; // TCP_CA_NAME_MAX
    let mut len = got.len() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `got`.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            got.as_mut_ptr().cast(),
            &mut len,
        )
    };
    let got = &got[..(len as usize).min(16)];
    let got = got.split(|&b| b == 0).next().unwrap_or_default();
    if r != 0 || got != name.as_bytes() {
        return Err(io::Error::other(format!(
            "asked for congestion control `{name}`, socket has `{}`",
            String::from_utf8_lossy(got)
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ping_stats() {
        let ms = Duration::from_millis;
        let s = PingStats {
            sent: 10,
            received: 4,
            rtts: vec![ms(90), ms(100), ms(110), ms(200)],
        };
        assert!((s.loss() - 0.6).abs() < 1e-12);
        assert_eq!(s.median(), Some(ms(105)));
        assert_eq!(s.mean(), Some(ms(125)));
        assert_eq!((s.min(), s.max()), (Some(ms(90)), Some(ms(200))));
        assert!(s.to_string().contains("60.0% loss"), "{s}");
        let none = PingStats {
            sent: 0,
            received: 0,
            rtts: vec![],
        };
        assert_eq!((none.loss(), none.median(), none.mean()), (0.0, None, None));
    }
}
