//! The implementations a row can run: Skiff itself and the peers found on the machine. Skiff,
//! Xray and V2Ray read the same Xray-format config (version quirks aside), so one generator
//! serves all three; the other peers are discovered and listed, and join the rows of the
//! protocols they speak as those protocols arrive in Skiff.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::combos::{Combination, KcpCarrier, KcpWindows, Kind};
use crate::faketcp::Relays;
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
    // B is a port forward: ss-tunnel (its target comes from the config's tunnel_address).
    ("ss-libev", Flavor::SsLibev, "ss-tunnel", "ss-server"),
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

/// Finds peers: `auto` = every known peer on PATH (Xray and sing-box also through XRAY_BIN and
/// SING_BOX_BIN, or in the project's `../shared/peers/bin`, where the interop tests find them);
/// otherwise a comma list of names, each optionally `name=PATH` (for a client/server pair,
/// PATH is a directory holding both).
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
            None => which(bin).or_else(|| shared_peer(flavor, bin)),
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

/// The prebuilt Xray or sing-box the project keeps beside it, or one XRAY_BIN or
/// SING_BOX_BIN names.
fn shared_peer(flavor: Flavor, bin: &str) -> Option<PathBuf> {
    let var = match flavor {
        Flavor::Xray => "XRAY_BIN",
        Flavor::SingBox => "SING_BOX_BIN",
        _ => return None,
    };
    crate::process::find_peer_bin(var, bin)
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
    /// The run's TCP congestion control (`--cc`), written into Skiff's configs: the peers take
    /// the namespace's default, and Skiff must too rather than its loopback rule's Reno.
    pub tcp_congestion: Option<String>,
    /// Where C's REALITY dials its target, for [`Kind::VlessVisionReality`].
    pub reality_target: Option<SocketAddr>,
    /// The loopback hops of a row carried over udp2raw's fake TCP
    /// ([`KcpCarrier::FakeTcp`]); None for every other row.
    pub relays: Option<Relays>,
}

/// The id every bench row uses between B and C.
pub(crate) const BENCH_UUID: &str = "b831381d-6324-4d53-ad4f-8cda48b30811";
/// The password every Trojan row uses between B and C.
pub(crate) const BENCH_PASSWORD: &str = "skiff bench";
/// TLS 1.3 suites for trojan-gfw (OpenSSL), AES-128-GCM first: OpenSSL would otherwise pick
/// AES-256-GCM, while rustls and Go pick AES-128-GCM, and the rows would not compare alike.
const OPENSSL_TLS13: &str =
    "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256:TLS_AES_256_GCM_SHA384";

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

/// streamSettings of the mKCP hop: v2ray 4.34's default kcpSettings, written out so that a
/// change of default on either side cannot make the two ends differ. `readBufferSize` and
/// `writeBufferSize` are in MB.
fn mkcp_stream() -> Value {
    json!({
        "network": "kcp",
        "kcpSettings": {
            "mtu": 1350,
            "tti": 50,
            "uplinkCapacity": 5,
            "downlinkCapacity": 20,
            "congestion": false,
            "readBufferSize": 2,
            "writeBufferSize": 2,
            "header": { "type": "none" }
        }
    })
}

