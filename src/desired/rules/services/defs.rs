//! The rules on a services ConfigMap's `data.services`, every finding at
//! that key with the service and field in the message.
//!
//! WMCO's: a bootstrap service may not use node variables nor depend on a
//! non-bootstrap service; no dependency cycles (WMCO stops exploring a
//! service after its first unexplored dependency, so some cycles pass
//! there; winfleet checks every edge); sorted by priority, no bootstrap
//! service after a non-bootstrap one, and no non-bootstrap service at the
//! last bootstrap priority. winfleet's: unique, plain names for services,
//! their dependencies and their variables; commands, pre-scripts and
//! JSONPath templates without control or invisible characters (issue 23:
//! a dependency's newline wrote `ExecStartPost=` into a systemd unit);
//! bootstrap pre-scripts without node arguments; JSONPath templates
//! winfleet can evaluate.

use std::collections::{BTreeMap, BTreeSet};

use crate::desired::Doc;
use crate::desired::kinds::services::{NodeArgJson, ServiceJson, ServicesConfigMap};
use crate::diagnostic::{Diagnostic, is_unseen, shown};
use crate::lifecycle::manifest::{NodeJsonPath, NodeVariable, PreScript, ServiceDef};

/// Findings about `data.services`, all at that key.
struct Findings<'a> {
    doc: &'a Doc<ServicesConfigMap>,
    out: Vec<Diagnostic>,
}

impl Findings<'_> {
    fn error(&mut self, message: String) {
        self.out.push(self.doc.error("/data/services", message));
    }

    fn warning(&mut self, message: String) {
        self.out.push(self.doc.warning("/data/services", message));
    }
}

/// The services as definitions sorted by priority; every finding goes
/// into `diagnostics` (the caller drops the manifest on any error).
pub(super) fn check(
    doc: &Doc<ServicesConfigMap>,
    services: &[ServiceJson],
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<ServiceDef> {
    let mut f = Findings { doc, out: Vec::new() };
    let mut names = BTreeSet::new();
    let mut defs = Vec::new();
    for (i, s) in services.iter().enumerate() {
        // A name that is not valid is reported once, not repeated in every
        // message about the service.
        let at = if valid_name(&s.name) { format!("services[{i}] ({})", s.name) } else { format!("services[{i}]") };
        if !valid_name(&s.name) {
            f.error(format!("services[{i}].name {} {NAME_RULE}", shown(&s.name)));
        } else if !names.insert(s.name.as_str()) {
            f.error(format!("{at}: service {} is listed twice", shown(&s.name)));
        }
        if let Err(e) = one_line(&s.path) {
            f.error(format!("{at}.path: the command must be non-empty, on one line, without control characters: {e}"));
        }
        let node_variables = variables(&at, "nodeVariablesInCommand", s.node_variables_in_command.as_deref(), &mut f);
        if s.bootstrap && !node_variables.is_empty() {
            f.error(format!("{at}: a bootstrap service cannot use node variables (it starts before its Node exists)"));
        }
        let mut pre_scripts = Vec::new();
        for (j, p) in s.powershell_pre_scripts.iter().flatten().enumerate() {
            let at = format!("{at}.powershellPreScripts[{j}]");
            if p.path.trim().is_empty() {
                f.error(format!("{at}.path: the script is empty"));
            } else if let Err(e) = one_line(&p.path) {
                f.error(format!("{at}.path: the script must be one line without control characters: {e}"));
            }
            if let Some(v) = &p.variable_name
                && !valid_name(v)
            {
                f.error(format!("{at}.variableName {} {NAME_RULE}", shown(v)));
            }
            let node_args = variables(&at, "NodeArgs", p.node_args.as_deref(), &mut f);
            if s.bootstrap && !node_args.is_empty() {
                f.error(format!(
                    "{at}: a bootstrap service's pre-script cannot take node arguments (its Node does not exist yet)"
                ));
            }
            pre_scripts.push(PreScript {
                // An invalid name is reported above, and only there.
                variable: p.variable_name.clone().filter(|v| valid_name(v)),
                path: p.path.clone(),
                node_args,
            });
        }
        // A dependency reaches a unit's Requires= and After= lines and the
        // Windows service manager's DependOnService value: a name, as the
        // services' own names are.
        let mut dependencies = Vec::new();
        for (k, dep) in s.dependencies.iter().flatten().enumerate() {
            if valid_name(dep) {
                dependencies.push(dep.clone());
            } else {
                f.error(format!("{at}.dependencies[{k}] {} {NAME_RULE}", shown(dep)));
            }
        }
        defs.push(ServiceDef {
            name: s.name.clone(),
            command: s.path.clone(),
            node_variables,
            pre_scripts,
            dependencies,
            bootstrap: s.bootstrap,
            priority: s.priority,
        });
    }
    let listed: BTreeMap<&str, &ServiceDef> = defs.iter().map(|d| (d.name.as_str(), d)).collect();
    for d in &defs {
        for dep in &d.dependencies {
            match listed.get(dep.as_str()) {
                Some(other) if d.bootstrap && !other.bootstrap => {
                    f.error(format!("service {}: a bootstrap service cannot depend on the non-bootstrap service {dep}", d.name));
                }
                Some(_) => {}
                None => f.warning(format!(
                    "service {} depends on {dep}, which is not in the manifest: winfleet neither installs nor starts it; it must already exist on the nodes",
                    d.name
                )),
            }
        }
        let used =
            d.node_variables.iter().map(|v| &v.name).chain(d.pre_scripts.iter().filter_map(|p| p.variable.as_ref()));
        for name in used {
            if !d.command.contains(name.as_str()) {
                f.warning(format!("service {}: variable {name} does not occur in its command", d.name));
            }
        }
    }
    if let Some(cycle) = cycle(&defs) {
        f.error(format!("dependency cycle: {}", cycle.join(" -> ")));
    }
    let mut sorted = defs;
    sorted.sort_by_key(|d| d.priority);
    let mut last_bootstrap: Option<u32> = None;
    let mut non_bootstrap_seen = false;
    for d in &sorted {
        if d.bootstrap {
            if non_bootstrap_seen {
                f.error(format!(
                    "service {}: a bootstrap service must come before every non-bootstrap service in priority order",
                    d.name
                ));
            }
            last_bootstrap = Some(d.priority);
        } else {
            if last_bootstrap == Some(d.priority) {
                f.error(format!(
                    "service {}: a non-bootstrap service cannot share priority {} with a bootstrap service",
                    d.name, d.priority
                ));
            }
            non_bootstrap_seen = true;
        }
    }
    diagnostics.extend(f.out);
    sorted
}

fn variables(at: &str, field: &str, args: Option<&[NodeArgJson]>, f: &mut Findings<'_>) -> Vec<NodeVariable> {
    let mut out = Vec::new();
    for (k, a) in args.unwrap_or_default().iter().enumerate() {
        if !valid_name(&a.name) {
            f.error(format!("{at}.{field}[{k}].name {} {NAME_RULE}", shown(&a.name)));
            continue;
        }
        let template = &a.node_object_json_path;
        let parsed = one_line(template).and_then(|()| NodeJsonPath::parse(template));
        match parsed {
            Ok(path) => out.push(NodeVariable { name: a.name.clone(), path }),
            Err(e) => f.error(format!("{at}.{field}[{k}].nodeObjectJsonPath: {e}")),
        }
    }
    out
}

/// What every name of the manifest (services, dependencies, variables)
/// must be.
const NAME_RULE: &str = "must be 1 to 256 ASCII letters, digits, '_', '.' or '-'";

/// A name: what Windows and systemd both take as a service name and no
/// shell, unit file or registry value reads as syntax.
fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 256 && name.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
}

