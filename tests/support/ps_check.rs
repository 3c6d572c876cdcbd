//! The reference check of a generated PowerShell script (issue 38),
//! read with the PowerShell grammar and [`super::ps_catalogue`], since no
//! Windows PowerShell runs here:
//!
//! - `command`: every command is a function the script defines, a
//!   function of a module it imports (the catalogue's `modules`), or a
//!   cmdlet the catalogue has a page of for every target version (Windows
//!   Server 2019 and 2022); native programs (`msiexec.exe`, `& $path`)
//!   are left to the host;
//! - `alias` (PSScriptAnalyzer's AvoidUsingCmdletAliases): no alias of a
//!   cmdlet in a command's place;
//! - `parameter`: every named parameter is the cmdlet's (by its full name
//!   or an alias: an abbreviation breaks when a version adds a parameter
//!   with the same start), a common parameter, or the defined function's;
//! - `parameter-set`: the parameters given together (named, positional,
//!   from the pipeline) fit one parameter set of every target version's
//!   page, its mandatory parameters included;
//! - `positional` (PSScriptAnalyzer's AvoidUsingPositionalParameters):
//!   no cmdlet is given more than two arguments by position. The rule's
//!   CommandAllowList holds the script's own functions (the generated
//!   calls of `Set-WfFile` and the like pass typed values by position, the
//!   function's declaration two hundred lines up names them);
//! - `value`: a value written out for a parameter whose page lists the
//!   values it accepts (an enumeration's names) is one of them;
//! - `dotnet`: every `[Type]` and `New-Object Type` is a type of .NET
//!   Framework 4.x (or a PowerShell type accelerator) and every
//!   `[Type]::Member` a member that type declares;
//! - `variable`: every variable is assigned before it is read;
//! - `loop`: every retry loop is bounded and sleeps
//!   ([`super::powershell::unbounded_loops`]).

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;

use tree_sitter::Node;

use super::ps_catalogue::{Catalogue, Page};

/// One thing the check found.
#[derive(Debug)]
pub struct Finding {
    /// 1-based line.
    pub line: usize,
    /// The rule (see the module's documentation).
    pub rule: &'static str,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}: {}", self.line, self.rule, self.message)
    }
}

/// A function the script defines.
struct Function {
    name: String,
    /// Its parameters (lower case); empty with `$args` only.
    parameters: Vec<String>,
    /// `[CmdletBinding()]` or `[Parameter()]`: takes the common parameters.
    advanced: bool,
    /// Reads `$args` (takes any number of arguments by position).
    reads_args: bool,
}

/// Everything the check finds in `script`.
pub fn check(script: &str, catalogue: &Catalogue) -> Vec<Finding> {
    let tree = super::powershell::parse(script);
    let root = tree.root_node();
    let mut nodes = Vec::new();
    collect(root, &mut nodes);
    let text = |n: Node<'_>| script[n.byte_range()].to_owned();
    let functions: Vec<Function> =
        nodes.iter().filter(|n| n.kind() == "function_statement").map(|n| function(*n, script)).collect();
    let imported: Vec<String> = catalogue
        .modules
        .keys()
        .filter(|m| {
            nodes.iter().any(|n| {
                n.kind() == "command"
                    && command_name(*n, script).is_some_and(|c| c.eq_ignore_ascii_case("Import-Module"))
                    && text(*n).to_ascii_lowercase().contains(&m.to_ascii_lowercase())
            })
        })
        .cloned()
        .collect();
    let mut findings = Vec::new();
    for node in nodes.iter().filter(|n| n.kind() == "command") {
        command(*node, script, catalogue, &functions, &imported, &mut findings);
    }
    super::ps_dotnet::check(&nodes, script, catalogue, &mut findings);
    super::ps_variables::check(root, script, catalogue, &mut findings);
    for problem in super::powershell::unbounded_loops(script) {
        let (line, message) = problem.split_once(": ").unwrap_or(("line 0", problem.as_str()));
        let line = line.trim_start_matches("line ").parse().unwrap_or(0);
        findings.push(Finding { line, rule: "loop", message: message.to_owned() });
    }
    findings.sort_by_key(|f| f.line);
    findings
}

