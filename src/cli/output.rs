//! Writing to stdout and stderr. Write errors (a closed pipe) are ignored:
//! the exit code still tells the verdict.

use std::io::Write;

use winfleet::diagnostic::Diagnostic;

/// Writes text to stdout as is.
pub fn out(text: &str) {
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}

/// Writes one line to stderr.
pub fn error(line: &str) {
    let _ = writeln!(std::io::stderr().lock(), "winfleet: {line}");
}

/// Writes every diagnostic to stderr, one per line.
pub fn diagnostics(diagnostics: &[Diagnostic]) {
    let mut err = std::io::stderr().lock();
    for d in diagnostics {
        let _ = writeln!(err, "{d}");
    }
}
