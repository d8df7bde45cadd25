//! `skiff share` end to end: links made from a Skiff server's config are turned into an Xray
//! client config the way v2rayN imports them (that conversion is written here, from the
//! share-link fields, not taken from Skiff), and Xray 26.7 (XRAY_BIN, else
//! `../shared/peers/bin/xray`) connects through each to the Skiff server: VLESS over TLS with
//! Vision, VLESS over HTTPUpgrade, VMess over WebSocket, Trojan over TLS, Shadowsocks AEAD and
//! 2022 multi-user; 1 MiB echoed through each, SHA-256 checked. The terminal QR code is read
//! back into an image and decoded by zbarimg (zbar-tools), which must give the link.

mod common;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use common::*;
use percent_encoding::percent_decode_str;
use sha2::{Digest, Sha256};

const PAYLOAD: usize = 1 << 20;
const SS_SERVER_KEY: &str = "AAECAwQFBgcICQoLDA0ODw==";
const SS_USER_KEY: &str = "EBESExQVFhcYGRobHB0eHw==";

fn xray() -> Option<PathBuf> {
    shared_peer("xray", "XRAY_BIN")
}

/// The server: one inbound per kind of link, every user with an email.
fn server_config(dir: &Path, ports: &[u16; 6]) -> String {
    let (cert, key) = certificate(dir);
    let tls = serde_json::json!({ "serverName": "localhost", "alpn": ["http/1.1"],
        "certificates": [{ "certificateFile": cert, "keyFile": key }] });
    serde_json::json!({
        "log": { "loglevel": "warning" },
        "inbounds": [
            { "tag": "vless-vision", "listen": "127.0.0.1", "port": ports[0], "protocol": "vless",
              "settings": { "decryption": "none", "clients": [{ "id": UUID,
                "flow": "xtls-rprx-vision", "email": "vision@example" }] },
              "streamSettings": { "security": "tls", "tlsSettings": tls } },
            { "tag": "vless-hu", "listen": "127.0.0.1", "port": ports[1], "protocol": "vless",
              "settings": { "decryption": "none", "clients": [{ "id": UUID, "email": "hu@example" }] },
              "streamSettings": { "network": "httpupgrade",
                "httpupgradeSettings": { "path": "/up", "host": "h.example" } } },
            { "tag": "vmess-ws", "listen": "127.0.0.1", "port": ports[2], "protocol": "vmess",
              "settings": { "clients": [{ "id": UUID, "email": "ws@example" }] },
              "streamSettings": { "network": "ws", "wsSettings": { "path": "/ws", "host": "w.example" } } },
            { "tag": "trojan-tls", "listen": "127.0.0.1", "port": ports[3], "protocol": "trojan",
              "settings": { "clients": [{ "password": "p@ss word:/?#", "email": "trojan@example" }] },
              "streamSettings": { "security": "tls", "tlsSettings": tls } },
            { "tag": "ss-aead", "listen": "127.0.0.1", "port": ports[4], "protocol": "shadowsocks",
              "settings": { "method": "aes-256-gcm", "password": "secret:with@signs",
                "email": "aead@example" } },
            { "tag": "ss-2022", "listen": "127.0.0.1", "port": ports[5], "protocol": "shadowsocks",
              "settings": { "method": "2022-blake3-aes-128-gcm", "password": SS_SERVER_KEY,
                "clients": [{ "password": SS_USER_KEY, "email": "ss2022@example" }] } }
        ],
        "outbounds": [{ "protocol": "freedom" }]
    })
    .to_string()
}

fn skiff_share(config: &Path, extra: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_skiff"))
        .arg("share")
        .arg("-c")
        .arg(config)
        .args(extra)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "skiff share failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A link split the way a client app reads it.
struct Link {
    scheme: String,
    user: String,
    host: String,
    port: u16,
    query: HashMap<String, String>,
}

fn decode(text: &str) -> String {
    percent_decode_str(text).decode_utf8().unwrap().into_owned()
}

fn parse_link(link: &str) -> Link {
    let (scheme, rest) = link.split_once("://").unwrap();
    let rest = rest.split_once('#').map_or(rest, |(before, _)| before);
    let (authority, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (user, server) = authority.rsplit_once('@').unwrap();
    let (host, port) = server.rsplit_once(':').unwrap();
    let query = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap();
            (k.to_string(), decode(v))
        })
        .collect();
    Link {
        scheme: scheme.into(),
        user: decode(user),
        host: host.trim_matches(['[', ']']).into(),
        port: port.parse().unwrap(),
        query,
    }
}

