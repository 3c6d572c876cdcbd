//! The framing of what node scripts print: NUL-terminated UTF-8 tokens
//! after a start marker and a format version (`Tokens`), why a report
//! could not be read ([`ReportError`]), and a service's state as the
//! dialects print it ([`ServiceState`]). Pure.

use std::fmt;

/// The state of a service on a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServiceState {
    /// Running (`Running`, `active`).
    Running,
    /// Installed, not running.
    Stopped,
    /// Not installed.
    Absent,
    /// Anything else the node said (`failed`, `StartPending`, `unknown`).
    Other(String),
}

impl ServiceState {
    /// Reads a state as the dialects print it.
    pub fn parse(text: &str) -> Self {
        match text.to_ascii_lowercase().as_str() {
            "running" | "active" => ServiceState::Running,
            "stopped" | "inactive" => ServiceState::Stopped,
            "absent" => ServiceState::Absent,
            _ => ServiceState::Other(text.to_owned()),
        }
    }
}

impl fmt::Display for ServiceState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServiceState::Running => f.write_str("running"),
            ServiceState::Stopped => f.write_str("stopped"),
            ServiceState::Absent => f.write_str("absent"),
            ServiceState::Other(s) => f.write_str(s),
        }
    }
}

/// Why a report could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReportError {
    /// The start marker never came: the script did not run.
    #[error("no {0} report in the output (did the script run? its output began: {1:?})")]
    NoMarker(&'static str, String),
    /// A version this build does not read.
    #[error("report format version {0:?} is not supported")]
    Version(String),
    /// The output stopped before `end` (connection lost, script killed).
    #[error("the report was cut off before its end")]
    Truncated,
    /// The script caught an error on the node.
    #[error("the node reported: {0}")]
    Node(String),
    /// A token this parser does not know.
    #[error("unexpected token {0:?} in the report")]
    Unexpected(String),
}

/// Tokens of a report after its start marker and version.
pub(crate) struct Tokens<'a> {
    inner: std::str::Split<'a, char>,
}

impl<'a> Tokens<'a> {
    /// Finds `marker`, checks the version and returns the tokens after it.
    pub(crate) fn after_marker(text: &'a str, marker: &'static str, version: &str) -> Result<Self, ReportError> {
        let start = text
            .match_indices(marker)
            .map(|(i, _)| i)
            .find(|&i| text[i + marker.len()..].starts_with('\0'))
            .ok_or_else(|| ReportError::NoMarker(marker, text.chars().take(200).collect()))?;
        let rest = &text[start + marker.len() + 1..];
        let Some(end) = rest.rfind('\0') else { return Err(ReportError::Truncated) };
        let mut tokens = Tokens { inner: rest[..end].split('\0') };
        match tokens.next()? {
            v if v == version => Ok(tokens),
            v => Err(ReportError::Version(v.to_owned())),
        }
    }

    /// The next token; running out means the report was cut off.
    pub(crate) fn next(&mut self) -> Result<&'a str, ReportError> {
        self.inner.next().ok_or(ReportError::Truncated)
    }
}
