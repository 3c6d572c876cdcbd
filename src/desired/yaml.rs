//! YAML reading: multi-document files into JSON values, and JSON pointers
//! back to line and column.
//!
//! Parsing reads like serde-saphyr configured like kubectl (YAML 1.1 octal
//! and booleans, duplicate keys rejected): a fast reader over
//! its event stream (`yaml_value`) builds the values, and serde-saphyr itself
//! reads whatever that reader leaves to it, errors included. Positions are only needed
//! when there is something to report, so [`locate`] re-reads the file's event
//! stream on demand instead of carrying spans through every value: a valid
//! repository pays nothing for them.

use std::collections::HashMap;

use serde_json::Value;
use serde_saphyr::granit_parser::{Event, Parser};

use super::yaml_value;
use crate::diagnostic::{Diagnostic, child};

/// Parses every non-empty document of one file.
///
/// On a syntax error returns the diagnostic for it (with position); the file
/// then contributes no documents.
pub fn parse_documents(path: &str, text: &str) -> Result<Vec<Value>, Diagnostic> {
    match yaml_value::read(text) {
        Some(documents) => Ok(documents),
        None => parse_documents_upstream(path, text),
    }
}

/// The fast reader alone: every non-null document, or `None` when it leaves
/// the file to serde-saphyr. Public so that tests and benches can compare
/// it with [`parse_documents_upstream`].
#[doc(hidden)]
pub fn parse_documents_fast(text: &str) -> Option<Vec<Value>> {
    yaml_value::read(text)
}

/// [`parse_documents`] by serde-saphyr alone: what the fast reader
/// (`yaml_value`) leaves to it (errors, tags, merge keys, limits), and the
/// reference the tests compare that reader with.
pub fn parse_documents_upstream(path: &str, text: &str) -> Result<Vec<Value>, Diagnostic> {
    let options = serde_saphyr::options! { legacy_octal_numbers: true };
    serde_saphyr::from_multiple_with_options::<Value>(text, options)
        .map(|docs| docs.into_iter().filter(|d| !d.is_null()).collect())
        .map_err(|e| {
            let (line, column) = e.location().map_or((1, 1), |l| (l.line() as usize, l.column() as usize));
            let message = limit(&e).unwrap_or_else(|| format!("YAML syntax: {}", first_line(&e.to_string())));
            Diagnostic::at(path, line.max(1), column.max(1), message)
        })
}

/// A limit of the YAML reader, said plainly: which limit, its value, and
/// what to do. `None` for any other error.
fn limit(error: &serde_saphyr::Error) -> Option<String> {
    use serde_saphyr::Error;
    use serde_saphyr::budget::BudgetBreach as B;
    let mut error = error;
    while let Error::WithSnippet { error: inner, .. } | Error::AliasError { error: inner, .. } = error {
        error = inner;
    }
    let Error::Budget { breach, .. } = error else { return None };
    let split = "split it into several files";
    let aliases = "write the values out instead of aliasing them";
    Some(match breach {
        B::Nodes { .. } => format!(
            "YAML limit: more than 250000 values in one file (each use of an alias counts its whole value again); \
             {split}, or {aliases}"
        ),
        B::Events { .. } => format!("YAML limit: more than 1000000 YAML events in one file; {split}"),
        B::Aliases { .. } => format!("YAML limit: more than 50000 aliases (*name) in one file; {aliases}"),
        B::AliasAnchorRatio { aliases: uses, anchors } => format!(
            "YAML limit: {uses} aliases for {anchors} anchor(s), more than 10 uses per anchor (an alias bomb); \
             {aliases}"
        ),
        B::Anchors { .. } => format!("YAML limit: more than 50000 anchors (&name) in one file; {split}"),
        B::Depth { .. } => "YAML limit: nested more than 64 levels deep; flatten the document".to_owned(),
        B::Documents { .. } => format!("YAML limit: more than 1024 documents (---) in one file; {split}"),
        B::ScalarBytes { .. } => format!("YAML limit: more than 64 MiB of text in one file; {split}"),
        B::InputBytes { .. } => format!("YAML limit: the file is larger than 256 MiB; {split}"),
        B::MergeKeys { .. } => format!("YAML limit: more than 10000 merge keys (<<) in one file; {aliases}"),
        other => format!("YAML limit: {other:?}; {split}"),
    })
}

