//! Xray's HandlerService AddInbound and AddOutbound with Xray's own CLI as the client
//! (`xray api adi` / `ado`; XRAY_BIN, else `../shared/peers/bin/xray`).
//!
//! * `added_handlers_answer_and_carry_traffic_as_in_xray`: Xray and then Skiff run the same
//!   base config (two tunnels, each routed to an outbound that is a blackhole at first) and
//!   are asked the same questions: `adi` a file with a VLESS inbound over TLS (certificate
//!   files), a Trojan inbound over TLS (certificate inline), a Shadowsocks 2022 and a SOCKS
//!   inbound; `adi` it again (every tag taken); `lsi`; `rmo` both blackholes and `ado` a VLESS
//!   and a Trojan outbound over TLS under their tags, which reach the added inbounds; `ado`
//!   again; `lso`; `rmi`, `lsi`. The CLI's answers must be the same. Through each tunnel a
//!   checksummed payload reaches a local echo server and comes back intact, by way of the
//!   added outbound and the added inbound, on both.
//! * `what_skiff_cannot_start_changes_nothing`: against Skiff, an inbound on a port in use,
//!   an unsupported transport and security, and a config error are refused with an error
//!   naming the problem, and nothing is listed or listening afterwards; Xray's answer to the
//!   port in use is printed beside Skiff's.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;

const SS_SERVER_KEY: &str = "AAAAAAAAAAAAAAAAAAAAAA==";
const SS_USER_KEY: &str = "AQEBAQEBAQEBAQEBAQEBAQ==";

fn xray() -> Option<PathBuf> {
    shared_peer("xray", "XRAY_BIN")
}

struct Ports {
    api: u16,
    tun_vless: u16,
    tun_trojan: u16,
    vless: u16,
    trojan: u16,
    ss: u16,
    socks: u16,
}

impl Ports {
    fn new() -> Ports {
        Ports {
            api: free_port(),
            tun_vless: free_port(),
            tun_trojan: free_port(),
            vless: free_port(),
            trojan: free_port(),
            ss: free_port(),
            socks: free_port(),
        }
    }
}

/// The base config: two tunnels to the echo server, each routed to an outbound that drops
/// everything until `ado` replaces it. Xray's freedom needs `finalRules` to reach loopback.
/// ADI_LOGLEVEL (e.g. `debug`) sets both servers' log level; SKIFF_KEEP_TEST_DIRS keeps the
/// logs.
fn base_config(ports: &Ports, echo: u16, xray: bool) -> String {
    let freedom = if xray {
        serde_json::json!({ "finalRules": [{ "action": "allow", "ip": ["127.0.0.0/8"] }] })
    } else {
        serde_json::json!({})
    };
    let tunnel = |tag: &str, port: u16| {
        serde_json::json!({ "tag": tag, "listen": "127.0.0.1", "port": port,
            "protocol": "dokodemo-door",
            "settings": { "address": "127.0.0.1", "port": echo, "network": "tcp" } })
    };
    serde_json::json!({
        "log": { "loglevel": std::env::var("ADI_LOGLEVEL").unwrap_or("warning".into()) },
        "api": { "tag": "api", "listen": format!("127.0.0.1:{}", ports.api),
            "services": ["HandlerService"] },
        "inbounds": [tunnel("tun-vless", ports.tun_vless), tunnel("tun-trojan", ports.tun_trojan)],
        "outbounds": [
            { "tag": "direct", "protocol": "freedom", "settings": freedom },
            { "tag": "relay-vless", "protocol": "blackhole" },
            { "tag": "relay-trojan", "protocol": "blackhole" }
        ],
        "routing": { "rules": [
            { "type": "field", "inboundTag": ["tun-vless"], "outboundTag": "relay-vless" },
            { "type": "field", "inboundTag": ["tun-trojan"], "outboundTag": "relay-trojan" }
        ] }
    })
    .to_string()
}

