//! Engine logs for JavaScript, pull-style: while capture is on, log records queue up (at most
//! [`MAX_QUEUED`], oldest dropped) and JavaScript awaits [`next_log_records`].

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use local_llm_engine::log::{self, Level};
use tokio::sync::Notify;

const MAX_QUEUED: usize = 1000;

static QUEUE: Mutex<VecDeque<LogRecord>> = Mutex::new(VecDeque::new());
static CAPTURE: AtomicBool = AtomicBool::new(false);

fn notify() -> &'static Notify {
    static NOTIFY: std::sync::OnceLock<Notify> = std::sync::OnceLock::new();
    NOTIFY.get_or_init(Notify::new)
}

fn queue() -> MutexGuard<'static, VecDeque<LogRecord>> {
    QUEUE.lock().unwrap_or_else(|p| p.into_inner())
}

/// Log severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum LogLevel {
    /// Details for debugging.
    Debug,
    /// Progress and timings.
    Info,
    /// Warnings.
    Warn,
    /// Errors.
    Error,
}

impl From<Level> for LogLevel {
    fn from(l: Level) -> Self {
        match l {
            Level::Debug => LogLevel::Debug,
            Level::Info => LogLevel::Info,
            Level::Warn => LogLevel::Warn,
            Level::Error => LogLevel::Error,
        }
    }
}

/// One log message.
#[derive(Debug, Clone, uniffi::Record)]
pub struct LogRecord {
    /// Severity.
    pub level: LogLevel,
    /// The message.
    pub message: String,
}

/// Emit messages at `level` and more severe.
#[uniffi::export]
pub fn set_log_level(level: LogLevel) {
    log::set_level(match level {
        LogLevel::Debug => Level::Debug,
        LogLevel::Info => Level::Info,
        LogLevel::Warn => Level::Warn,
        LogLevel::Error => Level::Error,
    });
}

/// Queue log messages for [`next_log_records`] (`true`) or print them to stderr (`false`;
/// a pending `next_log_records` then returns an empty list).
#[uniffi::export]
pub fn set_log_capture(enabled: bool) {
    CAPTURE.store(enabled, Ordering::Relaxed);
    if enabled {
        log::set_callback(Some(Arc::new(|level: Level, message: &str| {
            let mut q = queue();
            if q.len() >= MAX_QUEUED {
                q.pop_front();
            }
            q.push_back(LogRecord {
                level: level.into(),
                message: message.to_string(),
            });
            drop(q);
            notify().notify_one();
        })));
    } else {
        log::set_callback(None);
        queue().clear();
        notify().notify_one();
    }
}

/// Wait for queued log records; returns an empty list once capture is off.
#[uniffi::export]
pub async fn next_log_records() -> Vec<LogRecord> {
    loop {
        let records: Vec<LogRecord> = queue().drain(..).collect();
        if !records.is_empty() || !CAPTURE.load(Ordering::Relaxed) {
            return records;
        }
        notify().notified().await;
    }
}
