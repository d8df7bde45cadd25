//! The two network namespaces the link joins: creation, guaranteed removal, and ways to run a
//! thread or a child process inside one.
//!
//! Removal is guaranteed three ways: the [`Namespaces`] guard deletes them on drop (also while a
//! panic unwinds); SIGINT/SIGTERM only raise a flag ([`interrupted`]) so the owner can unwind
//! normally instead of dying with the namespaces in place; and whatever a hard crash (or a second
//! Ctrl-C, which exits at once) leaves behind is swept by the next run, since every name carries
//! the pid of its creator.

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Mutex, Once};

/// Every namespace we create is named `skiff-bench-<pid>-<n>-{b,c}`.
const PREFIX: &str = "skiff-bench-";
/// Where `ip netns add` bind-mounts named namespaces.
const NETNS_DIR: &str = "/var/run/netns";

/// `ip netns add/del` are not safe to run concurrently the first time (both may try to set up the
/// shared mount at /var/run/netns), and parallel tests create links concurrently.
static IP_NETNS_LOCK: Mutex<()> = Mutex::new(());
/// Distinguishes links made by one process (tests run several at once).
static NEXT_PAIR: AtomicU32 = AtomicU32::new(1);

/// The pair of namespaces `b` (client side: A and B) and `c` (server side: C and D), deleted on
/// drop.
#[derive(Debug)]
pub struct Namespaces {
    /// Those created so far, so a failure half-way removes exactly what exists.
    names: Vec<String>,
}

impl Namespaces {
    /// Sweeps namespaces left by dead runs, installs the SIGINT/SIGTERM flag, then creates both
    /// namespaces with loopback up.
    pub fn create() -> io::Result<Namespaces> {
        Namespaces::create_sides(&["b", "c"])
    }

    /// One namespace with loopback up, where all four hops of a loopback run live (the lab of
    /// `--cc`, see [`crate::fair_cc`]); [`Namespaces::b`] and [`Namespaces::c`] both name it.
    pub fn create_lab() -> io::Result<Namespaces> {
        Namespaces::create_sides(&["lab"])
    }

    fn create_sides(sides: &[&str]) -> io::Result<Namespaces> {
        install_signal_handlers();
        sweep_stale();
        let pid = std::process::id();
        let n = NEXT_PAIR.fetch_add(1, Ordering::Relaxed);
        let mut guard = Namespaces { names: Vec::new() };
        for side in sides {
            let name = format!("{PREFIX}{pid}-{n}-{side}");
            {
                let _lock = IP_NETNS_LOCK.lock().unwrap_or_else(|e| e.into_inner());
                run_ip(&["netns", "add", &name])?;
            }
            guard.names.push(name.clone());
            // A fresh namespace has `lo` down: A↔B and C↔D talk over it.
            run_ip(&["-n", &name, "link", "set", "lo", "up"])?;
        }
        Ok(guard)
    }

    /// The client-side namespace (A and B).
    pub fn b(&self) -> &str {
        &self.names[0]
    }

    /// The server-side namespace (C and D); the lab's one namespace for a lab.
    pub fn c(&self) -> &str {
        &self.names[self.names.len() - 1]
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for name in self.names.drain(..).rev() {
            delete(&name);
        }
    }
}

fn delete(name: &str) {
    let _lock = IP_NETNS_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    // Drop can't return an error; say so rather than leave a namespace silently.
    if let Err(e) = run_ip(&["netns", "del", name]) {
        eprintln!("skiff bench: could not remove network namespace {name}: {e}");
    }
}

/// Deletes `skiff-bench-<pid>-*` namespaces whose creator is gone (a crashed or killed run);
/// returns how many. Namespaces of live processes, this one included, are left alone.
pub fn sweep_stale() -> usize {
    let Ok(entries) = std::fs::read_dir(NETNS_DIR) else {
        return 0; // no named namespace was ever made: nothing to sweep
    };
    let me = std::process::id();
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != me && !process_alive(pid) {
            delete(&name);
            removed += 1;
        }
    }
    removed
}

fn process_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // Signal 0 checks existence only; EPERM means it exists but isn't ours (still alive).
    // SAFETY: kill with signal 0 sends nothing.
    unsafe { libc::kill(pid, 0) == 0 || *libc::__errno_location() == libc::EPERM }
}

/// Runs `ip ARGS…`, turning a failure into an error that quotes the command and its stderr.
pub(crate) fn run_ip(args: &[&str]) -> io::Result<()> {
    let out = Command::new(ip_program())
        .args(args)
        .output()
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot run iproute2's `ip` (apt-get install iproute2): {e}"),
            )
        })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "`ip {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// `ip` lives in sbin, which a non-login PATH may lack; fall back to PATH lookup.
fn ip_program() -> &'static str {
    ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .unwrap_or("ip")
}

