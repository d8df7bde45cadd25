//! `--format json`: a ready Xray client config for one endpoint (SOCKS on 127.0.0.1:10808
//! and HTTP on 127.0.0.1:10809 into the proxy, as Skiff's default config listens), which
//! both Xray and Skiff run.

use serde_json::{Value, json};

use super::endpoint::{Credential, Endpoint, Security};

pub fn client_config(e: &Endpoint) -> Value {
    json!({
        "log": { "loglevel": "warning" },
        "inbounds": [
            { "tag": "socks", "listen": "127.0.0.1", "port": 10808, "protocol": "socks",
              "settings": { "udp": true } },
            { "tag": "http", "listen": "127.0.0.1", "port": 10809, "protocol": "http" }
        ],
        "outbounds": [outbound(e), { "tag": "direct", "protocol": "freedom" }]
    })
}

/// The outbound that reaches the endpoint, tagged `proxy`.
pub fn outbound(e: &Endpoint) -> Value {
    let server = |user: Value| json!({ "address": e.address, "port": e.port, "users": [user] });
    let (protocol, settings) = match &e.credential {
        Credential::Vless { id, flow } => (
            "vless",
            json!({ "vnext": [server(json!({ "id": id, "encryption": "none",
                "flow": flow.unwrap_or_default() }))] }),
        ),
        Credential::Vmess { id } => (
            "vmess",
            json!({ "vnext": [server(json!({ "id": id, "security": "auto" }))] }),
        ),
        Credential::Trojan { password } => (
            "trojan",
            json!({ "servers": [{ "address": e.address, "port": e.port, "password": password }] }),
        ),
        Credential::Shadowsocks { method, password } => (
            "shadowsocks",
            json!({ "servers": [{ "address": e.address, "port": e.port, "method": method,
                "password": password }] }),
        ),
    };
    json!({ "tag": "proxy", "protocol": protocol, "settings": settings,
        "streamSettings": stream_settings(e) })
}

fn stream_settings(e: &Endpoint) -> Value {
    let t = &e.transport;
    let mut stream = json!({ "network": t.network });
    match t.network {
        "ws" => {
            stream["wsSettings"] = json!({ "path": t.path.clone().unwrap_or_default(),
                "host": t.host.clone().unwrap_or_default() })
        }
        "httpupgrade" => {
            stream["httpupgradeSettings"] = json!({ "path": t.path.clone().unwrap_or_default(),
                "host": t.host.clone().unwrap_or_default() })
        }
        "grpc" => {
            stream["grpcSettings"] = json!({
                "serviceName": t.service_name.clone().unwrap_or_default(),
                "multiMode": t.mode == Some("multi") })
        }
        "xhttp" => {
            stream["xhttpSettings"] = json!({ "path": t.path.clone().unwrap_or_default(),
                "host": t.host.clone().unwrap_or_default(), "mode": t.mode.unwrap_or("auto") })
        }
        "tcp" if t.header_type == Some("http") => {
            let mut request = json!({ "path": [t.path.clone().unwrap_or_else(|| "/".into())] });
            if let Some(host) = &t.host {
                request["headers"] = json!({ "Host": [host] });
            }
            stream["tcpSettings"] = json!({ "header": { "type": "http", "request": request } })
        }
        _ => {}
    }
    if let Security::Reality {
        server_name,
        public_key,
        short_id,
    } = &e.security
    {
        stream["security"] = json!("reality");
        stream["realitySettings"] = json!({ "serverName": server_name, "fingerprint": "chrome",
            "publicKey": public_key, "shortId": short_id, "spiderX": "/" });
    }
    if let Security::Tls {
        server_name,
        alpn,
        pinned_sha256,
    } = &e.security
    {
        stream["security"] = json!("tls");
        let mut tls = json!({});
        if let Some(name) = server_name {
            tls["serverName"] = json!(name);
        }
        if !alpn.is_empty() {
            tls["alpn"] = json!(alpn);
        }
        if let Some(pin) = pinned_sha256 {
            tls["pinnedPeerCertSha256"] = json!(pin);
        }
        stream["tlsSettings"] = tls;
    }
    stream
}
