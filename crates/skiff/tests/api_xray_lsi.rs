//! `xray api lsi` (ListInbounds, the full form) against Xray and against Skiff running the
//! same config, with Xray's own CLI as the client (XRAY_BIN, else `../shared/peers/bin/xray`):
//! the printed JSON must be the same, key for key, for inbounds covering every transport
//! Skiff lists (raw with and without `rawSettings` and its `header`, the HTTP header,
//! WebSocket and HTTPUpgrade with early data in the path, gRPC), TLS with certificate files
//! and inline, sniffing, VLESS and Trojan fallbacks, SOCKS, HTTP, Shadowsocks AEAD-2017
//! single and multi-user, 2022 single-user, a tunnel with followRedirect, REALITY, and an
//! inbound without `streamSettings`.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use serde_json::{Value, json};

fn xray() -> Option<PathBuf> {
    shared_peer("xray", "XRAY_BIN")
}

/// The inbounds, on ports from `port` up (one each), plus the API.
fn config(port: u16, api: u16, cert: &Path, key: &Path) -> String {
    let pem_lines = |path: &Path| -> Value {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(Value::from)
            .collect()
    };
    let vless = |tag: &str, n: u16, stream: Option<Value>| {
        let mut inbound = json!({ "tag": tag, "listen": "127.0.0.1", "port": port + n,
            "protocol": "vless",
            "settings": { "decryption": "none",
                "clients": [{ "id": UUID, "email": format!("{tag}@x") }] } });
        if let Some(stream) = stream {
            inbound["streamSettings"] = stream;
        }
        inbound
    };
    let tls_files = json!({ "certificates": [{ "certificateFile": cert, "keyFile": key }] });
    let mut inbounds = vec![
        vless("none", 0, None),
        vless("raw", 1, Some(json!({ "network": "tcp" }))),
        vless(
            "raw-header-none",
            2,
            Some(json!({ "network": "raw", "security": "none",
                "rawSettings": { "header": { "type": "none" } } })),
        ),
        vless(
            "raw-http-header",
            3,
            Some(
                json!({ "network": "tcp", "tcpSettings": { "header": { "type": "http",
                "request": { "version": "1.1", "method": "GET", "path": ["/a", "/b"],
                    "headers": { "Host": ["h.example"], "Accept": ["*/*", "text/html"] } },
                "response": { "version": "1.1", "status": "200", "reason": "OK",
                    "headers": { "Content-Type": ["text/plain"] } } } } }),
            ),
        ),
        vless(
            "ws",
            4,
            Some(
                json!({ "network": "ws", "wsSettings": { "path": "/w?ed=2048",
                "host": "h.example", "headers": { "X-A": "b" } } }),
            ),
        ),
        vless("ws-bare", 5, Some(json!({ "network": "ws" }))),
        vless(
            "httpupgrade",
            6,
            Some(json!({ "network": "httpupgrade",
                "httpupgradeSettings": { "path": "/u?ed=512", "host": "u.example" } })),
        ),
        vless(
            "grpc",
            7,
            Some(json!({ "network": "grpc", "grpcSettings": { "serviceName": "svc" } })),
        ),
        vless(
            "tls-files",
            8,
            Some(json!({ "network": "tcp", "security": "tls", "tlsSettings": tls_files })),
        ),
        vless(
            "tls-inline",
            9,
            Some(json!({ "security": "tls", "tlsSettings": {
                "serverName": "s.example", "alpn": ["http/1.1"], "minVersion": "1.2",
                "rejectUnknownSni": true,
                "certificates": [{ "certificate": pem_lines(cert), "key": pem_lines(key) }] } })),
        ),
        json!({ "tag": "sniffing", "listen": "127.0.0.1", "port": port + 10,
            "protocol": "socks", "settings": {},
            "sniffing": { "enabled": true, "destOverride": ["http", "tls"], "routeOnly": true } }),
        json!({ "tag": "socks-auth", "listen": "127.0.0.1", "port": port + 11,
            "protocol": "socks", "settings": { "auth": "password", "udp": true,
                "ip": "127.0.0.1", "userLevel": 1,
                "accounts": [{ "user": "u", "pass": "p" }, { "user": "v", "pass": "q" }] } }),
        json!({ "tag": "http", "listen": "127.0.0.1", "port": port + 12, "protocol": "http",
            "settings": { "accounts": [{ "user": "u", "pass": "p" }],
                "allowTransparent": true, "userLevel": 2 } }),
        json!({ "tag": "ss-single", "listen": "127.0.0.1", "port": port + 13,
            "protocol": "shadowsocks", "settings": { "method": "chacha20-ietf-poly1305",
                "password": "pw", "email": "e@x", "level": 1, "network": "tcp,udp" } }),
        json!({ "tag": "ss-multi", "listen": "127.0.0.1", "port": port + 14,
            "protocol": "shadowsocks", "settings": { "clients": [
                { "method": "aes-256-gcm", "password": "a", "email": "a@x" },
                { "method": "aes-128-gcm", "password": "b", "email": "b@x", "level": 1 }] } }),
        json!({ "tag": "ss-2022", "listen": "127.0.0.1", "port": port + 15,
            "protocol": "shadowsocks", "settings": { "method": "2022-blake3-aes-128-gcm",
                "password": "AAAAAAAAAAAAAAAAAAAAAA==" } }),
        json!({ "tag": "redirect", "listen": "127.0.0.1", "port": port + 16,
            "protocol": "dokodemo-door",
            "settings": { "network": "tcp", "followRedirect": true } }),
        json!({ "tag": "trojan-fallbacks", "listen": "127.0.0.1", "port": port + 17,
            "protocol": "trojan", "settings": {
                "clients": [{ "password": "pw", "email": "t@x" }],
                "fallbacks": [{ "dest": 8080 }, { "path": "/ws", "dest": "127.0.0.1:8081", "xver": 1 },
                    { "alpn": "h2", "dest": "/run/skiff-test.sock" }] },
            "streamSettings": { "network": "tcp", "security": "tls", "tlsSettings": tls_files } }),
    ];
    inbounds.push(vless(
        "reality",
        19,
        Some(json!({ "network": "tcp", "security": "reality", "realitySettings": {
            "target": "example.com:443", "xver": 1, "serverNames": ["example.com", "www.example.com"],
            "privateKey": "AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA",
            "shortIds": ["", "0123abcd"], "maxTimeDiff": 60000,
            "limitFallbackUpload": { "afterBytes": 1024 } } })),
    ));
    let mut with_fallbacks = vless("vless-fallbacks", 18, Some(json!({ "network": "tcp" })));
    with_fallbacks["settings"]["fallbacks"] =
        json!([{ "dest": "80" }, { "name": "a.example", "dest": "[::1]:81" }]);
    inbounds.push(with_fallbacks);
    json!({
        "log": { "loglevel": "warning" },
        "api": { "tag": "api", "listen": format!("127.0.0.1:{api}"),
            "services": ["HandlerService"] },
        "inbounds": inbounds,
        "outbounds": [{ "protocol": "freedom" }],
    })
    .to_string()
}