fn netns_path(ns: &str) -> io::Result<PathBuf> {
    if ns.is_empty() || ns == "." || ns == ".." || ns.contains('/') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("`{ns}` is not a namespace name"),
        ));
    }
    Ok(Path::new(NETNS_DIR).join(ns))
}

fn open_netns(ns: &str) -> io::Result<File> {
    let path = netns_path(ns)?;
    File::open(&path).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("network namespace {ns} ({}): {e}", path.display()),
        )
    })
}

/// Moves the CURRENT THREAD into namespace `ns` for good: sockets it creates afterwards belong to
/// `ns` (and stay there whichever thread later uses them). Network namespaces are per thread, so
/// the rest of the process is unaffected; call it only on a thread you own ([`run_in`] does).
pub fn enter(ns: &str) -> io::Result<()> {
    let file = open_netns(ns)?;
    // SAFETY: plain syscall on a valid fd.
    if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("setns into {ns}: {e}")));
    }
    Ok(())
}

/// Runs `f` on a fresh thread inside `ns` and returns its result; typically `f` creates a
/// socket, which keeps its namespace when handed back to the caller's thread.
pub fn run_in<T: Send>(ns: &str, f: impl FnOnce() -> T + Send) -> io::Result<T> {
    std::thread::scope(|scope| {
        let handle = std::thread::Builder::new()
            .name(format!("netns {ns}"))
            .spawn_scoped(scope, || {
                enter(ns)?;
                Ok(f())
            })?;
        handle
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// A `Command` whose child starts inside `ns`.
///
/// Done with a `pre_exec` setns rather than `ip netns exec NAME program`: the child is the
/// program itself with no `ip` in between (same pid either way, but no dependency on `ip` at
/// spawn and no extra mount namespace with a remounted /sys and /etc/netns binds the proxies
/// don't need), and the namespace file is opened here in the parent, so all the child does
/// between fork and exec is one async-signal-safe syscall. The fd is close-on-exec, so the
/// program does not inherit it. If `ns` can't be opened, `spawn` fails with that error.
pub fn command_in(ns: &str, program: impl AsRef<OsStr>) -> Command {
    let mut cmd = Command::new(program);
    let netns: Result<OwnedFd, i32> = open_netns(ns)
        .map(OwnedFd::from)
        .map_err(|e| e.raw_os_error().unwrap_or(libc::EINVAL));
    // SAFETY: the closure only calls setns and builds an io::Error from an errno, both
    // async-signal-safe (no allocation, no locks).
    unsafe {
        cmd.pre_exec(move || match &netns {
            Ok(fd) if libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) == 0 => Ok(()),
            Ok(_) => Err(io::Error::last_os_error()),
            Err(errno) => Err(io::Error::from_raw_os_error(*errno)),
        });
    }
    cmd
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// True once SIGINT or SIGTERM arrived (after [`install_signal_handlers`]): the owner should
/// stop, drop its `Link` (which deletes the namespaces) and exit.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

extern "C" fn on_signal(sig: libc::c_int) {
    // Only an atomic swap and _exit: both async-signal-safe. A second signal means the owner is
    // stuck or the user insists: exit now and leave the namespaces to the next run's sweep.
    if INTERRUPTED.swap(true, Ordering::SeqCst) {
        // SAFETY: _exit is async-signal-safe.
        unsafe { libc::_exit(128 + sig) };
    }
}

/// Makes SIGINT/SIGTERM set [`interrupted`] instead of killing the process (a second one still
/// exits at once). Idempotent; [`Namespaces::create`] calls it. SA_RESTART keeps other code's
/// blocking calls from failing with EINTR; loops notice the flag through their timeouts.
pub fn install_signal_handlers() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: a zeroed sigaction is valid; we fill handler, mask and flags before use.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            for sig in [libc::SIGINT, libc::SIGTERM] {
                libc::sigaction(sig, &action, std::ptr::null_mut());
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        for bad in ["", ".", "..", "a/b", "../etc"] {
            assert_eq!(
                netns_path(bad).unwrap_err().kind(),
                io::ErrorKind::InvalidInput
            );
        }
        assert_eq!(
            netns_path("skiff-bench-1-1-b").unwrap(),
            Path::new("/var/run/netns/skiff-bench-1-1-b")
        );
    }

    #[test]
    fn liveness() {
        assert!(process_alive(std::process::id()));
        assert!(process_alive(1));
        // Above the kernel's pid_max limit (4M): never a live process.
        assert!(!process_alive(99_999_999));
    }

    #[test]
    fn missing_namespace_fails_spawn_not_build() {
        let mut cmd = command_in("skiff-bench-no-such-ns", "/bin/true");
        assert!(cmd.status().is_err());
        assert!(enter("skiff-bench-no-such-ns").is_err());
    }
}