#[cfg(test)]
mod limit_tests {
    use super::parse_documents;

    #[test]
    fn a_file_over_the_node_limit_says_which_limit_and_what_to_do() {
        let labels: Vec<String> = (0..130_000).map(|i| format!("k{i}: v")).collect();
        let text = format!("spec:\n  labels: {{{}}}\n", labels.join(", "));
        let error = parse_documents("big.yaml", &text).unwrap_err();
        assert_eq!(
            error.message,
            "YAML limit: more than 250000 values in one file (each use of an alias counts its whole value again); \
             split it into several files, or write the values out instead of aliasing them"
        );
        assert_eq!(error.path, "big.yaml");
    }
}

/// The first meaningful line of a parser message, without what the
/// diagnostic already says (the position) or what only a library user can
/// act on (its option names).
fn first_line(message: &str) -> String {
    let line = message.lines().find(|l| !l.trim().is_empty()).unwrap_or(message).trim();
    let line = line.strip_prefix("error: ").unwrap_or(line);
    let line = match line.split_once(": ") {
        Some((position, rest)) if position.starts_with("line ") && position.contains(" column ") => rest,
        _ => line,
    };
    let line = line.split(", set DuplicateKeyPolicy").next().unwrap_or(line);
    plain(line)
}

/// The longest parser message shown, in characters.
const MAX_MESSAGE: usize = 300;

/// A parser message as the cutting rule shows values: the parser quotes
/// characters with Rust's escapes (`` `\u{7}' ``), which become `<U+0007>`,
/// as does any character a reader cannot see; the message is cut to
/// [`MAX_MESSAGE`] characters.
fn plain(message: &str) -> String {
    let mut out = String::new();
    let mut rest = message;
    while let Some(at) = rest.find("\\u{") {
        let (before, escape) = rest.split_at(at);
        out.push_str(before);
        let code = escape[3..].split_once('}').and_then(|(hex, tail)| {
            let c = u32::from_str_radix(hex, 16).ok().filter(|_| hex.len() <= 6)?;
            Some((c, tail))
        });
        match code {
            Some((c, tail)) => {
                out.push_str(&format!("<U+{c:04X}>"));
                rest = tail;
            }
            None => {
                out.push_str("\\u{");
                rest = &escape[3..];
            }
        }
    }
    out.push_str(rest);
    let mut shown = String::new();
    for c in out.chars().take(MAX_MESSAGE) {
        if crate::diagnostic::is_unseen(c) {
            shown.push_str(&format!("<U+{:04X}>", u32::from(c)));
        } else {
            shown.push(c);
        }
    }
    if out.chars().nth(MAX_MESSAGE).is_some() {
        shown.push('…');
    }
    shown
}

/// Line and column (1-based) of every JSON pointer in every non-empty
/// document of a file: `positions[document][pointer]`.
///
/// A pointer to a mapping entry resolves to its key, so that an unknown or
/// misspelt field is shown where it is written; a sequence item resolves to
/// the item; the empty pointer to the document's first node.
pub fn positions(text: &str) -> Vec<HashMap<String, (usize, usize)>> {
    let mut docs = Vec::new();
    let mut walker = Walker::default();
    for item in Parser::new_from_str(text) {
        let Ok((event, span)) = item else { break };
        let at = (span.start.line().max(1), span.start.col() + 1);
        match event {
            Event::DocumentStart(..) => walker = Walker::default(),
            Event::DocumentEnd if !walker.empty => docs.push(std::mem::take(&mut walker.found)),
            Event::Scalar(value, ..) => walker.scalar(&value, at),
            Event::Alias(..) => walker.scalar("", at),
            Event::MappingStart(..) => walker.open(Frame::Map { key: None }, at),
            Event::SequenceStart(..) => walker.open(Frame::Seq { index: 0 }, at),
            Event::MappingEnd | Event::SequenceEnd => walker.close(),
            _ => {}
        }
    }
    docs
}

