//! sing-box as a bench peer, in its own JSON format (not Xray's): B is a `direct` inbound
//! with a fixed destination (sing-box's port forward, like dokodemo-door) routed to the proxy
//! outbound; C is the proxy inbound routed to a `direct` outbound. Everything a row asks of
//! the other implementations is written the same way here: the same id, password and key,
//! TLS with the bench's self-signed certificate (B does not verify it, as allowInsecure
//! elsewhere), WebSocket on path /bench.

use std::net::SocketAddr;

use serde_json::{Value, json};

use crate::combos::Kind;
use crate::impls::{BENCH_PASSWORD, BENCH_UUID, Hops, Role, ss_password};

/// Whether sing-box runs `kind` in the bench. It speaks every TCP combination the bench has;
/// it has no kcptun, and its mKCP-free build has no V2Ray mKCP either.
pub fn supports(kind: Kind) -> bool {
    // sing-box has no XHTTP.
    !matches!(
        kind,
        Kind::Raw | Kind::Kcp { .. } | Kind::Mkcp | Kind::VlessXhttp { .. }
    )
}

/// The config for `role` in a combination of `kind`, or None if sing-box does not run it (or
/// a TLS row has no certificate).
pub fn config(kind: Kind, role: Role, hops: &Hops) -> Option<Value> {
    if !supports(kind) {
        return None;
    }
    if kind == Kind::Tunnel {
        let (listen, to) = match role {
            Role::Client => (hops.b_listen, hops.c_listen),
            Role::Server => (hops.c_listen, hops.d),
        };
        return Some(with_route(
            forward(listen, to),
            json!({ "type": "direct", "tag": "out" }),
        ));
    }
    let (tls, transport) = transport_of(kind);
    let mut endpoint = match role {
        Role::Client => json!({ "tag": "out", "server": hops.c_listen.ip().to_string(),
                                "server_port": hops.c_listen.port() }),
        Role::Server => json!({ "tag": "in", "listen": hops.c_listen.ip().to_string(),
                                "listen_port": hops.c_listen.port() }),
    };
    let fields = protocol_fields(kind, role);
    merge(&mut endpoint, fields);
    if kind.reality() {
        endpoint["tls"] = crate::reality::sing_box_tls(role, hops)?;
    } else if tls {
        endpoint["tls"] = tls_settings(role, hops)?;
    }
    if let Some(transport) = transport {
        endpoint["transport"] = transport;
    }
    Some(match role {
        Role::Client => with_route(forward(hops.b_listen, hops.d), endpoint),
        Role::Server => json!({
            "log": { "level": "warn" },
            "inbounds": [endpoint],
            "outbounds": [{ "type": "direct", "tag": "out" }],
            "route": { "final": "out" }
        }),
    })
}

/// Whether a combination runs over TLS (with a certificate of C's own), and its V2Ray
/// transport in sing-box's words, if any.
fn transport_of(kind: Kind) -> (bool, Option<Value>) {
    let ws = |on: bool| on.then(|| json!({ "type": "ws", "path": "/bench" }));
    match kind {
        Kind::Vless { tls, ws: w } | Kind::Vmess { tls, ws: w, .. } => (tls, ws(w)),
        Kind::VlessVision => (true, None),
        // The same service name as Xray's `grpcSettings.serviceName` in the row.
        Kind::VlessGrpc => (
            true,
            Some(json!({ "type": "grpc", "service_name": "bench" })),
        ),
        Kind::VlessHttpUpgrade => (
            false,
            Some(json!({ "type": "httpupgrade", "path": "/bench" })),
        ),
        Kind::Trojan { ws: w } => (true, ws(w)),
        _ => (false, None),
    }
}

