//! The implementations a row can run: Skiff itself and the peers found on the machine. Skiff,
//! Xray and V2Ray read the same Xray-format config (version quirks aside), so one generator
//! serves all three; the other peers are discovered and listed, and join the rows of the
//! protocols they speak as those protocols arrive in Skiff.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::combos::{Combination, Kind};
use crate::process::which;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    Skiff,
    Xray,
    V2ray,
    SingBox,
    Trojan,
    SsLibev,
    SsRust,
    Kcptun,
}

#[derive(Clone, Debug)]
pub struct Implementation {
    pub name: &'static str,
    pub flavor: Flavor,
    /// The client binary (B) and the server binary (C); the same for most.
    pub client: PathBuf,
    pub server: PathBuf,
    pub version: String,
}

/// Peer names `--peers` accepts, with the binaries that make them up.
const PEERS: &[(&str, Flavor, &str, &str)] = &[
    ("xray", Flavor::Xray, "xray", "xray"),
    ("v2ray", Flavor::V2ray, "v2ray", "v2ray"),
    ("sing-box", Flavor::SingBox, "sing-box", "sing-box"),
    ("trojan", Flavor::Trojan, "trojan", "trojan"),
    ("ss-libev", Flavor::SsLibev, "ss-local", "ss-server"),
    ("ss-rust", Flavor::SsRust, "sslocal", "ssserver"),
    ("kcptun", Flavor::Kcptun, "kcptun-client", "kcptun-server"),
];

pub fn peer_names() -> Vec<&'static str> {
    PEERS.iter().map(|p| p.0).collect()
}

pub fn skiff(path: PathBuf) -> Implementation {
    let version = version_of(&path, &["version"]);
    Implementation {
        name: "skiff",
        flavor: Flavor::Skiff,
        client: path.clone(),
        server: path,
        version,
    }
}

/// Finds peers: `auto` = every known peer on PATH; otherwise a comma list of names, each
/// optionally `name=PATH` (for a client/server pair, PATH is a directory holding both).
/// Returns the peers found and a note for each one asked for but missing.
pub fn discover(spec: &str) -> (Vec<Implementation>, Vec<String>) {
    let mut found = Vec::new();
    let mut missing = Vec::new();
    if spec == "none" || spec.is_empty() {
        return (found, missing);
    }
    let wanted: Vec<(String, Option<PathBuf>)> = if spec == "auto" {
        PEERS.iter().map(|p| (p.0.to_string(), None)).collect()
    } else {
        spec.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| match s.split_once('=') {
                Some((n, p)) => (n.to_string(), Some(PathBuf::from(p))),
                None => (s.to_string(), None),
            })
            .collect()
    };
    for (name, path) in wanted {
        let Some(&(pname, flavor, client_bin, server_bin)) = PEERS.iter().find(|p| p.0 == name)
        else {
            missing.push(format!(
                "unknown peer `{name}` (known: {})",
                peer_names().join(", ")
            ));
            continue;
        };
        let locate = |bin: &str| match &path {
            Some(p) if p.is_dir() => Some(p.join(bin)).filter(|c| c.is_file()),
            Some(p) => Some(p.clone()).filter(|c| c.is_file()),
            None => which(bin),
        };
        match (locate(client_bin), locate(server_bin)) {
            (Some(client), Some(server)) => {
                let version = version_of(&server, version_args(flavor));
                found.push(Implementation {
                    name: pname,
                    flavor,
                    client,
                    server,
                    version,
                });
            }
            _ if spec == "auto" => {}
            _ => missing.push(format!(
                "peer `{name}` not found ({client_bin}/{server_bin})"
            )),
        }
    }
    (found, missing)
}

fn version_args(flavor: Flavor) -> &'static [&'static str] {
    match flavor {
        Flavor::Skiff | Flavor::Xray | Flavor::SingBox => &["version"],
        Flavor::V2ray => &["-version"],
        Flavor::Trojan => &["-v"],
        Flavor::SsLibev => &["-h"],
        Flavor::SsRust => &["--version"],
        Flavor::Kcptun => &["-v"],
    }
}