/// Fills in line and column of diagnostics about one file's documents.
pub fn locate(text: &str, diagnostics: &mut [&mut Diagnostic]) {
    let positions = positions(text);
    for d in diagnostics.iter_mut() {
        let Some(doc) = d.document.and_then(|i| positions.get(i)) else { continue };
        let mut pointer = d.pointer.as_str();
        // Fall back to the nearest enclosing node that exists (a missing field
        // is reported at its parent).
        let (line, column) = loop {
            if let Some(p) = doc.get(pointer) {
                break *p;
            }
            match pointer.rfind('/') {
                Some(i) => pointer = &pointer[..i],
                None => break (1, 1),
            }
        };
        d.line = line;
        d.column = column;
    }
}

enum Frame {
    Map { key: Option<String> },
    Seq { index: usize },
}

#[derive(Default)]
struct Walker {
    stack: Vec<(String, Frame)>,
    found: HashMap<String, (usize, usize)>,
    empty: bool,
    started: bool,
}

impl Walker {
    /// The pointer of the node that starts now, or None when it is a key.
    fn next_pointer(&mut self, at: (usize, usize)) -> Option<String> {
        let Some((pointer, frame)) = self.stack.last_mut() else {
            self.found.entry(String::new()).or_insert(at);
            return Some(String::new());
        };
        match frame {
            Frame::Map { key } => key.take().map(|k| child(pointer, k)),
            Frame::Seq { index } => {
                let p = child(pointer, *index);
                *index += 1;
                self.found.entry(p.clone()).or_insert(at);
                Some(p)
            }
        }
    }

    fn scalar(&mut self, value: &str, at: (usize, usize)) {
        if !self.started {
            self.started = true;
            self.empty = value.is_empty() || value == "~" || value == "null";
        }
        if self.next_pointer(at).is_none() {
            // A key: remember it, and record the entry's position at the key.
            if let Some((pointer, Frame::Map { key })) = self.stack.last_mut() {
                let p = child(pointer, value);
                self.found.entry(p).or_insert(at);
                *key = Some(value.to_owned());
            }
        }
    }

    fn open(&mut self, frame: Frame, at: (usize, usize)) {
        self.started = true;
        match self.next_pointer(at) {
            Some(p) => {
                self.found.entry(p.clone()).or_insert(at);
                self.stack.push((p, frame));
            }
            // A complex key: not addressable by a JSON pointer; track depth only.
            None => self.stack.push(("\u{0}".to_owned(), frame)),
        }
    }

    fn close(&mut self) {
        self.stack.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn octal_and_booleans_read_like_kubectl() {
        let docs = parse_documents("f.yaml", "mode: 0755\nflag: yes\n").unwrap();
        assert_eq!(docs[0]["mode"], 493);
        assert_eq!(docs[0]["flag"], true);
    }

    #[test]
    fn empty_documents_are_skipped() {
        let docs = parse_documents("f.yaml", "---\n# only a comment\n---\na: 1\n---\n").unwrap();
        assert_eq!(docs.len(), 1);
    }

    #[test]
    fn syntax_errors_carry_a_position() {
        let err = parse_documents("f.yaml", "a: 1\nb: [1, 2\n").unwrap_err();
        assert!(err.line >= 2, "{err}");
        assert!(err.message.starts_with("YAML syntax: "), "{err}");
        assert!(!err.message.contains("line "), "the position is not repeated: {err}");
    }

    #[test]
    fn duplicate_keys_are_rejected() {
        assert!(parse_documents("f.yaml", "a: 1\na: 2\n").is_err());
    }

    #[test]
    fn pointers_resolve_to_keys_and_items() {
        let text = "---\n# nothing\n---\nkind: X\nspec:\n  items:\n  - a: 1\n    b: 2\n  - c\n---\nother: {x/y: 3}\n";
        let p = positions(text);
        assert_eq!(p.len(), 2);
        assert_eq!(p[0][""], (4, 1));
        assert_eq!(p[0]["/spec"], (5, 1));
        assert_eq!(p[0]["/spec/items/0"], (7, 5));
        assert_eq!(p[0]["/spec/items/0/b"], (8, 5));
        assert_eq!(p[0]["/spec/items/1"], (9, 5));
        assert_eq!(p[1]["/other/x~1y"], (11, 9));
    }

    #[test]
    fn locate_falls_back_to_the_nearest_parent() {
        let mut d = Diagnostic::error("f.yaml", 0, "/spec/missing", "m");
        locate("spec:\n  a: 1\n", &mut [&mut d]);
        assert_eq!((d.line, d.column), (1, 1));
    }
}
