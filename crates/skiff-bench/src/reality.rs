//! The REALITY row: C has no certificate of its own but borrows the TLS handshake of a target
//! server, which it dials for every connection B makes (as Xray's and Skiff's REALITY servers
//! do). The run starts that target beside C: a TLS 1.3 listener with a throwaway certificate
//! (the bench's own sink, serving inside TLS), so that what the row measures is the proxy, not
//! a web server.
//!
//! The key pair is fixed and public: it only ever guards a loopback bench run.

use serde_json::{Value, json};

use crate::impls::{Hops, Role};

/// The name B asks for and C accepts; the target's certificate is issued for it.
pub const SERVER_NAME: &str = crate::tls::SERVER_NAME;
/// C's X25519 private key, base64url without padding, as `xray x25519` prints it.
const PRIVATE_KEY: &str = "6CiYDE6jmrn7HsRhMHMmN88Nj5gZcNxoLDAPwM6RE3g";
/// Its public key, which B is configured with (Xray's `password`).
const PUBLIC_KEY: &str = "xF2WOddKRpDDII_vVB66MqW7fMTMPCbb4QF3V5hrby4";
const SHORT_ID: &str = "0123456789abcdef";
/// sing-box's client puts its own version (1.x) in the session ID, which Xray's default
/// minimum client version would refuse; every server in the row takes any version.
const MIN_CLIENT_VERSION: &str = "1.0.0";

/// `streamSettings` of B's VLESS outbound or C's VLESS inbound, in Xray's JSON (Skiff reads
/// the same). None when the run started no target.
pub fn xray_stream(role: Role, hops: &Hops) -> Option<Value> {
    let reality = match role {
        Role::Server => json!({
            "target": hops.reality_target?.to_string(),
            "serverNames": [SERVER_NAME],
            "privateKey": PRIVATE_KEY,
            "shortIds": ["", SHORT_ID],
            "minClientVer": MIN_CLIENT_VERSION
        }),
        Role::Client => json!({
            "serverName": SERVER_NAME,
            "password": PUBLIC_KEY,
            "shortId": SHORT_ID,
            "fingerprint": "chrome"
        }),
    };
    Some(json!({ "network": "tcp", "security": "reality", "realitySettings": reality }))
}

/// sing-box's `tls` object for the same row.
pub fn sing_box_tls(role: Role, hops: &Hops) -> Option<Value> {
    Some(match role {
        Role::Server => {
            let target = hops.reality_target?;
            json!({
                "enabled": true,
                "server_name": SERVER_NAME,
                "reality": {
                    "enabled": true,
                    "handshake": { "server": target.ip().to_string(), "server_port": target.port() },
                    "private_key": PRIVATE_KEY,
                    "short_id": ["", SHORT_ID]
                }
            })
        }
        Role::Client => json!({
            "enabled": true,
            "server_name": SERVER_NAME,
            "utls": { "enabled": true, "fingerprint": "chrome" },
            "reality": { "enabled": true, "public_key": PUBLIC_KEY, "short_id": SHORT_ID }
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hops(target: Option<&str>) -> Hops {
        Hops {
            b_listen: "127.0.0.1:1001".parse().unwrap(),
            c_listen: "127.0.0.1:1002".parse().unwrap(),
            d: "127.0.0.1:1003".parse().unwrap(),
            certificate: None,
            certificate_sha256: None,
            tcp_congestion: None,
            reality_target: target.map(|t| t.parse().unwrap()),
            relays: None,
        }
    }

    #[test]
    fn the_server_dials_the_runs_target_and_the_client_knows_its_key() {
        let server = xray_stream(Role::Server, &hops(Some("127.0.0.1:1004"))).unwrap();
        assert_eq!(server["realitySettings"]["target"], "127.0.0.1:1004");
        assert_eq!(server["realitySettings"]["privateKey"], PRIVATE_KEY);
        let client = xray_stream(Role::Client, &hops(None)).unwrap();
        assert_eq!(client["realitySettings"]["password"], PUBLIC_KEY);
        assert_eq!(
            client["realitySettings"]["serverName"],
            server["realitySettings"]["serverNames"][0]
        );
        // No target started, no server config: the row cannot run half set up.
        assert!(xray_stream(Role::Server, &hops(None)).is_none());
        assert!(sing_box_tls(Role::Server, &hops(None)).is_none());
        let sing = sing_box_tls(Role::Server, &hops(Some("127.0.0.1:1004"))).unwrap();
        assert_eq!(sing["reality"]["handshake"]["server_port"], 1004);
    }
}
