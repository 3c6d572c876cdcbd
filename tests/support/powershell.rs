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

/// The retry loops of `script` that could spin forever: every `while`,
/// `do` and `for` loop (the scripts iterate over lists with `foreach`
/// only, so any other loop retries) must compare a counter with `-lt`,
/// `-le`, `-gt` or `-ge` in its condition, step that counter in its own
/// body (or a `for` iterator) whatever a try does, and `Start-Sleep` in
/// its own body: a step or a sleep inside a `try`, `catch` or `if` runs
/// only on some tries (issue 35, item 8). One line per loop found.
pub fn unbounded_loops(script: &str) -> Vec<String> {
    let tree = parse(script);
    let mut found = Vec::new();
    loops(tree.root_node(), script, &mut found);
    found
}

fn loops(node: Node<'_>, text: &str, found: &mut Vec<String>) {
    if matches!(node.kind(), "while_statement" | "do_statement" | "for_statement")
        && let Some(problem) = loop_problem(node, text)
    {
        let line = node.start_position().row + 1;
        let head: String = text[node.byte_range()].lines().next().unwrap_or_default().chars().take(120).collect();
        found.push(format!("line {line}: {problem}: {head}"));
    }
    let mut cursor = node.walk();
    for child in node.children(&mut cursor) {
        loops(child, text, found);
    }
}

fn loop_problem(node: Node<'_>, text: &str) -> Option<&'static str> {
    let named = |kind: &str| {
        let mut cursor = node.walk();
        node.children(&mut cursor).find(|c| c.kind() == kind)
    };
    let condition = named("while_condition").or_else(|| named("for_condition"));
    let mut counters = Vec::new();
    if let Some(condition) = condition {
        bounds(condition, text, &mut counters);
    }
    if counters.is_empty() {
        return Some("no counter compared in its condition");
    }
    // The statements of the loop's own body, not those nested in it.
    let statements: Vec<String> = named("statement_block")
        .and_then(|b| {
            let mut cursor = b.walk();
            b.children(&mut cursor).find(|c| c.kind() == "statement_list")
        })
        .map(|list| {
            let mut cursor = list.walk();
            list.named_children(&mut cursor).map(|s| text[s.byte_range()].trim().to_owned()).collect()
        })
        .unwrap_or_default();
    let iterator = named("for_iterator").map(|i| text[i.byte_range()].trim().to_owned());
    let steps = |s: &str| {
        let s = s.to_ascii_lowercase();
        counters.iter().any(|v| {
            [
                format!("{v}++"),
                format!("++{v}"),
                format!("{v}--"),
                format!("--{v}"),
                format!("{v} +="),
                format!("{v} -="),
            ]
            .iter()
            .any(|p| s.starts_with(p.as_str()))
        })
    };
    if !statements.iter().chain(iterator.iter()).any(|s| steps(s)) {
        return Some("its counter is not stepped on every try");
    }
    if !statements.iter().any(|s| s.to_ascii_lowercase().starts_with("start-sleep")) {
        return Some("no Start-Sleep on every try");
    }
    None
}

/// The variables a condition compares with an order operator.
fn bounds(node: Node<'_>, text: &str, out: &mut Vec<String>) {
    if node.kind() == "comparison_expression" {
        let mut cursor = node.walk();
        let parts: Vec<Node<'_>> = node.named_children(&mut cursor).collect();
        let ordered = parts.iter().any(|p| {
            p.kind() == "comparison_operator"
                && matches!(text[p.byte_range()].to_ascii_lowercase().as_str(), "-lt" | "-le" | "-gt" | "-ge")
        });
        if ordered {
            for p in parts.iter().filter(|p| p.kind() != "comparison_operator") {
                let operand = text[p.byte_range()].trim();
                if operand.starts_with('$') && operand[1..].chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                    out.push(operand.to_ascii_lowercase());
                }
            }
        }
    }
    let mut cursor = node.walk();
    for child in node.children(&mut cursor) {
        bounds(child, text, out);
    }
}