/// streamSettings from a link's `type`, `security` and their fields, as v2rayN fills them.
fn stream_from_query(q: &HashMap<String, String>) -> serde_json::Value {
    let get = |k: &str| q.get(k).cloned().unwrap_or_default();
    let network = q.get("type").cloned().unwrap_or_else(|| "tcp".into());
    let mut stream = serde_json::json!({ "network": network });
    match network.as_str() {
        "ws" => {
            stream["wsSettings"] = serde_json::json!({ "path": get("path"), "host": get("host") })
        }
        "httpupgrade" => {
            stream["httpupgradeSettings"] =
                serde_json::json!({ "path": get("path"), "host": get("host") })
        }
        _ => {}
    }
    if get("security") == "tls" {
        stream["security"] = "tls".into();
        let mut tls = serde_json::json!({ "serverName": get("sni") });
        if !get("alpn").is_empty() {
            tls["alpn"] = get("alpn").split(',').collect::<Vec<_>>().into();
        }
        if !get("pcs").is_empty() {
            tls["pinnedPeerCertSha256"] = get("pcs").into();
        }
        stream["tlsSettings"] = tls;
    }
    stream
}

/// The Xray outbound a client app builds from one link.
fn outbound_from_link(link: &str, tag: &str) -> serde_json::Value {
    if let Some(body) = link.strip_prefix("vmess://") {
        let json: serde_json::Value =
            serde_json::from_slice(&STANDARD.decode(body).unwrap()).unwrap();
        let s = |k: &str| json[k].as_str().unwrap_or_default().to_string();
        let mut q = HashMap::new();
        q.insert("type".to_string(), s("net"));
        q.insert("path".to_string(), s("path"));
        q.insert("host".to_string(), s("host"));
        q.insert("security".to_string(), s("tls"));
        q.insert("sni".to_string(), s("sni"));
        return serde_json::json!({ "tag": tag, "protocol": "vmess",
            "settings": { "vnext": [{ "address": s("add"), "port": s("port").parse::<u16>().unwrap(),
                "users": [{ "id": s("id"), "security": s("scy") }] }] },
            "streamSettings": stream_from_query(&q) });
    }
    let l = parse_link(link);
    match l.scheme.as_str() {
        "vless" => serde_json::json!({ "tag": tag, "protocol": "vless",
            "settings": { "vnext": [{ "address": l.host, "port": l.port,
                "users": [{ "id": l.user, "encryption": l.query["encryption"],
                    "flow": l.query.get("flow").cloned().unwrap_or_default() }] }] },
            "streamSettings": stream_from_query(&l.query) }),
        "trojan" => serde_json::json!({ "tag": tag, "protocol": "trojan",
            "settings": { "servers": [{ "address": l.host, "port": l.port, "password": l.user }] },
            "streamSettings": stream_from_query(&l.query) }),
        "ss" => {
            // SIP002: base64url user info, or (2022) percent-encoded `method:password`.
            let info = match URL_SAFE_NO_PAD.decode(&l.user) {
                Ok(bytes) if !l.user.contains(':') => String::from_utf8(bytes).unwrap(),
                _ => l.user.clone(),
            };
            let (method, password) = info.split_once(':').unwrap();
            serde_json::json!({ "tag": tag, "protocol": "shadowsocks",
                "settings": { "servers": [{ "address": l.host, "port": l.port,
                    "method": method, "password": password }] } })
        }
        other => panic!("unexpected scheme {other}"),
    }
}

