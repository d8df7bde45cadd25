//! `autoRule` (udp2raw's `-a`): firewall rules that keep the kernel from answering the fake
//! flows (RSTs to fake TCP, port-unreachables to fake UDP, echo replies to fake ICMP). The
//! packets are dropped in INPUT; our `AF_PACKET` socket sees them before that.
//!
//! The rules live in a chain of their own, `skiff_u2r_<pid>_<n>` (iptables, jumped to from
//! INPUT) or a table of that name (nftables, when `iptables` is absent), so they name Skiff
//! and the process. A state file `<dir>/udp2raw-<pid>-<n>.rules` (default dir `/run/skiff`)
//! records the backend, the chain, the process start time and the network namespace.
//! [`Rules`] removes both on drop (normal exit, and SIGTERM when the caller turns it into a
//! normal stop). Installing first removes what a dead process left behind: state files of
//! this network namespace whose process is gone (or is another process with the same PID),
//! and chains or tables named `skiff_u2r_<pid>_…` of a PID that no longer runs.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::headers::RawMode;

/// Where state files go unless told otherwise.
pub const DEFAULT_STATE_DIR: &str = "/run/skiff";
const PREFIX: &str = "skiff_u2r_";

static SERIAL: AtomicU32 = AtomicU32::new(0);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Iptables,
    Nftables,
}

impl Backend {
    fn name(self) -> &'static str {
        match self {
            Backend::Iptables => "iptables",
            Backend::Nftables => "nft",
        }
    }

    fn from_name(s: &str) -> Option<Backend> {
        match s {
            "iptables" => Some(Backend::Iptables),
            "nft" => Some(Backend::Nftables),
            _ => None,
        }
    }

    /// `iptables` when installed, else `nft`.
    pub fn detect() -> io::Result<Backend> {
        for b in [Backend::Iptables, Backend::Nftables] {
            if run(b.name(), &["--version"]).is_ok() {
                return Ok(b);
            }
        }
        Err(io::Error::new(
            io::ErrorKind::NotFound,
            "udp2raw autoRule needs `iptables` or `nft` (neither was found)",
        ))
    }
}

/// What the rules drop: one end's fake flows.
#[derive(Debug, Clone, Copy)]
pub enum Flow {
    /// A server: what arrives at `listen`.
    Server { listen: SocketAddr },
    /// A client: what arrives from the server at `server`.
    Client { server: SocketAddr },
}

/// Installed rules; removed on drop.
#[derive(Debug)]
pub struct Rules {
    backend: Backend,
    chain: String,
    state_file: PathBuf,
    removed: bool,
}