/// What `adi` reads: VLESS over TLS with certificate files, Trojan over TLS with the
/// certificate inline, Shadowsocks 2022 with a user, SOCKS.
fn inbounds_file(dir: &Path, ports: &Ports, cert: &Path, key: &Path) -> PathBuf {
    let lines = |path: &Path| -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect()
    };
    let text = serde_json::json!({ "inbounds": [
        { "tag": "vless-tls-in", "listen": "127.0.0.1", "port": ports.vless, "protocol": "vless",
          "settings": { "decryption": "none", "clients": [{ "id": UUID, "email": "v@x" }] },
          "streamSettings": { "network": "raw", "security": "tls", "tlsSettings": {
              "certificates": [{ "certificateFile": cert, "keyFile": key }] } } },
        { "tag": "trojan-in", "listen": "127.0.0.1", "port": ports.trojan, "protocol": "trojan",
          "settings": { "clients": [{ "password": "pw-added", "email": "t@x" }] },
          "streamSettings": { "network": "tcp", "security": "tls", "tlsSettings": {
              "alpn": ["http/1.1"],
              "certificates": [{ "certificate": lines(cert), "key": lines(key) }] } } },
        { "tag": "ss-in", "listen": "127.0.0.1", "port": ports.ss, "protocol": "shadowsocks",
          "settings": { "method": "2022-blake3-aes-128-gcm", "password": SS_SERVER_KEY,
            "clients": [{ "password": SS_USER_KEY, "email": "s@x" }], "network": "tcp" } },
        { "tag": "socks-in", "listen": "127.0.0.1", "port": ports.socks, "protocol": "socks",
          "settings": { "auth": "noauth", "udp": false } }
    ] })
    .to_string();
    let path = dir.join("inbounds.json");
    std::fs::write(&path, text).unwrap();
    path
}

/// What `ado` reads: a VLESS and a Trojan outbound over TLS to the added inbounds, the
/// certificate pinned by its SHA-256 (the server name is localhost).
fn outbounds_file(dir: &Path, ports: &Ports, pin: &str) -> PathBuf {
    let tls = serde_json::json!({ "network": "raw", "security": "tls",
        "tlsSettings": { "serverName": "localhost", "pinnedPeerCertSha256": pin } });
    let text = serde_json::json!({ "outbounds": [
        { "tag": "relay-vless", "protocol": "vless", "settings": { "vnext": [{
            "address": "127.0.0.1", "port": ports.vless,
            "users": [{ "id": UUID, "encryption": "none" }] }] },
          "streamSettings": tls },
        { "tag": "relay-trojan", "protocol": "trojan", "settings": { "servers": [{
            "address": "127.0.0.1", "port": ports.trojan, "password": "pw-added" }] },
          "streamSettings": tls }
    ] })
    .to_string();
    let path = dir.join("outbounds.json");
    std::fs::write(&path, text).unwrap();
    path
}

/// The certificate's SHA-256 as hex with colons (openssl's form, which Xray accepts).
fn certificate_pin(cert: &Path) -> String {
    let out = Command::new("openssl")
        .args(["x509", "-noout", "-fingerprint", "-sha256", "-in"])
        .arg(cert)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim()
        .rsplit('=')
        .next()
        .unwrap_or_default()
        .to_string()
}

/// An `lsi` answer sorted by tag (Xray keeps handlers in a map: its order changes from run
/// to run), pretty-printed.
fn lsi_sorted(json: &str) -> String {
    let Ok(mut v) = serde_json::from_str::<serde_json::Value>(json) else {
        return json.to_string();
    };
    if let Some(inbounds) = v["inbounds"].as_array_mut() {
        inbounds.sort_by_key(|i| i["tag"].as_str().unwrap_or_default().to_string());
    }
    serde_json::to_string_pretty(&v).unwrap()
}