/// An echo server for the whole test, on its own thread; each connection on its own.
fn echo_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming().take(64) {
            let Ok(mut conn) = conn else { continue };
            std::thread::spawn(move || {
                let _ = conn.set_read_timeout(Some(READ_TIMEOUT));
                let mut buf = vec![0u8; 64 << 10];
                loop {
                    match conn.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            if conn.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                    }
                }
                let _ = conn.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    port
}

/// Sends PAYLOAD bytes through `port` and checks the echo's SHA-256. The first KiB goes alone
/// and is echoed before the rest: Xray 26.7's Trojan client fails ("buffer is full") when a
/// large burst is already waiting as it sends its request, which an application that speaks
/// first and then streams never meets.
fn round_trip(port: u16, seed: u64, what: &str) {
    let data = noise(seed, PAYLOAD);
    let mut conn = TcpStream::connect(("127.0.0.1", port)).unwrap();
    conn.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    conn.write_all(&data[..1024]).unwrap();
    let mut back = vec![0u8; 1024];
    conn.read_exact(&mut back)
        .unwrap_or_else(|e| panic!("{what}: no echo of the first KiB: {e}"));
    let mut writer = conn.try_clone().unwrap();
    let rest = data[1024..].to_vec();
    let sender = std::thread::spawn(move || {
        writer.write_all(&rest).unwrap();
        writer.shutdown(std::net::Shutdown::Write).unwrap();
    });
    let end = conn.read_to_end(&mut back);
    sender.join().unwrap();
    assert!(end.is_ok(), "{what}: {end:?} after {} bytes", back.len());
    assert_eq!(back.len(), PAYLOAD, "{what}: echo length");
    assert_eq!(
        Sha256::digest(&back),
        Sha256::digest(&data),
        "{what}: echo differs"
    );
}

#[test]
fn xray_connects_through_every_shared_link() {
    let Some(xray) = xray() else { return };
    let dir = TempDir::new("share-xray");
    let ports = [
        free_port(),
        free_port(),
        free_port(),
        free_port(),
        free_port(),
        free_port(),
    ];
    let config = server_config(dir.path(), &ports);
    let (mut skiff, skiff_log) = start_skiff(dir.path(), "server", &config, &ports);
    let config_path = dir.path().join("server.json");
    let links: Vec<String> = skiff_share(&config_path, &["--pin", "--format", "links"])
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(links.len(), 6, "one link per user: {links:#?}");

    let echo = echo_server();
    let local: Vec<u16> = links.iter().map(|_| free_port()).collect();
    let mut inbounds = Vec::new();
    let mut outbounds = Vec::new();
    let mut rules = Vec::new();
    for (i, link) in links.iter().enumerate() {
        inbounds.push(
            serde_json::json!({ "tag": format!("in{i}"), "listen": "127.0.0.1",
            "port": local[i], "protocol": "dokodemo-door",
            "settings": { "address": "127.0.0.1", "port": echo, "network": "tcp" } }),
        );
        outbounds.push(outbound_from_link(link, &format!("out{i}")));
        rules.push(
            serde_json::json!({ "type": "field", "inboundTag": [format!("in{i}")],
            "outboundTag": format!("out{i}") }),
        );
    }
    let client = serde_json::json!({ "log": { "loglevel": "warning" }, "inbounds": inbounds,
        "outbounds": outbounds, "routing": { "rules": rules } })
    .to_string();
    let client_path = dir.path().join("client.json");
    std::fs::write(&client_path, &client).unwrap();
    let log = dir.path().join("client.out");
    let file = std::fs::File::create(&log).unwrap();
    let child = Command::new(&xray)
        .arg("run")
        .arg("-c")
        .arg(&client_path)
        .stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .unwrap();
    let mut xray_proc = Proc {
        child,
        what: "xray",
    };
    wait_ports(&mut xray_proc, &local, &log);
    for (i, link) in links.iter().enumerate() {
        round_trip(local[i], i as u64 + 1, link);
    }
    assert_healthy(&mut skiff, &skiff_log);
}

/// Reads the terminal QR code (half blocks: a block half is a light module) into a PGM image,
/// 4 pixels per module.
fn qr_image(lines: &[&str], path: &Path) {
    let mut rows: Vec<Vec<bool>> = Vec::new();
    for line in lines {
        let (mut top, mut bottom) = (Vec::new(), Vec::new());
        for c in line.chars() {
            let (t, b) = match c {
                '█' => (true, true),
                '▀' => (true, false),
                '▄' => (false, true),
                ' ' => (false, false),
                other => panic!("unexpected character {other:?} in the QR code"),
            };
            top.push(t);
            bottom.push(b);
        }
        rows.push(top);
        rows.push(bottom);
    }
    let scale = 4;
    let width = rows.iter().map(Vec::len).max().unwrap();
    let mut pgm = format!("P5\n{} {}\n255\n", width * scale, rows.len() * scale).into_bytes();
    for row in &rows {
        for _ in 0..scale {
            for x in 0..width {
                let light = row.get(x).copied().unwrap_or(false);
                pgm.extend(std::iter::repeat_n(if light { 255u8 } else { 0 }, scale));
            }
        }
    }
    std::fs::write(path, pgm).unwrap();
}

#[test]
fn the_qr_code_decodes_to_the_link() {
    let Some(zbarimg) = tool("zbarimg", &["/usr/bin/zbarimg"]) else {
        return;
    };
    let dir = TempDir::new("share-qr");
    let ports = [
        free_port(),
        free_port(),
        free_port(),
        free_port(),
        free_port(),
        free_port(),
    ];
    let config_path = dir.path().join("server.json");
    std::fs::write(&config_path, server_config(dir.path(), &ports)).unwrap();
    for inbound in ["vmess-ws", "ss-2022", "trojan-tls"] {
        let text = skiff_share(&config_path, &["--inbound", inbound]);
        let lines: Vec<&str> = text.lines().collect();
        let link = lines[1];
        let image = dir.path().join(format!("{inbound}.pgm"));
        qr_image(&lines[2..], &image);
        let out = Command::new(&zbarimg)
            .args(["--raw", "-q"])
            .arg(&image)
            .output()
            .unwrap();
        assert!(out.status.success(), "zbarimg found no code for {inbound}");
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim_end(), link);
    }
}