/// Every node under `node`, in document order.
pub fn collect<'t>(node: Node<'t>, out: &mut Vec<Node<'t>>) {
    out.push(node);
    let mut cursor = node.walk();
    for child in node.children(&mut cursor) {
        collect(child, out);
    }
}

fn line(node: Node<'_>) -> usize {
    node.start_position().row + 1
}

/// The name in a command's place, when it is a plain name (not `& $x`).
fn command_name(node: Node<'_>, script: &str) -> Option<String> {
    let name = node.child_by_field_name("command_name")?;
    (name.kind() == "command_name").then(|| script[name.byte_range()].to_owned())
}

fn function(node: Node<'_>, script: &str) -> Function {
    let mut all = Vec::new();
    collect(node, &mut all);
    let name = all.iter().find(|n| n.kind() == "function_name").map(|n| script[n.byte_range()].to_owned());
    // Its own parameters: those of the declaration or of the body's
    // param block, not of a function nested in it.
    let own = |n: &Node<'_>| {
        let mut p = n.parent();
        while let Some(q) = p {
            if q.kind() == "function_statement" {
                return q.id() == node.id();
            }
            p = q.parent();
        }
        false
    };
    let parameters = all
        .iter()
        .filter(|n| n.kind() == "script_parameter" && own(n))
        .filter_map(|n| {
            let mut cursor = n.walk();
            let v = n.named_children(&mut cursor).find(|c| c.kind() == "variable")?;
            Some(script[v.byte_range()].trim_start_matches('$').to_ascii_lowercase())
        })
        .collect();
    let advanced = all.iter().any(|n| {
        n.kind() == "attribute_list" && own(n) && {
            let t = script[n.byte_range()].to_ascii_lowercase();
            t.contains("cmdletbinding") || t.contains("parameter(")
        }
    });
    let reads_args = all.iter().any(|n| n.kind() == "variable" && script[n.byte_range()].eq_ignore_ascii_case("$args"));
    Function { name: name.unwrap_or_default(), parameters, advanced, reads_args }
}

/// A command's arguments: named parameters (name, whether a value is
/// attached with `:`) and the other elements.
enum Element {
    Named { name: String, attached: bool },
    Other { splat: bool, literal: Option<String> },
}

/// A value written out in the script: a bare word, or a string without
/// anything expanded in it.
fn literal(text: &str) -> Option<String> {
    let bare = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "_.,-".contains(c));
    if let Some(inner) = text.strip_prefix('\'').and_then(|t| t.strip_suffix('\'')) {
        return (!inner.contains('\'')).then(|| inner.to_owned());
    }
    if let Some(inner) = text.strip_prefix('"').and_then(|t| t.strip_suffix('"')) {
        return (!inner.contains(['"', '$', '`'])).then(|| inner.to_owned());
    }
    (bare(text) && !text.starts_with('-')).then(|| text.to_owned())
}

fn elements(node: Node<'_>, script: &str) -> Vec<Element> {
    let Some(list) = node.child_by_field_name("command_elements") else { return Vec::new() };
    let mut cursor = list.walk();
    list.named_children(&mut cursor)
        .filter(|c| !matches!(c.kind(), "command_argument_sep" | "redirection"))
        .map(|c| {
            let t = script[c.byte_range()].trim();
            if c.kind() == "command_parameter" {
                let attached = t.ends_with(':');
                Element::Named { name: t.trim_start_matches('-').trim_end_matches(':').to_owned(), attached }
            } else {
                Element::Other {
                    splat: t.starts_with('@') && !t.starts_with("@(") && !t.starts_with("@{"),
                    literal: literal(t),
                }
            }
        })
        .collect()
}

/// Whether the command takes pipeline input (a `|` before it).
fn piped(node: Node<'_>) -> bool {
    let mut prev = node.prev_sibling();
    while let Some(p) = prev {
        if p.is_extra() {
            prev = p.prev_sibling();
            continue;
        }
        return p.kind() == "|";
    }
    false
}

