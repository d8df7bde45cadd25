//! What the REALITY tests share: keys from `skiff x25519`, a local nginx as the target (TLS
//! 1.2 and 1.3 with its own certificate for `localhost`, a page with a marker), Skiff's and
//! Xray's REALITY server configs and Xray's client config.
#![allow(dead_code)] // Each test file uses its own subset.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;

/// The page nginx serves; a probe that reaches the target gets it.
pub const TARGET_MARKER: &str = "reality-target-page-5e21";
/// The short id the clients use; the servers also allow the empty one.
pub const SHORT_ID: &str = "0123456789abcdef";

pub struct Keys {
    pub private: String,
    pub public: String,
}

/// A fresh key pair from `skiff x25519`, in Xray's format.
pub fn keys() -> Keys {
    let out = Command::new(env!("CARGO_BIN_EXE_skiff"))
        .arg("x25519")
        .output()
        .expect("skiff x25519");
    assert!(out.status.success(), "skiff x25519: {out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let field = |prefix: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("no {prefix} in {text}"))
            .trim()
            .to_owned()
    };
    Keys {
        private: field("PrivateKey:"),
        public: field("Password (PublicKey):"),
    }
}

/// The target: nginx on `port` with TLS (its own certificate) serving [`TARGET_MARKER`].
/// Returns the process and the certificate's path.
pub fn start_target(nginx: &Path, dir: &Path, port: u16) -> (Proc, PathBuf) {
    let ndir = dir.join("nginx");
    std::fs::create_dir_all(&ndir).unwrap();
    let (cert, key) = certificate(&ndir);
    let root = site(&ndir, "target", TARGET_MARKER);
    let servers = format!(
        r#"    server {{
        listen 127.0.0.1:{port} ssl;
        server_name localhost;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        ssl_protocols TLSv1.2 TLSv1.3;
        root {root};
    }}"#,
        cert = cert.display(),
        key = key.display(),
        root = root.display()
    );
    (start_nginx(nginx, &ndir, &servers, &[port]), cert)
}

/// `realitySettings` of a server in front of the target on `target_port`.
pub fn server_reality(
    keys: &Keys,
    target_port: u16,
    extra: serde_json::Value,
) -> serde_json::Value {
    let mut settings = serde_json::json!({
        "show": true,
        "target": format!("127.0.0.1:{target_port}"),
        "serverNames": ["localhost"],
        "privateKey": keys.private,
        "shortIds": ["", SHORT_ID],
        // sing-box puts its own version (1.8.x) in the session ID: Xray's default minimum
        // (26.3.27) would refuse it.
        "minClientVer": "1.0.0"
    });
    for (k, v) in extra.as_object().into_iter().flatten() {
        settings[k] = v.clone();
    }
    settings
}

/// A VLESS server config (Skiff's or Xray's: the same JSON) on `port` with REALITY.
pub fn server_config(port: u16, flow: &str, reality: serde_json::Value, log: &Path) -> String {
    serde_json::json!({
        "log": { "loglevel": "debug", "error": log, "access": "none" },
        "inbounds": [{ "listen": "127.0.0.1", "port": port, "protocol": "vless",
            "settings": { "clients": [{ "id": UUID, "flow": flow }], "decryption": "none" },
            "streamSettings": { "network": "tcp", "security": "reality",
                "realitySettings": reality } }],
        "outbounds": [{ "protocol": "freedom",
            "settings": { "finalRules": [{ "action": "allow", "ip": ["127.0.0.0/8"] }] } }]
    })
    .to_string()
}

/// The ports of a client in the chain: it listens on `listen`, forwards to 127.0.0.1:`target`
/// through the REALITY server on `server`.
#[derive(Clone, Copy)]
pub struct Ports {
    pub listen: u16,
    pub target: u16,
    pub server: u16,
}

/// Xray's client: dokodemo-door (network "tcp" or "udp") through VLESS + REALITY.
pub fn xray_client_config(
    network: &str,
    ports: Ports,
    flow: &str,
    public: &str,
    short_id: &str,
    log: &Path,
) -> String {
    let Ports {
        listen,
        target,
        server,
    } = ports;
    serde_json::json!({
        "log": { "loglevel": "debug", "error": log, "access": "none" },
        "inbounds": [{ "listen": "127.0.0.1", "port": listen, "protocol": "dokodemo-door",
            "settings": { "address": "127.0.0.1", "port": target, "network": network } }],
        "outbounds": [{ "protocol": "vless",
            "settings": { "vnext": [{ "address": "127.0.0.1", "port": server,
                "users": [{ "id": UUID, "encryption": "none", "flow": flow }] }] },
            "streamSettings": { "network": "tcp", "security": "reality",
                "realitySettings": { "serverName": "localhost", "password": public,
                    "shortId": short_id, "fingerprint": "chrome" } } }]
    })
    .to_string()
}
