//! The TCP congestion control of the link's namespaces (`cc=` in the link spec). The kernel
//! keeps `net.ipv4.tcp_congestion_control` per network namespace, and /proc/sys/net shows the
//! namespace of the thread that opens it, so a thread that entered a namespace reads and sets
//! that namespace's default there. The algorithms on offer are the kernel's, the same in
//! every namespace.
//!
//! A namespace other than the host's may only default to an algorithm the host allows
//! (`net.ipv4.tcp_allowed_congestion_control`, a host-wide list; anything else is EPERM). The
//! kernel checks that only when the default is set, so [`set_in`] widens the host's list for
//! that moment when it must, and puts it back at once: sockets made later in the namespaces
//! still get the algorithm, and the host keeps its own settings.

use std::io;
use std::path::Path;
use std::process::Command;

use super::netns;

const AVAILABLE: &str = "/proc/sys/net/ipv4/tcp_available_congestion_control";
const DEFAULT: &str = "/proc/sys/net/ipv4/tcp_congestion_control";
/// Host-wide; visible only from the host's namespace (the calling thread's, here).
const ALLOWED: &str = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";

/// The congestion controls the kernel offers now (loaded modules and built-ins).
pub fn available() -> io::Result<Vec<String>> {
    let text = std::fs::read_to_string(AVAILABLE)
        .map_err(|e| io::Error::new(e.kind(), format!("{AVAILABLE}: {e}")))?;
    Ok(parse_list(&text))
}

fn parse_list(text: &str) -> Vec<String> {
    text.split_whitespace().map(str::to_string).collect()
}

/// Makes sure the kernel offers `name`: if it does not, tries `modprobe tcp_<name>` once, and
/// otherwise fails with the list it does offer.
pub fn ensure_available(name: &str) -> io::Result<()> {
    if available()?.iter().any(|n| n == name) {
        return Ok(());
    }
    let modprobe = modprobe(&format!("tcp_{name}"));
    let offered = available()?;
    if offered.iter().any(|n| n == name) {
        return Ok(());
    }
    Err(unavailable(name, &offered, &modprobe))
}

fn unavailable(name: &str, offered: &[String], modprobe: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!(
            "TCP congestion control `{name}` is not available ({modprobe}); this kernel \
             offers: {} ({AVAILABLE})",
            offered.join(" ")
        ),
    )
}

/// Runs `modprobe MODULE`; says what came of it, for the error message when that was not
/// enough.
fn modprobe(module: &str) -> String {
    let program = ["/usr/sbin/modprobe", "/sbin/modprobe"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .unwrap_or("modprobe");
    match Command::new(program).arg(module).output() {
        Err(e) => format!("could not run modprobe {module}: {e}"),
        Ok(out) if !out.status.success() => format!(
            "modprobe {module} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Ok(_) => format!("modprobe {module} loaded nothing of that name"),
    }
}

/// The default congestion control of namespace `ns`.
pub fn current_in(ns: &str) -> io::Result<String> {
    netns::run_in(ns, read_default)?
}

fn read_default() -> io::Result<String> {
    std::fs::read_to_string(DEFAULT)
        .map(|t| t.trim().to_string())
        .map_err(|e| io::Error::new(e.kind(), format!("{DEFAULT}: {e}")))
}

/// Makes `name` the default congestion control of each namespace in `namespaces` (sockets
/// made there from now on use it) and checks that it took. Call it from a thread in the host's
/// namespace: if the host does not allow `name`, it is allowed for the moment of setting.
pub fn set_in(namespaces: &[&str], name: &str) -> io::Result<()> {
    // Two runs at once (two bench processes, or two tests) must not interleave here: one
    // would see `name` allowed by the other's widening, skip its own, and write it after the
    // other had restored the list (EPERM).
    let _exclusive = HostListLock::take()?;
    let allowed = std::fs::read_to_string(ALLOWED)
        .map_err(|e| io::Error::new(e.kind(), format!("{ALLOWED}: {e}")))?;
    let allowed = parse_list(&allowed);
    if allowed.iter().any(|n| n == name) {
        return set_each(namespaces, name);
    }
    let widened = format!("{} {name}", allowed.join(" "));
    std::fs::write(ALLOWED, widened.trim_start())
        .map_err(|e| io::Error::new(e.kind(), format!("adding `{name}` to {ALLOWED}: {e}")))?;
    let set = set_each(namespaces, name);
    let restored = std::fs::write(ALLOWED, allowed.join(" ")).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "could not restore {ALLOWED} to `{}` (it now also allows `{name}`): {e}",
                allowed.join(" ")
            ),
        )
    });
    set.and(restored)
}

/// An exclusive flock on a file of its own, held while the host's allowed list is read,
/// widened, used and put back; released when dropped (closing the file releases it).
struct HostListLock {
    _held: std::fs::File,
}

impl HostListLock {
    fn take() -> io::Result<HostListLock> {
        use std::os::fd::AsRawFd;
        let path = std::env::temp_dir().join("skiff-bench-tcp-allowed-congestion-control.lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        // SAFETY: flock on a descriptor this function owns; blocks until no other holder.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!("flock {}: {e}", path.display()),
            ));
        }
        Ok(HostListLock { _held: file })
    }
}

fn set_each(namespaces: &[&str], name: &str) -> io::Result<()> {
    for ns in namespaces {
        let now = netns::run_in(ns, || {
            std::fs::write(DEFAULT, name).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("writing `{name}` to {DEFAULT} in {ns}: {e}"),
                )
            })?;
            read_default()
        })??;
        if now != name {
            return Err(io::Error::other(format!(
                "set TCP congestion control `{name}` in {ns}, but it reads back `{now}`"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_errors() {
        assert_eq!(parse_list("reno bbr cubic\n"), ["reno", "bbr", "cubic"]);
        assert!(parse_list("\n").is_empty());
        let e = unavailable(
            "htcp",
            &parse_list("reno cubic"),
            "modprobe tcp_htcp failed: not found",
        )
        .to_string();
        assert!(e.contains("`htcp` is not available"), "{e}");
        assert!(e.contains("modprobe tcp_htcp failed"), "{e}");
        assert!(e.contains("offers: reno cubic"), "{e}");
        assert!(e.contains("tcp_available_congestion_control"), "{e}");
    }

    #[test]
    fn the_kernel_offers_reno() {
        // Built in whenever TCP is (the fallback of every other algorithm).
        match available() {
            Ok(list) => assert!(list.iter().any(|n| n == "reno"), "{list:?}"),
            Err(e) => println!("skipped: {e}"),
        }
    }
}
