//! The combinations `skiff bench` knows: each is one way of carrying A's traffic from B to C.
//! Protocol issues register theirs here; nothing is listed that Skiff cannot run.

/// How B and C talk to each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A talks to D directly: the ceiling of the machine.
    Raw,
    /// B and C are plain port forwards (dokodemo-door → freedom): the relay alone.
    Tunnel,
    /// B: dokodemo-door → VLESS out; C: VLESS in → freedom; over TLS and/or WebSocket.
    Vless { tls: bool, ws: bool },
    /// B: dokodemo-door → VLESS out over gRPC (Xray's "gun", one HTTP/2 stream per
    /// connection) with TLS; C: VLESS in over gRPC → freedom.
    VlessGrpc,
    /// B: dokodemo-door → VLESS out over HTTPUpgrade (an HTTP/1.1 upgrade, then raw bytes);
    /// C: VLESS in over HTTPUpgrade → freedom. No TLS.
    VlessHttpUpgrade,
    /// B: dokodemo-door → VLESS out over XHTTP in `mode` (`packet-up`: the upload as numbered
    /// POSTs; `stream-one`: one streaming request each way) with TLS, so HTTP/2; C: VLESS in
    /// over XHTTP → freedom.
    VlessXhttp { mode: &'static str },
    /// VLESS with XTLS Vision over TCP + TLS 1.3: leaves the outer TLS (and splices) once the
    /// inner traffic is TLS 1.3 application data, so it shows with `--payload tls`.
    VlessVision,
    /// VLESS with XTLS Vision over TCP with REALITY instead of a certificate of C's own: C
    /// borrows the handshake of a TLS server beside it (the run's REALITY target, see
    /// [`crate::reality`]), which it dials for every connection, as REALITY does.
    VlessVisionReality,
    /// B: dokodemo-door → Trojan out; C: Trojan in → freedom; always over TLS, optionally
    /// with WebSocket between (trojan-gfw speaks only the plain-TLS form).
    Trojan { ws: bool },
    /// B: a port forward into Shadowsocks (dokodemo-door → shadowsocks out, ss-tunnel,
    /// sslocal's tunnel); C: a Shadowsocks server → freedom. Raw TCP.
    Shadowsocks { method: &'static str },
    /// B: a kcptun client (Skiff's dokodemo-door → kcptun outbound, or kcptun-client); C: a
    /// kcptun server (Skiff's kcptun inbound → freedom, or kcptun-server) over UDP, both with
    /// kcptun's settings for `mode` and the same `windows` on both implementations (kcptun's
    /// defaults otherwise: aes, FEC 10/3, snappy). Made for `--link`, where it meets a lossy
    /// path.
    Kcp {
        mode: &'static str,
        windows: KcpWindows,
        carrier: KcpCarrier,
    },
    /// B: dokodemo-door → VLESS out over V2Ray's mKCP (`network: "kcp"`); C: VLESS in over
    /// mKCP → freedom. Both at v2ray 4.34's default kcpSettings, header none, no seed. UDP,
    /// made for `--link` like [`Kind::Kcp`]. The defaults bound it, whoever runs it: no more
    /// than the 2 MB write buffer unacknowledged (~84 Mbit/s at 200 ms round trip), and the
    /// receiver drops anything 776 segments (downlinkCapacity 20 MB/s at tti 50) past a hole.
    Mkcp,
    /// B: dokodemo-door → VMess out; C: VMess in → freedom; with this body cipher, over TLS
    /// and/or WebSocket.
    Vmess {
        cipher: VmessCipher,
        tls: bool,
        ws: bool,
    },
}

/// What carries a kcptun row's datagrams between B and C.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KcpCarrier {
    /// Plain UDP, as kcptun sends them.
    Udp,
    /// udp2raw's fake TCP (`--raw-mode faketcp`, aes128cbc, md5, `-a` rules), the lossy-link
    /// report's "kcptun over udp2raw": on B a udp2raw client takes the KCP client's datagrams
    /// on loopback, on C a udp2raw server hands them to the KCP server on loopback. Skiff runs
    /// both in one process per side (a `dokodemo-door` UDP inbound → `udp2raw` outbound on B,
    /// a `udp2raw` inbound on C); kcptun runs beside the real udp2raw, whose CPU counts to its
    /// side.
    FakeTcp,
}

