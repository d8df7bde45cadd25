//! Xray's HandlerService with Xray's own CLI as the client (`xray api …`, XRAY_BIN, else
//! `../shared/peers/bin/xray`).
//!
//! * `handler_service_answers_as_xray_does`: Skiff and Xray run the same config (VLESS,
//!   VMess, Trojan, Shadowsocks AEAD-2017 and 2022 multi-user inbounds, a tunnel) and are asked the same
//!   `lsi -isOnlyTags`, `inbounduser`, `inboundusercount`, `adu` (twice: the second time
//!   every user exists), `rmu` (known, unknown), `rmi`, `rmo`, `lso`; the CLI's output must be the
//!   same, errors included.
//! * `users_added_through_the_api_connect_and_removed_ones_are_cut`: against Skiff, a user
//!   `adu` adds connects at once (VLESS with raw requests, VMess, Trojan and Shadowsocks
//!   AEAD-2017 and 2022 through a Skiff client), its data echoed intact; `rmu` closes its open connection
//!   within a second and a new one is refused; the counters of a user nobody touched keep
//!   their values; `rmi` closes a listener and leaves its open connection running; after
//!   `rmo` the connections routed to that outbound are closed.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;

/// Shadowsocks 2022 (aes-128-gcm): the server's key and the users' keys, base64.
const SS_SERVER_KEY: &str = "AAAAAAAAAAAAAAAAAAAAAA==";
const SS_USER_KEY: &str = "AQEBAQEBAQEBAQEBAQEBAQ==";
const SS_NEW_KEY: &str = "AgICAgICAgICAgICAgICAg==";
const NEW_VLESS: &str = "11111111-6324-4d53-ad4f-8cda48b30811";
const NEW_VLESS_BYTES: [u8; 16] = [
    0x11, 0x11, 0x11, 0x11, 0x63, 0x24, 0x4d, 0x53, 0xad, 0x4f, 0x8c, 0xda, 0x48, 0xb3, 0x08, 0x11,
];
const NEW_VMESS: &str = "11111111-6324-4d53-ad4f-8cda48b30813";
const NEW_TROJAN: &str = "new-trojan-password";
const NEW_SS17: &str = "new-aead-2017-password";

fn xray() -> Option<PathBuf> {
    shared_peer("xray", "XRAY_BIN")
}

struct Ports {
    vless: u16,
    vmess: u16,
    trojan: u16,
    ss: u16,
    ss17: u16,
    tunnel: u16,
    api: u16,
}

impl Ports {
    fn new() -> Ports {
        Ports {
            vless: free_port(),
            vmess: free_port(),
            trojan: free_port(),
            ss: free_port(),
            ss17: free_port(),
            tunnel: free_port(),
            api: free_port(),
        }
    }

    fn all(&self) -> Vec<u16> {
        vec![
            self.vless,
            self.vmess,
            self.trojan,
            self.ss,
            self.ss17,
            self.tunnel,
            self.api,
        ]
    }
}

fn tls_settings(cert: &Path, key: &Path) -> serde_json::Value {
    serde_json::json!({ "network": "tcp", "security": "tls",
        "tlsSettings": { "certificates": [{ "certificateFile": cert, "keyFile": key }] } })
}