/// The protocol's own fields on B's outbound or C's inbound.
fn protocol_fields(kind: Kind, role: Role) -> Value {
    let server = role == Role::Server;
    match kind {
        Kind::Vless { .. }
        | Kind::VlessGrpc
        | Kind::VlessHttpUpgrade
        | Kind::VlessVision
        | Kind::VlessVisionReality => {
            let flow = if matches!(kind, Kind::VlessVision | Kind::VlessVisionReality) {
                "xtls-rprx-vision"
            } else {
                ""
            };
            if server {
                json!({ "type": "vless", "users": [{ "uuid": BENCH_UUID, "flow": flow }] })
            } else {
                json!({ "type": "vless", "uuid": BENCH_UUID, "flow": flow })
            }
        }
        Kind::Vmess { cipher, .. } => {
            if server {
                json!({ "type": "vmess", "users": [{ "uuid": BENCH_UUID, "alterId": 0 }] })
            } else {
                json!({ "type": "vmess", "uuid": BENCH_UUID, "alter_id": 0,
                        "security": cipher.security() })
            }
        }
        Kind::Trojan { .. } => {
            if server {
                json!({ "type": "trojan", "users": [{ "password": BENCH_PASSWORD }] })
            } else {
                json!({ "type": "trojan", "password": BENCH_PASSWORD })
            }
        }
        Kind::Shadowsocks { method } => json!({
            "type": "shadowsocks", "method": method, "password": ss_password(method),
            "network": "tcp"
        }),
        _ => json!({}),
    }
}

fn tls_settings(role: Role, hops: &Hops) -> Option<Value> {
    Some(match role {
        Role::Server => {
            let (cert, key) = hops.certificate.as_ref()?;
            json!({ "enabled": true, "certificate_path": cert.display().to_string(),
                    "key_path": key.display().to_string() })
        }
        Role::Client => json!({ "enabled": true, "server_name": "bench.skiff", "insecure": true }),
    })
}

/// sing-box's port forward: a `direct` inbound on `listen` that sends everything to `to`.
fn forward(listen: SocketAddr, to: SocketAddr) -> Value {
    json!({
        "type": "direct",
        "tag": "in",
        "listen": listen.ip().to_string(),
        "listen_port": listen.port(),
        "network": "tcp",
        "override_address": to.ip().to_string(),
        "override_port": to.port()
    })
}

/// A whole config: `inbound` routed to `outbound`.
fn with_route(inbound: Value, outbound: Value) -> Value {
    json!({
        "log": { "level": "warn" },
        "inbounds": [inbound],
        "outbounds": [outbound],
        "route": { "final": "out" }
    })
}

