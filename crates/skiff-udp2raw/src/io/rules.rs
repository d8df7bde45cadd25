//! `autoRule` (udp2raw's `-a`): firewall rules that keep the kernel from answering the fake
//! flows (RSTs to fake TCP, port-unreachables to fake UDP, echo replies to fake ICMP). The
//! packets are dropped in INPUT; our `AF_PACKET` socket sees them before that.
//!
//! The rules live in a chain of their own, `skiff_u2r_<pid>_<n>` (iptables for an IPv4
//! tunnel, ip6tables for an IPv6 one, jumped to from INPUT) or a table of that name (an
//! nftables `inet` table, when the family's iptables command is absent), so they name Skiff
//! and the process. For IPv6 the ICMP mode's rules match ICMPv6 echo (types 128/129), as
//! udp2raw's. A state file `<dir>/udp2raw-<pid>-<n>.rules` (default dir `/run/skiff`)
//! records the command (`iptables`, `ip6tables` or `nft`), the chain, the process start time
//! and the network namespace.
//! [`Rules`] removes both on drop (normal exit, and SIGTERM when the caller turns it into a
//! normal stop). Installing first removes what a dead process left behind: state files of
//! this network namespace whose process is gone (or is another process with the same PID),
//! and chains or tables named `skiff_u2r_<pid>_…` of a PID that no longer runs.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

use super::raw::Family;
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

/// The commands rules are added with; a state file names one.
const COMMANDS: [&str; 3] = ["iptables", "ip6tables", "nft"];

impl Backend {
    /// The command that adds rules of `family` with this backend.
    fn command(self, family: Family) -> &'static str {
        match (self, family) {
            (Backend::Iptables, Family::V4) => "iptables",
            (Backend::Iptables, Family::V6) => "ip6tables",
            (Backend::Nftables, _) => "nft",
        }
    }

    /// `iptables` (`ip6tables` for IPv6) when installed, else `nft`.
    pub fn detect(family: Family) -> io::Result<Backend> {
        for b in [Backend::Iptables, Backend::Nftables] {
            if run(b.command(family), &["--version"]).is_ok() {
                return Ok(b);
            }
        }
        Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "udp2raw autoRule needs `{}` or `nft` (neither was found)",
                Backend::Iptables.command(family)
            ),
        ))
    }
}

/// The command of [`COMMANDS`] named `s`.
fn command_named(s: &str) -> Option<&'static str> {
    COMMANDS.into_iter().find(|c| *c == s)
}

/// What the rules drop: one end's fake flows.
#[derive(Debug, Clone, Copy)]
pub enum Flow {
    /// A server: what arrives at `listen`.
    Server { listen: SocketAddr },
    /// A client: what arrives from the server at `server`.
    Client { server: SocketAddr },
}

impl Flow {
    /// The family of the address the rules name.
    pub fn family(self) -> Family {
        match self {
            Flow::Server { listen: a } | Flow::Client { server: a } => Family::of(a.ip()),
        }
    }
}