/// The server config both run (Xray's `finalRules` lets its freedom reach loopback; Skiff is
/// given the same text without it).
fn server_config(ports: &Ports, echo: u16, cert: &Path, key: &Path, xray: bool) -> String {
    let freedom = if xray {
        serde_json::json!({ "finalRules": [{ "action": "allow", "ip": ["127.0.0.0/8"] }] })
    } else {
        serde_json::json!({})
    };
    serde_json::json!({
        "log": { "loglevel": "warning" },
        "api": { "tag": "api", "listen": format!("127.0.0.1:{}", ports.api),
            "services": ["HandlerService", "StatsService"] },
        "stats": {},
        "policy": { "levels": { "0": { "statsUserUplink": true, "statsUserDownlink": true } } },
        "inbounds": [
            { "tag": "vless-in", "listen": "127.0.0.1", "port": ports.vless, "protocol": "vless",
              "settings": { "decryption": "none",
                "clients": [{ "id": UUID, "email": "a@x" }] } },
            { "tag": "vmess-in", "listen": "127.0.0.1", "port": ports.vmess, "protocol": "vmess",
              "settings": { "clients": [
                { "id": "b831381d-6324-4d53-ad4f-8cda48b30812", "email": "b@x" },
                // Listed with its security by both (no effect on connections).
                { "id": "b831381d-6324-4d53-ad4f-8cda48b30814", "email": "b2@x",
                  "security": "chacha20-poly1305" }] } },
            { "tag": "trojan-in", "listen": "127.0.0.1", "port": ports.trojan,
              "protocol": "trojan",
              "settings": { "clients": [{ "password": "pw1", "email": "c@x" }] },
              "streamSettings": tls_settings(cert, key) },
            { "tag": "ss-in", "listen": "127.0.0.1", "port": ports.ss, "protocol": "shadowsocks",
              "settings": { "method": "2022-blake3-aes-128-gcm", "password": SS_SERVER_KEY,
                "clients": [{ "password": SS_USER_KEY, "email": "d@x" }], "network": "tcp" } },
            { "tag": "ss17-in", "listen": "127.0.0.1", "port": ports.ss17,
              "protocol": "shadowsocks",
              "settings": { "clients": [
                { "method": "aes-256-gcm", "password": "pw17", "email": "e@x" }] } },
            { "tag": "tun-in", "listen": "127.0.0.1", "port": ports.tunnel,
              "protocol": "dokodemo-door",
              "settings": { "address": "127.0.0.1", "port": echo, "network": "tcp" } }
        ],
        "outbounds": [
            { "tag": "direct", "protocol": "freedom", "settings": freedom },
            { "tag": "block", "protocol": "blackhole" }
        ]
    })
    .to_string()
}

/// What `adu` reads: an inbound per tag with the users to add (ports are not used).
/// `vision`: the VLESS user's flow is xtls-rprx-vision (listed, not connected with). Beside
/// it, [`again`]'s file: the same without the AEAD-2017 inbound's user.
fn users_file(dir: &Path, vision: bool) -> PathBuf {
    let flow = if vision { "xtls-rprx-vision" } else { "" };
    let text = serde_json::json!({ "inbounds": [
        { "tag": "vless-in", "protocol": "vless", "port": 1, "settings": { "decryption": "none",
            "clients": [
                { "id": NEW_VLESS, "email": "new@x", "flow": flow },
                // Not a UUID: Xray maps it to one, and lists that.
                { "id": "any-string-id", "email": "str@x" },
                // No email: the CLI skips it.
                { "id": "11111111-6324-4d53-ad4f-8cda48b30812" }] } },
        { "tag": "vmess-in", "protocol": "vmess", "port": 1, "settings": { "clients": [
            { "id": NEW_VMESS, "email": "newv@x", "security": "chacha20-poly1305" }] } },
        { "tag": "trojan-in", "protocol": "trojan", "port": 1, "settings": { "clients": [
            { "password": NEW_TROJAN, "email": "newt@x" }] } },
        { "tag": "ss-in", "protocol": "shadowsocks", "port": 1, "settings": {
            "method": "2022-blake3-aes-128-gcm", "password": SS_SERVER_KEY,
            "clients": [{ "password": SS_NEW_KEY, "email": "news@x" }] } },
        { "tag": "ss17-in", "protocol": "shadowsocks", "port": 1, "settings": { "clients": [
            { "method": "chacha20-ietf-poly1305", "password": NEW_SS17, "email": "news17@x" }] } },
        { "tag": "tun-in", "protocol": "vless", "port": 1, "settings": { "decryption": "none",
            "clients": [{ "id": NEW_VLESS, "email": "x@x" }] } },
        { "tag": "nope", "protocol": "vless", "port": 1, "settings": { "decryption": "none",
            "clients": [{ "id": NEW_VLESS, "email": "x@x" }] } }
    ] });
    let path = dir.join(format!("users-{vision}.json"));
    std::fs::write(&path, text.to_string()).unwrap();
    let mut without_ss17 = text;
    without_ss17["inbounds"]
        .as_array_mut()
        .unwrap()
        .retain(|i| i["tag"] != "ss17-in");
    std::fs::write(again(&path), without_ss17.to_string()).unwrap();
    path
}

/// The users file `adu` reads the second time: Xray's AEAD-2017 server adds a user whose
/// email it has again (and lists and removes both), where Skiff refuses it as every other
/// protocol does ("already exists"); the comparison leaves that user out.
fn again(users: &Path) -> PathBuf {
    users.with_extension("again.json")
}