fn merge(into: &mut Value, from: Value) {
    if let (Some(into), Value::Object(from)) = (into.as_object_mut(), from) {
        into.extend(from);
    }
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
            relays: None,
        }
    }

    fn by_name(name: &str) -> Kind {
        ALL.iter().find(|c| c.name == name).unwrap().kind
    }

    #[test]
    fn every_tcp_combination_but_raw_and_no_udp_one() {
        let supported: Vec<&str> = ALL
            .iter()
            .filter(|c| supports(c.kind))
            .map(|c| c.name)
            .collect();
        assert!(supported.contains(&"vless-vision") && supported.contains(&"ss-2022"));
        assert!(supported.contains(&"tunnel") && supported.contains(&"trojan-ws-tls"));
        assert!(!supported.iter().any(|n| *n == "raw" || n.contains("kcp")));
        assert!(supported.contains(&"vless-httpupgrade"));
        assert!(!supported.iter().any(|n| n.contains("xhttp")));
        for c in ALL.iter().filter(|c| supports(c.kind)) {
            for role in [Role::Client, Role::Server] {
                assert!(config(c.kind, role, &hops()).is_some(), "{}", c.name);
            }
        }
    }

    #[test]
    fn b_forwards_to_d_through_the_proxy_and_c_serves_it() {
        let b = config(by_name("vless-ws-tls"), Role::Client, &hops()).unwrap();
        let entry = &b["inbounds"][0];
        assert_eq!(entry["type"], "direct");
        assert_eq!(entry["listen_port"], 1001);
        assert_eq!(entry["override_port"], 1003);
        let out = &b["outbounds"][0];
        assert_eq!(out["type"], "vless");
        assert_eq!(out["server_port"], 1002);
        assert_eq!(out["uuid"], BENCH_UUID);
        assert_eq!(out["tls"]["insecure"], true);
        assert_eq!(out["transport"]["path"], "/bench");
        assert_eq!(b["route"]["final"], out["tag"]);
        let c = config(by_name("vless-ws-tls"), Role::Server, &hops()).unwrap();
        let inbound = &c["inbounds"][0];
        assert_eq!(inbound["listen_port"], 1002);
        assert_eq!(inbound["users"][0]["uuid"], BENCH_UUID);
        assert_eq!(inbound["tls"]["certificate_path"], "/tmp/c.pem");
        assert_eq!(c["outbounds"][0]["type"], "direct");
    }

    #[test]
    fn each_protocol_in_sing_boxs_own_words() {
        let out = |name: &str| {
            config(by_name(name), Role::Client, &hops()).unwrap()["outbounds"][0].clone()
        };
        let inb = |name: &str| {
            config(by_name(name), Role::Server, &hops()).unwrap()["inbounds"][0].clone()
        };
        assert_eq!(out("vless-vision")["flow"], "xtls-rprx-vision");
        assert_eq!(out("vless-grpc-tls")["transport"]["service_name"], "bench");
        assert_eq!(inb("vless-grpc-tls")["transport"]["type"], "grpc");
        assert_eq!(out("vless-reality-vision")["flow"], "xtls-rprx-vision");
        assert_eq!(
            out("vless-reality-vision")["tls"]["reality"]["enabled"],
            true
        );
        assert_eq!(
            inb("vless-reality-vision")["tls"]["reality"]["handshake"]["server_port"],
            1004
        );
        assert_eq!(inb("vless-vision")["users"][0]["flow"], "xtls-rprx-vision");
        assert_eq!(out("vmess-chacha")["security"], "chacha20-poly1305");
        assert!(out("vmess-chacha").get("tls").is_none());
        assert_eq!(out("trojan-tls")["password"], BENCH_PASSWORD);
        assert_eq!(inb("trojan-tls")["users"][0]["password"], BENCH_PASSWORD);
        let ss = out("ss-2022");
        assert_eq!(ss["method"], "2022-blake3-aes-128-gcm");
        assert_eq!(ss["password"], ss_password("2022-blake3-aes-128-gcm"));
        assert_eq!(inb("ss-aes-128-gcm")["method"], "aes-128-gcm");
        // The tunnel row: port forwards on both sides.
        let c = config(Kind::Tunnel, Role::Server, &hops()).unwrap();
        assert_eq!(c["inbounds"][0]["override_port"], 1003);
        assert_eq!(c["outbounds"][0]["type"], "direct");
        // No certificate, no TLS row.
        let bare = Hops {
            certificate: None,
            ..hops()
        };
        assert!(config(by_name("trojan-tls"), Role::Server, &bare).is_none());
    }

    /// The shared sing-box binary (`SING_BOX_BIN`, or ../shared/peers/bin beside the repo);
    /// missing, the test is skipped with a reason, except under CI, where it must be there.
    fn sing_box() -> Option<std::path::PathBuf> {
        let shared = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/peers/bin/sing-box");
        let found = std::env::var_os("SING_BOX_BIN")
            .map(std::path::PathBuf::from)
            .or(Some(shared))
            .filter(|p| p.is_file());
        if found.is_none() {
            assert!(std::env::var_os("CI").is_none(), "CI must find sing-box");
            println!("skipped: sing-box not found (set SING_BOX_BIN)");
        }
        found
    }

    #[test]
    fn sing_box_itself_accepts_every_generated_config() {
        let Some(bin) = sing_box() else { return };
        let dir = std::env::temp_dir().join(format!("skiff-bench-singbox-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let certified = rcgen::generate_simple_self_signed(vec!["bench.skiff".into()]).unwrap();
        let (cert, key) = (dir.join("c.pem"), dir.join("k.pem"));
        std::fs::write(&cert, certified.cert.pem()).unwrap();
        std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
        let hops = Hops {
            certificate: Some((cert, key)),
            ..hops()
        };
        let mut checked = 0;
        for c in ALL.iter().filter(|c| supports(c.kind)) {
            for role in [Role::Client, Role::Server] {
                let path = dir.join(format!("{}-{role:?}.json", c.name));
                let text = serde_json::to_string_pretty(&config(c.kind, role, &hops).unwrap());
                std::fs::write(&path, text.unwrap()).unwrap();
                let out = std::process::Command::new(&bin)
                    .arg("check")
                    .arg("-c")
                    .arg(&path)
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "{} {role:?}: {}",
                    c.name,
                    String::from_utf8_lossy(&out.stderr)
                );
                checked += 1;
            }
        }
        assert!(checked >= 34, "{checked}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
