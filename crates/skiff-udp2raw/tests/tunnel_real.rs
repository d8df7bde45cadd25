//! The I/O side (`skiff_udp2raw::io`) against the real `udp2raw`, both directions, inside a
//! network namespace: our client ↔ `udp2raw -s`, and `udp2raw -c` ↔ our server. Datagrams
//! with sequence numbers and CRC-32s go from an application socket through the tunnel to an
//! echo target and back; none may be corrupted; loss, duplicates and reordering are counted
//! and printed. Fake TCP runs every cipher × auth mode, udp and icmp five pairs, and each
//! raw mode every cipher mode once with `--fix-gro`. `UDP2RAW_CASES` (a substring of `dir-raw-cipher-auth`) narrows the cases,
//! `UDP2RAW_DATAGRAMS` sets the count (default 10 000 for the first case of each raw mode,
//! 500 for the rest). Outside CI a missing binary or root skips; under `CI=true` it fails.
//! IPv6 tunnels run in `tunnel_real_v6.rs`.

mod common;

use std::net::SocketAddr;

use common::*;
use skiff_udp2raw::headers::RawMode;
use skiff_udp2raw::io::{self, Config, Handle};
use skiff_udp2raw::{AuthMode, CipherMode};

const PASSWORD: &str = "skiff-u2r-io";

struct Case {
    ours_is_client: bool,
    raw: RawMode,
    cipher: CipherMode,
    auth: AuthMode,
    gro: bool,
    n: u32,
}

impl Case {
    fn label(&self) -> String {
        format!(
            "{}-{}-{}-{}{}",
            if self.ours_is_client {
                "ours2real"
            } else {
                "real2ours"
            },
            self.raw.name(),
            self.cipher.name(),
            self.auth.name(),
            if self.gro { "-gro" } else { "" }
        )
    }
}

fn run_case(bin: &std::path::Path, case: &Case) -> Result<String, String> {
    let label = case.label();
    let mut ns = Netns::new(&label.replace("ours2real", "oc").replace("real2ours", "os"));
    ns.run_in(|| std::fs::write("/proc/sys/net/ipv4/icmp_echo_ignore_all", "1").ok());
    let server: SocketAddr = "127.0.0.1:4096".parse().unwrap();
    let target: SocketAddr = "127.0.0.1:7000".parse().unwrap();
    let client_udp: SocketAddr = "127.0.0.1:3333".parse().unwrap();
    // The kernel must not answer the fake flows (what autoRule adds for us).
    for proto in ["tcp", "udp"] {
        ns.exec(&[
            "iptables", "-I", "INPUT", "-p", proto, "--dport", "4096", "-j", "DROP",
        ]);
        ns.exec(&[
            "iptables", "-I", "INPUT", "-p", proto, "--sport", "4096", "-j", "DROP",
        ]);
    }
    let log = std::env::temp_dir().join(format!("skiff-u2r-io-{}-{label}.log", std::process::id()));
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
        "--log-level",
        "3",
        "--disable-color",
    ] {
        args.push(s.into());
    }
    if case.gro {
        args.push("--fix-gro".into());
    }
    ns.spawn(bin, &args, &log);

    let mut cfg = if case.ours_is_client {
        Config::new(PASSWORD.as_bytes(), case.raw, client_udp, server)
    } else {
        Config::new(PASSWORD.as_bytes(), case.raw, server, target)
    };
    cfg.cipher = case.cipher;
    cfg.auth = case.auth;
    cfg.fix_gro = case.gro;
    let handle = Handle::default();
    let (h2, name) = (handle.clone(), ns.name.clone());
    let ours_client = case.ours_is_client;
    let tunnel = std::thread::spawn(move || {
        Netns::enter(&name);
        if ours_client {
            io::client::run(&cfg, &h2)
        } else {
            io::server::run(&cfg, &h2)
        }
    });
    let (there, back) = exchange_through(
        &ns.name,
        "127.0.0.1:0",
        client_udp,
        &ns.name,
        target,
        case.n,
    );
    handle.stop();
    let res = tunnel.join().expect("tunnel thread");
    drop(ns);
    let logtext = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    if let Err(e) = res {
        return Err(format!("{label}: our end failed: {e}"));
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
fn tunnel_against_real_udp2raw() {
    let Some(bin) = binary() else {
        return skip("no udp2raw binary (UDP2RAW_BIN or ../shared/peers/bin/udp2raw)");
    };
    if !is_root() {
        return skip("not root (raw sockets and network namespaces)");
    }
    if !have("ip", "-V") || !have("iptables", "-V") {
        return skip("no `ip` or `iptables`");
    }
    let filter = std::env::var("UDP2RAW_CASES").unwrap_or_default();
    let big: Option<u32> = std::env::var("UDP2RAW_DATAGRAMS")
        .ok()
        .and_then(|v| v.parse().ok());
    let mut cases = Vec::new();
    for ours_is_client in [true, false] {
        for raw in RawMode::ALL {
            let mut first = true;
            for cipher in [
                CipherMode::Aes128Cbc,
                CipherMode::Aes128Cfb,
                CipherMode::Xor,
                CipherMode::None,
            ] {
                for auth in [
                    AuthMode::Md5,
                    AuthMode::Crc32,
                    AuthMode::Simple,
                    AuthMode::HmacSha1,
                    AuthMode::None,
                ] {
                    // fake TCP: every cipher × auth; udp and icmp: the diagonal-ish pairs.
                    if raw != RawMode::FakeTcp
                        && !matches!(
                            (cipher, auth),
                            (CipherMode::Aes128Cbc, AuthMode::Md5)
                                | (CipherMode::Aes128Cfb, AuthMode::HmacSha1)
                                | (CipherMode::Xor, AuthMode::Simple)
                                | (CipherMode::None, AuthMode::Crc32)
                                | (CipherMode::None, AuthMode::None)
                        )
                    {
                        continue;
                    }
                    let case = Case {
                        ours_is_client,
                        raw,
                        cipher,
                        auth,
                        gro: false,
                        n: big.unwrap_or(if first { 10_000 } else { 500 }),
                    };
                    first = false;
                    if filter.is_empty() || case.label().contains(&filter) {
                        cases.push(case);
                    }
                }
            }
        }
    }
    // --fix-gro: every cipher mode once per raw mode and direction.
    for ours_is_client in [true, false] {
        for raw in RawMode::ALL {
            for (cipher, auth) in [
                (CipherMode::Aes128Cbc, AuthMode::HmacSha1),
                (CipherMode::Aes128Cfb, AuthMode::Md5),
                (CipherMode::Xor, AuthMode::Crc32),
                (CipherMode::None, AuthMode::Simple),
            ] {
                let case = Case {
                    ours_is_client,
                    raw,
                    cipher,
                    auth,
                    gro: true,
                    n: big.unwrap_or(500),
                };
                if filter.is_empty() || case.label().contains(&filter) {
                    cases.push(case);
                }
            }
        }
    }
    run_all(&cases, &filter, |case| run_case(&bin, case));
}
