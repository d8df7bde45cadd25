//! The lossy link of the bench's lossy-link rows: B's and C's network namespaces joined by two
//! TUN devices and a user-space forwarder that adds delay, random loss, a rate limit and a
//! tail-drop queue in each direction. It replaces netem, which this machine's kernel lacks.
//! `cc=` also sets the TCP congestion control both namespaces default to (see [`cc`]).
//!
//! ```text
//!  namespace b                                         namespace c
//!  A ──lo── B ── skiff0 10.213.0.1 ⇄ [forwarder] ⇄ skiff0 10.213.0.2 ── C ──lo── D
//! ```
//!
//! Only those two addresses, inside namespaces we create, are ever used; both namespaces and
//! both devices go away when the [`Link`] is dropped (see [`netns`] for the crash cases).

pub mod cc;
mod emulator;
pub mod measure;
pub mod netns;
pub mod schedule;
pub mod spec;
pub mod tun;

use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

pub use emulator::{DirectionCounters, LinkCounters};
pub use measure::{
    DEFAULT_TRANSFER_TIMEOUT, PingStats, TcpTransfer, TransferDirection, tcp_download,
    tcp_transfer, udp_ping,
};
pub use netns::{command_in, enter, interrupted, run_in};
pub use spec::{LinkSpec, ParseLinkSpecError};

use emulator::Emulator;
use netns::Namespaces;

/// B's end of the link (a /30 holds exactly the two ends).
pub const ADDR_B: Ipv4Addr = Ipv4Addr::new(10, 213, 0, 1);
/// C's end of the link.
pub const ADDR_C: Ipv4Addr = Ipv4Addr::new(10, 213, 0, 2);
const PREFIX_LEN: u8 = 30;
/// The TUN device's name in each namespace (each namespace has its own device namespace).
const TUN_NAME: &str = "skiff0";

/// A running emulated link. Dropping it stops the forwarder, closes both TUN devices (which
/// removes them) and deletes both namespaces.
#[derive(Debug)]
pub struct Link {
    // Field order is drop order: threads stop before their fds close, and the devices are gone
    // before their namespaces are deleted.
    emulator: Emulator,
    _tun_b: Arc<OwnedFd>,
    _tun_c: Arc<OwnedFd>,
    namespaces: Namespaces,
    spec: LinkSpec,
    /// The TCP congestion control both namespaces default to: `spec.cc`, or the kernel's
    /// default for a new namespace.
    cc: String,
}

/// Errors unless this process can build a link: root and /dev/net/tun. Tests call it to skip.
pub fn check_support() -> io::Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "the lossy-link rows need root (network namespaces and TUN devices)",
        ));
    }
    if !Path::new("/dev/net/tun").exists() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            "the lossy-link rows need /dev/net/tun (a kernel with CONFIG_TUN)",
        ));
    }
    Ok(())
}

impl Link {
    /// Creates both namespaces and TUN devices and starts forwarding with `spec`.
    pub fn up(spec: &LinkSpec) -> io::Result<Link> {
        check_support()?;
        // Before anything is made: an unknown name fails without a trace.
        if let Some(name) = &spec.cc {
            cc::ensure_available(name)?;
        }
        // Each guard below cleans up after itself if a later step fails.
        let namespaces = Namespaces::create()?;
        if let Some(name) = &spec.cc {
            cc::set_in(&[namespaces.b(), namespaces.c()], name)?;
        }
        // Only for the reports: a link whose default cannot be read still works.
        let cc = cc::current_in(namespaces.b()).unwrap_or_else(|_| "unknown".into());
        let tun_b = Arc::new(tun::open_in(namespaces.b(), TUN_NAME)?);
        tun::configure(namespaces.b(), TUN_NAME, ADDR_B, PREFIX_LEN, spec.mtu)?;
        let tun_c = Arc::new(tun::open_in(namespaces.c(), TUN_NAME)?);
        tun::configure(namespaces.c(), TUN_NAME, ADDR_C, PREFIX_LEN, spec.mtu)?;
        let emulator = Emulator::start(spec, Arc::clone(&tun_b), Arc::clone(&tun_c))?;
        Ok(Link {
            emulator,
            _tun_b: tun_b,
            _tun_c: tun_c,
            namespaces,
            spec: spec.clone(),
            cc,
        })
    }

    /// The client-side namespace, where A and B run.
    pub fn ns_b(&self) -> &str {
        self.namespaces.b()
    }

    /// The server-side namespace, where C and D run.
    pub fn ns_c(&self) -> &str {
        self.namespaces.c()
    }

    /// B's address on the link ([`ADDR_B`]).
    pub fn addr_b(&self) -> IpAddr {
        IpAddr::V4(ADDR_B)
    }

    /// C's address on the link ([`ADDR_C`]): where B's proxy client connects to C's server.
    pub fn addr_c(&self) -> IpAddr {
        IpAddr::V4(ADDR_C)
    }

    pub fn spec(&self) -> &LinkSpec {
        &self.spec
    }

    /// The TCP congestion control sockets in either namespace default to.
    pub fn cc(&self) -> &str {
        &self.cc
    }

    /// The link as reports show it: the canonical spec, naming the congestion control even
    /// when `cc=` was not given, e.g. `delay=100ms,loss=9%,cc=bbr (default)`.
    pub fn describe(&self) -> String {
        match &self.spec.cc {
            Some(_) => self.spec.to_string(),
            None => format!("{},cc={} (default)", self.spec, self.cc),
        }
    }

    /// Packets and bytes of each direction since the link came up.
    pub fn counters(&self) -> LinkCounters {
        self.emulator.counters()
    }

    /// Runs `f` on a thread inside namespace b (sockets it makes live there).
    pub fn run_in_b<T: Send>(&self, f: impl FnOnce() -> T + Send) -> io::Result<T> {
        run_in(self.ns_b(), f)
    }

    /// Runs `f` on a thread inside namespace c.
    pub fn run_in_c<T: Send>(&self, f: impl FnOnce() -> T + Send) -> io::Result<T> {
        run_in(self.ns_c(), f)
    }

    /// A command whose child starts in namespace b (see [`command_in`]).
    pub fn command_in_b(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        command_in(self.ns_b(), program)
    }

    /// A command whose child starts in namespace c.
    pub fn command_in_c(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        command_in(self.ns_c(), program)
    }
}
