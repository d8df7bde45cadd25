//! kcptun `settings`: the inbound is a kcptun server (`target` = kcptun-server's `-t`), the
//! outbound a kcptun client (`address`/`port` of the server, `conn` sessions). Both take
//! kcptun's own lowercase JSON keys with kcptun's defaults (spec/kcp.md §7); where kcptun
//! silently falls back (an unknown `crypt` becomes aes) skiff refuses the value instead.

use skiff_kcp::{Crypt, KcpConfig};

use super::super::error_count;
use super::common::{server_address, server_port};
use super::parse_redirect;
use crate::diag::Diagnostic;
use crate::plan::{KcptunInbound, KcptunOutbound, KcptunStreamPlan, KcptunTuning};
use crate::raw::settings::{
    KcptunInboundSettings, KcptunOutboundSettings, KcptunStreamSettings, RawKcpTuning,
};
use crate::raw::values::{Int, out_of_range};
use crate::source::Loc;

/// kcptun's `--crypt` names; those `skiff-kcp` lacks are "not supported yet", others unknown.
const KCPTUN_CRYPTS: &[&str] = &[
    "none", "aes", "aes-128", "aes-192", "salsa20", "xor", "blowfish", "twofish", "cast5", "3des",
    "tea", "xtea", "sm4",
];

/// Skiff's default send and receive windows, both sides (kcptun: 128/512 and 1024/1024).
const SKIFF_WINDOW: u16 = 2048;

pub fn inbound(
    s: KcptunInboundSettings,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<KcptunInbound> {
    let before = error_count(diags);
    let target = match s.target.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
        None => {
            diags.push(loc.key("target").error(
                "missing `target`: the \"host:port\" every stream goes to (kcptun-server's -t)",
            ));
            None
        }
        Some(t) => match parse_redirect(t) {
            Some((host, port)) if !host.is_empty() && port != 0 => Some((host, port)),
            _ => {
                diags.push(loc.key("target").error(format!(
                    "`{t}` is not \"host:port\" (e.g. \"127.0.0.1:8388\")"
                )));
                None
            }
        },
    };
    let tuning = tuning(&s.tuning(), false, loc, diags);
    if error_count(diags) > before {
        return None;
    }
    let (target_host, target_port) = target?;
    Some(KcptunInbound {
        target_host,
        target_port,
        tuning: tuning?,
    })
}