/// The tags of an `lsi`/`lso` answer, sorted (Xray lists them in map order after a removal).
fn tags(json: &str, key: &str) -> Vec<String> {
    let v: serde_json::Value =
        serde_json::from_str(json).unwrap_or_else(|e| panic!("not JSON ({e}): {json}"));
    let mut tags: Vec<String> = v[key]
        .as_array()
        .unwrap_or(&Vec::new())
        .iter()
        .map(|i| i["tag"].as_str().unwrap_or_default().to_string())
        .collect();
    tags.sort();
    tags
}

/// An `inbounduser` answer with its users sorted by email (Xray keeps them in a map, so its
/// order is not the config's); any other text as it is.
fn users_sorted(text: &str) -> String {
    let Ok(mut v) = serde_json::from_str::<serde_json::Value>(text) else {
        return text.to_string();
    };
    let Some(users) = v["users"].as_array_mut() else {
        return text.to_string();
    };
    users.sort_by_key(|u| u["email"].as_str().unwrap_or_default().to_string());
    serde_json::to_string_pretty(&v).unwrap()
}

/// An `lsi` answer sorted by tag (Xray keeps its handlers in a map: its order changes from
/// run to run), pretty-printed.
fn lsi_sorted(json: &str) -> String {
    let mut v: serde_json::Value =
        serde_json::from_str(json).unwrap_or_else(|e| panic!("lsi: not JSON ({e}): {json}"));
    if let Some(inbounds) = v["inbounds"].as_array_mut() {
        inbounds.sort_by_key(|i| i["tag"].as_str().unwrap_or_default().to_string());
    }
    serde_json::to_string_pretty(&v).unwrap()
}

/// Every question of the comparison, in order, with its answer.
fn ask(xray: &Path, port: u16, users: &Path) -> Vec<(String, String)> {
    wait_xray_api(xray, port, &["lsi", "-isOnlyTags=true"]);
    let mut said = Vec::new();
    let file = users.to_str().unwrap();
    let (ok, text) = xray_api(xray, port, "lsi", &["-isOnlyTags=true"]);
    said.push((
        "lsi -isOnlyTags".into(),
        format!("ok={ok}\n{}", lsi_sorted(&text)),
    ));
    // The full listing, the TLS settings of trojan-in included.
    let (ok, text) = xray_api(xray, port, "lsi", &[]);
    said.push(("lsi".into(), format!("ok={ok}\n{}", lsi_sorted(&text))));
    let mut q = |sub: &str, args: &[&str]| {
        let (ok, text) = xray_api(xray, port, sub, args);
        said.push((
            format!("{sub} {}", args.join(" ")),
            format!("ok={ok}\n{}", users_sorted(&text)),
        ));
    };
    for tag in [
        "vless-in",
        "vmess-in",
        "trojan-in",
        "ss-in",
        "ss17-in",
        "tun-in",
        "nope",
    ] {
        q("inbounduser", &["-tag", tag]);
        q("inboundusercount", &["-tag", tag]);
    }
    q("inbounduser", &["-tag", "vless-in", "-email", "a@x"]);
    q("inbounduser", &["-tag", "vless-in", "-email", "A@X"]);
    q("inbounduser", &["-tag", "vless-in", "-email", "nobody@x"]);
    q("adu", &[file]);
    q("adu", &[again(users).to_str().unwrap()]);
    for tag in ["vless-in", "vmess-in", "trojan-in", "ss-in", "ss17-in"] {
        q("inbounduser", &["-tag", tag]);
    }
    q("rmu", &["-tag", "vless-in", "new@x", "nobody@x"]);
    q("rmu", &["-tag", "vmess-in", "NEWV@x"]);
    q("rmu", &["-tag", "trojan-in", "newt@x"]);
    q("rmu", &["-tag", "ss-in", "news@x", "news@x"]);
    q("rmu", &["-tag", "ss17-in", "NEWS17@x", "news17@x"]);
    q("rmu", &["-tag", "nope", "a@x"]);
    q("rmu", &["-tag", "tun-in", "a@x"]);
    for tag in ["vless-in", "vmess-in", "trojan-in", "ss-in", "ss17-in"] {
        q("inboundusercount", &["-tag", tag]);
    }
    q("rmi", &["tun-in"]);
    q("rmi", &["nope"]);
    q("rmo", &["block"]);
    q("rmo", &["nope"]);
    let (ok, text) = xray_api(xray, port, "lsi", &["-isOnlyTags=true"]);
    said.push((
        "lsi after rmi".into(),
        format!("ok={ok}\n{:?}", tags(&text, "inbounds")),
    ));
    // Outbounds by tag and type (Xray also prints each one's settings).
    let (ok, text) = xray_api(xray, port, "lso", &[]);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    let outbounds: Vec<(String, String, String)> = v["outbounds"]
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
    said.push(("lso".into(), format!("ok={ok}\n{outbounds:?}")));
    said
}

