//! Zero-copy relay for one direction between two raw TCP sockets: socket → pipe → socket with
//! splice(2), so payload bytes never enter user space. The pipe is created on the first
//! readable event, which keeps idle connections free of pipes.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};

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

/// Writes `data` to a raw socket (used for read-ahead residue before splicing starts).
pub async fn write_all_raw(socket: &TcpStream, mut data: &[u8]) -> io::Result<()> {
    while !data.is_empty() {
        socket.writable().await?;
        match socket.try_write(data) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => data = &data[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Moves bytes from `from` to `to` until `from` reaches EOF, then shuts down `to`'s write side
/// (half-close propagates). Counts every spliced byte as it leaves the pipe.
pub async fn splice_direction(
    from: &TcpStream,
    to: &TcpStream,
    counters: &DirectionCounters,
    spliced: &Counter,
    tally: &AtomicU64,
) -> io::Result<()> {
    let mut pipe: Option<Pipe> = None;
    loop {
        from.readable().await?;
        let pipe = match &mut pipe {
            Some(p) => p,
            None => pipe.insert(Pipe::new()?),
        };
        let read = from.try_io(Interest::READABLE, || {
            splice(from.as_raw_fd(), pipe.write, pipe.capacity)
        });
        let mut pending = match read {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        };
        while pending > 0 {
            to.writable().await?;
            let wrote = to.try_io(Interest::WRITABLE, || {
                splice(pipe.read, to.as_raw_fd(), pending)
            });
            match wrote {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    pending -= n;
                    counters.add(n as u64);
                    spliced.add(n as u64);
                    tally.fetch_add(n as u64, Ordering::Relaxed);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        }
    }
    shutdown_write(to)
}

fn shutdown_write(socket: &TcpStream) -> io::Result<()> {
    match socket2::SockRef::from(socket).shutdown(std::net::Shutdown::Write) {
        // The peer may already be gone; its half of the conversation is over either way.
        Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(()),
        other => other,
    }
}
