//! The I/O side over IPv6 against the real `udp2raw`, both directions: our client ↔
//! `udp2raw -s -l [fd00:2::2]:4096`, and `udp2raw -c -r [fd00:2::2]:4096` ↔ our server. Two
//! network namespaces this test creates (and removes), joined by a veth pair addressed
//! fd00:2::1/64 (client side) and fd00:2::2/64 (server side, `nodad` both); the application
//! and the UDP target are on `::1` of their side. Both ends add their firewall rules
//! themselves (`-a`, and our `rules::Rules` for our end), so the IPv6 rules are exercised with
//! traffic. Each case sends datagrams with sequence numbers and CRC-32s through the tunnel to
//! an echo target and back: none may be corrupted; loss, duplicates and reordering are
//! counted and printed. Each raw mode with aes128cbc + md5, and faketcp with xor + simple.
//! `UDP2RAW_CASES` (a substring of `dir-raw-cipher-auth`) narrows the cases,
//! `UDP2RAW_DATAGRAMS` sets the count (default 2 000). Outside CI a missing binary, root,
//! `ip` or `ip6tables` skips with a printed reason; under `CI=true` it fails.

mod common;

use std::net::SocketAddr;
use std::process::Command;

use common::*;
use skiff_udp2raw::headers::RawMode;
use skiff_udp2raw::io::rules::{Flow, Rules, list_chains};
use skiff_udp2raw::io::{self, Config, Handle};
use skiff_udp2raw::{AuthMode, CipherMode};

const PASSWORD: &str = "skiff-u2r-io6";
const CLIENT_IP: &str = "fd00:2::1";
const SERVER_IP: &str = "fd00:2::2";

struct Case {
    ours_is_client: bool,
    raw: RawMode,
    cipher: CipherMode,
    auth: AuthMode,
    n: u32,
}

impl Case {
    fn label(&self) -> String {
        format!(
            "{}-{}-{}-{}",
            if self.ours_is_client {
                "ours2real"
            } else {
                "real2ours"
            },
            self.raw.name(),
            self.cipher.name(),
            self.auth.name(),
        )
    }
}

/// Two namespaces joined by a veth pair with the test's IPv6 addresses.
fn pair(tag: &str) -> Result<(Netns, Netns), String> {
    let c = Netns::new(&format!("{tag}-c"));
    let s = Netns::new(&format!("{tag}-s"));
    let ip = |args: &[&str]| -> Result<(), String> {
        let ok = Command::new("ip")
            .args(args)
            .status()
            .is_ok_and(|st| st.success());
        if ok {
            Ok(())
        } else {
            Err(format!("`ip {}` failed", args.join(" ")))
        }
    };
    ip(&[
        "-n", &c.name, "link", "add", "u2r6c", "type", "veth", "peer", "name", "u2r6s", "netns",
        &s.name,
    ])?;
    for (ns, dev, addr) in [(&c, "u2r6c", CLIENT_IP), (&s, "u2r6s", SERVER_IP)] {
        ip(&[
            "-n",
            &ns.name,
            "addr",
            "add",
            &format!("{addr}/64"),
            "dev",
            dev,
            "nodad",
        ])?;
        ip(&["-n", &ns.name, "link", "set", dev, "up"])?;
    }
    Ok((c, s))
}

/// Runs our end in `ns` with its own firewall rules (removed when it returns).
fn our_end(
    ns: &Netns,
    cfg: Config,
    ours_client: bool,
    handle: Handle,
    state_dir: std::path::PathBuf,
) -> std::thread::JoinHandle<Result<Vec<String>, String>> {
    let name = ns.name.clone();
    std::thread::spawn(move || {
        Netns::enter(&name);
        let flow = if ours_client {
            Flow::Client { server: cfg.remote }
        } else {
            Flow::Server { listen: cfg.listen }
        };
        let rules =
            Rules::install(cfg.raw_mode, flow, &state_dir).map_err(|e| format!("rules: {e}"))?;
        let chains = list_chains();
        if rules.command() != "ip6tables" && rules.command() != "nft" {
            return Err(format!("IPv6 rules added with {}", rules.command()));
        }
        let r = if ours_client {
            io::client::run(&cfg, &handle)
        } else {
            io::server::run(&cfg, &handle)
        };
        drop(rules);
        r.map_err(|e| e.to_string())?;
        Ok(chains)
    })
}

