//! `policy`: per-level timeouts and the stats switches. A level that is listed starts from
//! Xray's defaults ([`LevelPolicy::default`]) and overrides only the fields it sets.

use std::time::Duration;

use crate::diag::Diagnostic;
use crate::plan::{LevelPolicy, PolicyPlan, SystemPolicy};
use crate::raw::Item;
use crate::raw::top::{RawLevel, RawPolicy};
use crate::raw::values::{Int, out_of_range};
use crate::source::Loc;

pub fn build_policy(item: Option<&Item<RawPolicy>>, diags: &mut Vec<Diagnostic>) -> PolicyPlan {
    let mut plan = PolicyPlan::default();
    let Some(Item { loc, raw }) = item else {
        return plan;
    };
    for (key, level) in raw.levels.iter().flatten() {
        let lloc = loc.key("levels").key(key);
        match key.trim().parse::<u32>() {
            Ok(n) => {
                plan.levels.insert(n, build_level(level, &lloc, diags));
            }
            Err(_) => diags.push(lloc.error(format!(
                "level `{key}` is not a level number (0, 1, 2, ...)"
            ))),
        }
    }
    if let Some(s) = &raw.system {
        plan.system = SystemPolicy {
            stats_inbound_uplink: s.stats_inbound_uplink.unwrap_or(false),
            stats_inbound_downlink: s.stats_inbound_downlink.unwrap_or(false),
            stats_outbound_uplink: s.stats_outbound_uplink.unwrap_or(false),
            stats_outbound_downlink: s.stats_outbound_downlink.unwrap_or(false),
        };
    }
    plan
}

fn build_level(raw: &RawLevel, loc: &Loc, diags: &mut Vec<Diagnostic>) -> LevelPolicy {
    let mut level = LevelPolicy::default();
    // Xray decodes the four timeouts as uint32 seconds. Bounding them here also keeps every
    // deadline the relay computes from them (`Instant + Duration`) far from overflowing.
    let mut seconds = |key: &str, value: Option<Int>, slot: &mut Duration| {
        let Some(v) = value else { return };
        match v.get::<u32>() {
            Some(secs) => *slot = Duration::from_secs(u64::from(secs)),
            None if v.is_negative() => diags.push(
                loc.key(key)
                    .error(format!("{key} must not be negative (got {v})")),
            ),
            None => diags.push(
                loc.key(key)
                    .error(out_of_range(v, &format!("seconds ≤ {}", u32::MAX))),
            ),
        }
    };
    seconds("handshake", raw.handshake, &mut level.handshake);
    seconds("connIdle", raw.conn_idle, &mut level.conn_idle);
    seconds("uplinkOnly", raw.uplink_only, &mut level.uplink_only);
    seconds("downlinkOnly", raw.downlink_only, &mut level.downlink_only);
    level.stats_user_uplink = raw.stats_user_uplink.unwrap_or(false);
    level.stats_user_downlink = raw.stats_user_downlink.unwrap_or(false);
    level.stats_user_online = raw.stats_user_online.unwrap_or(false);
    match raw.buffer_size {
        Some(v) if v.is_negative() => diags.push(
            loc.key("bufferSize")
                .error(format!("bufferSize must not be negative (got {v})")),
        ),
        // int32 kilobytes in Xray.
        Some(v) if v.get::<i32>().is_none() => diags.push(
            loc.key("bufferSize")
                .error(out_of_range(v, &format!("kilobytes ≤ {}", i32::MAX))),
        ),
        Some(_) => {
            diags.push(loc.key("bufferSize").warning(
                "bufferSize is accepted but ignored: skiff sizes its relay buffers itself",
            ))
        }
        None => {}
    }
    level
}
