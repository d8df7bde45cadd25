//! `autoRule`: the firewall chain is added, removed on a normal stop and on SIGTERM, and what
//! a `kill -9`ed run left is removed by the next start. In a network namespace (root, `ip`
//! and `iptables` needed; outside CI their absence skips with a printed reason, under
//! `CI=true` it fails). IPv6 flows go to ip6tables (their own test, `ip6tables` needed). The
//! nftables path (used when the family's iptables is absent) runs in its own test, chosen
//! explicitly, where `nft` is installed, for both families.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use skiff_udp2raw::headers::RawMode;
use skiff_udp2raw::io::raw::Family;
use skiff_udp2raw::io::rules::{Backend, Flow, Rules, list_chains, remove_leftovers};

fn ready() -> bool {
    if !is_root() {
        skip("not root (network namespaces, iptables)");
        return false;
    }
    if !have("ip", "-V") || !have("iptables", "-V") {
        skip("no `ip` or `iptables`");
        return false;
    }
    true
}

fn chains(ns: &Netns) -> Vec<String> {
    ns.run_in(list_chains)
}

fn state_files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Waits (bounded) until `f` holds.
fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("timed out waiting for {what}");
}

fn spawn_server(ns: &Netns, dir: &Path, raw: RawMode) -> Child {
    spawn_server_on(ns, dir, raw, "127.0.0.1:4096", "127.0.0.1:7000")
}

fn spawn_server_on(ns: &Netns, dir: &Path, raw: RawMode, listen: &str, target: &str) -> Child {
    Command::new("ip")
        .args(["netns", "exec", &ns.name])
        .arg(env!("CARGO_BIN_EXE_skiff-udp2raw"))
        .args(["-s", "-l", listen, "-r", target, "-a"])
        .args(["--raw-mode", raw.name(), "--state-dir"])
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn skiff-udp2raw")
}

fn wait_exit(child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if child.try_wait().unwrap().is_some() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("skiff-udp2raw did not exit");
}

