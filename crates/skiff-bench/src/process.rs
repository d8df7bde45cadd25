//! Child processes of a bench run (the B and C of each row): started, waited for, measured
//! from /proc, and always ended by PID — never by name.

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A started proxy process; killed on drop.
pub struct Proc {
    pub name: String,
    child: Child,
    /// Where its stdout and stderr go (a pipe could fill up and stall it).
    log: std::path::PathBuf,
}

/// CPU seconds (user + system) and peak RSS of a process.
#[derive(Clone, Copy, Debug, Default)]
pub struct Usage {
    pub cpu_s: f64,
    pub peak_rss_kib: u64,
    pub rss_kib: u64,
}

impl Usage {
    /// Two processes' usage as one side's.
    pub fn plus(&self, other: &Usage) -> Usage {
        Usage {
            cpu_s: self.cpu_s + other.cpu_s,
            peak_rss_kib: self.peak_rss_kib + other.peak_rss_kib,
            rss_kib: self.rss_kib + other.rss_kib,
        }
    }
}

/// A peer's binary: named by `var`, else on PATH, else the project's prebuilt one in
/// `../shared/peers/bin` (from the working directory, the repository's root, or from this
/// crate's source, for a `cargo run` from anywhere in it). Absolute: the hops run elsewhere.
pub fn find_peer_bin(var: &str, bin: &str) -> Option<std::path::PathBuf> {
    let from_source =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/peers/bin");
    std::env::var_os(var)
        .map(std::path::PathBuf::from)
        .into_iter()
        .chain(which(bin))
        .chain([
            std::path::Path::new("../shared/peers/bin").join(bin),
            from_source.join(bin),
        ])
        .find(|p| p.is_file())
        .and_then(|p| p.canonicalize().ok())
}

impl Proc {
    pub fn spawn(name: &str, mut command: Command, log: std::path::PathBuf) -> io::Result<Proc> {
        let out = std::fs::File::create(&log)?;
        command
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out);
        let child = command.spawn().map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot start {name} ({:?}): {e}", command.get_program()),
            )
        })?;
        Ok(Proc {
            name: name.to_string(),
            child,
            log,
        })
    }

    /// The last lines the process printed.
    pub fn output_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(lines).collect();
        tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits until `addr` accepts TCP connections (connecting from the current thread's
    /// network namespace), or fails with what the process printed if it exited.
    pub fn wait_for_port(&mut self, addr: SocketAddr, limit: Duration) -> io::Result<()> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            if let Some(status) = self.child.try_wait()? {
                let tail = self.output_tail(5);
                return Err(io::Error::other(format!(
                    "{} exited ({status}): {tail}",
                    self.name
                )));
            }
            std::thread::sleep(Duration::from_millis(30));
        }
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("{} did not listen on {addr} within {limit:?}", self.name),
        ))
    }

    pub fn usage(&self) -> Usage {
        usage_of(self.pid())
    }

    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // SIGTERM first so peers get to clean up; SIGKILL if they do not go within 2 s.
        // SAFETY: signalling our own child by PID.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// utime+stime from /proc/PID/stat (all threads), VmHWM and VmRSS from /proc/PID/status.
pub fn usage_of(pid: u32) -> Usage {
    let ticks = clock_ticks();
    let cpu_s = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            // The command name may hold spaces and parentheses: fields start after the last ')'.
            let rest = stat.rsplit_once(')')?.1;
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let utime: f64 = fields.get(11)?.parse().ok()?;
            let stime: f64 = fields.get(12)?.parse().ok()?;
            Some((utime + stime) / ticks)
        })
        .unwrap_or(0.0);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    Usage {
        cpu_s,
        peak_rss_kib: field("VmHWM:"),
        rss_kib: field("VmRSS:"),
    }
}

/// CPU seconds this process (the bench: traffic source and sink) has used so far.
pub fn own_cpu_s() -> f64 {
    // SAFETY: getrusage fills the struct we pass.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
}

/// Finds a program on PATH.
pub fn which(program: &str) -> Option<std::path::PathBuf> {
    if program.contains('/') {
        let p = std::path::PathBuf::from(program);
        return p.is_file().then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

/// A loopback port that was free a moment ago.
pub fn free_port() -> io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_itself() {
        let u = usage_of(std::process::id());
        assert!(u.peak_rss_kib > 0 && u.rss_kib > 0);
        assert!(own_cpu_s() >= 0.0);
        assert!(which("sh").is_some());
        assert!(which("definitely-not-a-program-skiff").is_none());
    }
}
