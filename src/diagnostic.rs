//! Diagnostics: what validation says about a repository, with file, line,
//! column and JSON pointer.
//!
//! Owns the one printed format, `path:line:column: /json/pointer: message`,
//! and the ordering that makes output deterministic. It never decides what is
//! wrong; the stages of [`crate::desired`] do.

use std::fmt;

/// How serious a diagnostic is: errors reject the revision, warnings do not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The revision is invalid and nothing from it is applied.
    Error,
    /// Worth a reviewer's attention; the revision stays valid.
    Warning,
}

/// One finding about the repository.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// Repository-relative path of the file, `/`-separated.
    pub path: String,
    /// 1-based line; 0 until located (see [`crate::desired::yaml::locate`]).
    pub line: usize,
    /// 1-based column; 0 until located.
    pub column: usize,
    /// Index of the YAML document in the file, when the finding is about one.
    #[serde(skip)]
    pub document: Option<usize>,
    /// JSON pointer inside the document (empty when the finding is about a
    /// file or a syntax error rather than a field).
    pub pointer: String,
    /// What is wrong and, where it helps, how to fix it.
    pub message: String,
}

impl Diagnostic {
    /// An error about a field of a document, located later.
    pub fn error(path: &str, document: usize, pointer: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(Severity::Error, path, Some(document), pointer.into(), message.into())
    }

    /// A warning about a field of a document, located later.
    pub fn warning(path: &str, document: usize, pointer: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(Severity::Warning, path, Some(document), pointer.into(), message.into())
    }

    /// An error about a file position that is already known (syntax, keys).
    pub fn at(path: &str, line: usize, column: usize, message: impl Into<String>) -> Self {
        let mut d = Self::new(Severity::Error, path, None, String::new(), message.into());
        d.line = line;
        d.column = column;
        d
    }

    fn new(severity: Severity, path: &str, document: Option<usize>, pointer: String, message: String) -> Self {
        Self { severity, path: path.to_owned(), line: 0, column: 0, document, pointer, message }
    }

    /// Whether this diagnostic rejects the revision.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: ", self.path, self.line, self.column)?;
        if !self.pointer.is_empty() {
            write!(f, "{}: ", self.pointer)?;
        }
        if self.severity == Severity::Warning {
            f.write_str("warning: ")?;
        }
        f.write_str(&self.message)
    }
}

/// Sorts diagnostics by file, position, then text, so output is stable.
pub fn sort(diagnostics: &mut [Diagnostic]) {
    diagnostics.sort_by(|a, b| {
        (&a.path, a.line, a.column, &a.pointer, &a.message).cmp(&(&b.path, b.line, b.column, &b.pointer, &b.message))
    });
}

/// Escapes one reference token of a JSON pointer (RFC 6901).
pub fn escape_token(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// Appends `token` to `pointer` as a new reference token.
pub fn child(pointer: &str, token: impl fmt::Display) -> String {
    format!("{pointer}/{}", escape_token(&token.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn displays_path_position_pointer_and_message() {
        let mut d = Diagnostic::error("a/b.yaml", 0, "/spec/x", "bad");
        d.line = 3;
        d.column = 5;
        assert_eq!(d.to_string(), "a/b.yaml:3:5: /spec/x: bad");
    }

    #[test]
    fn warnings_say_so_and_file_level_findings_have_no_pointer() {
        let mut d = Diagnostic::warning("x.yaml", 0, "", "careful");
        d.line = 1;
        d.column = 1;
        assert_eq!(d.to_string(), "x.yaml:1:1: warning: careful");
    }

    #[test]
    fn pointer_tokens_are_escaped() {
        assert_eq!(child("/data", "a/b~c"), "/data/a~1b~0c");
    }
}