fn command(
    node: Node<'_>,
    script: &str,
    catalogue: &Catalogue,
    functions: &[Function],
    imported: &[String],
    findings: &mut Vec<Finding>,
) {
    let Some(name) = command_name(node, script) else { return };
    let at = line(node);
    if name.contains(['\\', '/', '.']) {
        return; // a native program or a script path: the host's
    }
    let given = elements(node, script);
    if let Some(f) = functions.iter().find(|f| f.name.eq_ignore_ascii_case(&name)) {
        for e in &given {
            if let Element::Named { name: p, .. } = e
                && !f.parameters.contains(&p.to_ascii_lowercase())
                && !(f.advanced && catalogue.common(p).is_some())
            {
                findings.push(Finding {
                    line: at,
                    rule: "parameter",
                    message: format!("{name} (defined in the script) has no parameter -{p}"),
                });
            }
        }
        // An argument past the declared parameters lands in `$args`,
        // which a function that never reads it drops without a word.
        let by_position = by_position(&given);
        if !f.reads_args && by_position > f.parameters.len() {
            findings.push(Finding {
                line: at,
                rule: "parameter",
                message: format!(
                    "{name} (defined in the script) is given {by_position} arguments by position; it declares {} \
                     parameter(s) and never reads $args",
                    f.parameters.len()
                ),
            });
        }
        return;
    }
    if let Some((module, f)) = catalogue.module_function(&name)
        && imported.iter().any(|m| m == module)
    {
        for e in &given {
            if let Element::Named { name: p, .. } = e
                && !f.parameters.iter().any(|q| q.eq_ignore_ascii_case(p))
                && catalogue.common(p).is_none()
            {
                findings.push(Finding {
                    line: at,
                    rule: "parameter",
                    message: format!("{name} ({module}) has no parameter -{p}"),
                });
            }
        }
        positional(&name, &given, node, at, findings);
        return;
    }
    if let Some(cmdlet) = catalogue.aliased(&name) {
        findings.push(Finding {
            line: at,
            rule: "alias",
            message: format!("{name} is an alias of {cmdlet} (PSScriptAnalyzer AvoidUsingCmdletAliases)"),
        });
        return;
    }
    let Some((full, cmd)) = catalogue.command(&name) else {
        findings.push(Finding {
            line: at,
            rule: "command",
            message: format!(
                "{name} is neither defined in the script nor a cmdlet of the catalogue \
                 (scripts/powershell-catalogue.py --add {name})"
            ),
        });
        return;
    };
    if full != name {
        findings.push(Finding { line: at, rule: "command", message: format!("{name} is spelt {full}") });
    }
    for target in &catalogue.targets {
        match cmd.pages.iter().find(|p| p.windows.contains(target)) {
            None => findings.push(Finding {
                line: at,
                rule: "command",
                message: format!(
                    "{full} ({}) is not documented for Windows Server {target} (only {})",
                    cmd.module,
                    cmd.windows.join(", ")
                ),
            }),
            Some(page) => cmdlet(full, page, target, &given, piped(node), catalogue, at, findings),
        }
    }
    positional(full, &given, node, at, findings);
}

/// The arguments given without a parameter name before them.
fn by_position(given: &[Element]) -> usize {
    let mut count = 0;
    let mut after_name = false;
    for e in given {
        match e {
            Element::Named { attached, .. } => after_name = !attached,
            Element::Other { .. } => {
                if !after_name {
                    count += 1;
                }
                after_name = false;
            }
        }
    }
    count
}

/// PSScriptAnalyzer's AvoidUsingPositionalParameters: more than two
/// arguments without a parameter name before them (pipeline input counts
/// as one when the command is not the pipeline's first).
fn positional(name: &str, given: &[Element], node: Node<'_>, at: usize, findings: &mut Vec<Finding>) {
    if given.iter().any(|e| matches!(e, Element::Other { splat: true, .. })) {
        return;
    }
    let count = usize::from(piped(node)) + by_position(given);
    if count > 2 {
        findings.push(Finding {
            line: at,
            rule: "positional",
            message: format!(
                "{name} is given {count} arguments by position (PSScriptAnalyzer AvoidUsingPositionalParameters)"
            ),
        });
    }
}

