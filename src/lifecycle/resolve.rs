//! Service commands with their variables resolved, and the definition a
//! node should hold for each service: a systemd unit whose values are
//! escaped for its lines, or a Windows service's values. Pure.
//!
//! As WMCO's WICD does (`expectedServiceCommand`), a variable's name is
//! replaced by its value wherever it occurs in the command: node variables
//! from the Node object, then pre-script variables from the pre-script's
//! output on the node (observed). A value goes into a command line only if
//! it is made of characters that cannot change how the line is read
//! (letters, digits and `. _ : / \ = , @ + % -`): a Node annotation or a
//! script's output never smuggles a second command into a service.

use std::fmt::Write;

use serde_json::Value;

use super::facts::{Definition, LifecycleFacts};
use super::manifest::ServiceDef;
use crate::diagnostic::shown;
use crate::lifecycle::manifest::{NodeVariable, PreScript};
use crate::vocab::Shell;
use crate::vocab::file::sha256_hex;

/// The start type every service gets: automatic (Windows `Start` = 2), so
/// a rebooted node comes back with its services.
pub const AUTOMATIC: &str = "2";

/// Checks that a variable's value is safe to put into a command line.
pub fn check_value(name: &str, value: &str) -> Result<(), String> {
    let safe = |c: char| c.is_ascii_alphanumeric() || "._:/\\=,@+%-".contains(c);
    if value.is_empty() {
        return Err(format!("variable {name} resolved to an empty value"));
    }
    match value.chars().find(|c| !safe(*c)) {
        None => Ok(()),
        Some(c) => Err(format!(
            "variable {name} resolved to {}, which holds {}: winfleet puts only letters, digits and . _ : / \\ = , @ + % - into a command line",
            shown(value),
            shown(&c.to_string())
        )),
    }
}

fn node_values(vars: &[NodeVariable], node: Option<&Value>) -> Result<Vec<(String, String)>, String> {
    vars.iter()
        .map(|v| {
            let node =
                node.ok_or_else(|| format!("variable {} comes from the Node, which does not exist yet", v.name))?;
            let value = v.path.evaluate(node).map_err(|e| format!("variable {}: {e}", v.name))?;
            check_value(&v.name, &value)?;
            Ok((v.name.clone(), value))
        })
        .collect()
}

fn substitute(text: &str, values: &[(String, String)]) -> String {
    values.iter().fold(text.to_owned(), |acc, (name, value)| acc.replace(name.as_str(), value))
}

/// The command a service runs on this node.
pub fn command(service: &ServiceDef, node: Option<&Value>, facts: &LifecycleFacts) -> Result<String, String> {
    let mut values = node_values(&service.node_variables, node)?;
    for script in &service.pre_scripts {
        let Some(variable) = &script.variable else { continue };
        let key = (service.name.clone(), variable.clone());
        let value = match facts.variables.get(&key) {
            Some(Ok(value)) => value.clone(),
            Some(Err(e)) => return Err(format!("the pre-script that gives {variable} failed on the node: {e}")),
            None => return Err(format!("the pre-script that gives {variable} has not run on the node yet")),
        };
        check_value(variable, &value)?;
        values.push((variable.clone(), value));
    }
    Ok(substitute(&service.command, &values))
}

/// A pre-script's text with its node arguments in place.
pub fn pre_script(script: &PreScript, node: Option<&Value>) -> Result<String, String> {
    Ok(substitute(&script.path, &node_values(&script.node_args, node)?))
}

/// The definition `service` should have with `command` resolved, and for
/// posix nodes the unit file that carries it; an error when a value cannot
/// be written into a unit file (see [`unit_file`]).
pub fn definition(
    shell: Shell,
    service: &ServiceDef,
    command: &str,
    home: &str,
) -> Result<(Definition, Option<String>), String> {
    match shell {
        Shell::Posix => {
            let unit = unit_file(service, command, home)?;
            Ok((Definition::Unit { sha256: sha256_hex(unit.as_bytes()) }, Some(unit)))
        }
        Shell::Powershell => {
            let mut dependencies = service.dependencies.clone();
            dependencies.sort_by_key(|d| d.to_lowercase());
            let definition = Definition::Windows {
                image_path: command.to_owned(),
                description: service.description(),
                dependencies,
                start: AUTOMATIC.to_owned(),
            };
            Ok((definition, None))
        }
    }
}

