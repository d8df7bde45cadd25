//! Xray-style access log: one line per accepted or rejected session, to stderr or a file.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use skiff_config::LogTarget;

pub enum AccessLog {
    Off,
    Stderr,
    File(Mutex<File>),
}

impl AccessLog {
    pub fn open(target: &LogTarget) -> std::io::Result<AccessLog> {
        Ok(match target {
            LogTarget::Off => AccessLog::Off,
            LogTarget::Stderr => AccessLog::Stderr,
            LogTarget::File(path) => AccessLog::File(Mutex::new(
                OpenOptions::new().create(true).append(true).open(path)?,
            )),
        })
    }

    pub fn enabled(&self) -> bool {
        !matches!(self, AccessLog::Off)
    }

    /// Writes `line` prefixed with a UTC timestamp. Failures to log never fail a connection.
    pub fn write(&self, line: std::fmt::Arguments<'_>) {
        let text = format!("{} {}\n", timestamp(SystemTime::now()), line);
        match self {
            AccessLog::Off => {}
            AccessLog::Stderr => {
                let _ = std::io::stderr().write_all(text.as_bytes());
            }
            AccessLog::File(file) => {
                if let Ok(mut f) = file.lock() {
                    let _ = f.write_all(text.as_bytes());
                }
            }
        }
    }
}

/// `YYYY/MM/DD hh:mm:ss` in UTC, as Xray prints it, without a date-time dependency.
fn timestamp(now: SystemTime) -> String {
    let secs = now
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days as i64);
    format!(
        "{year:04}/{month:02}/{day:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 → proleptic Gregorian (year, month, day).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn formats_utc() {
        let t = UNIX_EPOCH + Duration::from_secs(1_795_242_136); // 2026-11-21 06:22:16 UTC
        assert_eq!(timestamp(t), "2026/11/21 06:22:16");
        assert_eq!(timestamp(UNIX_EPOCH), "1970/01/01 00:00:00");
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }
}
