//! Writing to stdout and stderr. Write errors (a closed pipe) are ignored:
//! the exit code still tells the verdict.
//!
//! Results go to stdout as they are. Messages for the operator go to stderr:
//! as `winfleet: …` lines, or, with `--log-format json`, as tracing events
//! so that every stderr line is JSON.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

use winfleet::diagnostic::Diagnostic;

use super::colour::{self, Stream};

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

/// Writes a text plan or round report to stdout, coloured on a terminal.
pub fn out_plan(text: &str) {
    if colour::enabled(Stream::Stdout) { out(&colour::plan(text)) } else { out(text) }
}

/// Writes `winfleet status`'s table to stdout, coloured on a terminal.
pub fn out_status(text: &str) {
    if colour::enabled(Stream::Stdout) { out(&colour::status(text)) } else { out(text) }
}

/// An error and its causes joined with ": ", each said once: a cause whose
/// words its wrapper already says (thiserror's `{source}` in a message) is
/// not repeated.
pub fn said_once(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let words = cause.to_string();
        if words.is_empty() || text.contains(&words) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&words);
    }
    text
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

/// Diagnostics with the same severity, file and message shown each with
/// its location; the rest of such a group is one line with their count.
pub const SHOWN_PER_GROUP: usize = 3;

/// Writes the diagnostics to stderr, one per line (in JSON, one event
/// each, an error at ERROR and a warning at WARN, with its location);
/// beyond [`SHOWN_PER_GROUP`] of the same message in the same file, one
/// line (event) says how many more there are and where the first is.
pub fn diagnostics(diagnostics: &[Diagnostic]) {
    let (shown, folded) = group(diagnostics);
    if json() {
        for d in shown {
            let (path, line, column, pointer, message) = (&d.path, d.line, d.column, &d.pointer, &d.message);
            if d.is_error() {
                tracing::error!(target: "winfleet", path, line, column, pointer, "{message}");
            } else {
                tracing::warn!(target: "winfleet", path, line, column, pointer, "{message}");
            }
        }
        for (d, more) in folded {
            let (path, pointer, message) = (&d.path, &d.pointer, &d.message);
            if d.is_error() {
                tracing::error!(target: "winfleet", path, more, first = pointer, "{more} more: {message}");
            } else {
                tracing::warn!(target: "winfleet", path, more, first = pointer, "{more} more: {message}");
            }
        }
        return;
    }
    let coloured = colour::enabled(Stream::Stderr);
    let paint = |line: String, error: bool| if coloured { colour::diagnostic(&line, error) } else { line };
    let mut err = std::io::stderr().lock();
    for d in shown {
        let _ = writeln!(err, "{}", paint(d.to_string(), d.is_error()));
    }
    for (d, more) in folded {
        let line = format!("{}: {more} more like this, from {}: {}", d.path, d.pointer, d.message);
        let _ = writeln!(err, "{}", paint(line, d.is_error()));
    }
}

/// The diagnostics to show in full, in their order, and per group past
/// [`SHOWN_PER_GROUP`] the first one left out with the count left out.
fn group(diagnostics: &[Diagnostic]) -> (Vec<&Diagnostic>, Vec<(&Diagnostic, usize)>) {
    let mut seen: std::collections::HashMap<(bool, &str, &str), usize> = std::collections::HashMap::new();
    let (mut shown, mut folded): (Vec<&Diagnostic>, Vec<(&Diagnostic, usize)>) = (Vec::new(), Vec::new());
    let mut first_folded: std::collections::HashMap<(bool, &str, &str), usize> = std::collections::HashMap::new();
    for d in diagnostics {
        let key = (d.is_error(), d.path.as_str(), d.message.as_str());
        let count = seen.entry(key).or_default();
        *count += 1;
        if *count <= SHOWN_PER_GROUP {
            shown.push(d);
        } else if let Some(&at) = first_folded.get(&key) {
            folded[at].1 += 1;
        } else {
            first_folded.insert(key, folded.len());
            folded.push((d, 1));
        }
    }
    (shown, folded)
}