#[test]
fn handler_service_answers_as_xray_does() {
    let Some(xray) = xray() else { return };
    let dir = TempDir::new("api-users-compare");
    let (cert, key) = certificate(dir.path());
    let users = users_file(dir.path(), true);
    let echo = echo_server(64, Duration::from_secs(30));
    let mut answers = Vec::new();
    // The same ports for both, one after the other: the answers name them.
    let ports = Ports::new();
    for implementation in ["xray", "skiff"] {
        let text = server_config(&ports, echo, &cert, &key, implementation == "xray");
        let said = if implementation == "xray" {
            let (_proc, _) = start_peer(&xray, "xray", dir.path(), "xray", &text, ports.api, false);
            ask(&xray, ports.api, &users)
        } else {
            let (mut proc, log) = start_skiff(dir.path(), "skiff", &text, &ports.all());
            let said = ask(&xray, ports.api, &users);
            assert_healthy(&mut proc, &log);
            said
        };
        answers.push(said);
    }
    let (xray_said, skiff_said) = (&answers[0], &answers[1]);
    assert_eq!(xray_said.len(), skiff_said.len());
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
    // Not vacuous: the answers carry users, and the additions succeeded.
    let all: String = xray_said.iter().map(|(_, a)| a.as_str()).collect();
    assert!(all.contains("Added 6 user(s) in total."), "{all}");
    assert!(all.contains("xray.proxy.shadowsocks_2022.Account"), "{all}");
    assert!(all.contains("xray.proxy.shadowsocks.Account"), "{all}");
}

/// The Skiff client: one tunnel inbound per protocol (VLESS is spoken by the test itself),
/// each to the echo server through that protocol's outbound with the user `adu` adds.
struct Client {
    vmess: u16,
    trojan: u16,
    ss: u16,
    ss17: u16,
}

fn client_config(c: &Client, server: &Ports, echo: u16) -> String {
    let tunnel = |tag: &str, port: u16| {
        serde_json::json!({ "tag": tag, "listen": "127.0.0.1", "port": port,
            "protocol": "dokodemo-door",
            "settings": { "address": "127.0.0.1", "port": echo, "network": "tcp" } })
    };
    let rule = |tag: &str| {
        serde_json::json!({ "type": "field", "inboundTag": [format!("{tag}-t")],
            "outboundTag": format!("{tag}-out") })
    };
    serde_json::json!({
        "log": { "loglevel": "warning" },
        "inbounds": [tunnel("vmess-t", c.vmess), tunnel("trojan-t", c.trojan),
            tunnel("ss-t", c.ss), tunnel("ss17-t", c.ss17)],
        "outbounds": [
            { "tag": "vmess-out", "protocol": "vmess", "settings": { "vnext": [{
                "address": "127.0.0.1", "port": server.vmess,
                "users": [{ "id": NEW_VMESS, "security": "chacha20-poly1305" }] }] } },
            { "tag": "trojan-out", "protocol": "trojan", "settings": { "servers": [{
                "address": "127.0.0.1", "port": server.trojan, "password": NEW_TROJAN }] },
              "streamSettings": { "network": "tcp", "security": "tls",
                "tlsSettings": { "serverName": "localhost", "allowInsecure": true } } },
            { "tag": "ss-out", "protocol": "shadowsocks", "settings": { "servers": [{
                "address": "127.0.0.1", "port": server.ss,
                "method": "2022-blake3-aes-128-gcm",
                "password": format!("{SS_SERVER_KEY}:{SS_NEW_KEY}") }] } },
            { "tag": "ss17-out", "protocol": "shadowsocks", "settings": { "servers": [{
                "address": "127.0.0.1", "port": server.ss17,
                "method": "chacha20-ietf-poly1305", "password": NEW_SS17 }] } }
        ],
        "routing": { "rules": [rule("vmess"), rule("trojan"), rule("ss"), rule("ss17")] }
    })
    .to_string()
}

