//! PowerShell scripts read by a real PowerShell grammar
//! (tree-sitter-powershell), since no Windows host runs them here: a
//! script must parse without an `ERROR` or `MISSING` node, and every base64
//! value in it must be the whole content of a string literal, never a
//! bare word in a command's position or arguments. The dialect's scripts
//! are sent wrapped (`dialect::powershell::wrap`): [`check_wrapped`] reads
//! the wrapper, then the script inside it.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use tree_sitter::{Node, Parser, Tree};

/// What a checked script holds: the decoded text of each base64 string
/// literal, in script order.
#[derive(Debug, Default)]
pub struct Checked {
    /// Decoded base64 literals.
    pub decoded: Vec<String>,
}

impl Checked {
    /// Whether `value` reached the script inside a base64 literal (as the
    /// whole literal, inside a JSON document's string, or inside a text).
    pub fn carries(&self, value: &str) -> bool {
        self.decoded.iter().any(|d| d.contains(value) || json_strings(d).iter().any(|s| s.contains(value)))
    }
}

fn json_strings(text: &str) -> Vec<String> {
    fn walk(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::String(s) => out.push(s.clone()),
            serde_json::Value::Array(a) => a.iter().for_each(|v| walk(v, out)),
            serde_json::Value::Object(o) => o.values().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(text) {
        walk(&v, &mut out);
    }
    out
}

/// Parses `script` with the PowerShell grammar.
pub fn parse(script: &str) -> Tree {
    let mut parser = Parser::new();
    parser.set_language(&tree_sitter_powershell::LANGUAGE.into()).expect("the PowerShell grammar loads");
    parser.parse(script, None).expect("the parser returns a tree")
}

/// Checks a script (readable form): no syntax error, base64 only inside
/// string literals. Returns what its base64 literals decode to.
pub fn check(script: &str) -> Result<Checked, String> {
    let tree = parse(script);
    let mut problems = Vec::new();
    let mut checked = Checked::default();
    visit(tree.root_node(), script, Within::default(), &mut problems, &mut checked);
    if problems.is_empty() {
        Ok(checked)
    } else {
        problems.truncate(10);
        Err(problems.join("\n"))
    }
}

/// Checks what is sent on standard input: the one-line wrapper, then the
/// script it decodes. Returns the inner script's findings.
pub fn check_wrapped(input: &str) -> Result<Checked, String> {
    let outer = check(input).map_err(|e| format!("the wrapper: {e}"))?;
    let [inner] = outer.decoded.as_slice() else {
        return Err(format!("the wrapper carries {} base64 literals, not one", outer.decoded.len()));
    };
    check(inner).map_err(|e| format!("the wrapped script: {e}"))
}

/// Panics with the problems of `script` (named `what`), if any.
pub fn assert_valid(what: &str, script: &str) -> Checked {
    check(script).unwrap_or_else(|e| panic!("{what} is not a sound PowerShell script:\n{e}"))
}

fn visit(node: Node<'_>, text: &str, within: Within, problems: &mut Vec<String>, checked: &mut Checked) {
    let at = || {
        let p = node.start_position();
        let line = text.lines().nth(p.row).unwrap_or_default();
        let shown: String = line.chars().take(160).collect();
        format!("line {} column {}: {shown}", p.row + 1, p.column + 1)
    };
    if node.is_error() {
        problems.push(format!("syntax error (ERROR node) at {}", at()));
        return;
    }
    if node.is_missing() {
        problems.push(format!("syntax error (MISSING {}) at {}", node.kind(), at()));
        return;
    }
    let within = Within { string: within.string || is_string(node.kind()), name: within.name || is_name(node.kind()) };
    if node.kind() == "verbatim_string_characters" {
        // `'...'` with its quotes; a base64 value fills it exactly.
        let raw = &text[node.byte_range()];
        let content = raw.strip_prefix('\'').and_then(|r| r.strip_suffix('\'')).unwrap_or(raw);
        if let Some(decoded) = decode(content) {
            checked.decoded.push(decoded);
        }
    }
    if node.child_count() == 0 && !within.string && !within.name {
        let raw = &text[node.byte_range()];
        if decode(raw).is_some() && looks_encoded(raw) {
            problems.push(format!(
                "base64 value {raw:?} outside a string literal (a {} in a {}) at {}",
                node.kind(),
                node.parent().map_or("-", |p| p.kind()),
                at()
            ));
        }
    }
    let mut cursor = node.walk();
    for child in node.children(&mut cursor) {
        visit(child, text, within, problems, checked);
    }
}

/// Where a node is: inside a string literal, or inside a name the
/// script's fixed text spells (a member, a type, a variable, a parameter),
/// where no value is ever put.
#[derive(Clone, Copy, Default)]
struct Within {
    string: bool,
    name: bool,
}

fn is_name(kind: &str) -> bool {
    matches!(kind, "member_name" | "type_literal" | "type_spec" | "type_name" | "variable" | "command_parameter")
}

fn is_string(kind: &str) -> bool {
    matches!(
        kind,
        "string_literal"
            | "verbatim_string_characters"
            | "expandable_string_literal"
            | "verbatim_here_string_characters"
            | "expandable_here_string_literal"
    )
}

/// Base64 that decodes to UTF-8 (what the dialects' values are).
fn decode(text: &str) -> Option<String> {
    if text.len() < 4 || !text.len().is_multiple_of(4) {
        return None;
    }
    let bytes = STANDARD.decode(text).ok()?;
    String::from_utf8(bytes).ok()
}

/// A token the scripts' fixed text never holds: PowerShell names and
/// keywords are letters and dashes; base64 of a value of two or more
/// characters has a digit, `+`, `/`, `=` or mixed case inside a word.
fn looks_encoded(token: &str) -> bool {
    token.chars().any(|c| c.is_ascii_digit() || "+/=".contains(c))
        || (token.len() >= 8 && token.chars().skip(1).any(|c| c.is_ascii_uppercase()) && !token.contains('-'))
}