/// A command line, script or template: not blank, and no character that
/// would end its line where it lands (a unit file, a registry value, a
/// script) or that a reviewer cannot see (bidirectional marks).
fn one_line(value: &str) -> Result<(), String> {
    if value.trim().is_empty() {
        return Err("it is empty".into());
    }
    match value.chars().find(|c| is_unseen(*c)) {
        Some(c) => Err(format!("{} holds U+{:04X}", shown(value), u32::from(c))),
        None => Ok(()),
    }
}

/// The first dependency cycle found (every edge checked), as a path.
fn cycle(defs: &[ServiceDef]) -> Option<Vec<String>> {
    let graph: BTreeMap<&str, Vec<&str>> =
        defs.iter().map(|d| (d.name.as_str(), d.dependencies.iter().map(String::as_str).collect())).collect();
    let mut done = BTreeSet::new();
    for start in graph.keys() {
        let mut path = Vec::new();
        if let Some(c) = visit(start, &graph, &mut path, &mut done) {
            return Some(c);
        }
    }
    None
}

fn visit<'a>(
    node: &'a str,
    graph: &BTreeMap<&'a str, Vec<&'a str>>,
    path: &mut Vec<&'a str>,
    done: &mut BTreeSet<&'a str>,
) -> Option<Vec<String>> {
    if let Some(at) = path.iter().position(|p| *p == node) {
        let mut cycle: Vec<String> = path[at..].iter().map(|s| (*s).to_owned()).collect();
        cycle.push(node.to_owned());
        return Some(cycle);
    }
    if done.contains(node) {
        return None;
    }
    path.push(node);
    for next in graph.get(node).into_iter().flatten() {
        if graph.contains_key(next)
            && let Some(c) = visit(next, graph, path, done)
        {
            return Some(c);
        }
    }
    path.pop();
    done.insert(node);
    None
}
