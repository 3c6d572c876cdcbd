//! MachineSet rules: what WMCO needs to configure a Machine (WMCO-SPEC 6) and
//! what the Machine API would reject.

use std::collections::BTreeMap;

use serde_json::Value;

use super::names::check_object_name;
use crate::desired::Doc;
use crate::desired::kinds::machineset::{MachineSet, Platform};
use crate::desired::model::MachineSetDesired;
use crate::diagnostic::{Diagnostic, child, shown, shown_bare};

/// The namespace of Machine API objects.
pub const MACHINE_API_NAMESPACE: &str = "openshift-machine-api";

/// Marks a repository MachineSet whose existing, unmanaged namesake in the
/// cluster winfleet may take over.
pub const ADOPT_ANNOTATION: &str = "winfleet.io/adopt";

/// Marks a repository MachineSet whose values win over another field
/// manager's: the fields they own are taken over (reported) instead of
/// reported as conflicts and left.
pub const FORCE_FIELDS_ANNOTATION: &str = "winfleet.io/force-fields";

/// The user-data secret WMCO maintains (WMCO-SPEC 5).
pub const USER_DATA_SECRET: &str = "windows-user-data";

/// Template labels every Windows MachineSet carries.
const TEMPLATE_LABELS: [(&str, &str); 3] = [
    ("machine.openshift.io/os-id", "Windows"),
    ("machine.openshift.io/cluster-api-machine-role", "worker"),
    ("machine.openshift.io/cluster-api-machine-type", "worker"),
];

/// The Node label the Machine spec must give.
const WORKER_ROLE: &str = "node-role.kubernetes.io/worker";

/// Checks every MachineSet and returns them by name.
pub fn collect(docs: &[Doc<MachineSet>], diagnostics: &mut Vec<Diagnostic>) -> BTreeMap<String, MachineSetDesired> {
    let mut sets = BTreeMap::new();
    for doc in docs {
        let ms = &doc.value;
        let name = &ms.metadata.name;
        if let Err(reason) = check_object_name(name) {
            diagnostics.push(doc.error("/metadata/name", reason));
        }
        let platform = ms.platform();
        if matches!(platform, Platform::VSphere | Platform::Azure) && name.len() > 9 {
            diagnostics.push(doc.error(
                "/metadata/name",
                format!(
                    "MachineSet name {} is {} characters long: on {} Windows computer names are at most 15 characters, \
                     and Machine names add 6 to the MachineSet name, so it must be at most 9",
                    shown(name),
                    name.len(),
                    if platform == Platform::VSphere { "vSphere" } else { "Azure" }
                ),
            ));
        }
        match ms.metadata.namespace.as_deref() {
            None | Some(MACHINE_API_NAMESPACE) => {}
            Some(other) => diagnostics.push(doc.error(
                "/metadata/namespace",
                format!("MachineSets live in namespace {MACHINE_API_NAMESPACE}, not {}", shown(other)),
            )),
        }
        if ms.spec.replicas.is_some_and(|r| r < 0) {
            diagnostics.push(doc.error("/spec/replicas", "replicas must not be negative"));
        }
        check_labels(doc, diagnostics);
        let secret = ms.spec.template.spec.provider_spec.value.get("userDataSecret").and_then(|s| s.get("name"));
        if secret.and_then(Value::as_str) != Some(USER_DATA_SECRET) {
            diagnostics.push(doc.error(
                "/spec/template/spec/providerSpec/value/userDataSecret/name",
                format!("providerSpec.value.userDataSecret.name must be {USER_DATA_SECRET} (the user data that sets up SSH for WMCO and winfleet)"),
            ));
        }
        if let Some(first) = sets.get(name).map(|m: &MachineSetDesired| m.origin.clone()) {
            diagnostics.push(doc.error(
                "/metadata/name",
                format!("MachineSet {} is defined twice: it is already in {first}", shown(name)),
            ));
            continue;
        }
        let mut object = Value::clone(&doc.raw);
        if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("namespace".into(), Value::String(MACHINE_API_NAMESPACE.into()));
        }
        sets.insert(
            name.clone(),
            MachineSetDesired {
                name: name.clone(),
                namespace: MACHINE_API_NAMESPACE.into(),
                replicas: ms.spec.replicas,
                adopt: ms.metadata.annotations.get(ADOPT_ANNOTATION).is_some_and(|v| v == "true"),
                force_fields: ms.metadata.annotations.get(FORCE_FIELDS_ANNOTATION).is_some_and(|v| v == "true"),
                object,
                origin: doc.path.clone(),
            },
        );
    }
    sets
}

fn check_labels(doc: &Doc<MachineSet>, diagnostics: &mut Vec<Diagnostic>) {
    let template = &doc.value.spec.template;
    let at = "/spec/template/metadata/labels";
    for (key, want) in TEMPLATE_LABELS {
        match template.metadata.labels.get(key) {
            Some(v) if v == want => {}
            Some(v) => diagnostics.push(doc.error(child(at, key), format!("label {key} must be {want:?}, not {}", shown(v)))),
            None => diagnostics.push(doc.error(
                at,
                format!("missing template label {key}: {want:?} (WMCO and winfleet configure only Machines labelled as Windows workers)"),
            )),
        }
    }
    let at = "/spec/template/spec/metadata/labels";
    match template.spec.metadata.labels.get(WORKER_ROLE) {
        Some(v) if v.is_empty() => {}
        Some(v) => diagnostics
            .push(doc.error(child(at, WORKER_ROLE), format!("label {WORKER_ROLE} must be \"\", not {}", shown(v)))),
        None => {
            diagnostics.push(doc.error(at, format!("missing label {WORKER_ROLE}: \"\" for the Node (the worker role)")))
        }
    }
    for (key, value) in &doc.value.spec.selector.match_labels {
        if template.metadata.labels.get(key) != Some(value) {
            diagnostics.push(doc.error(
                child("/spec/selector/matchLabels", key),
                format!(
                    "selector {}={} does not match the template's labels, so the MachineSet would never own its Machines",
                    shown_bare(key),
                    shown_bare(value)
                ),
            ));
        }
    }
}
