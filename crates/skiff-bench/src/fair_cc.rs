//! One TCP congestion control for every hop of every implementation (`--cc`).
//!
//! Linux gives a socket its network namespace's default algorithm
//! (`net.ipv4.tcp_congestion_control`) unless the program sets one. The peers never set one.
//! Skiff does on loopback: Reno (skiff-core's `tcp_tuning`), because BBR's pacing timers cost
//! a hypervisor exit each on a VM, which is right for a real deployment's loopback hops (a
//! local proxy chain, a fallback to a local web server) and stays there. On the bench's
//! loopback lab it meant Skiff ran Reno while the peers ran the host's BBR, an edge the peers
//! did not get. So the bench picks one algorithm for the run, makes it the default wherever
//! the hops run, and tells Skiff the same one (`sockopt.tcpcongestion` on every inbound and
//! outbound), which overrides its loopback rule.
//!
//! Where the hops run: when the algorithm is the host's default, on the host's loopback as
//! before (nothing to change, no root needed). Otherwise in a network namespace made for the
//! run (the lab) whose default is set to it. The host's default is never written, so other
//! work on the machine keeps its algorithm (only the host's list of algorithms allowed to
//! unprivileged sockets is widened for the instant of setting the namespace's default, when it
//! lacks the one chosen, and put back at once: see [`crate::link::cc`]), and an interrupted run
//! leaves nothing changed: the namespace goes with the run (a Ctrl-C unwinds, see
//! [`crate::link::netns`]) or with the next run's sweep after a crash. With `--link`, the
//! link's two namespaces are set to it.

use std::io;

use crate::link::cc;
use crate::link::netns::Namespaces;

const HOST_DEFAULT: &str = "/proc/sys/net/ipv4/tcp_congestion_control";

/// The host's default congestion control (read from this thread's namespace, the host's).
pub fn host_default() -> io::Result<String> {
    std::fs::read_to_string(HOST_DEFAULT)
        .map(|t| t.trim().to_string())
        .map_err(|e| io::Error::new(e.kind(), format!("{HOST_DEFAULT}: {e}")))
}

/// The algorithm a run uses: `--cc`, else the link spec's `cc=`, else the host's default.
/// `--cc` and `cc=` naming different ones is an error rather than a silent choice.
pub fn choose(flag: Option<&str>, link_cc: Option<&str>, host: &str) -> Result<String, String> {
    let flag = flag.map(str::trim).filter(|f| !f.is_empty());
    match (flag, link_cc) {
        (Some(f), Some(l)) if f != l => Err(format!(
            "--cc {f} and --link cc={l} disagree: give the algorithm once"
        )),
        (Some(f), _) => Ok(f.to_string()),
        (None, Some(l)) => Ok(l.to_string()),
        (None, None) => Ok(host.to_string()),
    }
}

/// Errors unless this process may make the lab: it needs root. Tests call it to skip.
pub fn check_support() -> io::Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "needs root (network namespaces)",
        ));
    }
    Ok(())
}

/// The namespace a loopback run uses when its algorithm is not the host's default; deleted on
/// drop.
pub struct Lab {
    namespaces: Namespaces,
}

impl Lab {
    /// Creates the lab namespace with `name` as its default congestion control (root).
    pub fn up(name: &str) -> io::Result<Lab> {
        check_support().map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "--cc {name} differs from the host's default, so the bench runs in a network \
                     namespace set to it, which {e} (or run without --cc to use the host's \
                     default)"
                ),
            )
        })?;
        cc::ensure_available(name)?;
        let namespaces = Namespaces::create_lab()?;
        cc::set_in(&[namespaces.b()], name)?;
        Ok(Lab { namespaces })
    }

    pub fn ns(&self) -> &str {
        self.namespaces.b()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_wins_then_the_link_then_the_host() {
        assert_eq!(choose(Some("cubic"), None, "bbr").unwrap(), "cubic");
        assert_eq!(choose(None, Some("reno"), "bbr").unwrap(), "reno");
        assert_eq!(choose(None, None, "bbr").unwrap(), "bbr");
        assert_eq!(choose(Some(" "), None, "bbr").unwrap(), "bbr");
        assert_eq!(choose(Some("reno"), Some("reno"), "bbr").unwrap(), "reno");
        let e = choose(Some("cubic"), Some("reno"), "bbr").unwrap_err();
        assert!(e.contains("--cc cubic") && e.contains("cc=reno"), "{e}");
    }

    #[test]
    fn the_host_has_a_default() {
        match host_default() {
            Ok(name) => assert!(!name.is_empty()),
            Err(e) => {
                assert!(std::env::var_os("CI").is_none(), "CI runs on Linux: {e}");
                println!("skipped: {e}");
            }
        }
    }
}
