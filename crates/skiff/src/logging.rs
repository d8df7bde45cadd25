//! The error log (Xray's `log.error` and `loglevel`) through tracing. Per-packet events stay at
//! debug; info tells an operator what listens where and what failed to start.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use skiff_config::{LogLevel, LogPlan, LogTarget};
use tracing::level_filters::LevelFilter;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

pub fn init(plan: &LogPlan) -> std::io::Result<()> {
    let level = match plan.level {
        LogLevel::Debug => LevelFilter::DEBUG,
        LogLevel::Info => LevelFilter::INFO,
        LogLevel::Warning => LevelFilter::WARN,
        LogLevel::Error => LevelFilter::ERROR,
        LogLevel::None => LevelFilter::OFF,
    };
    // h2 (gRPC, DoH) logs every frame at debug: only its warnings reach the error log.
    let quiet_h2 = Targets::new()
        .with_default(level)
        .with_target("h2", LevelFilter::WARN.min(level));
    let builder = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_target(false);
    let result = match &plan.error {
        LogTarget::Off => return Ok(()),
        LogTarget::Stderr => builder
            .with_writer(std::io::stderr)
            .finish()
            .with(quiet_h2)
            .try_init(),
        LogTarget::File(path) => {
            let file = ReopenableFile::open(path.clone())?;
            let reopen = file.clone();
            let _ = skiff_app::access_log::ERROR_LOG_REOPEN.set(Box::new(move || reopen.reopen()));
            builder
                .with_ansi(false)
                .with_writer(move || file.clone())
                .finish()
                .with(quiet_h2)
                .try_init()
        }
    };
    // A second init (tests) keeps the first subscriber; that is fine.
    let _ = result;
    Ok(())
}

/// The error log's file, opened again on request (the API's RestartLogger, after a
/// logrotate moved it away): every clone writes to the current file.
#[derive(Clone)]
struct ReopenableFile {
    path: PathBuf,
    file: Arc<Mutex<File>>,
}

impl ReopenableFile {
    fn open(path: PathBuf) -> std::io::Result<ReopenableFile> {
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        Ok(ReopenableFile {
            path,
            file: Arc::new(Mutex::new(file)),
        })
    }

    fn reopen(&self) -> std::io::Result<()> {
        let fresh = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        *self.file.lock().unwrap_or_else(|p| p.into_inner()) = fresh;
        Ok(())
    }
}

impl Write for ReopenableFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.file
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.lock().unwrap_or_else(|p| p.into_inner()).flush()
    }
}