pub fn outbound(
    s: KcptunOutboundSettings,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<KcptunOutbound> {
    let before = error_count(diags);
    let address = server_address(s.address.as_deref(), &loc.key("address"), "kcptun", diags);
    let port = server_port(s.port, &loc.key("port"), "kcptun", diags);
    let conn = int(s.conn, 1, 1, 256, &loc.key("conn"), diags);
    let tuning = tuning(&s.tuning(), true, loc, diags);
    if error_count(diags) > before {
        return None;
    }
    Some(KcptunOutbound {
        address: address?,
        port: port?,
        conn: conn as usize,
        tuning: tuning?,
    })
}

/// `streamSettings.kcptunSettings` of the `kcptun` transport network: kcptun's keys with the
/// client's defaults on outbounds and the server's on inbounds; `conn` only on outbounds.
pub(in crate::build) fn stream(
    s: KcptunStreamSettings,
    outbound: bool,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<KcptunStreamPlan> {
    let before = error_count(diags);
    let conn = if outbound {
        int(s.conn, 1, 1, 256, &loc.key("conn"), diags) as usize
    } else {
        if s.conn.is_some() {
            diags.push(loc.key("conn").warning(
                "`conn` (KCP sessions per server) applies to outbounds only and is ignored here",
            ));
        }
        1
    };
    let tuning = tuning(&s.tuning(), outbound, loc, diags);
    if error_count(diags) > before {
        return None;
    }
    Some(KcptunStreamPlan {
        tuning: tuning?,
        conn,
    })
}

/// An integer key within `min..=max`, `default` when absent.
fn int(
    value: Option<Int>,
    default: i64,
    min: i64,
    max: i64,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> i64 {
    let Some(v) = value else { return default };
    v.within(min, max).unwrap_or_else(|| {
        diags.push(loc.error(out_of_range(v, &format!("an integer {min}–{max}"))));
        default
    })
}

/// The shared keys; `client` picks kcptun-client's defaults (windows 128/512) over the
/// server's (1024/1024).
fn tuning(
    t: &RawKcpTuning,
    client: bool,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<KcptunTuning> {
    let before = error_count(diags);
    let mut kcp = KcpConfig::kcptun_default(client);
    // Windows are local tuning (each end only advertises its own receive window), so Skiff
    // may differ from kcptun here: kcptun's 128/512 (client) and 1024 (server) stall a
    // 200 ms lossy path long before the link is full; 2048 segments (~2.6 MiB in flight at
    // most, held only while data is in flight) keep it busy.
    kcp.snd_wnd = SKIFF_WINDOW;
    kcp.rcv_wnd = SKIFF_WINDOW;
    if let Some(key) = &t.key {
        kcp.key = key.clone();
    }
    let crypt_name = t
        .crypt
        .as_deref()
        .map_or_else(|| "aes".to_owned(), |n| n.trim().to_ascii_lowercase());
    if t.crypt.is_some() {
        let name = crypt_name.clone();
        match Crypt::parse(&name) {
            Ok(c) => kcp.crypt = c,
            Err(_) if KCPTUN_CRYPTS.contains(&name.as_str()) => diags.push(loc.key("crypt").error(
                format!("crypt `{name}` is not supported by this version of skiff yet"),
            )),
            Err(_) => diags.push(loc.key("crypt").error(format!(
                "unknown crypt `{name}` (kcptun's: {})",
                KCPTUN_CRYPTS.join(", ")
            ))),
        }
    }
    let mode = t
        .mode
        .as_deref()
        .map(|m| m.trim().to_ascii_lowercase())
        .unwrap_or_else(|| "fast".into());
    if mode == "manual" {
        // kcptun's hidden flags, used by `manual` only; their defaults are kcptun's.
        kcp.nodelay = int(t.nodelay, 0, 0, 1, &loc.key("nodelay"), diags) == 1;
        kcp.interval_ms = int(t.interval, 50, 10, 5000, &loc.key("interval"), diags) as u32;
        kcp.resend = int(t.resend, 0, 0, 1_000_000, &loc.key("resend"), diags) as u32;
        kcp.no_congestion = int(t.nc, 0, 0, 1, &loc.key("nc"), diags) == 1;
    } else {
        if let Err(e) = kcp.apply_mode(&mode) {
            diags.push(loc.key("mode").error(e.to_string()));
        }
        for (key, value) in [
            ("nodelay", t.nodelay),
            ("interval", t.interval),
            ("resend", t.resend),
            ("nc", t.nc),
        ] {
            if value.is_some() {
                diags.push(loc.key(key).warning(format!(
                    "`{key}` applies only with \"mode\": \"manual\" (as in kcptun); ignored"
                )));
            }
        }
    }
    kcp.mtu = int(t.mtu, 1350, 64, 1500, &loc.key("mtu"), diags) as usize;
    kcp.snd_wnd = int(
        t.sndwnd,
        i64::from(kcp.snd_wnd),
        1,
        65535,
        &loc.key("sndwnd"),
        diags,
    ) as u16;
    kcp.rcv_wnd = int(
        t.rcvwnd,
        i64::from(kcp.rcv_wnd),
        1,
        65535,
        &loc.key("rcvwnd"),
        diags,
    ) as u16;
    kcp.data_shards = int(t.datashard, 10, 0, 255, &loc.key("datashard"), diags) as usize;
    kcp.parity_shards = int(t.parityshard, 3, 0, 255, &loc.key("parityshard"), diags) as usize;
    if kcp.data_shards + kcp.parity_shards > 256 {
        diags.push(
            loc.key("parityshard")
                .error("datashard + parityshard must not exceed 256 (Reed-Solomon over GF(2^8))"),
        );
    }
    kcp.ack_nodelay = t.acknodelay.unwrap_or(false);
    let dscp = int(t.dscp, 0, 0, 63, &loc.key("dscp"), diags) as u8;
    let smux_version = int(t.smuxver, 1, 1, 2, &loc.key("smuxver"), diags) as u8;
    let max = i64::from(i32::MAX);
    let smux_buf = int(t.smuxbuf, 4_194_304, 1, max, &loc.key("smuxbuf"), diags) as usize;
    let stream_buf = int(t.streambuf, 2_097_152, 1, max, &loc.key("streambuf"), diags) as usize;
    // smux's keepalive timeout is a fixed 30 s and must not be shorter than the interval.
    let keepalive_secs = int(t.keepalive, 10, 1, 30, &loc.key("keepalive"), diags) as u32;
    let sockbuf = int(t.sockbuf, 4_194_304, 0, max, &loc.key("sockbuf"), diags) as usize;
    if error_count(diags) > before {
        return None;
    }
    Some(KcptunTuning {
        kcp,
        crypt_name,
        compress: !t.nocomp.unwrap_or(false),
        smux_version,
        smux_buf,
        stream_buf,
        keepalive_secs,
        dscp,
        sockbuf,
    })
}