#[allow(clippy::too_many_arguments)]
fn cmdlet(
    name: &str,
    page: &Page,
    target: &str,
    given: &[Element],
    piped: bool,
    catalogue: &Catalogue,
    at: usize,
    findings: &mut Vec<Finding>,
) {
    let source = page.path_for(target);
    let mut named: BTreeSet<String> = BTreeSet::new();
    let mut positional = 0usize;
    let mut splat = false;
    let mut i = 0;
    while i < given.len() {
        match &given[i] {
            Element::Named { name: p, attached } => {
                let resolved = page
                    .parameters
                    .iter()
                    .find(|(n, d)| n.eq_ignore_ascii_case(p) || d.aliases.iter().any(|a| a.eq_ignore_ascii_case(p)));
                match resolved {
                    Some((full, d)) => {
                        named.insert(full.clone());
                        if !attached && !d.is_switch() {
                            i += 1; // its value
                            if let Some(Element::Other { literal: Some(value), .. }) = given.get(i)
                                && !d.values.is_empty()
                            {
                                for part in value.split(',').map(str::trim) {
                                    if !d.values.iter().any(|v| v.eq_ignore_ascii_case(part)) {
                                        findings.push(Finding {
                                            line: at,
                                            rule: "value",
                                            message: format!(
                                                "{name} -{full} does not accept {part:?} on Windows Server {target} \
                                                 (it accepts {}; {source})",
                                                d.values.join(", ")
                                            ),
                                        });
                                    }
                                }
                            }
                        }
                    }
                    None if catalogue.common(p).is_some() => {
                        let switch = ["Verbose", "Debug"].iter().any(|s| s.eq_ignore_ascii_case(p));
                        if !attached && !switch {
                            i += 1;
                        }
                    }
                    None => {
                        let starts: Vec<&String> = page
                            .parameters
                            .keys()
                            .filter(|n| n.to_ascii_lowercase().starts_with(&p.to_ascii_lowercase()))
                            .collect();
                        let message = match starts.as_slice() {
                            [one] => format!(
                                "-{p} abbreviates -{one} of {name}: spell it out (Windows Server {target}, {source})"
                            ),
                            _ => format!("{name} has no parameter -{p} on Windows Server {target} ({source})"),
                        };
                        findings.push(Finding { line: at, rule: "parameter", message });
                        return;
                    }
                }
            }
            Element::Other { splat: s, .. } => {
                splat |= *s;
                positional += 1;
            }
        }
        i += 1;
    }
    if splat {
        positional -= 1;
    }
    if page.sets.is_empty() {
        return;
    }
    let fits = page.sets.values().any(|set| {
        if !named.iter().all(|n| set.parameters.contains_key(n)) {
            return false;
        }
        let free: Vec<_> = set.parameters.iter().filter(|(n, m)| m.position.is_some() && !named.contains(*n)).collect();
        if positional > free.len() {
            return false;
        }
        let mut by_position: Vec<_> = free.clone();
        by_position.sort_by_key(|(_, m)| m.position);
        let filled: BTreeSet<&String> = by_position.iter().take(positional).map(|(n, _)| *n).collect();
        splat
            || set
                .parameters
                .iter()
                .all(|(n, m)| !m.required || named.contains(n) || filled.contains(n) || (piped && m.pipeline))
    });
    if !fits {
        let named: Vec<String> = named.iter().map(|n| format!("-{n}")).collect();
        findings.push(Finding {
            line: at,
            rule: "parameter-set",
            message: format!(
                "{name} {} with {positional} positional argument(s){} fits none of its parameter sets on \
                 Windows Server {target} ({}; {source})",
                named.join(" "),
                if piped { " and pipeline input" } else { "" },
                page.sets.keys().cloned().collect::<Vec<_>>().join(", ")
            ),
        });
    }
}
