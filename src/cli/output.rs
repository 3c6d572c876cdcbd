//! Writing to stdout and stderr. Write errors (a closed pipe) are ignored:
//! the exit code still tells the verdict.
//!
//! Results go to stdout as they are. Messages for the operator go to stderr:
//! as `winfleet: …` lines, or, with `--log-format json`, as tracing events
//! so that every stderr line is JSON.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

use winfleet::diagnostic::Diagnostic;

/// Whether stderr messages are JSON log events (`--log-format json`).
static JSON: AtomicBool = AtomicBool::new(false);

/// Sends the stderr messages through the JSON logs from now on.
pub fn set_json(json: bool) {
    JSON.store(json, Ordering::Relaxed);
}

fn json() -> bool {
    JSON.load(Ordering::Relaxed)
}

/// Writes text to stdout as is.
pub fn out(text: &str) {
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}

/// Says something went wrong (an ERROR event in JSON).
pub fn error(line: &str) {
    if json() {
        tracing::error!(target: "winfleet", "{line}");
    } else {
        plain(line);
    }
}

/// Says something the operator should heed, such as a degraded mode (a
/// WARN event in JSON).
pub fn warn(line: &str) {
    if json() {
        tracing::warn!(target: "winfleet", "{line}");
    } else {
        plain(line);
    }
}

/// Says what is going on (an INFO event in JSON).
pub fn info(line: &str) {
    if json() {
        tracing::info!(target: "winfleet", "{line}");
    } else {
        plain(line);
    }
}

fn plain(line: &str) {
    let _ = writeln!(std::io::stderr().lock(), "winfleet: {line}");
}

/// Writes every diagnostic to stderr, one per line (in JSON, one event
/// each, an error at ERROR and a warning at WARN, with its location).
pub fn diagnostics(diagnostics: &[Diagnostic]) {
    if json() {
        for d in diagnostics {
            let (path, line, column, pointer, message) = (&d.path, d.line, d.column, &d.pointer, &d.message);
            if d.is_error() {
                tracing::error!(target: "winfleet", path, line, column, pointer, "{message}");
            } else {
                tracing::warn!(target: "winfleet", path, line, column, pointer, "{message}");
            }
        }
        return;
    }
    let mut err = std::io::stderr().lock();
    for d in diagnostics {
        let _ = writeln!(err, "{d}");
    }
}
