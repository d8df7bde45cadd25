//! The error log (Xray's `log.error` and `loglevel`) through tracing. Per-packet events stay at
//! debug; info tells an operator what listens where and what failed to start.

use std::fs::OpenOptions;
use std::sync::Mutex;

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
            let file = OpenOptions::new().create(true).append(true).open(path)?;
            builder
                .with_ansi(false)
                .with_writer(Mutex::new(file))
                .finish()
                .with(quiet_h2)
                .try_init()
        }
    };
    // A second init (tests) keeps the first subscriber; that is fine.
    let _ = result;
    Ok(())
}