/// The KCP send and receive windows (in segments) a kcptun row gives both implementations,
/// written into both configs so that a row compares protocol work, not window defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KcpWindows {
    /// kcptun's defaults: the client sends 128 and receives 512, the server 1024 and 1024.
    KcptunDefaults,
    /// Skiff's defaults: 2048 both ways on both sides (kcptun's `--sndwnd 2048 --rcvwnd 2048`).
    Skiff2048,
}

impl KcpWindows {
    /// `(sndwnd, rcvwnd)` for the client (B) or the server (C).
    pub fn of(self, client: bool) -> (u16, u16) {
        match (self, client) {
            (KcpWindows::KcptunDefaults, true) => (128, 512),
            (KcpWindows::KcptunDefaults, false) => (1024, 1024),
            (KcpWindows::Skiff2048, _) => (2048, 2048),
        }
    }
}

/// The VMess `security` a combination asks for (both ends of every implementation speak
/// these two; Xray 26 dropped `none`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VmessCipher {
    Aes128Gcm,
    ChaCha20Poly1305,
}

impl VmessCipher {
    /// The name in Xray's JSON.
    pub fn security(self) -> &'static str {
        match self {
            VmessCipher::Aes128Gcm => "aes-128-gcm",
            VmessCipher::ChaCha20Poly1305 => "chacha20-poly1305",
        }
    }
}

impl Kind {
    /// B reaches C over UDP: C has no TCP port to wait for, and the row is about lossy links
    /// (left out of the default loopback matrix).
    pub fn udp(self) -> bool {
        matches!(self, Kind::Kcp { .. } | Kind::Mkcp)
    }

    /// C runs REALITY, so the run starts a TLS target beside it.
    pub fn reality(self) -> bool {
        self == Kind::VlessVisionReality
    }

    /// The combination needs a certificate on C.
    pub fn tls(self) -> bool {
        matches!(
            self,
            Kind::Vless { tls: true, .. }
                | Kind::VlessGrpc
                | Kind::VlessXhttp { .. }
                | Kind::VlessVision
                | Kind::Trojan { .. }
                | Kind::Vmess { tls: true, .. }
        )
    }
}

#[derive(Clone, Copy, Debug)]
pub struct Combination {
    pub name: &'static str,
    pub about: &'static str,
    pub kind: Kind,
}

