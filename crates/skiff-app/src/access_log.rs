//! Xray-style access log: one line per accepted or rejected session, to stderr or a file.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};
use std::time::SystemTime;

use skiff_config::LogTarget;

pub enum AccessLog {
    Off,
    Stderr,
    File { path: PathBuf, file: Mutex<File> },
}

/// Reopens the error log's file (set by whoever installed the error log): what the API's
/// RestartLogger and a logrotate `postrotate` need, alongside [`AccessLog::reopen`].
pub static ERROR_LOG_REOPEN: OnceLock<Box<dyn Fn() -> std::io::Result<()> + Send + Sync>> =
    OnceLock::new();

impl AccessLog {
    pub fn open(target: &LogTarget) -> std::io::Result<AccessLog> {
        Ok(match target {
            LogTarget::Off => AccessLog::Off,
            LogTarget::Stderr => AccessLog::Stderr,
            LogTarget::File(path) => AccessLog::File {
                path: path.clone(),
                file: Mutex::new(OpenOptions::new().create(true).append(true).open(path)?),
            },
        })
    }

    /// Opens the file again (after a rotation moved it away); lines go to the new one.
    pub fn reopen(&self) -> std::io::Result<()> {
        if let AccessLog::File { path, file } = self {
            let fresh = OpenOptions::new().create(true).append(true).open(path)?;
            *file.lock().unwrap_or_else(|p| p.into_inner()) = fresh;
        }
        Ok(())
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
            AccessLog::File { file, .. } => {
                if let Ok(mut f) = file.lock() {
                    let _ = f.write_all(text.as_bytes());
                }
            }
        }
    }
}

/// `YYYY/MM/DD hh:mm:ss` in UTC, as Xray prints it.
fn timestamp(now: SystemTime) -> String {
    let (y, mo, d, h, mi, s) = skiff_core::time::utc_parts(now);
    format!("{y:04}/{mo:02}/{d:02} {h:02}:{mi:02}:{s:02}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn formats_utc() {
        let t = UNIX_EPOCH + Duration::from_secs(1_795_242_136); // 2026-11-21 06:22:16 UTC
        assert_eq!(timestamp(t), "2026/11/21 06:22:16");
        assert_eq!(timestamp(UNIX_EPOCH), "1970/01/01 00:00:00");
    }
}
