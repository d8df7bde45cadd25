//! Zero-copy relay for one direction between two raw TCP sockets: socket → pipe → socket with
//! splice(2), so payload bytes never enter user space. The pipe is created on the first
//! readable event, which keeps idle connections free of pipes.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, ready};

use tokio::io::Interest;
use tokio::net::TcpStream;

use crate::stats::{Counter, DirectionCounters};

/// Pipe capacity asked for with F_SETPIPE_SZ: larger pipes mean fewer syscalls per GiB. The
/// kernel allocates the pages only as data flows through.
const PIPE_SIZE: usize = 1 << 20;

struct Pipe {
    read: RawFd,
    write: RawFd,
    capacity: usize,
}

impl Pipe {
    fn new() -> io::Result<Pipe> {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: fds is a valid array of two ints, as pipe2 requires.
        let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        let [read, write] = fds;
        // SAFETY: write is the pipe fd just created. A refusal (pipe-max-size) keeps 64 KiB.
        let granted = unsafe { libc::fcntl(write, libc::F_SETPIPE_SZ, PIPE_SIZE as libc::c_int) };
        let capacity = if granted > 0 {
            granted as usize
        } else {
            1 << 16
        };
        Ok(Pipe {
            read,
            write,
            capacity,
        })
    }
}

impl Drop for Pipe {
    fn drop(&mut self) {
        // SAFETY: both fds are owned by this Pipe and closed exactly once.
        unsafe {
            libc::close(self.read);
            libc::close(self.write);
        }
    }
}

fn splice(from: RawFd, to: RawFd, len: usize) -> io::Result<usize> {
    // SAFETY: plain syscall on fds we own or borrow for its duration; null offsets mean
    // "current position", as required for sockets and pipes.
    let n = unsafe {
        libc::splice(
            from,
            std::ptr::null_mut(),
            to,
            std::ptr::null_mut(),
            len,
            libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// One direction of splicing: socket → pipe → socket, as a poll-driven state so the relay can
/// switch a direction from copying to splicing in the middle of a connection.
#[derive(Default)]
pub struct SpliceState {
    pipe: Option<Pipe>,
    /// Bytes sitting in the pipe, not yet written to the destination.
    pending: usize,
    eof: bool,
}

impl SpliceState {
    /// Moves bytes from `from` to `to` until `from` reaches EOF, then shuts down `to`'s write
    /// side (half-close propagates). Counts every spliced byte as it leaves the pipe, so
    /// traffic counters move live.
    pub fn poll_splice(
        &mut self,
        cx: &mut Context<'_>,
        from: &TcpStream,
        to: &TcpStream,
        counters: &DirectionCounters,
        spliced: &Counter,
        tally: &AtomicU64,
    ) -> Poll<io::Result<()>> {
        loop {
            if self.pending == 0 {
                if self.eof {
                    return Poll::Ready(shutdown_write(to));
                }
                ready!(from.poll_read_ready(cx))?;
                let pipe = match &mut self.pipe {
                    Some(p) => p,
                    None => self.pipe.insert(Pipe::new()?),
                };
                let (pipe_write, capacity) = (pipe.write, pipe.capacity);
                match from.try_io(Interest::READABLE, || {
                    splice(from.as_raw_fd(), pipe_write, capacity)
                }) {
                    Ok(0) => self.eof = true,
                    Ok(n) => self.pending = n,
                    // try_io cleared the readiness: the next poll registers the waker.
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Poll::Ready(Err(e)),
                }
                continue;
            }
            let Some(pipe) = &self.pipe else {
                return Poll::Ready(Err(io::Error::other("splice pipe vanished")));
            };
            let pipe_read = pipe.read;
            ready!(to.poll_write_ready(cx))?;
            match to.try_io(Interest::WRITABLE, || {
                splice(pipe_read, to.as_raw_fd(), self.pending)
            }) {
                Ok(0) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Ok(n) => {
                    self.pending -= n;
                    counters.add(n as u64);
                    spliced.add(n as u64);
                    tally.fetch_add(n as u64, Ordering::Relaxed);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

fn shutdown_write(socket: &TcpStream) -> io::Result<()> {
    match socket2::SockRef::from(socket).shutdown(std::net::Shutdown::Write) {
        // The peer may already be gone; its half of the conversation is over either way.
        Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(()),
        other => other,
    }
}
