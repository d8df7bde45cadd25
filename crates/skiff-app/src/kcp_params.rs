//! kcptun tuning from the plan, translated once into skiff-transport's runtime form.

use skiff_config::KcptunTuning;
use skiff_kcp::smux::SmuxConfig;
use skiff_transport::kcp::TunnelParams;

/// The runtime form of a kcptun plan's tuning, with kcptun's stream semantics (the kcptun
/// protocol, inbound and outbound).
pub fn from_plan(t: &KcptunTuning) -> TunnelParams {
    let mut smux = SmuxConfig::kcptun(t.smux_version);
    smux.max_receive_buffer = t.smux_buf;
    smux.max_stream_buffer = t.stream_buf;
    smux.keepalive_interval_ms = t.keepalive_secs.saturating_mul(1000);
    TunnelParams {
        kcp: t.kcp.clone(),
        smux,
        compress: t.compress,
        dscp: t.dscp,
        sockbuf: t.sockbuf,
    }
}

/// The `kcptun` network under another protocol: both ends are Skiff, so streams keep
/// half-close (a client may shut down its sending side and still read the answer).
pub fn for_network(t: &KcptunTuning) -> TunnelParams {
    let mut params = from_plan(t);
    params.smux.half_close = true;
    params
}