/// B: dokodemo-door on `listen` to `d`, carried by VLESS to C at `c`.
fn xray_vless_client(
    listen: SocketAddr,
    d: SocketAddr,
    c: SocketAddr,
    stream: Value,
    flow: &str,
) -> Value {
    json!({
        "log": { "loglevel": "warning", "access": "none" },
        "inbounds": [dokodemo(listen, d)],
        "outbounds": [{
            "tag": "to-c",
            "protocol": "vless",
            "settings": { "vnext": [{
                "address": c.ip().to_string(),
                "port": c.port(),
                "users": [with_flow(json!({ "id": BENCH_UUID, "encryption": "none" }), flow)]
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
/// A VLESS user object with `flow` set when there is one (v2ray 4.34 knows no flows).
fn with_flow(mut user: Value, flow: &str) -> Value {
    if !flow.is_empty()
        && let Some(object) = user.as_object_mut()
    {
        object.insert("flow".into(), json!(flow));
    }
    user
}

fn xray_vless_server(listen: SocketAddr, stream: Value, flow: &str) -> Value {
    json!({
        "log": { "loglevel": "warning", "access": "none" },
        "inbounds": [{
            "tag": "bench-in",
            "listen": listen.ip().to_string(),
            "port": listen.port(),
            "protocol": "vless",
            "settings": {
                "clients": [with_flow(json!({ "id": BENCH_UUID }), flow)],
                "decryption": "none"
            },
            "streamSettings": stream
        }],
        "outbounds": [freedom()]
    })
}

/// B: dokodemo-door on `listen` to `d`, carried by Trojan to C at `c`.
fn xray_trojan_client(listen: SocketAddr, d: SocketAddr, c: SocketAddr, stream: Value) -> Value {
    json!({
        "log": { "loglevel": "warning", "access": "none" },
        "inbounds": [dokodemo(listen, d)],
        "outbounds": [{
            "tag": "to-c",
            "protocol": "trojan",
            "settings": { "servers": [{
                "address": c.ip().to_string(),
                "port": c.port(),
                "password": BENCH_PASSWORD
            }] },
            "streamSettings": stream
        }]
    })
}

/// C: Trojan in on `listen`, freedom out.
fn xray_trojan_server(listen: SocketAddr, stream: Value) -> Value {
    json!({
        "log": { "loglevel": "warning", "access": "none" },
        "inbounds": [{
            "tag": "bench-in",
            "listen": listen.ip().to_string(),
            "port": listen.port(),
            "protocol": "trojan",
            "settings": { "clients": [{ "password": BENCH_PASSWORD }] },
            "streamSettings": stream
        }],
        "outbounds": [freedom()]
    })
}

/// trojan-gfw's own format. B runs `forward` (a fixed target: A's traffic to D, like the
/// dokodemo-door of the other rows); C runs `server`, whose `remote_addr` (the fallback for
/// non-Trojan traffic, never used by the bench) points at D. No certificate check on B: the
/// bench's certificate is self-signed, as with the other peers' allowInsecure.
fn trojan_gfw(role: Role, hops: &Hops) -> Option<Value> {
    let tcp = json!({ "no_delay": true, "keep_alive": true, "reuse_port": false,
                      "fast_open": false, "fast_open_qlen": 20 });
    Some(match role {
        Role::Client => json!({
            "run_type": "forward",
            "local_addr": hops.b_listen.ip().to_string(),
            "local_port": hops.b_listen.port(),
            "remote_addr": hops.c_listen.ip().to_string(),
            "remote_port": hops.c_listen.port(),
            "target_addr": hops.d.ip().to_string(),
            "target_port": hops.d.port(),
            "password": [BENCH_PASSWORD],
            "udp_timeout": 60,
            "log_level": 3,
            "ssl": {
                "verify": false, "verify_hostname": false, "cert": "", "sni": "bench.skiff",
                "cipher_tls13": OPENSSL_TLS13, "alpn": ["h2", "http/1.1"],
                "reuse_session": true, "session_ticket": false, "curves": ""
            },
            "tcp": tcp
        }),
        Role::Server => {
            let (cert, key) = hops.certificate.as_ref()?;
            json!({
                "run_type": "server",
                "local_addr": hops.c_listen.ip().to_string(),
                "local_port": hops.c_listen.port(),
                "remote_addr": hops.d.ip().to_string(),
                "remote_port": hops.d.port(),
                "password": [BENCH_PASSWORD],
                "log_level": 3,
                "ssl": {
                    "cert": cert.display().to_string(), "key": key.display().to_string(),
                    "key_password": "", "cipher_tls13": OPENSSL_TLS13,
                    "prefer_server_cipher": true, "alpn": ["http/1.1"], "reuse_session": true,
                    "session_ticket": false, "session_timeout": 600, "plain_http_response": "",
                    "curves": "", "dhparam": ""
                },
                "tcp": tcp,
                "mysql": { "enabled": false }
            })
        }
    })
}

/// The password every Shadowsocks bench row uses: a 16-byte base64 key for 2022 (which takes
/// keys, not passwords), a plain password otherwise.
pub(crate) fn ss_password(method: &str) -> &'static str {
    if method.starts_with("2022-") {
        "c2tpZmYgYmVuY2gga2V5IQ=="
    } else {
        "skiff-bench-password"
    }
}

/// B: dokodemo-door on `listen` to `d`, carried by Shadowsocks to C at `c`.
fn xray_ss_client(listen: SocketAddr, d: SocketAddr, c: SocketAddr, method: &str) -> Value {
    json!({
        "log": { "loglevel": "warning", "access": "none" },
        "inbounds": [dokodemo(listen, d)],
        "outbounds": [{
            "tag": "to-c",
            "protocol": "shadowsocks",
            "settings": { "servers": [{
                "address": c.ip().to_string(),
                "port": c.port(),
                "method": method,
                "password": ss_password(method)
            }] }
        }]
    })
}

/// C: Shadowsocks in on `listen`, freedom out.
fn xray_ss_server(listen: SocketAddr, method: &str) -> Value {
    json!({
        "log": { "loglevel": "warning", "access": "none" },
        "inbounds": [{
            "tag": "bench-in",
            "listen": listen.ip().to_string(),
            "port": listen.port(),
            "protocol": "shadowsocks",
            "settings": { "method": method, "password": ss_password(method), "network": "tcp" }
        }],
        "outbounds": [freedom()]
    })
}

/// shadowsocks-libev: ss-tunnel (B) forwarding to `d` through C, or ss-server (C).
fn ss_libev(role: Role, hops: &Hops, method: &str) -> Value {
    let mut config = json!({
        "server": hops.c_listen.ip().to_string(),
        "server_port": hops.c_listen.port(),
        "password": ss_password(method),
        "method": method,
        "mode": "tcp_only",
        "timeout": 300
    });
    if role == Role::Client {
        config["local_address"] = json!(hops.b_listen.ip().to_string());
        config["local_port"] = json!(hops.b_listen.port());
        config["tunnel_address"] = json!(hops.d.to_string());
    }
    config
}

/// The key both kcptun ends share in the bench.
const KCP_KEY: &str = "skiff bench kcp";

/// Skiff as a kcptun client (B: dokodemo-door → kcptun out) or server (C: kcptun in →
/// freedom to D), with kcptun's defaults but `mode` and `windows`; over fake TCP, the same
/// process also runs the udp2raw end of its side (see [`KcpCarrier::FakeTcp`]).
fn skiff_kcptun(
    role: Role,
    hops: &Hops,
    mode: &str,
    windows: KcpWindows,
    carrier: KcpCarrier,
) -> Option<Value> {
    let (sndwnd, rcvwnd) = windows.of(role == Role::Client);
    let relays = match carrier {
        KcpCarrier::Udp => None,
        KcpCarrier::FakeTcp => Some(hops.relays?),
    };
    let kcp_server = relays.map_or(hops.c_listen, |r| r.b);
    let kcp_listen = relays.map_or(hops.c_listen, |r| r.c);
    let mut config = match role {
        Role::Client => json!({
            "log": { "loglevel": "warning", "access": "none" },
            "inbounds": [dokodemo(hops.b_listen, hops.d)],
            "outbounds": [{
                "tag": "to-c",
                "protocol": "kcptun",
                "settings": {
                    "address": kcp_server.ip().to_string(),
                    "port": kcp_server.port(),
                    "key": KCP_KEY,
                    "mode": mode,
                    "sndwnd": sndwnd,
                    "rcvwnd": rcvwnd
                }
            }]
        }),
        Role::Server => json!({
            "log": { "loglevel": "warning", "access": "none" },
            "inbounds": [{
                "tag": "bench-in",
                "listen": kcp_listen.ip().to_string(),
                "port": kcp_listen.port(),
                "protocol": "kcptun",
                "settings": {
                    "target": hops.d.to_string(), "key": KCP_KEY, "mode": mode,
                    "sndwnd": sndwnd, "rcvwnd": rcvwnd
                }
            }],
            "outbounds": [freedom()]
        }),
    };
    if let Some(relays) = relays {
        crate::faketcp::add_skiff_end(&mut config, role == Role::Client, hops.c_listen, relays);
    }
    Some(config)
}

/// The real udp2raw beside kcptun on a fake-TCP row (see [`crate::faketcp::udp2raw_args`]).
pub fn udp2raw_command(udp2raw: &Path, role: Role, hops: &Hops) -> Option<Command> {
    let mut cmd = Command::new(udp2raw);
    cmd.args(crate::faketcp::udp2raw_args(
        role == Role::Client,
        hops.c_listen,
        hops.relays?,
    ));
    Some(cmd)
}

/// kcptun's own JSON (`-c`): the same keys as its flags.
fn kcptun(
    role: Role,
    hops: &Hops,
    mode: &str,
    windows: KcpWindows,
    carrier: KcpCarrier,
) -> Option<Value> {
    let (sndwnd, rcvwnd) = windows.of(role == Role::Client);
    let relays = match carrier {
        KcpCarrier::Udp => None,
        KcpCarrier::FakeTcp => Some(hops.relays?),
    };
    let remote = relays.map_or(hops.c_listen, |r| r.b);
    let listen = relays.map_or(hops.c_listen, |r| r.c);
    Some(match role {
        Role::Client => json!({
            "localaddr": hops.b_listen.to_string(),
            "remoteaddr": remote.to_string(),
            "key": KCP_KEY,
            "mode": mode,
            "sndwnd": sndwnd,
            "rcvwnd": rcvwnd,
            "quiet": true
        }),
        Role::Server => json!({
            "listen": listen.to_string(),
            "target": hops.d.to_string(),
            "key": KCP_KEY,
            "mode": mode,
            "sndwnd": sndwnd,
            "rcvwnd": rcvwnd,
            "quiet": true
        }),
    })
}

/// shadowsocks-rust: sslocal with a tunnel local (B), or ssserver (C).
fn ss_rust(role: Role, hops: &Hops, method: &str) -> Value {
    let server = json!({
        "server": hops.c_listen.ip().to_string(),
        "server_port": hops.c_listen.port(),
        "password": ss_password(method),
        "method": method,
        "mode": "tcp_only"
    });
    match role {
        Role::Server => json!({ "servers": [server] }),
        Role::Client => json!({
            "servers": [server],
            "locals": [{
                "protocol": "tunnel",
                "local_address": hops.b_listen.ip().to_string(),
                "local_port": hops.b_listen.port(),
                "forward_address": hops.d.ip().to_string(),
                "forward_port": hops.d.port(),
                "mode": "tcp_only"
            }]
        }),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Client,
    Server,
}

impl Implementation {
    pub fn supports(&self, combo: &Combination) -> bool {
        if self.flavor == Flavor::SingBox {
            return crate::singbox::supports(combo.kind);
        }
        match combo.kind {
            Kind::Raw => false,
            Kind::Tunnel | Kind::Vless { .. } | Kind::Trojan { ws: true } | Kind::Vmess { .. } => {
                matches!(self.flavor, Flavor::Skiff | Flavor::Xray | Flavor::V2ray)
            }
            Kind::Kcp { .. } => matches!(self.flavor, Flavor::Skiff | Flavor::Kcptun),
            // v2ray 4.34 is the mKCP peer Skiff is interop-tested with (tests/interop_mkcp.rs).
            Kind::Mkcp => matches!(self.flavor, Flavor::Skiff | Flavor::V2ray),
            // v2ray 4.34's gRPC predates Xray's; sing-box would need its own config format.
            Kind::VlessGrpc => matches!(self.flavor, Flavor::Skiff | Flavor::Xray),
            // Both are Xray's (2023 and 2024): v2ray 4.34 has neither; sing-box speaks
            // HTTPUpgrade (its own config format) but not XHTTP.
            Kind::VlessHttpUpgrade | Kind::VlessXhttp { .. } => {
                matches!(self.flavor, Flavor::Skiff | Flavor::Xray)
            }
            // v2ray 4.34 has no flows; sing-box speaks Vision in its own config format.
            Kind::VlessVision => matches!(self.flavor, Flavor::Skiff | Flavor::Xray),
            // v2ray 4.34 predates REALITY.
            Kind::VlessVisionReality => matches!(self.flavor, Flavor::Skiff | Flavor::Xray),
            Kind::Trojan { ws: false } => matches!(
                self.flavor,
                Flavor::Skiff | Flavor::Xray | Flavor::V2ray | Flavor::Trojan
            ),
            Kind::Shadowsocks { method } => match self.flavor {
                Flavor::Skiff | Flavor::Xray | Flavor::SsRust => true,
                // Neither v2ray 4.34 nor shadowsocks-libev speaks 2022.
                Flavor::V2ray | Flavor::SsLibev => !method.starts_with("2022-"),
                Flavor::SingBox | Flavor::Trojan | Flavor::Kcptun => false,
            },
        }
    }

    /// Why this implementation cannot measure `mode` at all, if it cannot: the plan then
    /// skips its rows as not supported by this peer, with this reason, instead of running
    /// them into a transfer error.
    pub fn cannot_measure(&self, mode: crate::traffic::Mode) -> Option<&'static str> {
        use crate::traffic::Mode;
        match (self.flavor, mode) {
            // ss-libev closes both directions at the first FIN (no TCP half-close), so the
            // sink's byte count after an upload never comes back.
            (Flavor::SsLibev, Mode::Upload | Mode::Both) => Some(
                "ss-libev has no TCP half-close (its first FIN closes both ways), measure it with -d download",
            ),
            _ => None,
        }
    }

    /// The config file text for `role` in `combo`, if this implementation takes one.
    pub fn config(&self, combo: &Combination, role: Role, hops: &Hops) -> Option<String> {
        let value = match (combo.kind, self.flavor) {
            (kind, Flavor::SingBox) => crate::singbox::config(kind, role, hops)?,
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
                    Role::Client => {
                        xray_vless_client(hops.b_listen, hops.d, hops.c_listen, stream, "")
                    }
                    Role::Server => xray_vless_server(hops.c_listen, stream, ""),
                }
            }
            (
                Kind::Kcp {
                    mode,
                    windows,
                    carrier,
                },
                Flavor::Skiff,
            ) => skiff_kcptun(role, hops, mode, windows, carrier)?,
            (
                Kind::Kcp {
                    mode,
                    windows,
                    carrier,
                },
                Flavor::Kcptun,
            ) => kcptun(role, hops, mode, windows, carrier)?,
            (Kind::Mkcp, Flavor::Skiff | Flavor::V2ray) => match role {
                Role::Client => {
                    xray_vless_client(hops.b_listen, hops.d, hops.c_listen, mkcp_stream(), "")
                }
                Role::Server => xray_vless_server(hops.c_listen, mkcp_stream(), ""),
            },
            (Kind::VlessGrpc, Flavor::Skiff | Flavor::Xray) => {
                let mut stream = proxy_stream(true, false, role, self.flavor, hops)?;
                stream["network"] = json!("grpc");
                stream["grpcSettings"] = json!({ "serviceName": "bench" });
                match role {
                    Role::Client => {
                        xray_vless_client(hops.b_listen, hops.d, hops.c_listen, stream, "")
                    }
                    Role::Server => xray_vless_server(hops.c_listen, stream, ""),
                }
            }
            (Kind::VlessVision, Flavor::Skiff | Flavor::Xray) => {
                let stream = proxy_stream(true, false, role, self.flavor, hops)?;
                let flow = "xtls-rprx-vision";
                match role {
                    Role::Client => {
                        xray_vless_client(hops.b_listen, hops.d, hops.c_listen, stream, flow)
                    }
                    Role::Server => xray_vless_server(hops.c_listen, stream, flow),
                }
            }
            (Kind::VlessHttpUpgrade, Flavor::Skiff | Flavor::Xray) => {
                let mut stream = proxy_stream(false, false, role, self.flavor, hops)?;
                stream["network"] = json!("httpupgrade");
                stream["httpupgradeSettings"] = json!({ "path": "/bench" });
                match role {
                    Role::Client => {
                        xray_vless_client(hops.b_listen, hops.d, hops.c_listen, stream, "")
                    }
                    Role::Server => xray_vless_server(hops.c_listen, stream, ""),
                }
            }
            (Kind::VlessXhttp { mode }, Flavor::Skiff | Flavor::Xray) => {
                let mut stream = proxy_stream(true, false, role, self.flavor, hops)?;
                stream["network"] = json!("xhttp");
                stream["xhttpSettings"] = json!({ "path": "/bench", "mode": mode });
                match role {
                    Role::Client => {
                        xray_vless_client(hops.b_listen, hops.d, hops.c_listen, stream, "")
                    }
                    Role::Server => xray_vless_server(hops.c_listen, stream, ""),
                }
            }
            (Kind::VlessVisionReality, Flavor::Skiff | Flavor::Xray) => {
                let stream = crate::reality::xray_stream(role, hops)?;
                let flow = "xtls-rprx-vision";
                match role {
                    Role::Client => {
                        xray_vless_client(hops.b_listen, hops.d, hops.c_listen, stream, flow)
                    }
                    Role::Server => xray_vless_server(hops.c_listen, stream, flow),
                }
            }
            (Kind::Trojan { ws }, Flavor::Skiff | Flavor::Xray | Flavor::V2ray) => {
                let stream = proxy_stream(true, ws, role, self.flavor, hops)?;
                match role {
                    Role::Client => {
                        xray_trojan_client(hops.b_listen, hops.d, hops.c_listen, stream)
                    }
                    Role::Server => xray_trojan_server(hops.c_listen, stream),
                }
            }
            (Kind::Trojan { ws: false }, Flavor::Trojan) => trojan_gfw(role, hops)?,
            (Kind::Shadowsocks { method }, Flavor::Skiff | Flavor::Xray | Flavor::V2ray) => {
                match role {
                    Role::Client => xray_ss_client(hops.b_listen, hops.d, hops.c_listen, method),
                    Role::Server => xray_ss_server(hops.c_listen, method),
                }
            }
            (Kind::Shadowsocks { method }, Flavor::SsLibev) => ss_libev(role, hops, method),
            (Kind::Shadowsocks { method }, Flavor::SsRust) => ss_rust(role, hops, method),
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
        let mut value = value;
        if let (Flavor::Skiff, Some(name)) = (self.flavor, &hops.tcp_congestion) {
            pin_congestion(&mut value, name);
        }
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

/// Sets `streamSettings.sockopt.tcpcongestion` on every inbound and outbound of an Xray-format
/// config, so each TCP connection Skiff accepts or dials uses `name` (see [`crate::fair_cc`]).
fn pin_congestion(config: &mut Value, name: &str) {
    for list in ["inbounds", "outbounds"] {
        let Some(entries) = config.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for entry in entries {
            // kcptun and udp2raw bring their own transports over UDP or raw IP and take no
            // streamSettings; a UDP dokodemo-door has no TCP to tune.
            let Some(entry) = entry.as_object_mut().filter(|e| {
                e.get("protocol") != Some(&json!("kcptun"))
                    && e.get("protocol") != Some(&json!("udp2raw"))
                    && e.get("settings").and_then(|s| s.get("network")) != Some(&json!("udp"))
            }) else {
                continue;
            };
            let stream = entry.entry("streamSettings").or_insert_with(|| json!({}));
            if let Some(stream) = stream.as_object_mut() {
                let sockopt = stream.entry("sockopt").or_insert_with(|| json!({}));
                if let Some(sockopt) = sockopt.as_object_mut() {
                    sockopt.insert("tcpcongestion".into(), json!(name));
                }
            }
        }
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
            tcp_congestion: None,
            reality_target: Some("127.0.0.1:1004".parse().unwrap()),
            relays: Some(Relays {
                b: "127.0.0.1:1005".parse().unwrap(),
                c: "127.0.0.1:1006".parse().unwrap(),
            }),
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
        // With the run's congestion control pinned, as every bench run writes them.
        let hops = Hops {
            certificate: Some((cert, key)),
            tcp_congestion: Some("reno".into()),
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
    fn skiffs_every_inbound_and_outbound_is_told_the_runs_congestion_control() {
        let skiff = skiff(PathBuf::from("/bin/true"));
        let v2ray = Implementation {
            name: "v2ray",
            flavor: Flavor::V2ray,
            ..skiff.clone()
        };
        let hops = Hops {
            tcp_congestion: Some("cubic".into()),
            ..hops()
        };
        let vless_tls = ALL.iter().find(|c| c.name == "vless-tls").unwrap();
        for role in [Role::Client, Role::Server] {
            let config: Value =
                serde_json::from_str(&skiff.config(vless_tls, role, &hops).unwrap()).unwrap();
            let mut seen = 0;
            for list in ["inbounds", "outbounds"] {
                for entry in config[list].as_array().unwrap() {
                    let cc = &entry["streamSettings"]["sockopt"]["tcpcongestion"];
                    assert_eq!(cc, "cubic", "{list} of {role:?}: {entry}");
                    seen += 1;
                }
            }
            assert_eq!(seen, 2, "{config}");
            // The TLS settings beside it are kept.
            let proxy = if role == Role::Client {
                &config["outbounds"][0]
            } else {
                &config["inbounds"][0]
            };
            assert_eq!(proxy["streamSettings"]["security"], "tls");
            // Peers take the namespace's default: nothing is written into theirs.
            let peer = v2ray.config(vless_tls, role, &hops).unwrap();
            assert!(!peer.contains("tcpcongestion"), "{peer}");
        }
        // No algorithm chosen: nothing pinned.
        let plain = skiff.config(vless_tls, Role::Client, &super::tests::hops());
        assert!(!plain.unwrap().contains("tcpcongestion"));
    }

    #[test]
    fn trojan_gfw_runs_trojan_tls_in_its_own_format() {
        let gfw = Implementation {
            name: "trojan",
            flavor: Flavor::Trojan,
            client: "trojan".into(),
            server: "trojan".into(),
            version: String::new(),
        };
        let by_name = |n: &str| ALL.iter().find(|c| c.name == n).unwrap();
        assert!(gfw.supports(by_name("trojan-tls")));
        assert!(!gfw.supports(by_name("trojan-ws-tls")));
        assert!(!gfw.supports(by_name("vless-tls")));
        let client: Value = serde_json::from_str(
            &gfw.config(by_name("trojan-tls"), Role::Client, &hops())
                .unwrap(),
        )
        .unwrap();
        assert_eq!(client["run_type"], "forward");
        assert_eq!(client["local_port"], 1001);
        assert_eq!(client["remote_port"], 1002);
        assert_eq!(client["target_port"], 1003);
        assert_eq!(client["password"][0], BENCH_PASSWORD);
        let server: Value = serde_json::from_str(
            &gfw.config(by_name("trojan-tls"), Role::Server, &hops())
                .unwrap(),
        )
        .unwrap();
        assert_eq!(server["run_type"], "server");
        assert_eq!(server["local_port"], 1002);
        assert_eq!(server["ssl"]["cert"], "/tmp/c.pem");
        let args: Vec<_> = gfw
            .command(Role::Client, Path::new("/tmp/b.json"))
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(args, ["-c", "/tmp/b.json"]);
    }

    #[test]
    fn shadowsocks_peers_get_their_own_configs() {
        let ss = |name, flavor| Implementation {
            name,
            flavor,
            client: "c".into(),
            server: "s".into(),
            version: String::new(),
        };
        let libev = ss("ss-libev", Flavor::SsLibev);
        let rust = ss("ss-rust", Flavor::SsRust);
        let v2 = ss("v2ray", Flavor::V2ray);
        let find = |n: &str| ALL.iter().find(|c| c.name == n).unwrap();
        let (aes, ss2022) = (find("ss-aes-128-gcm"), find("ss-2022"));
        assert!(libev.supports(aes) && !libev.supports(ss2022));
        assert!(v2.supports(aes) && !v2.supports(ss2022));
        assert!(rust.supports(aes) && rust.supports(ss2022));
        let b: Value =
            serde_json::from_str(&libev.config(aes, Role::Client, &hops()).unwrap()).unwrap();
        assert_eq!(b["tunnel_address"], "127.0.0.1:1003");
        assert_eq!(b["local_port"], 1001);
        assert_eq!(b["server_port"], 1002);
        assert_eq!(b["method"], "aes-128-gcm");
        let c: Value =
            serde_json::from_str(&libev.config(aes, Role::Server, &hops()).unwrap()).unwrap();
        assert!(c.get("tunnel_address").is_none());
        let b: Value =
            serde_json::from_str(&rust.config(ss2022, Role::Client, &hops()).unwrap()).unwrap();
        assert_eq!(b["locals"][0]["protocol"], "tunnel");
        assert_eq!(b["locals"][0]["forward_port"], 1003);
        assert_eq!(b["servers"][0]["method"], "2022-blake3-aes-128-gcm");
        let args: Vec<_> = libev
            .command(Role::Client, Path::new("/tmp/b.json"))
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(args, ["-c", "/tmp/b.json"]);
        use crate::traffic::Mode;
        assert!(libev.cannot_measure(Mode::Upload).is_some());
        assert!(libev.cannot_measure(Mode::Download).is_none());
        assert!(rust.cannot_measure(Mode::Upload).is_none());
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
    fn mkcp_runs_vless_over_kcp_at_v2rays_defaults_on_skiff_and_v2ray() {
        let mkcp = ALL.iter().find(|c| c.kind == Kind::Mkcp).unwrap();
        let peer = |name, flavor| Implementation {
            name,
            flavor,
            client: "x".into(),
            server: "x".into(),
            version: String::new(),
        };
        let v2 = peer("v2ray", Flavor::V2ray);
        assert!(skiff(PathBuf::from("/bin/true")).supports(mkcp) && v2.supports(mkcp));
        assert!(!peer("kcptun", Flavor::Kcptun).supports(mkcp));
        assert!(!peer("xray", Flavor::Xray).supports(mkcp));
        let client: Value =
            serde_json::from_str(&v2.config(mkcp, Role::Client, &hops()).unwrap()).unwrap();
        let out = &client["outbounds"][0];
        assert_eq!(out["protocol"], "vless");
        assert_eq!(out["settings"]["vnext"][0]["port"], 1002);
        assert_eq!(client["inbounds"][0]["settings"]["port"], 1003);
        let kcp = &out["streamSettings"]["kcpSettings"];
        assert_eq!(out["streamSettings"]["network"], "kcp");
        assert_eq!(
            (&kcp["uplinkCapacity"], &kcp["downlinkCapacity"]),
            (&json!(5), &json!(20))
        );
        assert_eq!(kcp["congestion"], false);
        assert_eq!(kcp["header"]["type"], "none");
        assert!(kcp.get("seed").is_none());
        let server: Value =
            serde_json::from_str(&v2.config(mkcp, Role::Server, &hops()).unwrap()).unwrap();
        assert_eq!(server["inbounds"][0]["protocol"], "vless");
        assert_eq!(server["inbounds"][0]["port"], 1002);
        assert_eq!(
            server["inbounds"][0]["streamSettings"],
            out["streamSettings"]
        );
    }

    #[test]
    fn kcp_rows_give_both_implementations_the_same_windows() {
        let skiff = skiff(PathBuf::from("/bin/true"));
        let kcptun = Implementation {
            name: "kcptun",
            flavor: Flavor::Kcptun,
            ..skiff.clone()
        };
        let windows = |imp: &Implementation, name: &str, role: Role| {
            let combo = ALL.iter().find(|c| c.name == name).unwrap();
            let v: Value =
                serde_json::from_str(&imp.config(combo, role, &hops()).unwrap()).unwrap();
            let settings = match (imp.flavor, role) {
                (Flavor::Kcptun, _) => v,
                (_, Role::Client) => v["outbounds"][0]["settings"].clone(),
                (_, Role::Server) => v["inbounds"][0]["settings"].clone(),
            };
            (
                settings["sndwnd"].as_u64().unwrap(),
                settings["rcvwnd"].as_u64().unwrap(),
            )
        };
        for imp in [&skiff, &kcptun] {
            assert_eq!(windows(imp, "kcp", Role::Client), (128, 512));
            assert_eq!(windows(imp, "kcp", Role::Server), (1024, 1024));
            assert_eq!(windows(imp, "kcp-fast3", Role::Client), (128, 512));
            assert_eq!(windows(imp, "kcp-w2048", Role::Client), (2048, 2048));
            assert_eq!(windows(imp, "kcp-w2048", Role::Server), (2048, 2048));
        }
    }

    #[test]
    fn fake_tcp_rows_put_udp2raw_between_the_kcp_ends() {
        let skiff = skiff(PathBuf::from("/bin/true"));
        let kcptun = Implementation {
            name: "kcptun",
            flavor: Flavor::Kcptun,
            ..skiff.clone()
        };
        let combo = ALL.iter().find(|c| c.name == "kcp-w2048-faketcp").unwrap();
        let config = |imp: &Implementation, role| -> Value {
            serde_json::from_str(&imp.config(combo, role, &hops()).unwrap()).unwrap()
        };
        // kcptun: the client sends to B's relay, the server listens on C's.
        assert_eq!(
            config(&kcptun, Role::Client)["remoteaddr"],
            "127.0.0.1:1005"
        );
        assert_eq!(config(&kcptun, Role::Server)["listen"], "127.0.0.1:1006");
        assert_eq!(config(&kcptun, Role::Server)["sndwnd"], 2048);
        // Skiff: the same hops, with its own udp2raw ends in the same process.
        let b = config(&skiff, Role::Client);
        assert_eq!(b["outbounds"][0]["settings"]["port"], 1005);
        assert_eq!(b["inbounds"][1]["port"], 1005);
        assert_eq!(b["outbounds"][1]["protocol"], "udp2raw");
        assert_eq!(b["outbounds"][1]["settings"]["port"], 1002);
        assert_eq!(b["routing"]["rules"][0]["outboundTag"], "faketcp");
        let c = config(&skiff, Role::Server);
        assert_eq!(c["inbounds"][0]["port"], 1006);
        assert_eq!(c["inbounds"][1]["protocol"], "udp2raw");
        assert_eq!(c["inbounds"][1]["port"], 1002);
        assert_eq!(c["inbounds"][1]["settings"]["target"], "127.0.0.1:1006");
        // The real udp2raw gets the same hops, key and mode.
        let args = |role| -> Vec<String> {
            udp2raw_command(Path::new("/bin/udp2raw"), role, &hops())
                .unwrap()
                .get_args()
                .map(|a| a.to_string_lossy().into_owned())
                .collect()
        };
        let client = args(Role::Client).join(" ");
        assert!(
            client.starts_with("-c -l 127.0.0.1:1005 -r 127.0.0.1:1002 -k"),
            "{client}"
        );
        let server = args(Role::Server).join(" ");
        assert!(
            server.starts_with("-s -l 127.0.0.1:1002 -r 127.0.0.1:1006 -k"),
            "{server}"
        );
        assert!(server.contains("--raw-mode faketcp -a"), "{server}");
        // Without relays (a run that did not prepare them) there is no config to run.
        let bare = Hops {
            relays: None,
            ..hops()
        };
        assert!(skiff.config(combo, Role::Client, &bare).is_none());
        assert!(udp2raw_command(Path::new("/bin/udp2raw"), Role::Client, &bare).is_none());
    }

    #[test]
    fn discovery_reports_unknown_and_missing_peers() {
        let (found, missing) = discover("nonesuch,kcptun=/definitely/missing");
        assert!(found.is_empty());
        assert_eq!(missing.len(), 2);
        assert!(discover("none").0.is_empty());
    }
}
