//! `log`: level and the two log targets.

use std::path::PathBuf;

use super::lower;
use crate::diag::Diagnostic;
use crate::plan::{LogLevel, LogPlan, LogTarget};
use crate::raw::Item;
use crate::raw::top::RawLog;
use crate::source::Loc;

pub fn build_log(item: Option<&Item<RawLog>>, diags: &mut Vec<Diagnostic>) -> LogPlan {
    let mut plan = LogPlan {
        level: LogLevel::Warning,
        access: LogTarget::Stderr,
        error: LogTarget::Stderr,
    };
    let Some(Item { loc, raw }) = item else {
        return plan;
    };
    plan.level = match lower(raw.loglevel.as_deref()).as_deref() {
        None | Some("warning") => LogLevel::Warning,
        Some("debug") => LogLevel::Debug,
        Some("info") => LogLevel::Info,
        Some("error") => LogLevel::Error,
        Some("none") => LogLevel::None,
        Some(other) => {
            diags.push(loc.key("loglevel").error(format!(
                "unknown loglevel `{other}` (expected debug, info, warning, error or none)"
            )));
            LogLevel::Warning
        }
    };
    plan.access = target(raw.access.as_deref());
    plan.error = target(raw.error.as_deref());
    if raw
        .mask_address
        .as_deref()
        .is_some_and(|m| !m.is_empty() && !m.eq_ignore_ascii_case("off"))
    {
        diags.push(mask_warning(loc));
    }
    plan
}

fn mask_warning(loc: &Loc) -> Diagnostic {
    loc.key("maskAddress")
        .warning("maskAddress is accepted but ignored: addresses are logged unmasked")
}

/// Xray's rule: absent or "" = stderr, "none" = off, anything else is a file path.
fn target(value: Option<&str>) -> LogTarget {
    match value.map(str::trim) {
        None | Some("") => LogTarget::Stderr,
        Some(v) if v.eq_ignore_ascii_case("none") => LogTarget::Off,
        Some(path) => LogTarget::File(PathBuf::from(path)),
    }
}