/// How one protocol's connections are opened: through the client's tunnel port, or (VLESS)
/// straight to the server with our own request header.
#[derive(Clone, Copy)]
enum Via {
    Tunnel(u16),
    RawVless { server: u16, echo: u16 },
}

/// A connection that carried `data` both ways and is still open.
fn open_and_echo(via: Via, data: &[u8]) -> Option<TcpStream> {
    let (port, mut head, skip) = match via {
        Via::Tunnel(port) => (port, Vec::new(), 0),
        Via::RawVless { server, echo } => (server, vless_request(&NEW_VLESS_BYTES, echo, &[]), 2),
    };
    let mut conn = TcpStream::connect(("127.0.0.1", port)).ok()?;
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    head.extend_from_slice(data);
    conn.write_all(&head).ok()?;
    let mut back = vec![0u8; data.len() + skip];
    let mut got = 0;
    while got < back.len() {
        match conn.read(&mut back[got..]) {
            Ok(0) | Err(_) => return None,
            Ok(n) => got += n,
        }
    }
    (back[skip..] == *data).then_some(conn)
}

/// How long `conn` stays open (bounded by `limit`): until it reads its end or an error.
fn time_to_close(conn: &mut TcpStream, limit: Duration) -> Option<Duration> {
    let start = Instant::now();
    conn.set_read_timeout(Some(limit)).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match conn.read(&mut buf) {
            Ok(0) => return Some(start.elapsed()),
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return None;
            }
            Err(_) => return Some(start.elapsed()),
        }
        if start.elapsed() > limit {
            return None;
        }
    }
}

/// `user>>>EMAIL>>>traffic>>>uplink` and downlink as Skiff counts them.
fn user_counters(xray: &Path, api_port: u16, email: &str) -> String {
    let (ok, text) = xray_api(
        xray,
        api_port,
        "statsquery",
        &["-pattern", &format!("user>>>{email}>>>")],
    );
    assert!(ok, "statsquery: {text}");
    text
}