/// Whether the definition on the node matches the desired one (Windows
/// compares dependencies as sets, ignoring case, as WICD does).
pub fn same_definition(observed: &Definition, desired: &Definition) -> bool {
    match (observed, desired) {
        (
            Definition::Windows { image_path: a, description: b, dependencies: c, start: d },
            Definition::Windows { image_path: w, description: x, dependencies: y, start: z },
        ) => {
            let fold = |v: &[String]| v.iter().map(|s| s.to_lowercase()).collect::<std::collections::BTreeSet<_>>();
            a == w && b == x && fold(c) == fold(y) && d == z
        }
        (a, b) => a == b,
    }
}

/// The systemd unit of a service on posix nodes: WMCO's description, the
/// dependencies as `Requires=` and `After=`, the command with a relative
/// program made absolute from the SSH user's home, which is also the
/// working directory (so relative paths in arguments resolve the way the
/// Fleet's other relative directories do).
///
/// Every value is escaped for its line ([`unit_value`], [`unit_name`]);
/// one that a unit file cannot hold (a control character, a final
/// backslash, a dependency that is not a unit name) is an error, never a
/// line of its own: validation refuses these in the manifest, and the home
/// directory is the node's to report (issue 23).
pub fn unit_file(service: &ServiceDef, command: &str, home: &str) -> Result<String, String> {
    let home = home.trim_end_matches('/');
    let command = command.trim();
    let command =
        if command.starts_with('/') || home.is_empty() { command.to_owned() } else { format!("{home}/{command}") };
    let description = unit_value(&service.description(), false).map_err(|e| format!("the name {e}"))?;
    let mut unit = String::from("# Managed by winfleet from the services manifest. Changes are overwritten.\n[Unit]\n");
    let _ = writeln!(unit, "Description={description}");
    if !service.dependencies.is_empty() {
        let deps: Vec<String> = service
            .dependencies
            .iter()
            .map(|d| unit_name(d).map_err(|e| format!("dependency {e}")))
            .collect::<Result<_, _>>()?;
        let deps = deps.join(" ");
        let _ = write!(unit, "Requires={deps}\nAfter={deps}\n");
    }
    let home = unit_value(home, false).map_err(|e| format!("the home directory {} {e}", shown(home)))?;
    let command = unit_value(&command, true).map_err(|e| format!("the command {e}"))?;
    let _ = write!(unit, "\n[Service]\nWorkingDirectory={home}\nExecStart={command}\nRestart=always\nRestartSec=10\n");
    unit.push_str("\n[Install]\nWantedBy=multi-user.target\n");
    Ok(unit)
}

/// A value for a unit file's `Key=Value` line, escaped so that systemd
/// reads back exactly `value`: `%` is doubled (a specifier otherwise) and,
/// for an `Exec*=` command line (`exec`), `$` too (a variable otherwise).
/// The command line's own quoting and backslashes are systemd's syntax for
/// words and are kept. Refused: a character a line cannot hold (a control
/// character; a newline would start a new key or section), a final
/// backslash (systemd joins the next line to it: `conf-parser.c`), and
/// white space at either end (systemd strips it).
pub fn unit_value(value: &str, exec: bool) -> Result<String, String> {
    if let Some(c) = value.chars().find(|c| c.is_control()) {
        return Err(format!("holds the control character U+{:04X}, which a unit file line cannot", u32::from(c)));
    }
    if value.trim() != value {
        return Err("starts or ends with white space, which systemd would drop".into());
    }
    let trailing = value.chars().rev().take_while(|c| *c == '\\').count();
    if !trailing.is_multiple_of(2) {
        return Err("ends with a backslash, which would join the next line of the unit file to it".into());
    }
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '%' => out.push_str("%%"),
            '$' if exec => out.push_str("$$"),
            c => out.push(c),
        }
    }
    Ok(out)
}