fn run_case(bin: &std::path::Path, case: &Case) -> Result<String, String> {
    let label = case.label();
    let short = label
        .replace("ours2real", "v6oc")
        .replace("real2ours", "v6os");
    let (cns, sns) = pair(&short)?;
    let (mut cns, mut sns) = (cns, sns);
    let server: SocketAddr = format!("[{SERVER_IP}]:4096").parse().unwrap();
    let target: SocketAddr = "[::1]:7000".parse().unwrap();
    let client_udp: SocketAddr = "[::1]:3333".parse().unwrap();
    let state_dir = std::env::temp_dir().join(format!(
        "skiff-u2r-io6-{}-{label}-state",
        std::process::id()
    ));
    let log =
        std::env::temp_dir().join(format!("skiff-u2r-io6-{}-{label}.log", std::process::id()));
    let mut args: Vec<String> = if case.ours_is_client {
        vec!["-s".into(), format!("-l{server}"), format!("-r{target}")]
    } else {
        vec![
            "-c".into(),
            format!("-l{client_udp}"),
            format!("-r{server}"),
        ]
    };
    for s in [
        "-k",
        PASSWORD,
        "--raw-mode",
        case.raw.name(),
        "--cipher-mode",
        case.cipher.name(),
        "--auth-mode",
        case.auth.name(),
        "-a",
        "--log-level",
        "4",
        "--disable-color",
    ] {
        args.push(s.into());
    }
    if case.ours_is_client {
        sns.spawn(bin, &args, &log);
    } else {
        cns.spawn(bin, &args, &log);
    }

    let mut cfg = if case.ours_is_client {
        Config::new(PASSWORD.as_bytes(), case.raw, client_udp, server)
    } else {
        Config::new(PASSWORD.as_bytes(), case.raw, server, target)
    };
    cfg.cipher = case.cipher;
    cfg.auth = case.auth;
    let handle = Handle::default();
    let ours_ns = if case.ours_is_client { &cns } else { &sns };
    let tunnel = our_end(
        ours_ns,
        cfg,
        case.ours_is_client,
        handle.clone(),
        state_dir.clone(),
    );
    let (there, back) =
        exchange_through(&cns.name, "[::1]:0", client_udp, &sns.name, target, case.n);
    handle.stop();
    let res = tunnel.join().expect("tunnel thread");
    let ours_ns = if case.ours_is_client { &cns } else { &sns };
    let left = ours_ns.run_in(list_chains);
    drop(cns);
    drop(sns);
    let logtext = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    let _ = std::fs::remove_dir_all(&state_dir);
    let chains = match res {
        Err(e) => return Err(format!("{label}: our end failed: {e}")),
        Ok(c) => c,
    };
    if chains.is_empty() || !left.is_empty() {
        return Err(format!(
            "{label}: our rules: {chains:?} while running, {left:?} left after"
        ));
    }
    let Some(back) = back else {
        return Err(format!(
            "{label}: tunnel never came up (stats {:?})\n{}",
            handle.stats,
            tail(&logtext)
        ));
    };
    verdict(&label, &there, &back, &logtext)
}

#[test]
fn tunnel_over_ipv6_against_real_udp2raw() {
    let Some(bin) = binary() else {
        return skip("no udp2raw binary (UDP2RAW_BIN or ../shared/peers/bin/udp2raw)");
    };
    if !is_root() {
        return skip("not root (raw sockets and network namespaces)");
    }
    if !have("ip", "-V") || !have("ip6tables", "-V") {
        return skip("no `ip` or `ip6tables` (udp2raw's -a adds ip6tables rules for IPv6)");
    }
    let filter = std::env::var("UDP2RAW_CASES").unwrap_or_default();
    let n: u32 = std::env::var("UDP2RAW_DATAGRAMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let mut cases = Vec::new();
    for ours_is_client in [true, false] {
        for (raw, cipher, auth) in [
            (RawMode::FakeTcp, CipherMode::Aes128Cbc, AuthMode::Md5),
            (RawMode::FakeTcp, CipherMode::Xor, AuthMode::Simple),
            (RawMode::Udp, CipherMode::Aes128Cbc, AuthMode::Md5),
            (RawMode::Icmp, CipherMode::Aes128Cbc, AuthMode::Md5),
        ] {
            let case = Case {
                ours_is_client,
                raw,
                cipher,
                auth,
                n,
            };
            if filter.is_empty() || case.label().contains(&filter) {
                cases.push(case);
            }
        }
    }
    run_all(&cases, &filter, |case| run_case(&bin, case));
}
