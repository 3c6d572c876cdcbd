//! Services ConfigMap rules: WMCO's own (WMCO-SPEC 7.3, `servicescm.go`)
//! and winfleet's, every problem reported at the `data` key it is in, with
//! the service and field in the message; then which manifest is in force.
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
//! winfleet can evaluate. Values are echoed with [`shown`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::json;

use crate::desired::Doc;
use crate::desired::kinds::services::{FileJson, NodeArgJson, ServiceJson, ServicesConfigMap};
use crate::desired::model::FleetSettings;
use crate::diagnostic::{Diagnostic, child, is_unseen, shown};
use crate::lifecycle::manifest::{NodeJsonPath, NodeVariable, PreScript, ServiceDef, ServicesManifest};
use crate::node::MANAGED_ENVIRONMENT;
use crate::vocab::file::sha256_hex;

const KEYS: [&str; 4] = ["services", "files", "environmentVars", "watchedEnvironmentVars"];

/// The manifest in force, if the repository has one (and it is valid).
pub fn in_force(
    docs: &[Doc<ServicesConfigMap>],
    fleet: &FleetSettings,
    fleet_doc: Option<&Doc<crate::desired::kinds::fleet::Fleet>>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<Arc<ServicesManifest>> {
    let manifests: Vec<(usize, Option<ServicesManifest>)> =
        docs.iter().enumerate().map(|(i, d)| (i, manifest(d, diagnostics))).collect();
    let chosen = match (&fleet.services_config_map, docs) {
        (_, []) => {
            if let (Some(name), Some(fleet_doc)) = (&fleet.services_config_map, fleet_doc) {
                diagnostics.push(fleet_doc.error(
                    "/spec/services/configMapName",
                    format!(
                        "names services ConfigMap {}, but the repository has no windows-services-* ConfigMap",
                        shown(name)
                    ),
                ));
            }
            return None;
        }
        (Some(name), _) => match docs.iter().position(|d| &d.value.metadata.name == name) {
            Some(i) => i,
            None => {
                let have: Vec<&str> = docs.iter().map(|d| d.value.metadata.name.as_str()).collect();
                if let Some(fleet_doc) = fleet_doc {
                    diagnostics.push(fleet_doc.error(
                        "/spec/services/configMapName",
                        format!(
                            "no services ConfigMap is named {} (the repository has {})",
                            shown(name),
                            have.join(", ")
                        ),
                    ));
                }
                return None;
            }
        },
        (None, [_]) => 0,
        (None, _) => {
            let names: Vec<&str> = docs.iter().map(|d| d.value.metadata.name.as_str()).collect();
            for doc in docs {
                diagnostics.push(doc.error(
                    "/metadata/name",
                    format!(
                        "the repository has {} services ConfigMaps ({}): name the one in force in the Fleet's spec.services.configMapName",
                        docs.len(),
                        names.join(", ")
                    ),
                ));
            }
            return None;
        }
    };
    let manifest = manifests.into_iter().find(|(i, _)| *i == chosen).and_then(|(_, m)| m)?;
    let pin_written = fleet_doc.is_some_and(|f| f.value.spec.payload.digest.is_some());
    if !pin_written {
        let doc = &docs[chosen];
        diagnostics.push(doc.error(
            "/metadata/name",
            "a services manifest needs the payload it runs: set the Fleet's spec.payload.digest (winfleet payload digest DIR prints it)",
        ));
    }
    Some(Arc::new(manifest))
}

/// One ConfigMap checked; `None` when it has errors.
fn manifest(doc: &Doc<ServicesConfigMap>, diagnostics: &mut Vec<Diagnostic>) -> Option<ServicesManifest> {
    let errors_before = diagnostics.iter().filter(|d| d.is_error()).count();
    let data = &doc.value.data;
    for key in data.keys().filter(|k| !KEYS.contains(&k.as_str())) {
        diagnostics.push(doc.error(
            child("/data", key),
            format!(
                "unknown key {}: a services ConfigMap holds services, files, environmentVars and watchedEnvironmentVars",
                shown(key)
            ),
        ));
    }
    for key in ["services", "files"] {
        if !data.contains_key(key) {
            diagnostics.push(doc.error("/data", format!("the required key {key:?} is missing (WMCO's format)")));
        }
    }
    let services: Vec<ServiceJson> = parse(doc, "services", diagnostics).unwrap_or_default();
    let files: Vec<FileJson> = parse(doc, "files", diagnostics).unwrap_or_default();
    if !files.is_empty() {
        diagnostics
            .push(doc.warning("/data/files", "ignored: the Fleet's spec.payload.digest pins the files nodes get"));
    }
    let env: Option<BTreeMap<String, String>> = parse_optional(doc, "environmentVars", diagnostics);
    if env.is_some_and(|e| !e.is_empty()) {
        diagnostics.push(doc.warning(
            "/data/environmentVars",
            "ignored: winfleet sets the proxy variables from the repository's Proxy",
        ));
    }
    let watched: Option<Vec<String>> = parse_optional(doc, "watchedEnvironmentVars", diagnostics);
    for name in watched.unwrap_or_default().iter().filter(|n| !MANAGED_ENVIRONMENT.contains(&n.as_str())) {
        diagnostics.push(doc.warning(
            "/data/watchedEnvironmentVars",
            format!("{} is not watched: winfleet manages HTTP_PROXY, HTTPS_PROXY and NO_PROXY", shown(name)),
        ));
    }
    let defs = services_rules(doc, &services, diagnostics);
    let errors_now = diagnostics.iter().filter(|d| d.is_error()).count();
    (errors_now == errors_before).then(|| {
        let canonical = canonical(&defs);
        ServicesManifest {
            name: doc.value.metadata.name.clone(),
            origin: doc.path.clone(),
            digest: sha256_hex(canonical.as_bytes()),
            canonical,
            services: defs,
        }
    })
}

/// Parses a JSON document in `data[key]`; errors at `/data/<key>`.
fn parse<T: DeserializeOwned>(doc: &Doc<ServicesConfigMap>, key: &str, diagnostics: &mut Vec<Diagnostic>) -> Option<T> {
    let text = doc.value.data.get(key)?;
    match serde_path_to_error::deserialize::<_, T>(&mut serde_json::Deserializer::from_str(text)) {
        Ok(value) => Some(value),
        Err(e) => {
            let path = e.path().to_string();
            let inner = e.into_inner();
            // serde_json ends its message with the position; it is said once.
            let text = inner.to_string();
            let text = crate::desired::typed::plain(text.rsplit_once(" at line ").map_or(text.as_str(), |(m, _)| m));
            let message = if path.is_empty() || path == "." {
                format!("{key}: invalid JSON at line {} column {}: {text}", inner.line(), inner.column())
            } else {
                format!("{key}{}: {text}", display_path(&path))
            };
            diagnostics.push(doc.error(child("/data", key), message));
            None
        }
    }
}

/// `[2].priority` as serde_path_to_error prints it, made `[2].priority`.
fn display_path(path: &str) -> String {
    if path.starts_with('[') { path.to_owned() } else { format!(".{path}") }
}

fn parse_optional<T: DeserializeOwned>(
    doc: &Doc<ServicesConfigMap>,
    key: &str,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<T> {
    match doc.value.data.get(key) {
        Some(text) if text.trim().is_empty() || text.trim() == "null" => None,
        Some(_) => parse(doc, key, diagnostics),
        None => None,
    }
}

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

fn services_rules(
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

/// Deterministic JSON of the services: what the desired version hashes.
fn canonical(defs: &[ServiceDef]) -> String {
    let vars = |v: &[NodeVariable]| -> Vec<serde_json::Value> {
        v.iter().map(|v| json!({ "name": v.name, "nodeObjectJsonPath": v.path.as_str() })).collect()
    };
    let services: Vec<serde_json::Value> = defs
        .iter()
        .map(|d| {
            json!({
                "name": d.name,
                "path": d.command,
                "nodeVariablesInCommand": vars(&d.node_variables),
                "powershellPreScripts": d.pre_scripts.iter().map(|p| json!({
                    "variableName": p.variable, "path": p.path, "NodeArgs": vars(&p.node_args),
                })).collect::<Vec<_>>(),
                "dependencies": d.dependencies,
                "bootstrap": d.bootstrap,
                "priority": d.priority,
            })
        })
        .collect();
    serde_json::Value::Array(services).to_string()
}
