//! Service commands with their variables resolved, and the definition a
//! node should hold for each service. Pure.
//!
//! As WMCO's WICD does (`expectedServiceCommand`), a variable's name is
//! replaced by its value wherever it occurs in the command: node variables
//! from the Node object, then pre-script variables from the pre-script's
//! output on the node (observed). A value goes into a command line only if
//! it is made of characters that cannot change how the line is read
//! (letters, digits and `. _ : / \ = , @ + % -`): a Node annotation or a
//! script's output never smuggles a second command into a service.

use serde_json::Value;

use super::ServiceSpec;
use super::facts::{Definition, LifecycleFacts};
use crate::desired::kinds::instances::Shell;
use crate::desired::services::{NodeVariable, PreScript};
use crate::node::sha256_hex;

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
            "variable {name} resolved to {value:?}, which holds {c:?}: winfleet puts only letters, digits and . _ : / \\ = , @ + % - into a command line"
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
pub fn command(service: &ServiceSpec, node: Option<&Value>, facts: &LifecycleFacts) -> Result<String, String> {
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
/// posix nodes the unit file that carries it.
pub fn definition(shell: Shell, service: &ServiceSpec, command: &str, home: &str) -> (Definition, Option<String>) {
    match shell {
        Shell::Posix => {
            let unit = unit_file(service, command, home);
            (Definition::Unit { sha256: sha256_hex(unit.as_bytes()) }, Some(unit))
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
            (definition, None)
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
pub fn unit_file(service: &ServiceSpec, command: &str, home: &str) -> String {
    let home = home.trim_end_matches('/');
    let command = command.trim();
    let command =
        if command.starts_with('/') || home.is_empty() { command.to_owned() } else { format!("{home}/{command}") };
    let mut unit = String::from("# Managed by winfleet from the services manifest. Changes are overwritten.\n[Unit]\n");
    unit.push_str(&format!("Description={}\n", service.description()));
    if !service.dependencies.is_empty() {
        let deps: Vec<String> = service.dependencies.iter().map(|d| format!("{d}.service")).collect();
        unit.push_str(&format!("Requires={}\nAfter={}\n", deps.join(" "), deps.join(" ")));
    }
    unit.push_str(&format!(
        "\n[Service]\nWorkingDirectory={home}\nExecStart={command}\nRestart=always\nRestartSec=10\n"
    ));
    unit.push_str("\n[Install]\nWantedBy=multi-user.target\n");
    unit
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::desired::services::NodeJsonPath;

    fn service() -> ServiceSpec {
        ServiceSpec {
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
        assert!(e.contains("holds ';'"), "{e}");
        let mut facts = LifecycleFacts::default();
        facts.variables.insert(("hybrid-overlay-node".into(), "NODE_IP".into()), Ok("1.2.3.4 $(id)".into()));
        let node = serde_json::json!({"metadata": {"name": "win-1"}});
        assert!(command(&service(), Some(&node), &facts).is_err());
    }

    #[test]
    fn units_make_the_program_absolute_and_work_from_home() {
        let unit = unit_file(&service(), "payload/hon --node win-1", "/home/u/");
        assert!(unit.contains("ExecStart=/home/u/payload/hon --node win-1\n"), "{unit}");
        assert!(unit.contains("WorkingDirectory=/home/u\n"));
        assert!(unit.contains("Requires=kubelet.service\nAfter=kubelet.service\n"));
        assert!(unit.contains("Description=OpenShift managed hybrid-overlay-node\n"));
        assert!(unit_file(&service(), "/usr/bin/x", "/h").contains("ExecStart=/usr/bin/x\n"));
    }

    #[test]
    fn windows_definitions_compare_dependencies_as_sets() {
        let (desired, unit) = definition(Shell::Powershell, &service(), "C:\\k\\hon.exe", "");
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
