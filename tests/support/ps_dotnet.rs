//! Rule `dotnet` of the reference check ([`super::ps_check`]): every type
//! a script names (`[System.IO.File]`, `[int]`, `New-Object TypeName`) is
//! a PowerShell type accelerator (about_Type_Accelerators) or a public
//! type of .NET Framework 4.8 (the catalogue's `dotnet.types`, read from
//! microsoft/referencesource), and every static member it reaches
//! (`[System.IO.File]::Exists`) is one that type or a base class declares
//! public. A type PowerShell itself defines (`[ScriptBlock]`,
//! `[pscustomobject]`) is known by its accelerator; its members, and
//! every instance member (`$s.Write(…)`, whose type the script does not
//! say), are left to a Windows host, as are the overloads a call picks.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use tree_sitter::Node;

use super::ps_catalogue::{Catalogue, Dotnet};
use super::ps_check::Finding;

/// What a type name resolves to.
enum Resolved<'c> {
    /// A .NET Framework type of the catalogue, by full name.
    Framework(&'c str),
    /// A type PowerShell defines (by its accelerator).
    PowerShell(&'c str),
    /// Nothing the catalogue knows.
    Unknown,
}

fn resolve<'c>(dotnet: &'c Dotnet, written: &str) -> Resolved<'c> {
    let name = written.trim().trim_end_matches("[]").trim();
    let full = dotnet
        .accelerators
        .iter()
        .find(|(a, _)| a.eq_ignore_ascii_case(name))
        .map_or_else(|| name.to_owned(), |(_, f)| f.clone());
    // PowerShell resolves a name with and without `System.` in front.
    for candidate in [full.clone(), format!("System.{full}")] {
        if let Some((k, _)) = dotnet.types.iter().find(|(k, _)| k.eq_ignore_ascii_case(&candidate)) {
            return Resolved::Framework(k.as_str());
        }
    }
    match dotnet.accelerators.iter().find(|(a, _)| a.eq_ignore_ascii_case(name)) {
        Some((_, f)) if f.starts_with("System.Management.Automation") || f.starts_with("Microsoft.Management") => {
            Resolved::PowerShell(f.as_str())
        }
        _ => Resolved::Unknown,
    }
}

fn type_spec(node: Node<'_>, script: &str) -> Option<String> {
    let mut cursor = node.walk();
    let spec = node.named_children(&mut cursor).find(|c| c.kind() == "type_spec")?;
    Some(script[spec.byte_range()].to_owned())
}

/// The findings of rule `dotnet` among `nodes` (every node of the script).
pub fn check(nodes: &[Node<'_>], script: &str, catalogue: &Catalogue, findings: &mut Vec<Finding>) {
    let dotnet = &catalogue.dotnet;
    let unknown = |written: &str, line: usize, findings: &mut Vec<Finding>| {
        let not_found = dotnet.not_found.iter().any(|t| t.eq_ignore_ascii_case(written.trim_end_matches("[]")));
        findings.push(Finding {
            line,
            rule: "dotnet",
            message: if not_found {
                format!("[{written}] is not a public type of .NET Framework 4.8")
            } else {
                format!("[{written}] is not in the catalogue (scripts/powershell-catalogue.py --add-type <full name>)")
            },
        });
    };
    for node in nodes {
        let line = node.start_position().row + 1;
        match node.kind() {
            "type_literal" => {
                let Some(written) = type_spec(*node, script) else { continue };
                match resolve(dotnet, &written) {
                    Resolved::Unknown => unknown(&written, line, findings),
                    Resolved::Framework(full) => {
                        if let Some(member) = static_member(*node, script) {
                            let t = &dotnet.types[full];
                            if !t.members.iter().any(|m| m.eq_ignore_ascii_case(&member)) {
                                findings.push(Finding {
                                    line,
                                    rule: "dotnet",
                                    message: if t.missing.iter().any(|m| m.eq_ignore_ascii_case(&member)) {
                                        format!(
                                            "{full} declares no public {member} in .NET Framework 4.8 ({})",
                                            t.source.path
                                        )
                                    } else {
                                        format!(
                                            "{full}::{member} is not in the catalogue (--add-type {full}::{member})"
                                        )
                                    },
                                });
                            }
                        }
                    }
                    Resolved::PowerShell(_) => {}
                }
            }
            "command" => {
                let Some(name) = node.child_by_field_name("command_name") else { continue };
                if !script[name.byte_range()].eq_ignore_ascii_case("New-Object") {
                    continue;
                }
                if let Some(written) = new_object_type(*node, script)
                    && matches!(resolve(dotnet, &written), Resolved::Unknown)
                {
                    unknown(&written, line, findings);
                }
            }
            _ => {}
        }
    }
}

/// `[Type]::Member`: the member's name, when `node` is the type of one.
fn static_member(node: Node<'_>, script: &str) -> Option<String> {
    let parent = node.parent()?;
    if !matches!(parent.kind(), "member_access" | "invokation_expression") {
        return None;
    }
    let rest = script[node.end_byte()..parent.end_byte()].trim_start();
    let rest = rest.strip_prefix("::")?;
    let member: String = rest.trim_start().chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
    (!member.is_empty()).then_some(member)
}

/// The type `New-Object` creates: `-TypeName`'s value or the first
/// argument without a parameter name.
fn new_object_type(node: Node<'_>, script: &str) -> Option<String> {
    let list = node.child_by_field_name("command_elements")?;
    let mut cursor = list.walk();
    let elements: Vec<Node<'_>> =
        list.named_children(&mut cursor).filter(|c| c.kind() != "command_argument_sep").collect();
    let mut i = 0;
    while i < elements.len() {
        let text = script[elements[i].byte_range()].trim();
        if elements[i].kind() == "command_parameter" {
            if text.trim_start_matches('-').eq_ignore_ascii_case("TypeName") {
                return elements.get(i + 1).map(|e| script[e.byte_range()].trim().to_owned());
            }
            i += 2;
            continue;
        }
        return Some(text.split('(').next().unwrap_or(text).trim().to_owned());
    }
    None
}
