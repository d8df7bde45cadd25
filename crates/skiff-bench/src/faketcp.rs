//! udp2raw's fake TCP under a UDP row (the kcp rows `*-faketcp`, and `--udp-fec --fec-faketcp`):
//! where the row's datagrams cross loopback, Skiff's udp2raw ends in its own config, and the
//! real udp2raw's command line beside a peer. Both ends run udp2raw's defaults (aes128cbc,
//! md5) with `-a` / `autoRule`, inside the bench's namespaces only.

use std::net::SocketAddr;

use serde_json::{Value, json};

/// The key both udp2raw ends share (one word: udp2raw reads only the first of `-k`).
const KEY: &str = "skiff-bench-raw";

/// Where a fake-TCP row's datagrams cross loopback: B's UDP client (KCP or FEC) sends to `b`,
/// the udp2raw client's UDP side; C's udp2raw server delivers to `c`, the UDP server. B's
/// udp2raw client reaches C's udp2raw server at the row's C address.
#[derive(Clone, Copy, Debug)]
pub struct Relays {
    pub b: SocketAddr,
    pub c: SocketAddr,
}

/// Appends `entry` to the config's `list` ("inbounds" or "outbounds").
pub fn push_entry(config: &mut Value, list: &str, entry: Value) {
    if let Some(list) = config[list].as_array_mut() {
        list.push(entry);
    }
}

/// `streamSettings` putting Skiff's udp2raw under a UDP protocol or transport in the same
/// process (`udp2rawSettings`), with the same key, mode and rules as the other ends.
pub fn skiff_layer() -> Value {
    json!({ "udp2rawSettings": { "key": KEY, "rawMode": "faketcp", "autoRule": true } })
}

/// Adds Skiff's udp2raw end of its side to a config: on B (`client`) a UDP `dokodemo-door` at
/// the relay, routed to a `udp2raw` outbound to C at `c_listen`; on C a `udp2raw` inbound at
/// `c_listen` delivering to the relay.
pub fn add_skiff_end(config: &mut Value, client: bool, c_listen: SocketAddr, relays: Relays) {
    let settings = |extra: Value| {
        let mut s = json!({ "key": KEY, "rawMode": "faketcp", "autoRule": true });
        if let (Some(s), Some(extra)) = (s.as_object_mut(), extra.as_object()) {
            s.extend(extra.clone());
        }
        s
    };
    if client {
        push_entry(
            config,
            "inbounds",
            json!({
                "tag": "to-faketcp",
                "listen": relays.b.ip().to_string(),
                "port": relays.b.port(),
                "protocol": "dokodemo-door",
                // udp2raw's server decides where datagrams go; this is only a name.
                "settings": { "address": relays.c.ip().to_string(), "port": relays.c.port(), "network": "udp" }
            }),
        );
        push_entry(
            config,
            "outbounds",
            json!({
                "tag": "faketcp",
                "protocol": "udp2raw",
                "settings": settings(json!({
                    "address": c_listen.ip().to_string(),
                    "port": c_listen.port()
                }))
            }),
        );
        config["routing"] = json!({
            "rules": [{ "inboundTag": ["to-faketcp"], "outboundTag": "faketcp" }]
        });
    } else {
        push_entry(
            config,
            "inbounds",
            json!({
                "tag": "faketcp-in",
                "listen": c_listen.ip().to_string(),
                "port": c_listen.port(),
                "protocol": "udp2raw",
                "settings": settings(json!({ "target": relays.c.to_string() }))
            }),
        );
    }
}

/// The real udp2raw's arguments beside a peer: `-c` on B from the relay to C at `c_listen`,
/// `-s` on C at `c_listen` to the relay; `-a` adds (and on exit removes) its iptables rule.
pub fn udp2raw_args(client: bool, c_listen: SocketAddr, relays: Relays) -> Vec<String> {
    let (side, listen, remote) = if client {
        ("-c", relays.b, c_listen)
    } else {
        ("-s", c_listen, relays.c)
    };
    let mut args: Vec<String> = vec![
        side.into(),
        "-l".into(),
        listen.to_string(),
        "-r".into(),
        remote.to_string(),
    ];
    args.extend(
        [
            "-k",
            KEY,
            "--raw-mode",
            "faketcp",
            "-a",
            "--log-level",
            "3",
            "--disable-color",
        ]
        .map(String::from),
    );
    args
}
