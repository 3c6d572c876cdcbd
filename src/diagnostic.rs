//! Diagnostics: what validation says about a repository, with file, line,
//! column and JSON pointer.
//!
//! Owns the one printed format, `path:line:column: /json/pointer: message`,
//! the ordering that makes output deterministic, and how a message shows a
//! value from the repository ([`shown`]). It never decides what is wrong;
//! the stages of [`crate::desired`] do.

use std::fmt::{self, Write};

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
            // A key is a value too: each reference token is shown cut.
            for token in self.pointer.split('/').skip(1) {
                write!(f, "/{}", shown_bare(token))?;
            }
            f.write_str(": ")?;
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

/// How many characters of a value a message shows.
pub const SHOWN_CHARS: usize = 80;

/// A value from the repository as a message shows it: in double quotes,
/// cut after [`SHOWN_CHARS`] characters with its size (`"aaa…" (1000000
/// characters)`), and each character a reader cannot see as its code point
/// (`<U+0007>`, `<U+202E>`). `{:?}` would repeat the whole value with Rust
/// escapes (`\u{7}`): a 1-million-character address once made 8.4 MB of
/// stderr (issue 23).
pub fn shown(value: &str) -> String {
    show(value, true)
}

/// [`shown`] without the quotes, for a value that is not a string (a JSON
/// document, a number).
pub fn shown_bare(value: &str) -> String {
    show(value, false)
}

fn show(value: &str, quoted: bool) -> String {
    let mut out = String::with_capacity(value.len().min(SHOWN_CHARS * 2) + 32);
    if quoted {
        out.push('"');
    }
    let mut chars = value.chars();
    for c in chars.by_ref().take(SHOWN_CHARS) {
        push_shown(&mut out, c);
    }
    let cut = chars.next().is_some();
    if cut {
        out.push('…');
    }
    if quoted {
        out.push('"');
    }
    if cut {
        let _ = write!(out, " ({} characters)", value.chars().count());
    }
    out
}

/// A composed text (an Event's note, a log message that quotes values) by
/// the same rule, within a budget of `max_bytes` instead of
/// [`SHOWN_CHARS`] characters: each character a reader cannot see as its
/// code point, and a text over the budget cut with `… (N characters)`.
/// The result is at most `max_bytes` bytes long (for `max_bytes` ≥ 48).
pub fn shown_within(text: &str, max_bytes: usize) -> String {
    let escaped_len: usize = text.chars().map(shown_len).sum();
    let room = if escaped_len <= max_bytes { max_bytes } else { max_bytes.saturating_sub(48) };
    let mut out = String::with_capacity(room.min(escaped_len) + 48);
    for c in text.chars() {
        if out.len() + shown_len(c) > room {
            let _ = write!(out, "… ({} characters)", text.chars().count());
            return out;
        }
        push_shown(&mut out, c);
    }
    out
}

fn shown_len(c: char) -> usize {
    if is_unseen(c) { format!("<U+{:04X}>", u32::from(c)).len() } else { c.len_utf8() }
}

fn push_shown(out: &mut String, c: char) {
    if is_unseen(c) {
        let _ = write!(out, "<U+{:04X}>", u32::from(c));
    } else {
        out.push(c);
    }
}

/// A character a reader cannot see, or that moves what follows: control
/// characters, line and paragraph separators, bidirectional marks,
/// embeddings, overrides and isolates, zero-width characters, the byte
/// order mark and the soft hyphen.
pub fn is_unseen(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{00AD}'
                | '\u{061C}'
                | '\u{180E}'
                | '\u{200B}'..='\u{200F}'
                | '\u{2028}'..='\u{202E}'
                | '\u{2060}'..='\u{2069}'
                | '\u{FEFF}'
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_shown_cut_with_their_size() {
        assert_eq!(shown("win-1"), "\"win-1\"");
        assert_eq!(shown(r"C:\k"), r#""C:\k""#);
        let long = "a".repeat(1_000_000);
        let text = shown(&long);
        assert_eq!(text, format!("\"{}…\" (1000000 characters)", "a".repeat(SHOWN_CHARS)));
        assert_eq!(shown(&"a".repeat(SHOWN_CHARS)), format!("\"{}\"", "a".repeat(SHOWN_CHARS)));
        assert_eq!(shown_bare("{\"a\":1}"), "{\"a\":1}");
        assert_eq!(shown(&"é".repeat(100)).chars().filter(|c| *c == 'é').count(), SHOWN_CHARS);
    }

    #[test]
    fn unseen_characters_are_shown_as_code_points() {
        assert_eq!(shown("a\u{7}b\nc"), "\"a<U+0007>b<U+000A>c\"");
        assert_eq!(shown("rtl\u{202e}txt.exe"), "\"rtl<U+202E>txt.exe\"");
        assert_eq!(shown("\u{0}"), "\"<U+0000>\"");
        assert!(!shown("x\u{85}\u{2028}\u{feff}").contains(['\u{85}', '\u{2028}', '\u{feff}']));
        assert_eq!(shown("é ünï 中文"), "\"é ünï 中文\"");
    }

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
    fn pointers_show_their_keys_cut() {
        let mut d = Diagnostic::error("x.yaml", 0, child("/spec", "k".repeat(1000) + "\n"), "unknown field");
        d.line = 1;
        d.column = 1;
        let text = d.to_string();
        assert!(
            text.starts_with(&format!("x.yaml:1:1: /spec/{}… (1001 characters): ", "k".repeat(SHOWN_CHARS))),
            "{text}"
        );
    }

    #[test]
    fn pointer_tokens_are_escaped() {
        assert_eq!(child("/data", "a/b~c"), "/data/a~1b~0c");
    }

    #[test]
    fn composed_texts_are_shown_within_their_budget_issue_35() {
        assert_eq!(shown_within("drain of win-1 failed\u{7}", 1000), "drain of win-1 failed<U+0007>");
        let long = format!("note {}", "é\u{202e}".repeat(100_000));
        let text = shown_within(&long, 1000);
        assert!(text.len() <= 1000, "{} bytes", text.len());
        assert!(text.ends_with("… (200005 characters)"), "{}", &text[text.len() - 40..]);
        assert!(!text.contains('\u{202e}'));
        let exact = "x".repeat(1000);
        assert_eq!(shown_within(&exact, 1000), exact);
    }
}