fn run(cmd: &str, args: &[&str]) -> io::Result<String> {
    let out = Command::new(cmd).args(args).stdin(Stdio::null()).output()?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(io::Error::other(format!(
            "`{cmd} {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// The iptables match arguments of `flow`.
fn iptables_match(mode: RawMode, flow: Flow) -> Vec<String> {
    let mut a: Vec<String> = Vec::new();
    let (addr, dir_addr, dir_port) = match flow {
        Flow::Server { listen } => (listen, "-d", "--dport"),
        Flow::Client { server } => (server, "-s", "--sport"),
    };
    if !addr.ip().is_unspecified() {
        a.extend([dir_addr.to_string(), addr.ip().to_string()]);
    }
    match mode {
        RawMode::FakeTcp | RawMode::Udp => {
            let p = if mode == RawMode::FakeTcp {
                "tcp"
            } else {
                "udp"
            };
            a.extend(["-p".into(), p.into(), "-m".into(), p.into()]);
            a.extend([dir_port.to_string(), addr.port().to_string()]);
        }
        RawMode::Icmp => {
            let t = match flow {
                Flow::Server { .. } => "echo-request",
                Flow::Client { .. } => "echo-reply",
            };
            a.extend(["-p".into(), "icmp".into(), "--icmp-type".into(), t.into()]);
        }
    }
    a
}

/// The nft rule expression of `flow`.
fn nft_match(mode: RawMode, flow: Flow) -> String {
    let (addr, dir, port) = match flow {
        Flow::Server { listen } => (listen, "daddr", "dport"),
        Flow::Client { server } => (server, "saddr", "sport"),
    };
    let mut e = String::new();
    if !addr.ip().is_unspecified() {
        let fam = if matches!(addr.ip(), IpAddr::V4(_)) {
            "ip"
        } else {
            "ip6"
        };
        e.push_str(&format!("{fam} {dir} {} ", addr.ip()));
    }
    match mode {
        RawMode::FakeTcp => e.push_str(&format!("tcp {port} {}", addr.port())),
        RawMode::Udp => e.push_str(&format!("udp {port} {}", addr.port())),
        RawMode::Icmp => e.push_str(match flow {
            Flow::Server { .. } => "icmp type echo-request",
            Flow::Client { .. } => "icmp type echo-reply",
        }),
    }
    e
}

/// The process start time (field 22 of /proc/PID/stat), to tell a reused PID apart.
fn start_time(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// This thread's network namespace (`net:[inode]`).
fn netns_id() -> String {
    std::fs::read_link("/proc/thread-self/ns/net")
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn remove_chain(backend: Backend, chain: &str) {
    match backend {
        Backend::Iptables => {
            // Every jump to it (bounded), then the chain.
            for _ in 0..16 {
                if run("iptables", &["-w", "-D", "INPUT", "-j", chain]).is_err() {
                    break;
                }
            }
            let _ = run("iptables", &["-w", "-F", chain]);
            let _ = run("iptables", &["-w", "-X", chain]);
        }
        Backend::Nftables => {
            let _ = run("nft", &["delete", "table", "inet", chain]);
        }
    }
}

/// The chains or tables of our naming that exist in this namespace.
fn existing_chains(backend: Backend) -> Vec<String> {
    let text = match backend {
        Backend::Iptables => run("iptables", &["-w", "-S"]),
        Backend::Nftables => run("nft", &["list", "tables"]),
    }
    .unwrap_or_default();
    text.split_whitespace()
        .filter(|w| w.starts_with(PREFIX))
        .map(str::to_string)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect()
}

fn pid_of_chain(chain: &str) -> Option<u32> {
    chain.strip_prefix(PREFIX)?.split('_').next()?.parse().ok()
}

/// Removes what dead processes left in this network namespace; returns the chains removed.
pub fn remove_leftovers(state_dir: &Path) -> Vec<String> {
    let mut removed = Vec::new();
    let me = netns_id();
    if let Ok(dir) = std::fs::read_dir(state_dir) {
        for entry in dir.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if !name.starts_with("udp2raw-") || !name.ends_with(".rules") {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let field = |k: &str| {
                text.lines()
                    .find_map(|l| l.strip_prefix(k)?.strip_prefix('='))
                    .map(str::to_string)
            };
            let (Some(backend), Some(chain), Some(pid)) = (
                field("backend").and_then(|b| Backend::from_name(&b)),
                field("chain"),
                field("pid").and_then(|p| p.parse::<u32>().ok()),
            ) else {
                continue;
            };
            if field("netns").unwrap_or_default() != me {
                continue;
            }
            let started = field("start").and_then(|s| s.parse::<u64>().ok());
            let alive = start_time(pid).is_some_and(|t| Some(t) == started);
            if !alive {
                remove_chain(backend, &chain);
                let _ = std::fs::remove_file(&path);
                removed.push(chain);
            }
        }
    }
    // Chains without a state file (a crash between creating them and writing it).
    for backend in [Backend::Iptables, Backend::Nftables] {
        if run(backend.name(), &["--version"]).is_err() {
            continue;
        }
        for chain in existing_chains(backend) {
            if let Some(pid) = pid_of_chain(&chain)
                && start_time(pid).is_none()
                && !removed.contains(&chain)
            {
                remove_chain(backend, &chain);
                removed.push(chain);
            }
        }
    }
    removed
}

impl Rules {
    /// Removes leftovers of dead runs, then installs the rules for `flow`. Needs root or
    /// CAP_NET_ADMIN.
    pub fn install(mode: RawMode, flow: Flow, state_dir: &Path) -> io::Result<Rules> {
        Rules::install_with(Backend::detect()?, mode, flow, state_dir)
    }

    /// As [`Rules::install`], with `backend` chosen by the caller (a test runs the nftables
    /// path on a machine that also has `iptables`).
    pub fn install_with(
        backend: Backend,
        mode: RawMode,
        flow: Flow,
        state_dir: &Path,
    ) -> io::Result<Rules> {
        remove_leftovers(state_dir);
        let pid = std::process::id();
        let chain = format!("{PREFIX}{pid}_{}", SERIAL.fetch_add(1, Ordering::Relaxed));
        std::fs::create_dir_all(state_dir)?;
        let state_file = state_dir.join(format!(
            "udp2raw-{pid}-{}.rules",
            chain.rsplit('_').next().unwrap_or("0")
        ));
        std::fs::write(
            &state_file,
            format!(
                "backend={}\nchain={chain}\npid={pid}\nstart={}\nnetns={}\n",
                backend.name(),
                start_time(pid).unwrap_or(0),
                netns_id()
            ),
        )?;
        let rules = Rules {
            backend,
            chain: chain.clone(),
            state_file,
            removed: false,
        };
        let added = match backend {
            Backend::Iptables => (|| {
                run("iptables", &["-w", "-N", &chain])?;
                let mut a: Vec<String> = vec!["-w".into(), "-A".into(), chain.clone()];
                a.extend(iptables_match(mode, flow));
                a.extend(["-j".into(), "DROP".into()]);
                let a: Vec<&str> = a.iter().map(String::as_str).collect();
                run("iptables", &a)?;
                run("iptables", &["-w", "-I", "INPUT", "-j", &chain])
            })(),
            Backend::Nftables => (|| {
                run("nft", &["add", "table", "inet", &chain])?;
                run(
                    "nft",
                    &[
                        "add",
                        "chain",
                        "inet",
                        &chain,
                        "input",
                        "{ type filter hook input priority -10 ; }",
                    ],
                )?;
                let m = nft_match(mode, flow);
                let mut a = vec!["add", "rule", "inet", &chain, "input"];
                a.extend(m.split_whitespace());
                a.push("drop");
                run("nft", &a)
            })(),
        };
        if let Err(e) = added {
            drop(rules);
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "udp2raw autoRule could not add its firewall rules (root or CAP_NET_ADMIN needed): {e}"
                ),
            ));
        }
        Ok(rules)
    }

    /// The chain (iptables) or table (nftables) holding the rules.
    pub fn chain(&self) -> &str {
        &self.chain
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Removes the rules and the state file now.
    pub fn remove(mut self) {
        self.remove_now();
    }

    fn remove_now(&mut self) {
        if std::mem::replace(&mut self.removed, true) {
            return;
        }
        remove_chain(self.backend, &self.chain);
        let _ = std::fs::remove_file(&self.state_file);
    }
}

impl Drop for Rules {
    fn drop(&mut self) {
        self.remove_now();
    }
}

/// The chains or tables named like ours in this network namespace (for tests and checks).
pub fn list_chains() -> Vec<String> {
    let mut v = Vec::new();
    for b in [Backend::Iptables, Backend::Nftables] {
        if run(b.name(), &["--version"]).is_ok() {
            v.extend(existing_chains(b));
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_name_the_flow() {
        let listen: SocketAddr = "0.0.0.0:4096".parse().unwrap();
        let a = iptables_match(RawMode::FakeTcp, Flow::Server { listen }).join(" ");
        assert_eq!(a, "-p tcp -m tcp --dport 4096");
        let server: SocketAddr = "10.0.0.1:4096".parse().unwrap();
        let a = iptables_match(RawMode::Udp, Flow::Client { server }).join(" ");
        assert_eq!(a, "-s 10.0.0.1 -p udp -m udp --sport 4096");
        assert_eq!(
            nft_match(RawMode::Icmp, Flow::Client { server }),
            "ip saddr 10.0.0.1 icmp type echo-reply"
        );
        assert_eq!(pid_of_chain("skiff_u2r_123_4"), Some(123));
        assert_eq!(pid_of_chain("other"), None);
    }
}