/// The unit name of a service, `<name>.service`, for `Requires=` and
/// `After=` lines: only the characters systemd allows in a unit name
/// (letters, digits, `:`, `-`, `_`, `.`, `\`; `unit-name.c`), so a name
/// is one word of the list and adds no key.
pub fn unit_name(name: &str) -> Result<String, String> {
    let valid = |c: char| c.is_ascii_alphanumeric() || ":-_.\\".contains(c);
    if name.is_empty() || !name.chars().all(valid) {
        return Err(format!("{} is not a systemd unit name", shown(name)));
    }
    Ok(format!("{name}.service"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::manifest::NodeJsonPath;

    fn service() -> ServiceDef {
        ServiceDef {
            name: "hybrid-overlay-node".into(),
            command: "payload/hon --node NODE_NAME --ip NODE_IP".into(),
            node_variables: vec![NodeVariable {
                name: "NODE_NAME".into(),
                path: NodeJsonPath::parse("{.metadata.name}").unwrap(),
            }],
            pre_scripts: vec![PreScript {
                variable: Some("NODE_IP".into()),
                path: "hostname -i".into(),
                node_args: vec![],
            }],
            dependencies: vec!["kubelet".into()],
            bootstrap: false,
            priority: 2,
        }
    }

    #[test]
    fn variables_come_from_the_node_and_the_pre_scripts() {
        let node = serde_json::json!({"metadata": {"name": "win-1"}});
        let mut facts = LifecycleFacts::default();
        facts.variables.insert(("hybrid-overlay-node".into(), "NODE_IP".into()), Ok("10.0.0.5".into()));
        assert_eq!(command(&service(), Some(&node), &facts).unwrap(), "payload/hon --node win-1 --ip 10.0.0.5");
        assert!(command(&service(), None, &facts).unwrap_err().contains("does not exist yet"));
    }

    #[test]
    fn values_that_could_change_the_command_line_are_refused() {
        let node = serde_json::json!({"metadata": {"name": "win-1; rm -rf /"}});
        let facts = LifecycleFacts::default();
        let e = command(&service(), Some(&node), &facts).unwrap_err();
        assert!(e.contains("holds \";\""), "{e}");
        let mut facts = LifecycleFacts::default();
        facts.variables.insert(("hybrid-overlay-node".into(), "NODE_IP".into()), Ok("1.2.3.4 $(id)".into()));
        let node = serde_json::json!({"metadata": {"name": "win-1"}});
        assert!(command(&service(), Some(&node), &facts).is_err());
    }

    #[test]
    fn units_make_the_program_absolute_and_work_from_home() {
        let unit = unit_file(&service(), "payload/hon --node win-1", "/home/u/").unwrap();
        assert!(unit.contains("ExecStart=/home/u/payload/hon --node win-1\n"), "{unit}");
        assert!(unit.contains("WorkingDirectory=/home/u\n"));
        assert!(unit.contains("Requires=kubelet.service\nAfter=kubelet.service\n"));
        assert!(unit.contains("Description=OpenShift managed hybrid-overlay-node\n"));
        assert!(unit_file(&service(), "/usr/bin/x", "/h").unwrap().contains("ExecStart=/usr/bin/x\n"));
    }

    #[test]
    fn units_refuse_what_would_add_a_line_issue_23() {
        let mut s = service();
        s.dependencies = vec!["kubelet\nExecStartPost=/bin/id".into()];
        assert!(unit_file(&s, "/x", "/h").unwrap_err().contains("not a systemd unit name"));
        assert!(unit_file(&service(), "/x", "/h\nExecStartPre=/bin/id").is_err());
        assert!(unit_file(&service(), "/x\r[Service]", "/h").is_err());
        let unit = unit_file(&service(), "/x 50% $HOME", "/h%").unwrap();
        assert!(unit.contains("WorkingDirectory=/h%%\nExecStart=/x 50%% $$HOME\n"), "{unit}");
    }

    #[test]
    fn unit_values_are_escaped_or_refused() {
        assert_eq!(unit_value("50% of $HOME", false).unwrap(), "50%% of $HOME");
        assert_eq!(unit_value("/x --p=$HOME %n", true).unwrap(), "/x --p=$$HOME %%n");
        assert_eq!(unit_value(r"C:\\k\\", true).unwrap(), r"C:\\k\\", "an escaped final backslash ends the line");
        for bad in ["a\nExecStartPost=/bin/id", "a\rb", "nul\0", r"tail\", r"tail\\\", " lead", "trail "] {
            assert!(unit_value(bad, true).is_err(), "{bad:?}");
        }
        assert_eq!(unit_name("kubelet").unwrap(), "kubelet.service");
        for bad in ["", "a b", "a\nb", "a%b", "a/b", "a$b"] {
            assert!(unit_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn windows_definitions_compare_dependencies_as_sets() {
        let (desired, unit) = definition(Shell::Powershell, &service(), "C:\\k\\hon.exe", "").unwrap();
        assert!(unit.is_none());
        let observed = Definition::Windows {
            image_path: "C:\\k\\hon.exe".into(),
            description: "OpenShift managed hybrid-overlay-node".into(),
            dependencies: vec!["KUBELET".into()],
            start: "2".into(),
        };
        assert!(same_definition(&observed, &desired));
    }
}
