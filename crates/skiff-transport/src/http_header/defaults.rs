//! Xray 26's default headers (infra/conf `AuthenticatorRequest`/`AuthenticatorResponse`),
//! used when the config gives none. The request's User-Agent and Sec-CH-UA name a Chrome
//! version that moves with the date, as Xray's `utils.ChromeVersion` does.

use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

fn list(values: &[&str]) -> Vec<String> {
    values.iter().map(|v| (*v).to_owned()).collect()
}

/// The request headers Xray sends when `request.headers` is not configured, in its order.
pub fn request_headers() -> Vec<(String, Vec<String>)> {
    let (ua, ch_ua) = chrome();
    [
        ("Host", list(&["www.baidu.com", "www.bing.com"])),
        ("User-Agent", vec![ua.clone()]),
        ("Sec-CH-UA", vec![ch_ua.clone()]),
        ("Sec-CH-UA-Mobile", list(&["?0"])),
        ("Sec-CH-UA-Platform", list(&["Windows"])),
        ("Sec-Fetch-Mode", list(&["no-cors", "cors", "same-origin"])),
        ("Sec-Fetch-Dest", list(&["empty"])),
        ("Sec-Fetch-Site", list(&["none"])),
        ("Sec-Fetch-User", list(&["?1"])),
        ("Accept-Encoding", list(&["gzip, deflate"])),
        ("Connection", list(&["keep-alive"])),
        ("Pragma", list(&["no-cache"])),
    ]
    .into_iter()
    .map(|(n, v)| (n.to_owned(), v))
    .collect()
}

/// The response headers Xray sends when `response.headers` is not configured.
pub fn response_headers() -> Vec<(String, Vec<String>)> {
    [
        (
            "Content-Type",
            list(&["application/octet-stream", "video/mpeg"]),
        ),
        ("Transfer-Encoding", list(&["chunked"])),
        ("Connection", list(&["keep-alive"])),
        ("Pragma", list(&["no-cache"])),
        ("Cache-Control", list(&["private", "no-cache"])),
    ]
    .into_iter()
    .map(|(n, v)| (n.to_owned(), v))
    .collect()
}

/// This process's Chrome User-Agent (Xray's `utils.ChromeUA`); the gRPC client sends it too.
pub fn chrome_user_agent() -> &'static str {
    &chrome().0
}

/// The User-Agent and Sec-CH-UA of this process's Chrome version (drawn once, as Xray draws
/// its anchored version once per process).
fn chrome() -> &'static (String, String) {
    static CHROME: OnceLock<(String, String)> = OnceLock::new();
    CHROME.get_or_init(|| {
        let days = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() / 86_400) as i64;
        let mut r = [0u8; 8];
        skiff_crypto::random::fill(&mut r);
        let r = (u64::from_le_bytes(r) >> 11) as f64 / (1u64 << 53) as f64;
        let v = chrome_version(days, r);
        (
            format!(
                "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/{v}.0.0.0 Safari/537.36"
            ),
            sec_ch_ua(v),
        )
    })
}

/// Xray's `ChromeVersion`: 144 on 2026-01-13, one more every 35 days, lagging by 35 days plus
/// up to 105 more (`r` in [0, 1), squared).
pub fn chrome_version(days_since_epoch: i64, r: f64) -> i64 {
    const START: i64 = 20_466; // 2026-01-13
    let diff = days_since_epoch - START - 35 - (r * r * 105.0).floor() as i64;
    144 + diff / 35 // Go's division truncates toward zero, as Rust's does
}

/// Xray's `getGreasedChUa(version, "chrome")`: the three brands, one of them Chromium's GREASE
/// brand, in an order chosen by the version.
pub fn sec_ch_ua(version: i64) -> String {
    const GREASE: [&str; 11] = [" ", "(", ":", "-", ".", "/", ")", ";", "=", "?", "_"];
    const GREASE_VERSION: [&str; 3] = ["8", "99", "24"];
    const SHUFFLE: [[usize; 3]; 6] = [
        [0, 1, 2],
        [0, 2, 1],
        [1, 0, 2],
        [1, 2, 0],
        [2, 0, 1],
        [2, 1, 0],
    ];
    let seed = version.unsigned_abs() as usize;
    let brands = [
        format!(
            "\"Not{}A{}Brand\";v=\"{}\"",
            GREASE[seed % 11],
            GREASE[(seed + 1) % 11],
            GREASE_VERSION[seed % 3]
        ),
        format!("\"Chromium\";v=\"{version}\""),
        format!("\"Google Chrome\";v=\"{version}\""),
    ];
    let mut shuffled = [const { String::new() }; 3];
    for (i, &to) in SHUFFLE[seed % 6].iter().enumerate() {
        shuffled[to] = brands[i].clone();
    }
    shuffled.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chrome_as_xray_26_names_it() {
        // Captured from Xray 26.7.28 on 2026-11-25.
        assert_eq!(
            sec_ch_ua(149),
            r#""Google Chrome";v="149", "Chromium";v="149", "Not)A;Brand";v="24""#
        );
        let nov_25 = 20_782;
        assert_eq!(chrome_version(nov_25, 0.0), 152);
        assert_eq!(chrome_version(nov_25, 0.999), 149);
        // Go truncates toward zero: 35 days early is one version back.
        assert_eq!(chrome_version(20_466, 0.0), 143);
    }
}