/// The full `lsi` answer sorted by tag (Xray keeps handlers in a map: its order changes
/// from run to run), pretty-printed.
fn lsi(xray: &Path, api: u16) -> String {
    wait_xray_api(xray, api, &["lsi", "-isOnlyTags=true"]);
    let (ok, text) = xray_api(xray, api, "lsi", &[]);
    assert!(ok, "lsi failed: {text}");
    let mut v: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("lsi: not JSON ({e}): {text}"));
    v["inbounds"]
        .as_array_mut()
        .unwrap_or_else(|| panic!("lsi: no inbounds: {text}"))
        .sort_by_key(|i| i["tag"].as_str().unwrap_or_default().to_string());
    serde_json::to_string_pretty(&v).unwrap()
}

#[test]
fn list_inbounds_prints_what_xray_prints() {
    let Some(xray) = xray() else { return };
    let dir = TempDir::new("api-lsi");
    let (cert, key) = certificate(dir.path());
    // 20 consecutive free ports for the inbounds (the answers name them, so both runs use
    // the same), then the API's.
    let first = (0..50)
        .map(|_| free_port())
        .find(|&p| {
            p < 65000 && (p..p + 20).all(|q| std::net::TcpListener::bind(("127.0.0.1", q)).is_ok())
        })
        .expect("no 20 free consecutive ports");
    let api = free_port();
    let text = config(first, api, &cert, &key);
    let xray_said = {
        let (_proc, _) = start_peer(&xray, "xray", dir.path(), "xray", &text, api, false);
        lsi(&xray, api)
    };
    let skiff_said = {
        let (mut proc, log) = start_skiff(dir.path(), "skiff", &text, &[api, first + 18]);
        let said = lsi(&xray, api);
        assert_healthy(&mut proc, &log);
        said
    };
    // Not vacuous: the answer carries what this test is about.
    for needle in [
        "\"certificatePath\"",
        "\"OneTimeLoading\": true",
        "xray.transport.internet.headers.http.Config",
        "xray.transport.internet.headers.noop.ConnectionConfig",
        "\"ed\": 2048",
        "xray.transport.internet.grpc.encoding.Config",
        "\"sniffingSettings\"",
        "\"fallbacks\"",
        "\"receiveOriginalDestination\": true",
        "\"udpEnabled\": true",
        "xray.proxy.shadowsocks_2022.ServerConfig",
        "xray.transport.internet.reality.Config",
        "\"shortIds\"",
    ] {
        assert!(
            xray_said.contains(needle),
            "{needle} not in Xray's answer:\n{xray_said}"
        );
    }
    if xray_said != skiff_said {
        let x: Vec<&str> = xray_said.lines().collect();
        let s: Vec<&str> = skiff_said.lines().collect();
        let first_difference = x
            .iter()
            .zip(&s)
            .position(|(a, b)| a != b)
            .unwrap_or(x.len().min(s.len()));
        let from = first_difference.saturating_sub(30);
        panic!(
            "lsi differs from line {first_difference}:\n-- Xray:\n{}\n-- Skiff:\n{}",
            x[from..(first_difference + 10).min(x.len())].join("\n"),
            s[from..(first_difference + 10).min(s.len())].join("\n"),
        );
    }
}
