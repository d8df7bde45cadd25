//! `udpspeeder` settings: speederv2's flags as camelCase keys (`fec`, `mode`, `timeout`,
//! `mtu`, `queueLen`, `key`, `disableObscure`, `disableChecksum`, `disableFec`, `decodeBuf`),
//! with speederv2's defaults and ranges; the inbound adds `target` (its `-r`), the outbound
//! `address` and `port` of the server.

use serde::Deserialize;

use super::super::error_count;
use super::common::{server_address, server_port};
use super::parse_redirect;
use crate::diag::Diagnostic;
use crate::plan_udpspeeder::{
    CookOptions, FecParams, UdpspeederInbound, UdpspeederOutbound, UdpspeederTuning,
};
use crate::raw::values::{Int, out_of_range};
use crate::source::Loc;

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UdpspeederSettings {
    pub target: Option<String>,
    pub address: Option<String>,
    pub port: Option<Int>,
    pub fec: Option<String>,
    pub mode: Option<Int>,
    pub timeout: Option<Int>,
    pub mtu: Option<Int>,
    pub queue_len: Option<Int>,
    pub key: Option<String>,
    pub disable_obscure: Option<bool>,
    pub disable_checksum: Option<bool>,
    pub disable_fec: Option<bool>,
    pub decode_buf: Option<Int>,
}

pub fn inbound(
    s: UdpspeederSettings,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<UdpspeederInbound> {
    let before = error_count(diags);
    let target = match s.target.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
        None => {
            diags.push(loc.key("target").error(
                "missing `target`: the \"host:port\" every conversation goes to (speederv2 -s -r)",
            ));
            None
        }
        Some(t) => match parse_redirect(t) {
            Some((host, port)) if !host.is_empty() && port != 0 => Some((host, port)),
            _ => {
                diags.push(loc.key("target").error(format!(
                    "`{t}` is not \"host:port\" (e.g. \"127.0.0.1:51820\")"
                )));
                None
            }
        },
    };
    let tuning = tuning(&s, loc, diags);
    if error_count(diags) > before {
        return None;
    }
    let (target_host, target_port) = target?;
    Some(UdpspeederInbound {
        target_host,
        target_port,
        tuning: tuning?,
    })
}

pub fn outbound(
    s: UdpspeederSettings,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<UdpspeederOutbound> {
    let before = error_count(diags);
    let address = server_address(
        s.address.as_deref(),
        &loc.key("address"),
        "udpspeeder",
        diags,
    );
    let port = server_port(s.port, &loc.key("port"), "udpspeeder", diags);
    let tuning = tuning(&s, loc, diags);
    if error_count(diags) > before {
        return None;
    }
    Some(UdpspeederOutbound {
        address: address?,
        port: port?,
        tuning: tuning?,
    })
}

/// One integer key: its default when absent, an error with its path when out of range.
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

fn tuning(
    s: &UdpspeederSettings,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<UdpspeederTuning> {
    let before = error_count(diags);
    let mut params = FecParams::default();
    if let Some(fec) = s.fec.as_deref()
        && let Err(e) = params.set_fec(fec.trim())
    {
        diags.push(loc.key("fec").error(format!(
            "{e} (speederv2's -f: \"x:y\" or \"x1:y1,x2:y2,…\")"
        )));
    }
    let mode = int(s.mode, 0, 0, 1, &loc.key("mode"), diags);
    let _ = params.set_mode(mode as u32);
    let mtu = int(s.mtu, 1250, 100, 2000, &loc.key("mtu"), diags);
    let _ = params.set_mtu(mtu as u32);
    let queue_len = int(s.queue_len, 200, 1, 10_000, &loc.key("queueLen"), diags);
    let _ = params.set_queue_len(queue_len as u32);
    let timeout = int(s.timeout, 8, 0, 1000, &loc.key("timeout"), diags);
    let _ = params.set_timeout_ms(timeout as u32);
    params.disable_fec = s.disable_fec.unwrap_or(false);
    let decode_buf = int(s.decode_buf, 2000, 1, 20_000, &loc.key("decodeBuf"), diags);
    let key = s.key.clone().unwrap_or_default();
    // speederv2 reads `-k` with scanf("%s"): a key never holds whitespace or NUL, so one that
    // does could not match a real peer.
    if key.chars().any(|c| c.is_whitespace() || c == '\0') {
        diags.push(
            loc.key("key")
                .error("`key` must not contain whitespace (speederv2 could not use it)"),
        );
    }
    if error_count(diags) > before {
        return None;
    }
    Some(UdpspeederTuning {
        params,
        cook: CookOptions {
            key: key.into_bytes(),
            disable_obscure: s.disable_obscure.unwrap_or(false),
            disable_checksum: s.disable_checksum.unwrap_or(false),
        },
        decode_buf: decode_buf as usize,
    })
}
