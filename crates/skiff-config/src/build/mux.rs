//! An outbound's `mux` object (Xray's `MuxConfig`): `enabled`, `concurrency`,
//! `xudpConcurrency`, `xudpProxyUDP443`.

use crate::diag::Diagnostic;
use crate::plan::{MuxPlan, OutboundProtocol, Udp443Plan};
use crate::raw::bounds::RawMux;
use crate::source::Loc;

/// Xray's documented range for both concurrencies (negative turns that traffic's mux off).
const MAX_CONCURRENCY: i64 = 1024;

/// The plan when mux is enabled, None when it is absent or disabled.
pub fn build_mux(
    raw: Option<&RawMux>,
    protocol: Option<&OutboundProtocol>,
    loc: &Loc,
    diags: &mut Vec<Diagnostic>,
) -> Option<MuxPlan> {
    let raw = raw?;
    if raw.enabled != Some(true) {
        return None;
    }
    let loc = loc.key("mux");
    match protocol {
        Some(
            OutboundProtocol::Vless(_)
            | OutboundProtocol::Vmess(_)
            | OutboundProtocol::Trojan(_)
            | OutboundProtocol::Shadowsocks(_),
        ) => {}
        None => return None,
        Some(_) => {
            diags.push(loc.key("enabled").error(
                "mux applies to vless, vmess, trojan and shadowsocks outbounds (their server speaks Mux.Cool)",
            ));
            return None;
        }
    }
    let mut concurrency = |key: &str, value: Option<crate::raw::values::Int>| -> i32 {
        match value {
            None => 0,
            Some(v) => match v.within(i64::from(i32::MIN), MAX_CONCURRENCY) {
                Some(n) => n as i32,
                None => {
                    diags.push(loc.key(key).error(format!(
                        "{key} must be at most {MAX_CONCURRENCY} (negative: no mux for this traffic)"
                    )));
                    0
                }
            },
        }
    };
    let tcp = concurrency("concurrency", raw.concurrency);
    let udp = concurrency("xudpConcurrency", raw.xudp_concurrency);
    let udp443 = match raw.xudp_proxy_udp443.as_deref() {
        None | Some("") | Some("reject") => Udp443Plan::Reject,
        Some("allow") => Udp443Plan::Allow,
        Some("skip") => Udp443Plan::Skip,
        Some(other) => {
            diags.push(loc.key("xudpProxyUDP443").error(format!(
                "unknown xudpProxyUDP443 `{other}`: use \"reject\", \"allow\" or \"skip\""
            )));
            Udp443Plan::Reject
        }
    };
    Some(MuxPlan {
        concurrency: tcp,
        xudp_concurrency: udp,
        xudp_proxy_udp443: udp443,
    })
}
