//! geoip/geosite routing against Xray 26.7 as the oracle: the same config (rules with
//! `geoip:private`, `geosite:google`, `geosite:category-ads-all` and a plain domain, over the
//! shared geoip.dat and geosite.dat) and the same SOCKS5 requests through both; each
//! connection must take the same outbound in both, read from their access logs. Every
//! outbound is a blackhole with its own tag, so nothing leaves the machine (a freedom
//! outbound would resolve and dial real names).
//!
//! Xray from XRAY_BIN or `../shared/peers/bin/xray`, the data from `../shared/data/geo`;
//! outside CI a missing one skips, under CI it fails.

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

fn geo_dir() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/geo");
    if dir.join("geosite.dat").is_file() && dir.join("geoip.dat").is_file() {
        return Some(dir);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI must have ../shared/data/geo"
    );
    eprintln!("skipped: ../shared/data/geo not found");
    None
}

fn config(port: u16, access: &Path) -> String {
    let blackhole = |tag: &str| serde_json::json!({ "tag": tag, "protocol": "blackhole" });
    serde_json::json!({
        "log": { "loglevel": "warning", "access": access },
        "inbounds": [{ "tag": "in", "listen": "127.0.0.1", "port": port, "protocol": "socks" }],
        "outbounds": [blackhole("default"), blackhole("private"), blackhole("google"),
                      blackhole("ads"), blackhole("plain")],
        "routing": { "domainStrategy": "AsIs", "rules": [
            { "ip": ["geoip:private"], "outboundTag": "private" },
            { "domain": ["geosite:google"], "outboundTag": "google" },
            { "domain": ["geosite:category-ads-all"], "outboundTag": "ads" },
            { "domain": ["domain:example.org", "keyword:skiff-test"], "outboundTag": "plain" }
        ] }
    })
    .to_string()
}

/// Destinations (as SOCKS5 sends them) whose routes are compared.
const DESTINATIONS: &[(&str, u16)] = &[
    ("127.0.0.1", 9),
    ("10.1.2.3", 80),
    ("192.168.7.7", 443),
    ("172.16.0.1", 53),
    ("8.8.8.8", 53),
    ("fc00::1", 80),
    ("www.google.com", 443),
    ("mail.google.com", 443),
    ("youtube.com", 443),
    ("doubleclick.net", 80),
    ("ads.doubleclick.net", 80),
    ("ib.adnxs.com", 443),
    ("static.criteo.net", 443),
    ("cdn.taboola.com", 443),
    ("google.com.evil.invalid", 80),
    ("www.example.org", 443),
    ("a-skiff-test-name.net", 443),
    ("github.com", 443),
];

/// One SOCKS5 CONNECT to `host:port` through `socks`; the answer does not matter (every
/// outbound is a blackhole), only that the request was made.
fn connect_through(socks: u16, host: &str, port: u16) {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", socks)) else {
        return;
    };
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let _ = s.write_all(&[5, 1, 0]);
    let mut reply = [0u8; 2];
    let _ = s.read_exact(&mut reply);
    let mut request = vec![5, 1, 0];
    match host.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(ip)) => {
            request.push(1);
            request.extend_from_slice(&ip.octets());
        }
        Ok(std::net::IpAddr::V6(ip)) => {
            request.push(4);
            request.extend_from_slice(&ip.octets());
        }
        Err(_) => {
            request.push(3);
            request.push(host.len() as u8);
            request.extend_from_slice(host.as_bytes());
        }
    }
    request.extend_from_slice(&port.to_be_bytes());
    let _ = s.write_all(&request);
    let mut answer = [0u8; 64];
    let _ = s.read(&mut answer);
}

/// Destination → outbound tag, from an access log (`… tcp:DEST [in -> TAG]`, Xray writes
/// `>>` for the default route).
fn routes(log: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some(at) = line
            .find("accepted tcp:")
            .or_else(|| line.find("rejected tcp:"))
        else {
            continue;
        };
        let Some(dest) = line[at + 13..].split_whitespace().next() else {
            continue;
        };
        // The route is the last bracket: `[in -> TAG]` (an IPv6 destination has its own).
        let (Some(open), Some(close)) = (line.rfind('['), line.rfind(']')) else {
            continue;
        };
        if close < open {
            continue;
        }
        let tag = line[open + 1..close]
            .split_whitespace()
            .last()
            .unwrap_or_default()
            .to_string();
        out.insert(dest.to_string(), tag);
    }
    out
}

fn spawn(program: &Path, args: &[&str], env: (&str, &Path), out: &Path) -> Proc {
    let file = std::fs::File::create(out).unwrap();
    let child = Command::new(program)
        .args(args)
        .env(env.0, env.1)
        .stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .unwrap();
    Proc {
        child,
        what: "peer",
    }
}

/// Runs one implementation on the config, sends every destination, and reads its routes
/// once the access log holds them all (at most 10 s).
fn drive(mut proc: Proc, port: u16, out: &Path, access: &Path) -> BTreeMap<String, String> {
    wait_ports(&mut proc, &[port], out);
    for (host, dport) in DESTINATIONS {
        connect_through(port, host, *dport);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = routes(access);
        if got.len() >= DESTINATIONS.len() || Instant::now() > deadline {
            return got;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn geoip_and_geosite_rules_route_as_xray_s() {
    let Some(xray) = shared_peer("xray", "XRAY_BIN") else {
        return;
    };
    let Some(geo) = geo_dir() else { return };
    let dir = TempDir::new("routing-geodata");
    let mut results = Vec::new();
    for name in ["xray", "skiff"] {
        let port = free_port();
        let access = dir.path().join(format!("{name}.access"));
        let path = dir.path().join(format!("{name}.json"));
        std::fs::write(&path, config(port, &access)).unwrap();
        let out = dir.path().join(format!("{name}.out"));
        let path = path.to_string_lossy().into_owned();
        let proc = if name == "xray" {
            spawn(
                &xray,
                &["run", "-c", &path],
                ("XRAY_LOCATION_ASSET", &geo),
                &out,
            )
        } else {
            spawn(
                Path::new(env!("CARGO_BIN_EXE_skiff")),
                &["run", "-c", &path],
                ("SKIFF_LOCATION_ASSET", &geo),
                &out,
            )
        };
        results.push(drive(proc, port, &out, &access));
    }
    let (xray, skiff) = (&results[0], &results[1]);
    let mut table = Vec::new();
    let mut differ = 0;
    for (dest, x) in xray {
        let s = skiff.get(dest).map(String::as_str).unwrap_or("(none)");
        let same = x == s;
        differ += usize::from(!same);
        table.push(format!(
            "{dest:32} xray {x:8} skiff {s:8}{}",
            if same { "" } else { "  DIFFERENT" }
        ));
    }
    let report = table.join("\n");
    eprintln!("{report}");
    assert_eq!(
        xray.len(),
        DESTINATIONS.len(),
        "Xray logged every destination:\n{report}"
    );
    assert_eq!(differ, 0, "routes differ:\n{report}");
    // The rules did something: not everything went to the default outbound.
    for tag in ["private", "google", "ads", "plain", "default"] {
        assert!(
            skiff.values().any(|t| t == tag),
            "no connection took `{tag}`:\n{report}"
        );
    }
}