/// The first line of the program's version output that holds a digit (bounded in time).
pub fn version_of(path: &Path, args: &[&str]) -> String {
    let child = Command::new(path)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let Ok(child) = child else {
        return "unknown".into();
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let pid = child.id();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let Ok(Ok(out)) = rx.recv_timeout(Duration::from_secs(5)) else {
        // SAFETY: ending the child we started, by PID.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        return "unknown".into();
    };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.clone().next();
    lines
        .find(|l| l.chars().any(|c| c.is_ascii_digit()))
        .or(first)
        .unwrap_or("unknown")
        .chars()
        .take(100)
        .collect()
}

/// Where each hop of a row listens.
#[derive(Clone, Debug)]
pub struct Hops {
    /// B's inbound, where A connects.
    pub b_listen: SocketAddr,
    /// C's inbound, where B connects (an address of C's namespace on the lossy link).
    pub c_listen: SocketAddr,
    /// D, where C connects.
    pub d: SocketAddr,
    /// C's certificate and key files, for combinations with TLS.
    pub certificate: Option<(PathBuf, PathBuf)>,
    /// Hex SHA-256 of C's certificate (DER): Xray 26 pins it, having dropped allowInsecure.
    pub certificate_sha256: Option<String>,
}

/// The id every bench row uses between B and C.
const BENCH_UUID: &str = "b831381d-6324-4d53-ad4f-8cda48b30811";

/// streamSettings of the proxied hop B → C (VLESS and VMess alike).
fn proxy_stream(tls: bool, ws: bool, role: Role, flavor: Flavor, hops: &Hops) -> Option<Value> {
    let mut stream = json!({ "network": if ws { "ws" } else { "tcp" } });
    if ws {
        stream["wsSettings"] = json!({ "path": "/bench" });
    }
    if tls {
        stream["security"] = json!("tls");
        stream["tlsSettings"] = match role {
            Role::Server => {
                let (cert, key) = hops.certificate.as_ref()?;
                json!({ "certificates": [{
                    "certificateFile": cert.display().to_string(),
                    "keyFile": key.display().to_string()
                }] })
            }
            // Xray 26 refuses allowInsecure; v2ray 4.34 knows no pinning by hash.
            Role::Client if flavor == Flavor::Xray => json!({
                "serverName": "bench.skiff",
                "pinnedPeerCertSha256": hops.certificate_sha256.as_deref()?
            }),
            Role::Client => json!({ "serverName": "bench.skiff", "allowInsecure": true }),
        };
    }
    Some(stream)
}

/// B: dokodemo-door on `listen` to `d`, carried by VLESS to C at `c`.
fn xray_vless_client(listen: SocketAddr, d: SocketAddr, c: SocketAddr, stream: Value) -> Value {
    json!({
        "log": { "loglevel": "warning", "access": "none" },
        "inbounds": [dokodemo(listen, d)],
        "outbounds": [{
            "tag": "to-c",
            "protocol": "vless",
            "settings": { "vnext": [{
                "address": c.ip().to_string(),
                "port": c.port(),
                "users": [{ "id": BENCH_UUID, "encryption": "none" }]
            }] },
            "streamSettings": stream
        }]
    })
}

/// B: dokodemo-door on `listen` to `d`, carried by VMess (AEAD: `alterId` 0, which v2ray 4.x
/// needs written and Xray ignores) with `security` to C at `c`.
fn xray_vmess_client(
    listen: SocketAddr,
    d: SocketAddr,
    c: SocketAddr,
    security: &str,
    stream: Value,
) -> Value {
    json!({
        "log": { "loglevel": "warning", "access": "none" },
        "inbounds": [dokodemo(listen, d)],
        "outbounds": [{
            "tag": "to-c",
            "protocol": "vmess",
            "settings": { "vnext": [{
                "address": c.ip().to_string(),
                "port": c.port(),
                "users": [{ "id": BENCH_UUID, "alterId": 0, "security": security }]
            }] },
            "streamSettings": stream
        }]
    })
}

/// C: VMess in on `listen`, freedom out.
fn xray_vmess_server(listen: SocketAddr, stream: Value) -> Value {
    json!({
        "log": { "loglevel": "warning", "access": "none" },
        "inbounds": [{
            "tag": "bench-in",
            "listen": listen.ip().to_string(),
            "port": listen.port(),
            "protocol": "vmess",
            "settings": { "clients": [{ "id": BENCH_UUID, "alterId": 0 }] },
            "streamSettings": stream
        }],
        "outbounds": [freedom()]
    })
}

/// C: VLESS in on `listen`, freedom out.
fn xray_vless_server(listen: SocketAddr, stream: Value) -> Value {
    json!({
        "log": { "loglevel": "warning", "access": "none" },
        "inbounds": [{
            "tag": "bench-in",
            "listen": listen.ip().to_string(),
            "port": listen.port(),
            "protocol": "vless",
            "settings": { "clients": [{ "id": BENCH_UUID }], "decryption": "none" },
            "streamSettings": stream
        }],
        "outbounds": [freedom()]
    })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Client,
    Server,
}

impl Implementation {
    pub fn supports(&self, combo: &Combination) -> bool {
        match combo.kind {
            Kind::Raw => false,
            Kind::Tunnel | Kind::Vless { .. } | Kind::Vmess { .. } => {
                matches!(self.flavor, Flavor::Skiff | Flavor::Xray | Flavor::V2ray)
            }
        }
    }

    /// The config file text for `role` in `combo`, if this implementation takes one.
    pub fn config(&self, combo: &Combination, role: Role, hops: &Hops) -> Option<String> {
        let value = match (combo.kind, self.flavor) {
            (Kind::Tunnel, Flavor::Skiff | Flavor::Xray | Flavor::V2ray) => {
                let (listen, to) = match role {
                    Role::Client => (hops.b_listen, hops.c_listen),
                    Role::Server => (hops.c_listen, hops.d),
                };
                xray_tunnel(listen, to)
            }
            (Kind::Vless { tls, ws }, Flavor::Skiff | Flavor::Xray | Flavor::V2ray) => {
                let stream = proxy_stream(tls, ws, role, self.flavor, hops)?;
                match role {
                    Role::Client => xray_vless_client(hops.b_listen, hops.d, hops.c_listen, stream),
                    Role::Server => xray_vless_server(hops.c_listen, stream),
                }
            }
            (Kind::Vmess { cipher, tls, ws }, Flavor::Skiff | Flavor::Xray | Flavor::V2ray) => {
                let stream = proxy_stream(tls, ws, role, self.flavor, hops)?;
                match role {
                    Role::Client => xray_vmess_client(
                        hops.b_listen,
                        hops.d,
                        hops.c_listen,
                        cipher.security(),
                        stream,
                    ),
                    Role::Server => xray_vmess_server(hops.c_listen, stream),
                }
            }
            _ => return None,
        };
        serde_json::to_string_pretty(&value).ok()
    }

    /// The command that runs `role` with the config at `config`.
    pub fn command(&self, role: Role, config: &Path) -> Command {
        let bin = match role {
            Role::Client => &self.client,
            Role::Server => &self.server,
        };
        let mut cmd = Command::new(bin);
        match self.flavor {
            Flavor::Skiff | Flavor::Xray | Flavor::SingBox => {
                cmd.arg("run").arg("-c").arg(config);
            }
            Flavor::V2ray => {
                cmd.arg("-config").arg(config);
                // v2ray looks for geo files beside its config when asked to.
                if let Some(dir) = config.parent() {
                    cmd.env("V2RAY_LOCATION_ASSET", dir)
                        .env("XRAY_LOCATION_ASSET", dir);
                }
            }
            Flavor::Trojan | Flavor::SsLibev | Flavor::SsRust | Flavor::Kcptun => {
                cmd.arg("-c").arg(config);
            }
        }
        cmd
    }
}

/// The dokodemo-door inbound B uses as A's entry: `listen`, forwarding to `to`.
fn dokodemo(listen: SocketAddr, to: SocketAddr) -> Value {
    json!({
        "tag": "bench-in",
        "listen": listen.ip().to_string(),
        "port": listen.port(),
        "protocol": "dokodemo-door",
        "settings": { "address": to.ip().to_string(), "port": to.port(), "network": "tcp" }
    })
}

/// Freedom out. Its `finalRules` let Xray 26 reach loopback and the link's private addresses
/// (older versions and Skiff accept the allow rule as a no-op).
fn freedom() -> Value {
    json!({
        "tag": "direct",
        "protocol": "freedom",
        "settings": { "finalRules": [{ "action": "allow", "ip": ["127.0.0.0/8", "10.0.0.0/8"] }] }
    })
}

/// Xray-format port forward with quiet logs: dokodemo-door on `listen` to `to`, freedom out.
fn xray_tunnel(listen: SocketAddr, to: SocketAddr) -> Value {
    json!({
        "log": { "loglevel": "warning", "access": "none" },
        "inbounds": [dokodemo(listen, to)],
        "outbounds": [freedom()]
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::combos::ALL;

    fn hops() -> Hops {
        Hops {
            b_listen: "127.0.0.1:1001".parse().unwrap(),
            c_listen: "127.0.0.1:1002".parse().unwrap(),
            d: "127.0.0.1:1003".parse().unwrap(),
            certificate: Some(("/tmp/c.pem".into(), "/tmp/k.pem".into())),
            certificate_sha256: None,
        }
    }

    #[test]
    fn tunnel_configs_chain_b_to_c_to_d() {
        let imp = skiff(PathBuf::from("/bin/true"));
        let tunnel = ALL.iter().find(|c| c.kind == Kind::Tunnel).unwrap();
        let client: Value =
            serde_json::from_str(&imp.config(tunnel, Role::Client, &hops()).unwrap()).unwrap();
        assert_eq!(client["inbounds"][0]["port"], 1001);
        assert_eq!(client["inbounds"][0]["settings"]["port"], 1002);
        let server: Value =
            serde_json::from_str(&imp.config(tunnel, Role::Server, &hops()).unwrap()).unwrap();
        assert_eq!(server["inbounds"][0]["port"], 1002);
        assert_eq!(server["inbounds"][0]["settings"]["port"], 1003);
        assert_eq!(server["outbounds"][0]["protocol"], "freedom");
    }

    #[test]
    fn raw_has_no_implementation_and_peers_only_run_what_they_speak() {
        let raw = ALL.iter().find(|c| c.kind == Kind::Raw).unwrap();
        let tunnel = ALL.iter().find(|c| c.kind == Kind::Tunnel).unwrap();
        let v2 = Implementation {
            name: "v2ray",
            flavor: Flavor::V2ray,
            client: "v2ray".into(),
            server: "v2ray".into(),
            version: String::new(),
        };
        assert!(!v2.supports(raw));
        assert!(v2.supports(tunnel));
        let ss = Implementation {
            flavor: Flavor::SsLibev,
            name: "ss-libev",
            ..v2.clone()
        };
        assert!(!ss.supports(tunnel));
        let cmd = v2.command(Role::Server, Path::new("/tmp/x/c.json"));
        let args: Vec<_> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(args, ["-config", "/tmp/x/c.json"]);
    }

    #[test]
    fn skiff_accepts_the_generated_configs() {
        let imp = skiff(PathBuf::from("/bin/true"));
        // Real certificate files: the loader reads them.
        let dir = std::env::temp_dir().join(format!("skiff-bench-impls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let certified = rcgen::generate_simple_self_signed(vec!["bench.skiff".into()]).unwrap();
        let (cert, key) = (dir.join("c.pem"), dir.join("k.pem"));
        std::fs::write(&cert, certified.cert.pem()).unwrap();
        std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
        let hops = Hops {
            certificate: Some((cert, key)),
            ..hops()
        };
        for combo in ALL.iter().filter(|c| imp.supports(c)) {
            for role in [Role::Client, Role::Server] {
                let text = imp.config(combo, role, &hops).unwrap();
                let loaded = skiff_config::load_sources(&[skiff_config::Source {
                    name: "gen.json".into(),
                    text,
                }]);
                let loaded = loaded.unwrap_or_else(|e| panic!("{}: {e:?}", combo.name));
                assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn vmess_configs_name_the_cipher_and_alter_id_zero() {
        let imp = skiff(PathBuf::from("/bin/true"));
        let chacha = ALL.iter().find(|c| c.name == "vmess-chacha").unwrap();
        let client: Value =
            serde_json::from_str(&imp.config(chacha, Role::Client, &hops()).unwrap()).unwrap();
        let user = &client["outbounds"][0]["settings"]["vnext"][0]["users"][0];
        assert_eq!(user["security"], "chacha20-poly1305");
        assert_eq!(user["alterId"], 0);
        let ws_tls = ALL.iter().find(|c| c.name == "vmess-ws-tls").unwrap();
        let server: Value =
            serde_json::from_str(&imp.config(ws_tls, Role::Server, &hops()).unwrap()).unwrap();
        assert_eq!(server["inbounds"][0]["protocol"], "vmess");
        assert_eq!(server["inbounds"][0]["streamSettings"]["network"], "ws");
        assert_eq!(server["inbounds"][0]["streamSettings"]["security"], "tls");
    }

    #[test]
    fn discovery_reports_unknown_and_missing_peers() {
        let (found, missing) = discover("nonesuch,kcptun=/definitely/missing");
        assert!(found.is_empty());
        assert_eq!(missing.len(), 2);
        assert!(discover("none").0.is_empty());
    }
}
