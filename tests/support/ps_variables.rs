//! Rule `variable` of the reference check ([`super::ps_check`]): every
//! variable a script reads is assigned before, in document order: at the
//! script's top level, by an earlier assignment, `foreach` or the script's
//! `param` block; inside a function, by its parameters or an earlier
//! assignment in it, or by an assignment anywhere at the script's top
//! level (a function runs when called, after the top level has run up to
//! the call). PowerShell's automatic and preference variables (the
//! catalogue's `automatic_variables`, from about_Automatic_Variables and
//! about_Preference_Variables) and `$env:` are always there. A branch's
//! assignment counts for what follows it: whether every branch assigns is
//! left to reading the script.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;

use tree_sitter::Node;

use super::ps_catalogue::Catalogue;
use super::ps_check::Finding;

/// A variable's name (lower case) and whether it names the script scope;
/// `None` for `$env:` and other drives.
fn name(raw: &str) -> Option<(String, bool)> {
    let bare = raw.trim_start_matches(['$', '@']).trim_start_matches('{').trim_end_matches('}');
    let (scope, rest) = match bare.split_once(':') {
        Some((scope, rest)) => (Some(scope.to_ascii_lowercase()), rest),
        None => (None, bare),
    };
    match scope.as_deref() {
        None | Some("local" | "private") => Some((rest.to_ascii_lowercase(), false)),
        Some("script" | "global") => Some((rest.to_ascii_lowercase(), true)),
        Some(_) => None,
    }
}

/// The variable an assignment's left side is, when it is one (`$x`,
/// `[string]$x`, `$script:x`), not an element or a member of one.
fn target<'t>(left: Node<'t>, script: &str) -> Option<Node<'t>> {
    let mut all = Vec::new();
    super::ps_check::collect(left, &mut all);
    let variable = all.into_iter().rfind(|n| n.kind() == "variable")?;
    let left_text = script[left.byte_range()].trim();
    left_text.ends_with(script[variable.byte_range()].trim()).then_some(variable)
}

struct Walk<'a> {
    script: &'a str,
    automatic: BTreeSet<String>,
    /// Every top-level (and `$script:`) assignment, wherever it is.
    all_top: BTreeSet<String>,
    /// Assigned so far at the top level.
    top: BTreeSet<String>,
    /// Assigned so far in the function being read.
    local: Option<BTreeSet<String>>,
    findings: Vec<Finding>,
}

impl Walk<'_> {
    fn assign(&mut self, node: Node<'_>) {
        if let Some((n, script)) = name(&self.script[node.byte_range()]) {
            match (&mut self.local, script) {
                (Some(local), false) => {
                    local.insert(n);
                }
                _ => {
                    self.top.insert(n);
                }
            }
        }
    }

    fn read(&mut self, node: Node<'_>) {
        let raw = &self.script[node.byte_range()];
        let Some((n, script)) = name(raw) else { return };
        let known = self.automatic.contains(&n)
            || match &self.local {
                Some(local) => (!script && local.contains(&n)) || self.all_top.contains(&n),
                None => self.top.contains(&n),
            };
        if !known {
            self.findings.push(Finding {
                line: node.start_position().row + 1,
                rule: "variable",
                message: format!("{raw} is read before it is assigned"),
            });
            self.assign(node); // once per variable
        }
    }

    fn walk(&mut self, node: Node<'_>) {
        match node.kind() {
            "function_statement" => {
                let outer = self.local.replace(BTreeSet::new());
                self.children(node);
                self.local = outer;
            }
            "script_parameter" => {
                let mut cursor = node.walk();
                let children: Vec<Node<'_>> = node.named_children(&mut cursor).collect();
                for c in &children {
                    if c.kind() == "variable" {
                        self.assign(*c);
                    } else {
                        self.walk(*c);
                    }
                }
            }
            "assignment_expression" => {
                let mut cursor = node.walk();
                let children: Vec<Node<'_>> = node.children(&mut cursor).collect();
                let left = children.iter().find(|c| c.kind() == "left_assignment_expression").copied();
                let op = children
                    .iter()
                    .find(|c| c.kind() == "assignement_operator")
                    .map(|o| self.script[o.byte_range()].trim());
                for c in children.iter().filter(|c| Some(**c) != left) {
                    self.walk(*c);
                }
                if let Some(left) = left {
                    match target(left, self.script) {
                        Some(v) => {
                            if op != Some("=") {
                                self.read(v);
                            }
                            self.assign(v);
                        }
                        None => self.walk(left),
                    }
                }
            }
            "foreach_statement" => {
                let mut cursor = node.walk();
                let children: Vec<Node<'_>> = node.named_children(&mut cursor).collect();
                let variable = children.iter().find(|c| c.kind() == "variable").copied();
                for c in children.iter().filter(|c| c.kind() == "pipeline") {
                    self.walk(*c);
                }
                if let Some(v) = variable {
                    self.assign(v);
                }
                for c in children.iter().filter(|c| !matches!(c.kind(), "variable" | "pipeline")) {
                    self.walk(*c);
                }
            }
            "variable" => self.read(node),
            _ => self.children(node),
        }
    }

    fn children(&mut self, node: Node<'_>) {
        let mut cursor = node.walk();
        let children: Vec<Node<'_>> = node.children(&mut cursor).collect();
        for c in children {
            self.walk(c);
        }
    }
}

/// Every top-level assignment target, and every `$script:` one.
fn top_level(node: Node<'_>, script: &str, in_function: bool, out: &mut BTreeSet<String>) {
    let in_function = in_function || node.kind() == "function_statement";
    if node.kind() == "assignment_expression" {
        let mut cursor = node.walk();
        if let Some(left) = node.children(&mut cursor).find(|c| c.kind() == "left_assignment_expression")
            && let Some(v) = target(left, script)
            && let Some((n, scoped)) = name(&script[v.byte_range()])
            && (scoped || !in_function)
        {
            out.insert(n);
        }
    }
    if node.kind() == "foreach_statement" && !in_function {
        let mut cursor = node.walk();
        if let Some(v) = node.named_children(&mut cursor).find(|c| c.kind() == "variable")
            && let Some((n, _)) = name(&script[v.byte_range()])
        {
            out.insert(n);
        }
    }
    if node.kind() == "script_parameter" && !in_function {
        let mut cursor = node.walk();
        if let Some(v) = node.named_children(&mut cursor).find(|c| c.kind() == "variable")
            && let Some((n, _)) = name(&script[v.byte_range()])
        {
            out.insert(n);
        }
    }
    let mut cursor = node.walk();
    for c in node.children(&mut cursor) {
        top_level(c, script, in_function, out);
    }
}

/// The findings of rule `variable` in `script`.
pub fn check(root: Node<'_>, script: &str, catalogue: &Catalogue, findings: &mut Vec<Finding>) {
    let mut all_top = BTreeSet::new();
    top_level(root, script, false, &mut all_top);
    let automatic = catalogue.automatic_variables.names.iter().map(|n| n.to_ascii_lowercase()).collect();
    let mut walk = Walk { script, automatic, all_top, top: BTreeSet::new(), local: None, findings: Vec::new() };
    walk.walk(root);
    findings.append(&mut walk.findings);
}