/// An `lso` answer as (tag, sender type, proxy type), sorted (Xray also prints settings).
fn lso_sorted(json: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(json).unwrap_or_default();
    let mut outbounds: Vec<(String, String, String)> = v["outbounds"]
        .as_array()
        .unwrap_or(&Vec::new())
        .iter()
        .map(|o| {
            let name = |k: &str| {
                o[k]["_TypedMessage_"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            };
            let tag = o["tag"].as_str().unwrap_or_default().to_string();
            (tag, name("senderSettings"), name("proxySettings"))
        })
        .collect();
    outbounds.sort();
    format!("{outbounds:?}")
}

/// FNV-1a, 64 bits: the payload's checksum.
fn checksum(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Sends `data` through the tunnel on `port` and reads back until the end: the checksum of
/// what came back, or None when nothing did. The first KiB goes alone and comes back before
/// the rest is sent: Xray's Trojan client refuses a first payload larger than its buffer
/// ("buffer is full"), and a tunnel hands it whatever arrived first.
fn through(port: u16, data: &[u8]) -> Option<u64> {
    let mut conn = TcpStream::connect(("127.0.0.1", port)).ok()?;
    conn.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    let first = data.len().min(1024);
    conn.write_all(&data[..first]).ok()?;
    let mut back = vec![0u8; first];
    conn.read_exact(&mut back).ok()?;
    let writer = {
        let mut conn = conn.try_clone().ok()?;
        let rest = data[first..].to_vec();
        std::thread::spawn(move || {
            let _ = conn.write_all(&rest);
            let _ = conn.shutdown(std::net::Shutdown::Write);
        })
    };
    let _ = conn.read_to_end(&mut back);
    let _ = writer.join();
    Some(checksum(&back))
}

/// Every question of the comparison in order, with its answer; checks the traffic on the
/// way (`who` names the implementation in failures).
fn ask(
    xray: &Path,
    ports: &Ports,
    inbounds: &Path,
    outbounds: &Path,
    who: &str,
) -> Vec<(String, String)> {
    wait_xray_api(xray, ports.api, &["lsi", "-isOnlyTags=true"]);
    let mut said = Vec::new();
    let mut q = |name: &str, sub: &str, args: &[&str], shape: fn(&str) -> String| {
        let (ok, text) = xray_api(xray, ports.api, sub, args);
        said.push((name.to_string(), format!("ok={ok}\n{}", shape(&text))));
        (ok, text)
    };
    let same = |t: &str| t.to_string();
    let (inbounds, outbounds) = (inbounds.to_str().unwrap(), outbounds.to_str().unwrap());
    let data = noise(7, 512 << 10);
    let sum = checksum(&data);
    // Nothing gets through the blackholes yet.
    assert_eq!(
        through(ports.tun_vless, &data[..1000]),
        None,
        "{who}: before ado"
    );

    let (ok, text) = q("adi", "adi", &[inbounds], same);
    assert!(ok, "{who}: adi: {text}");
    q("adi again", "adi", &[inbounds], same);
    q("lsi -isOnlyTags", "lsi", &["-isOnlyTags=true"], lsi_sorted);
    q("lsi", "lsi", &[], lsi_sorted);
    q("rmo", "rmo", &["relay-vless", "relay-trojan"], same);
    let (ok, text) = q("ado", "ado", &[outbounds], same);
    assert!(ok, "{who}: ado: {text}");
    q("ado again", "ado", &[outbounds], same);
    q("lso", "lso", &[], lso_sorted);

    // tun-vless → relay-vless (added) → vless-tls-in (added) → direct → echo, and the same
    // through Trojan.
    for (name, port) in [("vless", ports.tun_vless), ("trojan", ports.tun_trojan)] {
        assert_eq!(
            through(port, &data),
            Some(sum),
            "{who}: the payload through the added {name} outbound and inbound"
        );
    }
    q("rmi", "rmi", &["vless-tls-in"], same);
    q("lsi after rmi", "lsi", &["-isOnlyTags=true"], lsi_sorted);
    // The removed inbound is gone: its tunnel's payload does not come back.
    assert_eq!(
        through(ports.tun_vless, &data[..1000]),
        None,
        "{who}: through vless-tls-in after rmi"
    );
    assert_eq!(
        through(ports.tun_trojan, &data),
        Some(sum),
        "{who}: trojan after rmi"
    );
    said
}

#[test]
fn added_handlers_answer_and_carry_traffic_as_in_xray() {
    let Some(xray) = xray() else { return };
    let dir = TempDir::new("api-adi-compare");
    let (cert, key) = certificate(dir.path());
    let pin = certificate_pin(&cert);
    assert_eq!(pin.len(), 95, "openssl's fingerprint: {pin}");
    let echo = echo_server(64, Duration::from_secs(30));
    let mut answers = Vec::new();
    // The same ports for both, one after the other: the answers name them.
    let ports = Ports::new();
    let inbounds = inbounds_file(dir.path(), &ports, &cert, &key);
    let outbounds = outbounds_file(dir.path(), &ports, &pin);
    for implementation in ["xray", "skiff"] {
        let text = base_config(&ports, echo, implementation == "xray");
        let base_ports = [ports.api, ports.tun_vless, ports.tun_trojan];
        let said = if implementation == "xray" {
            let (_proc, _) = start_peer(&xray, "xray", dir.path(), "xray", &text, ports.api, false);
            ask(&xray, &ports, &inbounds, &outbounds, "xray")
        } else {
            let (mut proc, log) = start_skiff(dir.path(), "skiff", &text, &base_ports);
            let said = ask(&xray, &ports, &inbounds, &outbounds, "skiff");
            assert_healthy(&mut proc, &log);
            said
        };
        answers.push(said);
        // The next one binds the same ports.
        let deadline = Instant::now() + Duration::from_secs(10);
        while [ports.api, ports.vless, ports.trojan]
            .iter()
            .any(|&p| listening(p))
        {
            assert!(
                Instant::now() < deadline,
                "{implementation}'s ports stay bound"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let (xray_said, skiff_said) = (&answers[0], &answers[1]);
    assert_eq!(xray_said.len(), skiff_said.len());
    for (question, answer) in skiff_said {
        eprintln!("== {question}\n{answer}");
    }
    let mut differences = Vec::new();
    for ((question, x), (_, s)) in xray_said.iter().zip(skiff_said) {
        if x != s {
            differences.push(format!("== {question}\n-- Xray:\n{x}\n-- Skiff:\n{s}"));
        }
    }
    assert!(
        differences.is_empty(),
        "{} answers differ:\n{}",
        differences.len(),
        differences.join("\n")
    );
    // Not vacuous: the listing carries the added inbounds' users.
    let all: String = xray_said.iter().map(|(_, a)| a.as_str()).collect();
    assert!(all.contains("xray.proxy.shadowsocks_2022.Account"), "{all}");
    assert!(all.contains("existing tag found"), "{all}");
}

#[test]
fn what_skiff_cannot_start_changes_nothing() {
    let Some(xray) = xray() else { return };
    let dir = TempDir::new("api-adi-refused");
    let (cert, key) = certificate(dir.path());
    let echo = echo_server(64, Duration::from_secs(30));
    let ports = Ports::new();
    let text = base_config(&ports, echo, false);
    let (mut proc, log) = start_skiff(
        dir.path(),
        "skiff",
        &text,
        &[ports.api, ports.tun_vless, ports.tun_trojan],
    );
    wait_xray_api(&xray, ports.api, &["lsi", "-isOnlyTags=true"]);
    let listed = |xray: &Path| xray_api(xray, ports.api, "lsi", &["-isOnlyTags=true"]).1;
    let before = listed(&xray);

    // Port in use: the second of two ports is taken, so the first must not stay bound.
    let busy = TcpListener::bind("127.0.0.1:0").unwrap();
    let busy_port = busy.local_addr().unwrap().port();
    let first = free_port();
    let write = |name: &str, inbound: serde_json::Value| {
        let path = dir.path().join(format!("{name}.json"));
        std::fs::write(
            &path,
            serde_json::json!({ "inbounds": [inbound] }).to_string(),
        )
        .unwrap();
        path
    };
    let vless = |tag: &str, port: serde_json::Value, stream: serde_json::Value| {
        serde_json::json!({ "tag": tag, "listen": "127.0.0.1", "port": port,
            "protocol": "vless", "settings": { "decryption": "none",
            "clients": [{ "id": UUID, "email": "v@x" }] }, "streamSettings": stream })
    };
    let in_use = write(
        "in-use",
        vless(
            "busy-in",
            format!("{first},{busy_port}").into(),
            serde_json::json!({ "network": "raw" }),
        ),
    );
    let xhttp = write(
        "xhttp",
        vless(
            "xhttp-in",
            free_port().into(),
            serde_json::json!({ "network": "xhttp", "xhttpSettings": { "path": "/x" } }),
        ),
    );
    let reality = write(
        "reality",
        vless(
            "reality-in",
            free_port().into(),
            serde_json::json!({ "network": "raw", "security": "reality", "realitySettings": {
                "target": "127.0.0.1:1", "serverNames": ["localhost"],
                "privateKey": "SMtX3oUXQJ0hmiq6ZmUBHQTq2A1UxfBEPxMF0VTXfWY",
                "shortIds": [""] } }),
        ),
    );
    // A TLS inbound whose certificate usage Skiff does not serve: the config's own check.
    let usage = write(
        "usage",
        vless(
            "usage-in",
            free_port().into(),
            serde_json::json!({ "network": "raw", "security": "tls", "tlsSettings": {
                "certificates": [{ "certificateFile": cert, "keyFile": key, "usage": "verify" }] } }),
        ),
    );
    for (file, naming) in [
        (&in_use, "in use"),
        (&xhttp, "xhttp"),
        (&reality, "REALITY"),
        (&usage, "usage"),
    ] {
        let (ok, said) = xray_api(&xray, ports.api, "adi", &[file.to_str().unwrap()]);
        eprintln!("skiff, adi {}:\n{said}", file.display());
        assert!(!ok, "adi {} succeeded: {said}", file.display());
        assert!(said.contains(naming), "adi {}: {said}", file.display());
    }
    assert!(
        !listening(first),
        "the free port of the refused inbound stays bound"
    );
    assert_eq!(listed(&xray), before, "a refused inbound is listed");
    // The same port in use, added for real once it is free: nothing of the refused call
    // stands in the way.
    drop(busy);
    let (ok, said) = xray_api(&xray, ports.api, "adi", &[in_use.to_str().unwrap()]);
    assert!(ok, "adi once the port is free: {said}");
    assert!(listening(first) && listening(busy_port));
    // An outbound of a protocol Skiff does not run.
    let wg = dir.path().join("wg.json");
    std::fs::write(
        &wg,
        serde_json::json!({ "outbounds": [{ "tag": "wg", "protocol": "wireguard", "settings": {
            "secretKey": "SMtX3oUXQJ0hmiq6ZmUBHQTq2A1UxfBEPxMF0VTXfWY",
            "peers": [{ "publicKey": "Z6_tG5cxT6XgIspS3Lr6Hv2fQZLrUG9cUaCvbWy3MXw",
                "endpoint": "127.0.0.1:1" }] } }] })
        .to_string(),
    )
    .unwrap();
    let (ok, said) = xray_api(&xray, ports.api, "ado", &[wg.to_str().unwrap()]);
    eprintln!("skiff, ado wireguard:\n{said}");
    assert!(!ok && said.contains("wireguard"), "ado wireguard: {said}");
    assert_healthy(&mut proc, &log);
    drop(proc);

    // Xray's answer to the port in use, for the record (it keeps the tag: see README).
    let busy = TcpListener::bind("127.0.0.1:0").unwrap();
    let busy_port = busy.local_addr().unwrap().port();
    let in_use = write(
        "in-use-xray",
        vless(
            "busy-in",
            format!("{},{busy_port}", free_port()).into(),
            serde_json::json!({ "network": "raw" }),
        ),
    );
    let xray_ports = Ports::new();
    let text = base_config(&xray_ports, echo, true);
    let (_x, _) = start_peer(
        &xray,
        "xray",
        dir.path(),
        "xray",
        &text,
        xray_ports.api,
        false,
    );
    wait_xray_api(&xray, xray_ports.api, &["lsi", "-isOnlyTags=true"]);
    let (ok, said) = xray_api(&xray, xray_ports.api, "adi", &[in_use.to_str().unwrap()]);
    let (_, after) = xray_api(&xray, xray_ports.api, "lsi", &["-isOnlyTags=true"]);
    eprintln!("xray, adi with a port in use (ok={ok}):\n{said}\nxray lists then:\n{after}");
    drop(busy);
}