/// Installed rules; removed on drop.
#[derive(Debug)]
pub struct Rules {
    backend: Backend,
    /// `iptables`, `ip6tables` or `nft`.
    command: &'static str,
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
            let (p, opt) = match flow.family() {
                Family::V4 => ("icmp", "--icmp-type"),
                Family::V6 => ("icmpv6", "--icmpv6-type"),
            };
            a.extend(["-p".into(), p.into(), opt.into(), t.into()]);
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
    let v4 = matches!(addr.ip(), IpAddr::V4(_));
    if !addr.ip().is_unspecified() {
        let fam = if v4 { "ip" } else { "ip6" };
        e.push_str(&format!("{fam} {dir} {} ", addr.ip()));
    } else if mode != RawMode::Icmp {
        // The table is `inet`: keep an unspecified address's rule to its own family.
        e.push_str(if v4 {
            "meta nfproto ipv4 "
        } else {
            "meta nfproto ipv6 "
        });
    }
    let icmp = if v4 { "icmp" } else { "icmpv6" };
    match mode {
        RawMode::FakeTcp => e.push_str(&format!("tcp {port} {}", addr.port())),
        RawMode::Udp => e.push_str(&format!("udp {port} {}", addr.port())),
        RawMode::Icmp => e.push_str(&match flow {
            Flow::Server { .. } => format!("{icmp} type echo-request"),
            Flow::Client { .. } => format!("{icmp} type echo-reply"),
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

/// Removes `chain` (a table for `nft`) with `command`, one of [`COMMANDS`].
fn remove_chain(command: &str, chain: &str) {
    if command == "nft" {
        let _ = run("nft", &["delete", "table", "inet", chain]);
        return;
    }
    // Every jump to it (bounded), then the chain.
    for _ in 0..16 {
        if run(command, &["-w", "-D", "INPUT", "-j", chain]).is_err() {
            break;
        }
    }
    let _ = run(command, &["-w", "-F", chain]);
    let _ = run(command, &["-w", "-X", chain]);
}

/// The chains or tables of our naming that `command` lists in this namespace.
fn existing_chains(command: &str) -> Vec<String> {
    let text = if command == "nft" {
        run("nft", &["list", "tables"])
    } else {
        run(command, &["-w", "-S"])
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
            let (Some(command), Some(chain), Some(pid)) = (
                field("backend").and_then(|b| command_named(&b)),
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
                remove_chain(command, &chain);
                let _ = std::fs::remove_file(&path);
                removed.push(chain);
            }
        }
    }
    // Chains without a state file (a crash between creating them and writing it).
    for command in COMMANDS {
        if run(command, &["--version"]).is_err() {
            continue;
        }
        for chain in existing_chains(command) {
            if let Some(pid) = pid_of_chain(&chain)
                && start_time(pid).is_none()
                && !removed.contains(&chain)
            {
                remove_chain(command, &chain);
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
        Rules::install_with(Backend::detect(flow.family())?, mode, flow, state_dir)
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
        let command = backend.command(flow.family());
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
                "backend={command}\nchain={chain}\npid={pid}\nstart={}\nnetns={}\n",
                start_time(pid).unwrap_or(0),
                netns_id()
            ),
        )?;
        let rules = Rules {
            backend,
            command,
            chain: chain.clone(),
            state_file,
            removed: false,
        };
        let added = match backend {
            Backend::Iptables => (|| {
                run(command, &["-w", "-N", &chain])?;
                let mut a: Vec<String> = vec!["-w".into(), "-A".into(), chain.clone()];
                a.extend(iptables_match(mode, flow));
                a.extend(["-j".into(), "DROP".into()]);
                let a: Vec<&str> = a.iter().map(String::as_str).collect();
                run(command, &a)?;
                run(command, &["-w", "-I", "INPUT", "-j", &chain])
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

    /// The command the rules were added with: `iptables`, `ip6tables` or `nft`.
    pub fn command(&self) -> &'static str {
        self.command
    }

    /// Removes the rules and the state file now.
    pub fn remove(mut self) {
        self.remove_now();
    }

    fn remove_now(&mut self) {
        if std::mem::replace(&mut self.removed, true) {
            return;
        }
        remove_chain(self.command, &self.chain);
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
    for command in COMMANDS {
        if run(command, &["--version"]).is_ok() {
            v.extend(existing_chains(command));
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
        assert_eq!(
            nft_match(RawMode::FakeTcp, Flow::Server { listen }),
            "meta nfproto ipv4 tcp dport 4096"
        );
        assert_eq!(pid_of_chain("skiff_u2r_123_4"), Some(123));
        assert_eq!(pid_of_chain("other"), None);
    }

    #[test]
    fn ipv6_matches_use_ip6_and_icmpv6() {
        let listen: SocketAddr = "[::]:4096".parse().unwrap();
        let server: SocketAddr = "[fd00:2::1]:4096".parse().unwrap();
        assert_eq!(Flow::Server { listen }.family(), Family::V6);
        assert_eq!(Backend::Iptables.command(Family::V6), "ip6tables");
        assert_eq!(Backend::Nftables.command(Family::V6), "nft");
        assert_eq!(
            iptables_match(RawMode::FakeTcp, Flow::Client { server }).join(" "),
            "-s fd00:2::1 -p tcp -m tcp --sport 4096"
        );
        assert_eq!(
            iptables_match(RawMode::Icmp, Flow::Server { listen }).join(" "),
            "-p icmpv6 --icmpv6-type echo-request"
        );
        assert_eq!(
            iptables_match(RawMode::Icmp, Flow::Client { server }).join(" "),
            "-s fd00:2::1 -p icmpv6 --icmpv6-type echo-reply"
        );
        assert_eq!(
            nft_match(RawMode::Udp, Flow::Server { listen }),
            "meta nfproto ipv6 udp dport 4096"
        );
        assert_eq!(
            nft_match(RawMode::Icmp, Flow::Client { server }),
            "ip6 saddr fd00:2::1 icmpv6 type echo-reply"
        );
        assert_eq!(command_named("ip6tables"), Some("ip6tables"));
        assert_eq!(command_named("sh"), None);
    }
}