#[test]
fn users_added_through_the_api_connect_and_removed_ones_are_cut() {
    let Some(xray) = xray() else { return };
    let dir = TempDir::new("api-users-live");
    let (cert, key) = certificate(dir.path());
    let users = users_file(dir.path(), false);
    let echo = echo_server(64, Duration::from_secs(30));
    let ports = Ports::new();
    let text = server_config(&ports, echo, &cert, &key, false);
    let (mut server, server_log) = start_skiff(dir.path(), "server", &text, &ports.all());
    let client = Client {
        vmess: free_port(),
        trojan: free_port(),
        ss: free_port(),
        ss17: free_port(),
    };
    let client_text = client_config(&client, &ports, echo);
    let (mut client_proc, client_log) = start_skiff(
        dir.path(),
        "client",
        &client_text,
        &[client.vmess, client.trojan, client.ss, client.ss17],
    );
    wait_xray_api(&xray, ports.api, &["lsi", "-isOnlyTags=true"]);

    // A configured user carries traffic first: its counters must not move below.
    let data = noise(3, 64 << 10);
    let mut request = vless_request(&UUID_BYTES, echo, &[]);
    request.extend_from_slice(&data);
    {
        let mut conn = TcpStream::connect(("127.0.0.1", ports.vless)).unwrap();
        conn.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        conn.write_all(&request).unwrap();
        conn.shutdown(std::net::Shutdown::Write).unwrap();
        let mut back = Vec::new();
        conn.read_to_end(&mut back).unwrap();
        assert_eq!(&back[2..], &data[..], "configured VLESS user's echo");
    }
    let before = user_counters(&xray, ports.api, "a@x");
    assert!(before.contains("a@x"), "{before}");

    let cases = [
        (
            "vless-in",
            "new@x",
            Via::RawVless {
                server: ports.vless,
                echo,
            },
        ),
        ("vmess-in", "newv@x", Via::Tunnel(client.vmess)),
        ("trojan-in", "newt@x", Via::Tunnel(client.trojan)),
        ("ss-in", "news@x", Via::Tunnel(client.ss)),
        ("ss17-in", "news17@x", Via::Tunnel(client.ss17)),
    ];
    // Nobody gets through before the users exist.
    for (tag, _, via) in cases {
        assert!(
            open_and_echo(via, &data).is_none(),
            "{tag}: a user not added yet got through"
        );
    }
    let (ok, said) = xray_api(&xray, ports.api, "adu", &[users.to_str().unwrap()]);
    assert!(
        ok && said.contains("Added 6 user(s) in total."),
        "adu: {said}"
    );
    for (round, (tag, email, via)) in cases.into_iter().enumerate() {
        let data = noise(10 + round as u64, 256 << 10);
        let mut conn = open_and_echo(via, &data)
            .unwrap_or_else(|| panic!("{tag}: the added user {email} could not connect"));
        // A second connection of the same user, also open while it is removed.
        let mut second = open_and_echo(via, &data[..1000])
            .unwrap_or_else(|| panic!("{tag}: second connection of {email}"));
        // Both stay open while the user exists.
        for c in [&mut conn, &mut second] {
            assert!(
                time_to_close(c, Duration::from_millis(300)).is_none(),
                "{tag}: a connection of {email} closed before rmu"
            );
        }
        let asked = Instant::now();
        let (ok, said) = xray_api(&xray, ports.api, "rmu", &["-tag", tag, email]);
        let answered = asked.elapsed();
        assert!(
            ok && said.contains("Removed 1 user(s) in total."),
            "rmu: {said}"
        );
        for (which, c) in [("first", &mut conn), ("second", &mut second)] {
            time_to_close(c, Duration::from_secs(3)).unwrap_or_else(|| {
                panic!("{tag}: {which} connection of removed {email} stayed open")
            });
            // From the moment the CLI was started (its own start-up and the call included).
            let took = asked.elapsed();
            assert!(
                took < Duration::from_secs(1),
                "{tag}: {which} connection closed {took:?} after rmu was started"
            );
            eprintln!(
                "{tag}: {which} connection of the removed user closed {took:?} after rmu started (the CLI returned after {answered:?})"
            );
        }
        assert!(
            open_and_echo(via, &data[..1000]).is_none(),
            "{tag}: the removed user {email} connected again"
        );
    }
    // Removed users can be added again (str@x was never removed) and connect at once.
    let (ok, said) = xray_api(&xray, ports.api, "adu", &[users.to_str().unwrap()]);
    assert!(
        ok && said.contains("Added 5 user(s) in total."),
        "adu again: {said}"
    );
    for (tag, email, via) in cases {
        let again = open_and_echo(via, &data[..1000]);
        assert!(
            again.is_some(),
            "{tag}: {email} added again could not connect"
        );
    }
    // rmi: the listener goes, a connection it accepted before runs on.
    let tunnel = Via::Tunnel(ports.tunnel);
    let mut open = open_and_echo(tunnel, &data[..1000]).expect("tun-in before rmi");
    let (ok, said) = xray_api(&xray, ports.api, "rmi", &["tun-in"]);
    assert!(ok, "rmi: {said}");
    let deadline = Instant::now() + Duration::from_secs(1);
    while TcpStream::connect(("127.0.0.1", ports.tunnel)).is_ok() {
        assert!(
            Instant::now() < deadline,
            "tun-in still accepts connections 1 s after rmi"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    open.write_all(&data[..5000]).unwrap();
    let mut back = vec![0u8; 5000];
    open.read_exact(&mut back)
        .expect("the open tun-in connection after rmi");
    assert_eq!(back, data[..5000], "echo through tun-in after rmi");
    // The untouched user's counters are where they were.
    assert_eq!(user_counters(&xray, ports.api, "a@x"), before);
    // rmo: a connection routed to a removed outbound is closed (Xray: "non existing
    // outTag"), not carried by another one.
    let (ok, said) = xray_api(&xray, ports.api, "rmo", &["direct"]);
    assert!(ok, "rmo: {said}");
    let mut conn = TcpStream::connect(("127.0.0.1", ports.vless)).unwrap();
    conn.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    conn.write_all(&request[..2000]).unwrap();
    let mut back = Vec::new();
    let _ = conn.read_to_end(&mut back);
    assert!(
        back.len() <= 2,
        "a connection routed to the removed outbound carried {} bytes",
        back.len()
    );
    assert_healthy(&mut server, &server_log);
    assert_healthy(&mut client_proc, &client_log);
}