pub const ALL: &[Combination] = &[
    Combination {
        name: "raw",
        about: "A → D directly, no proxy (the ceiling)",
        kind: Kind::Raw,
    },
    Combination {
        name: "tunnel",
        about: "dokodemo-door → freedom on B and on C (the relay alone: splice when possible)",
        kind: Kind::Tunnel,
    },
    Combination {
        name: "vless-tcp",
        about: "VLESS over raw TCP",
        kind: Kind::Vless {
            tls: false,
            ws: false,
        },
    },
    Combination {
        name: "vless-tls",
        about: "VLESS over TCP with TLS",
        kind: Kind::Vless {
            tls: true,
            ws: false,
        },
    },
    Combination {
        name: "vless-ws",
        about: "VLESS over WebSocket",
        kind: Kind::Vless {
            tls: false,
            ws: true,
        },
    },
    Combination {
        name: "vless-ws-tls",
        about: "VLESS over WebSocket with TLS",
        kind: Kind::Vless {
            tls: true,
            ws: true,
        },
    },
    Combination {
        name: "vless-grpc-tls",
        about: "VLESS over gRPC (gun) with TLS",
        kind: Kind::VlessGrpc,
    },
    Combination {
        name: "vless-httpupgrade",
        about: "VLESS over HTTPUpgrade (no TLS)",
        kind: Kind::VlessHttpUpgrade,
    },
    Combination {
        name: "vless-xhttp-tls-packet-up",
        about: "VLESS over XHTTP in packet-up mode (the upload as numbered POSTs) with TLS (HTTP/2)",
        kind: Kind::VlessXhttp { mode: "packet-up" },
    },
    Combination {
        name: "vless-xhttp-tls-stream-one",
        about: "VLESS over XHTTP in stream-one mode (one streaming request) with TLS (HTTP/2)",
        kind: Kind::VlessXhttp { mode: "stream-one" },
    },
    Combination {
        name: "vless-vision",
        about: "VLESS with XTLS Vision over TCP with TLS (direct + splice on TLS 1.3 payloads)",
        kind: Kind::VlessVision,
    },
    Combination {
        name: "vless-reality-vision",
        about: "VLESS with XTLS Vision over TCP with REALITY (a borrowed TLS handshake; splices as vision does)",
        kind: Kind::VlessVisionReality,
    },
    Combination {
        name: "trojan-tls",
        about: "Trojan over TCP with TLS",
        kind: Kind::Trojan { ws: false },
    },
    Combination {
        name: "trojan-ws-tls",
        about: "Trojan over WebSocket with TLS",
        kind: Kind::Trojan { ws: true },
    },
    Combination {
        name: "ss-aes-128-gcm",
        about: "Shadowsocks AEAD aes-128-gcm over raw TCP",
        kind: Kind::Shadowsocks {
            method: "aes-128-gcm",
        },
    },
    Combination {
        name: "ss-chacha20",
        about: "Shadowsocks AEAD chacha20-ietf-poly1305 over raw TCP",
        kind: Kind::Shadowsocks {
            method: "chacha20-ietf-poly1305",
        },
    },
    Combination {
        name: "ss-2022",
        about: "Shadowsocks 2022 (2022-blake3-aes-128-gcm) over raw TCP",
        kind: Kind::Shadowsocks {
            method: "2022-blake3-aes-128-gcm",
        },
    },
    Combination {
        name: "kcp",
        about: "kcptun's wire format at kcptun's defaults (mode fast; windows 128/512 on B, \
                1024/1024 on C, on Skiff too), over UDP",
        kind: Kind::Kcp {
            mode: "fast",
            windows: KcpWindows::KcptunDefaults,
            carrier: KcpCarrier::Udp,
        },
    },
    Combination {
        name: "kcp-w2048",
        about: "kcptun's wire format in mode fast at Skiff's windows (sndwnd/rcvwnd 2048 on \
                both sides, kcptun too), over UDP",
        kind: Kind::Kcp {
            mode: "fast",
            windows: KcpWindows::Skiff2048,
            carrier: KcpCarrier::Udp,
        },
    },
    Combination {
        name: "kcp-fast3",
        about: "kcptun's wire format in mode fast3 (its most aggressive preset) at kcptun's \
                default windows, over UDP",
        kind: Kind::Kcp {
            mode: "fast3",
            windows: KcpWindows::KcptunDefaults,
            carrier: KcpCarrier::Udp,
        },
    },
    Combination {
        name: "kcp-faketcp",
        about: "kcptun's wire format at kcptun's defaults (mode fast; windows 128/512 on B, \
                1024/1024 on C), over udp2raw's fake TCP (aes128cbc, md5; Skiff's own udp2raw \
                ends, or the real udp2raw beside kcptun); needs root and --link",
        kind: Kind::Kcp {
            mode: "fast",
            windows: KcpWindows::KcptunDefaults,
            carrier: KcpCarrier::FakeTcp,
        },
    },
    Combination {
        name: "kcp-w2048-faketcp",
        about: "kcptun's wire format in mode fast at Skiff's windows (2048 both sides, kcptun \
                too), over udp2raw's fake TCP; needs root and --link",
        kind: Kind::Kcp {
            mode: "fast",
            windows: KcpWindows::Skiff2048,
            carrier: KcpCarrier::FakeTcp,
        },
    },
    Combination {
        name: "mkcp",
        about: "VLESS over V2Ray's mKCP at v2ray 4.34's default kcpSettings (mtu 1350, tti 50, \
                uplinkCapacity 5, downlinkCapacity 20, congestion off, read/writeBufferSize 2, \
                header none, no seed), over UDP. Those defaults cap it: at most the 2 MB write \
                buffer per round trip, and less on loss, as the 776-segment receive window \
                (downlinkCapacity 20) waits behind each lost segment",
        kind: Kind::Mkcp,
    },
    Combination {
        name: "vmess-aes",
        about: "VMess (AEAD, aes-128-gcm) over raw TCP",
        kind: Kind::Vmess {
            cipher: VmessCipher::Aes128Gcm,
            tls: false,
            ws: false,
        },
    },
    Combination {
        name: "vmess-chacha",
        about: "VMess (AEAD, chacha20-poly1305) over raw TCP",
        kind: Kind::Vmess {
            cipher: VmessCipher::ChaCha20Poly1305,
            tls: false,
            ws: false,
        },
    },
    Combination {
        name: "vmess-ws-tls",
        about: "VMess (AEAD, aes-128-gcm) over WebSocket with TLS",
        kind: Kind::Vmess {
            cipher: VmessCipher::Aes128Gcm,
            tls: true,
            ws: true,
        },
    },
];