#[test]
fn rules_removed_on_drop_sigterm_and_after_a_crash() {
    if !ready() {
        return;
    }
    let ns = Netns::new("rules");
    let dir = std::env::temp_dir().join(format!("skiff-u2r-rules-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);

    // In process, each raw mode and side: installed, then removed on drop.
    for raw in RawMode::ALL {
        for flow in [
            Flow::Server {
                listen: "0.0.0.0:4096".parse().unwrap(),
            },
            Flow::Client {
                server: "10.1.2.3:4096".parse().unwrap(),
            },
        ] {
            let d = dir.clone();
            let (chain, during) = ns.run_in(move || {
                let r = Rules::install(raw, flow, &d).expect("install");
                (r.chain().to_string(), list_chains())
            });
            assert!(during.contains(&chain), "{chain} in {during:?}");
            assert!(
                chains(&ns).is_empty(),
                "dropped → removed: {:?}",
                chains(&ns)
            );
            assert!(state_files(&dir).is_empty(), "{:?}", state_files(&dir));
        }
    }

    // SIGTERM: the process removes its chain and state file.
    let mut child = spawn_server(&ns, &dir, RawMode::FakeTcp);
    wait_until("the chain of the first run", || chains(&ns).len() == 1);
    let first = chains(&ns);
    assert!(first[0].contains(&format!("_{}_", child.id())), "{first:?}");
    // SAFETY: kill on the PID of a child this test started and has not reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    wait_exit(&mut child);
    assert!(chains(&ns).is_empty(), "after SIGTERM: {:?}", chains(&ns));
    assert!(state_files(&dir).is_empty(), "{:?}", state_files(&dir));

    // kill -9: the chain and state file stay; the next start removes them.
    let mut crashed = spawn_server(&ns, &dir, RawMode::Udp);
    wait_until("the chain of the crashing run", || chains(&ns).len() == 1);
    let left = chains(&ns);
    crashed.kill().unwrap();
    crashed.wait().unwrap();
    assert_eq!(chains(&ns), left, "kill -9 leaves the chain");
    assert_eq!(state_files(&dir).len(), 1);
    let mut next = spawn_server(&ns, &dir, RawMode::Udp);
    let pid = next.id();
    wait_until("the leftover removed and the new chain added", || {
        let c = chains(&ns);
        c.len() == 1 && c[0].contains(&format!("_{pid}_"))
    });
    assert_eq!(state_files(&dir).len(), 1);
    // SAFETY: as above.
    unsafe { libc::kill(next.id() as i32, libc::SIGTERM) };
    wait_exit(&mut next);
    assert!(chains(&ns).is_empty(), "{:?}", chains(&ns));
    assert!(state_files(&dir).is_empty(), "{:?}", state_files(&dir));
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!("rules: drop, SIGTERM and kill -9 + restart all leave no chain ({left:?} cleaned)");
}

/// `ip6tables -S` and `iptables -S` of this thread's network namespace.
fn xtables_here() -> (String, String) {
    let out = |cmd: &str| {
        let o = Command::new(cmd).args(["-w", "-S"]).output().expect(cmd);
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    (out("ip6tables"), out("iptables"))
}

fn xtables(ns: &Netns) -> (String, String) {
    ns.run_in(xtables_here)
}

#[test]
fn ipv6_rules_go_to_ip6tables_and_away_on_drop_sigterm_and_after_a_crash() {
    if !ready() {
        return;
    }
    if !have("ip6tables", "-V") {
        return skip("no `ip6tables`");
    }
    let ns = Netns::new("rules6");
    let dir = std::env::temp_dir().join(format!("skiff-u2r-rules6-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);

    // In process, each raw mode and side: an ip6tables chain (not an iptables one) whose rule
    // names the flow, removed on drop.
    for raw in RawMode::ALL {
        for (flow, wanted) in [
            (
                Flow::Server {
                    listen: "[::]:4096".parse().unwrap(),
                },
                match raw {
                    RawMode::FakeTcp => "-p tcp -m tcp --dport 4096 -j DROP",
                    RawMode::Udp => "-p udp -m udp --dport 4096 -j DROP",
                    RawMode::Icmp => "-p ipv6-icmp -m icmp6 --icmpv6-type 128 -j DROP",
                },
            ),
            (
                Flow::Client {
                    server: "[fd00:2::2]:4097".parse().unwrap(),
                },
                match raw {
                    RawMode::FakeTcp => "-s fd00:2::2/128 -p tcp -m tcp --sport 4097 -j DROP",
                    RawMode::Udp => "-s fd00:2::2/128 -p udp -m udp --sport 4097 -j DROP",
                    RawMode::Icmp => {
                        "-s fd00:2::2/128 -p ipv6-icmp -m icmp6 --icmpv6-type 129 -j DROP"
                    }
                },
            ),
        ] {
            let d = dir.clone();
            let (chain, command, v6, v4) = ns.run_in(move || {
                let r = Rules::install(raw, flow, &d).expect("install");
                let (v6, v4) = xtables_here();
                (r.chain().to_string(), r.command(), v6, v4)
            });
            assert_eq!(command, "ip6tables");
            assert!(
                v6.contains(&format!("-A {chain} {wanted}")),
                "{raw:?} {flow:?}: {v6}"
            );
            assert!(v6.contains(&format!("-A INPUT -j {chain}")), "{v6}");
            assert!(!v4.contains(&chain), "no IPv4 chain: {v4}");
            assert!(
                chains(&ns).is_empty(),
                "dropped → removed: {:?}",
                chains(&ns)
            );
            assert!(state_files(&dir).is_empty(), "{:?}", state_files(&dir));
        }
    }

    // SIGTERM: the process removes its ip6tables chain and state file.
    let mut child = spawn_server_on(&ns, &dir, RawMode::FakeTcp, "[::1]:4096", "[::1]:7000");
    wait_until("the chain of the first run", || chains(&ns).len() == 1);
    let first = chains(&ns);
    assert!(xtables(&ns).0.contains(&first[0]), "{first:?} in ip6tables");
    let state = std::fs::read_to_string(dir.join(&state_files(&dir)[0])).unwrap();
    assert!(state.contains("backend=ip6tables"), "{state}");
    // SAFETY: kill on the PID of a child this test started and has not reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    wait_exit(&mut child);
    assert!(chains(&ns).is_empty(), "after SIGTERM: {:?}", chains(&ns));
    assert!(state_files(&dir).is_empty(), "{:?}", state_files(&dir));

    // kill -9: the chain and state file stay; the next start (an IPv4 one: leftovers are
    // removed whatever their family) removes them.
    let mut crashed = spawn_server_on(&ns, &dir, RawMode::Icmp, "[::1]:4096", "[::1]:7000");
    wait_until("the chain of the crashing run", || chains(&ns).len() == 1);
    let left = chains(&ns);
    crashed.kill().unwrap();
    crashed.wait().unwrap();
    assert_eq!(chains(&ns), left, "kill -9 leaves the chain");
    assert_eq!(state_files(&dir).len(), 1);
    let mut next = spawn_server(&ns, &dir, RawMode::Udp);
    let pid = next.id();
    wait_until("the leftover removed and the new chain added", || {
        let c = chains(&ns);
        c.len() == 1 && c[0].contains(&format!("_{pid}_"))
    });
    let (v6, v4) = xtables(&ns);
    assert!(!v6.contains("skiff_u2r_"), "{v6}");
    assert!(v4.contains(&format!("skiff_u2r_{pid}_")), "{v4}");
    // SAFETY: as above.
    unsafe { libc::kill(next.id() as i32, libc::SIGTERM) };
    wait_exit(&mut next);
    assert!(chains(&ns).is_empty(), "{:?}", chains(&ns));
    assert!(state_files(&dir).is_empty(), "{:?}", state_files(&dir));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `nft` output inside `ns`.
fn nft(ns: &Netns, args: &[&str]) -> String {
    let out = Command::new("ip")
        .args(["netns", "exec", &ns.name, "nft"])
        .args(args)
        .output()
        .expect("nft");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn nftables_rules_drop_the_fake_flow_and_go_away_with_their_run() {
    if !is_root() {
        return skip("not root (network namespaces, nftables)");
    }
    if !have("ip", "-V") || !have("nft", "--version") {
        return skip("no `ip` or `nft`");
    }
    let ns = Netns::new("nft");
    let dir = std::env::temp_dir().join(format!("skiff-u2r-nft-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);

    // Each raw mode and side: a table whose rule names the flow and drops it; gone on drop.
    for raw in RawMode::ALL {
        for (flow, wanted) in [
            (
                Flow::Server {
                    listen: "10.9.8.7:4096".parse().unwrap(),
                },
                "ip daddr 10.9.8.7",
            ),
            (
                Flow::Client {
                    server: "10.1.2.3:4097".parse().unwrap(),
                },
                "ip saddr 10.1.2.3",
            ),
            (
                Flow::Server {
                    listen: "[fd00::7]:4096".parse().unwrap(),
                },
                "ip6 daddr fd00::7",
            ),
            (
                Flow::Client {
                    server: "[fd00:2::2]:4097".parse().unwrap(),
                },
                "ip6 saddr fd00:2::2",
            ),
        ] {
            let d = dir.clone();
            let (table, listed) = ns.run_in(move || {
                let r = Rules::install_with(Backend::Nftables, raw, flow, &d).expect("install");
                let table = r.chain().to_string();
                let listed = std::process::Command::new("nft")
                    .args(["list", "table", "inet", &table])
                    .output()
                    .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                    .unwrap_or_default();
                (table, listed)
            });
            assert!(listed.contains(wanted), "{raw:?} {flow:?}: {listed}");
            if raw == RawMode::Icmp {
                let icmp = if flow.family() == Family::V6 {
                    "icmpv6 type echo-"
                } else {
                    "icmp type echo-"
                };
                assert!(listed.contains(icmp), "{listed}");
            }
            assert!(listed.contains("drop"), "{listed}");
            assert!(listed.contains("hook input"), "{listed}");
            assert!(
                !nft(&ns, &["list", "tables"]).contains(&table),
                "dropped → removed"
            );
        }
    }

    // A crashed run's table, with and without its state file: the next start removes both.
    let mut gone = Command::new("true").spawn().unwrap();
    let dead = gone.id();
    gone.wait().unwrap();
    let with_state = format!("skiff_u2r_{dead}_7");
    let without_state = format!("skiff_u2r_{dead}_8");
    for table in [&with_state, &without_state] {
        assert!(ns.exec(&["nft", "add", "table", "inet", table]));
    }
    std::fs::create_dir_all(&dir).unwrap();
    let netns = ns.run_in(|| {
        std::fs::read_link("/proc/thread-self/ns/net")
            .unwrap()
            .to_string_lossy()
            .into_owned()
    });
    std::fs::write(
        dir.join(format!("udp2raw-{dead}-7.rules")),
        format!("backend=nft\nchain={with_state}\npid={dead}\nstart=1\nnetns={netns}\n"),
    )
    .unwrap();
    let d = dir.clone();
    let mut removed = ns.run_in(move || remove_leftovers(&d));
    removed.sort();
    assert_eq!(removed, [with_state.clone(), without_state.clone()]);
    let tables = nft(&ns, &["list", "tables"]);
    assert!(!tables.contains("skiff_u2r_"), "{tables}");
    assert!(std::fs::read_dir(&dir).unwrap().next().is_none());
    let _ = std::fs::remove_dir_all(&dir);
}
