//! Services ConfigMap rules (WMCO-SPEC 7.3, `servicescm.go`), every
//! problem reported at the `data` key it is in: which manifest is in force
//! (one ConfigMap, or the one the Fleet names, with the payload pinned), and
//! one ConfigMap read: its keys, each key's JSON document, the keys winfleet
//! ignores said as warnings, and the canonical form its digest hashes. The
//! rules on the services themselves are [`defs`]'. Values are echoed with
//! [`shown`].

mod defs;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::json;

use crate::desired::Doc;
use crate::desired::kinds::services::{FileJson, ServiceJson, ServicesConfigMap};
use crate::desired::model::FleetSettings;
use crate::diagnostic::{Diagnostic, child, shown};
use crate::lifecycle::manifest::{ManifestAt, NodeVariable, ServiceDef, ServicesManifest};
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
                let have: Vec<String> = docs.iter().map(|d| shown(&d.value.metadata.name)).collect();
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
            let names: Vec<String> = docs.iter().map(|d| shown(&d.value.metadata.name)).collect();
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
    let defs = defs::check(doc, &services, diagnostics);
    let errors_now = diagnostics.iter().filter(|d| d.is_error()).count();
    (errors_now == errors_before).then(|| {
        let canonical = canonical(&defs);
        ServicesManifest {
            name: doc.value.metadata.name.clone(),
            origin: doc.path.clone(),
            digest: sha256_hex(canonical.as_bytes()),
            canonical,
            services: defs,
            services_at: ManifestAt {
                path: doc.path.clone(),
                document: doc.index,
                line: doc.value.services_at.0,
                column: doc.value.services_at.1,
            },
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