/// The seed rows `--quick` runs: the ceiling, the relay alone, the two setups the seed reports
/// recommend (VLESS over TCP with TLS; VMess over WebSocket with TLS), and one row each for
/// Trojan and Shadowsocks, so every peer the bench knows for TCP has a row.
pub const QUICK: &[&str] = &[
    "raw",
    "tunnel",
    "vless-tls",
    "trojan-tls",
    "ss-aes-128-gcm",
    "vmess-ws-tls",
];

/// The `--quick` combinations, in [`ALL`]'s order.
pub fn quick() -> Vec<Combination> {
    ALL.iter()
        .filter(|c| QUICK.contains(&c.name))
        .copied()
        .collect()
}

/// The combinations whose name matches any of the comma-separated `filter` words (substring
/// match; an exact name wins so `raw` does not pull in `raw-tls`). No filter: all.
pub fn select(filter: Option<&str>) -> Vec<Combination> {
    let Some(filter) = filter else {
        return ALL.to_vec();
    };
    let words: Vec<&str> = filter
        .split(',')
        .map(str::trim)
        .filter(|w| !w.is_empty())
        .collect();
    ALL.iter()
        .filter(|c| {
            words
                .iter()
                .any(|w| c.name == *w || (!ALL.iter().any(|o| o.name == *w) && c.name.contains(w)))
        })
        .copied()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_by_name() {
        assert_eq!(select(None).len(), ALL.len());
        let names: Vec<_> = select(Some("raw")).iter().map(|c| c.name).collect();
        assert_eq!(names, ["raw"]);
        let names: Vec<_> = select(Some("tun, raw")).iter().map(|c| c.name).collect();
        assert_eq!(names, ["raw", "tunnel"]);
        let names: Vec<_> = select(Some("vless-ws")).iter().map(|c| c.name).collect();
        assert_eq!(names, ["vless-ws"]);
        assert_eq!(select(Some("vless")).len(), 10);
        let names: Vec<_> = select(Some("xhttp")).iter().map(|c| c.name).collect();
        assert_eq!(
            names,
            ["vless-xhttp-tls-packet-up", "vless-xhttp-tls-stream-one"]
        );
        assert!(select(Some("xhttp")).iter().all(|c| c.kind.tls()));
        assert!(!select(Some("vless-httpupgrade"))[0].kind.tls());
        assert!(select(Some("vless-vision"))[0].kind.tls());
        // REALITY borrows its target's handshake: a target to start, no certificate of C's.
        let reality = select(Some("vless-reality-vision"))[0].kind;
        assert!(reality.reality() && !reality.tls());
        let names: Vec<_> = select(Some("trojan")).iter().map(|c| c.name).collect();
        assert_eq!(names, ["trojan-tls", "trojan-ws-tls"]);
        assert!(select(Some("trojan-tls")).iter().all(|c| c.kind.tls()));
        assert_eq!(select(Some("ss-aes-128-gcm,ss-chacha20,ss-2022")).len(), 3);
        let names: Vec<_> = select(Some("ss-2022")).iter().map(|c| c.name).collect();
        assert_eq!(names, ["ss-2022"]);
        let names: Vec<_> = select(Some("vmess")).iter().map(|c| c.name).collect();
        assert_eq!(names, ["vmess-aes", "vmess-chacha", "vmess-ws-tls"]);
        assert!(select(Some("vmess-ws-tls"))[0].kind.tls());
        assert!(select(Some("nothing-like-this")).is_empty());
        // `kcp` is a name, so it does not pull in `mkcp`; the UDP rows are these six.
        let names: Vec<_> = select(Some("kcp")).iter().map(|c| c.name).collect();
        assert_eq!(names, ["kcp"]);
        let udp: Vec<_> = ALL
            .iter()
            .filter(|c| c.kind.udp())
            .map(|c| c.name)
            .collect();
        assert_eq!(
            udp,
            [
                "kcp",
                "kcp-w2048",
                "kcp-fast3",
                "kcp-faketcp",
                "kcp-w2048-faketcp",
                "mkcp"
            ]
        );
    }

    #[test]
    fn quick_rows_are_known_tcp_combinations_in_order() {
        let names: Vec<_> = quick().iter().map(|c| c.name).collect();
        // Every name is a combination (a typo would drop the row silently), listed in ALL's
        // order, and none needs a lossy link.
        assert_eq!(names, QUICK);
        assert!(quick().iter().all(|c| !c.kind.udp()));
    }
}
