//! Minimal engine logging: a global level and an optional callback (the CLI prints to stderr, the
//! FFI forwards to JavaScript). Without a callback, messages at or above the level go to stderr.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, RwLock};

/// Log severity, most severe first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Errors.
    Error = 0,
    /// Warnings (e.g. a device falling back to the CPU).
    Warn = 1,
    /// Progress and timings.
    Info = 2,
    /// Details for debugging.
    Debug = 3,
}

/// A log sink.
pub type Callback = Arc<dyn Fn(Level, &str) + Send + Sync>;

static LEVEL: AtomicU8 = AtomicU8::new(Level::Warn as u8);
static CALLBACK: RwLock<Option<Callback>> = RwLock::new(None);

/// Set the most verbose level that is emitted.
pub fn set_level(level: Level) {
    LEVEL.store(level as u8, Ordering::Relaxed);
}

/// Send messages to `callback` instead of stderr (`None` restores stderr).
pub fn set_callback(callback: Option<Callback>) {
    if let Ok(mut slot) = CALLBACK.write() {
        *slot = callback;
    }
}

/// Emit a message at `level`.
pub fn log(level: Level, message: &str) {
    if level as u8 > LEVEL.load(Ordering::Relaxed) {
        return;
    }
    let callback = CALLBACK.read().ok().and_then(|c| c.clone());
    match callback {
        Some(cb) => cb(level, message),
        None => eprintln!("local-llm [{level:?}] {message}"),
    }
}

/// Emit a warning.
pub fn warn(message: &str) {
    log(Level::Warn, message);
}
