//! `user_agent`'s names, as Xray's gRPC dialer reads them: "" and "chrome" are Xray's
//! Chrome User-Agent, "firefox" and "edge" theirs, "golang" none at all, anything else as is.

use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::http_header::defaults::chrome_user_agent;

pub fn user_agent(setting: &str) -> Option<String> {
    match setting {
        "" | "chrome" => Some(chrome_user_agent().to_owned()),
        "firefox" => Some(firefox().to_owned()),
        "edge" => {
            // Xray appends Edge's token to the Chrome string without a space.
            let chrome = chrome_user_agent();
            let version = chrome
                .split("Chrome/")
                .nth(1)
                .and_then(|v| v.split('.').next())
                .unwrap_or("0");
            Some(format!("{chrome}Edg/{version}.0.0.0"))
        }
        "golang" => None,
        literal => Some(literal.to_owned()),
    }
}

/// Xray's `FirefoxUA`, its version drawn once per process.
fn firefox() -> &'static str {
    static FIREFOX: OnceLock<String> = OnceLock::new();
    FIREFOX.get_or_init(|| {
        let days = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() / 86_400) as i64;
        let mut r = [0u8; 8];
        skiff_crypto::random::fill(&mut r);
        let r = (u64::from_le_bytes(r) >> 11) as f64 / (1u64 << 53) as f64;
        let v = firefox_version(days, r);
        format!("Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:{v}.0) Gecko/20100101 Firefox/{v}.0")
    })
}

/// Xray's `FirefoxVersion`: 128 on 2024-07-29, one more every 30 days, lagging by 25 days
/// plus up to 50 more (`r` in [0, 1), squared).
fn firefox_version(days_since_epoch: i64, r: f64) -> i64 {
    const START: i64 = 19_933; // 2024-07-29
    let diff = days_since_epoch - START - 25 - (r * r * 50.0).floor() as i64;
    diff / 30 + 128
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(user_agent("golang"), None);
        assert_eq!(user_agent("my-agent/1").as_deref(), Some("my-agent/1"));
        assert!(user_agent("").unwrap().contains("Chrome/"));
        assert!(user_agent("edge").unwrap().contains("Safari/537.36Edg/"));
        assert!(user_agent("firefox").unwrap().contains("Firefox/"));
        // 2026-01-13 with the least lag: (20466 - 19933 - 25) / 30 + 128.
        assert_eq!(firefox_version(20_466, 0.0), 144);
    }
}
