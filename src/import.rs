//! `winfleet import`: a config repository from what a running WMCO cluster
//! holds, in examples-repo's layout. Pure: it turns the objects read from
//! the cluster (`cli/import.rs` reads them) into files, deterministically
//! (sorted keys, no timestamps), with the fields the API server fills in
//! removed so that the files say only what an admin declares.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::desired::kinds::services::SERVICES_CONFIGMAP_PREFIX;

/// What `winfleet import` read from the cluster.
#[derive(Debug, Default)]
pub struct ClusterObjects {
    /// The `windows-instances` ConfigMap, when there is one.
    pub instances: Option<Value>,
    /// `windows-services-<version>` ConfigMaps.
    pub services: Vec<Value>,
    /// ImageDigestMirrorSets and ImageTagMirrorSets.
    pub mirror_sets: Vec<Value>,
    /// The cluster Proxy, when there is one.
    pub proxy: Option<Value>,
    /// The Windows MachineSets.
    pub machine_sets: Vec<Value>,
}

/// Metadata fields the API server sets.
const SERVER_METADATA: [&str; 10] = [
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
    "ownerReferences",
    "finalizers",
];

/// Annotations tools set, not admins.
const TOOL_ANNOTATIONS: [&str; 1] = ["kubectl.kubernetes.io/last-applied-configuration"];

/// The ignore file that keeps the services manifest out until the payload is pinned.
const IGNORE: &str = "# winfleet import: the services manifest needs the payload it runs.\n\
# Pin it (winfleet payload digest DIR, then spec.payload.digest in fleet.yaml)\n\
# and delete this line to let winfleet manage the node services:\n\
services/\n";

/// The repository's files: path → content.
pub fn repository(objects: &ClusterObjects) -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    let mut add = |path: String, header: &str, value: &Value| {
        files.insert(path, format!("{header}{}", yaml(value)));
    };
    let fleet = json!({
        "apiVersion": "winfleet.io/v1alpha1",
        "kind": "Fleet",
        "metadata": { "name": "fleet" },
        "spec": {},
    });
    add("fleet.yaml".into(), "# Every section is optional; see examples-repo/fleet.yaml for them all.\n", &fleet);
    if let Some(instances) = &objects.instances {
        add(
            "instances/windows-instances.yaml".into(),
            "# WMCO's format: key = address, value = username=<name>.\n",
            &strip(instances),
        );
    }
    for set in &objects.mirror_sets {
        let file = match kind(set) {
            "ImageTagMirrorSet" => format!("mirrors/itms-{}.yaml", name(set)),
            _ => format!("mirrors/idms-{}.yaml", name(set)),
        };
        add(file, "", &strip(set));
    }
    if let Some(proxy) = objects.proxy.as_ref().and_then(proxy) {
        add("proxy.yaml".into(), "# The cluster Proxy's spec: the nodes get these variables verbatim.\n", &proxy);
    }
    for set in &objects.machine_sets {
        let mut set = strip(set);
        // It exists already: winfleet takes it over instead of creating it.
        if let Some(metadata) = set.get_mut("metadata").and_then(Value::as_object_mut) {
            let annotations = metadata.entry("annotations").or_insert_with(|| json!({}));
            if let Some(annotations) = annotations.as_object_mut() {
                annotations.insert("winfleet.io/adopt".into(), json!("true"));
            }
        }
        add(format!("machinesets/{}.yaml", name(&set)), "", &set);
    }
    let services: Vec<&Value> =
        objects.services.iter().filter(|s| name(s).starts_with(SERVICES_CONFIGMAP_PREFIX)).collect();
    for manifest in &services {
        add(format!("services/{}.yaml", name(manifest)), "", &strip(manifest));
    }
    if !services.is_empty() {
        files.insert(".winfleetignore".into(), IGNORE.to_owned());
    }
    files.insert("README.md".into(), readme(objects, &files));
    files
}

fn kind(value: &Value) -> &str {
    value.get("kind").and_then(Value::as_str).unwrap_or_default()
}

fn name(value: &Value) -> &str {
    value.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("unnamed")
}

/// The object without status and without what the API server filled in.
pub fn strip(object: &Value) -> Value {
    let mut object = object.clone();
    let Some(map) = object.as_object_mut() else { return object };
    map.remove("status");
    if let Some(metadata) = map.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in SERVER_METADATA {
            metadata.remove(field);
        }
        if let Some(annotations) = metadata.get_mut("annotations").and_then(Value::as_object_mut) {
            for annotation in TOOL_ANNOTATIONS {
                annotations.remove(annotation);
            }
        }
        for empty in ["annotations", "labels"] {
            if metadata.get(empty).and_then(Value::as_object).is_some_and(Map::is_empty) {
                metadata.remove(empty);
            }
        }
    }
    object
}

/// The Proxy with its variables only; None when it sets none.
fn proxy(cluster: &Value) -> Option<Value> {
    let spec = cluster.get("spec")?.as_object()?;
    let mut kept = Map::new();
    for field in ["httpProxy", "httpsProxy", "noProxy"] {
        if let Some(value) = spec.get(field).filter(|v| v.as_str().is_some_and(|s| !s.is_empty())) {
            kept.insert(field.to_owned(), value.clone());
        }
    }
    (!kept.is_empty()).then(|| {
        json!({ "apiVersion": "config.openshift.io/v1", "kind": "Proxy", "metadata": { "name": "cluster" }, "spec": kept })
    })
}

fn yaml(value: &Value) -> String {
    serde_saphyr::to_string(value).unwrap_or_else(|e| format!("# could not be written as YAML: {e}\n"))
}

fn readme(objects: &ClusterObjects, files: &BTreeMap<String, String>) -> String {
    let mut text = String::from(
        "# Imported from a running cluster\n\n\
         `winfleet import` wrote this repository from what the cluster's Windows Machine Config\n\
         Operator works from. Review it before the first `winfleet apply` or `winfleet run`:\n\n",
    );
    let list: Vec<String> = files.keys().map(|f| format!("- `{f}`")).collect();
    text.push_str(&list.join("\n"));
    text.push_str(
        "\n\nBefore the first apply:\n\n\
         1. `winfleet validate` and `winfleet plan --live` against the cluster: the plan should show only\n\
            what winfleet does differently from WMCO (winfleet's docs/wmco-spec.md lists each decision), such as removing\n\
            registry directories no mirror set describes.\n\
         2. Instances: WMCO's ConfigMap gives only a user name; set `spec.defaults` in `fleet.yaml` when the\n\
            hosts use another SSH port or the posix shell.\n\
         3. MachineSets carry `winfleet.io/adopt: \"true\"`: winfleet takes them over as they are.\n",
    );
    if !objects.services.is_empty() {
        text.push_str(
            "4. The services manifest is under `services/` and left out by `.winfleetignore` until the payload\n\
                it runs is pinned (`winfleet payload digest DIR`, then `spec.payload.digest`).\n",
        );
    }
    text.push_str(
        "\nThen turn WMCO's reconciliation of these objects off (see the README's section on WMCO) and\n\
         let winfleet apply the repository.\n",
    );
    text
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn server_fields_and_status_are_stripped() {
        let object = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {
                "name": "windows-instances", "namespace": "openshift-windows-machine-config-operator",
                "uid": "0b1c", "resourceVersion": "7", "creationTimestamp": "2026-01-01T00:00:00Z",
                "managedFields": [{}], "annotations": { "kubectl.kubernetes.io/last-applied-configuration": "{}" },
            },
            "data": { "10.0.0.1": "username=Administrator" },
            "status": {},
        });
        let stripped = strip(&object);
        assert_eq!(
            stripped,
            json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": { "name": "windows-instances", "namespace": "openshift-windows-machine-config-operator" },
                "data": { "10.0.0.1": "username=Administrator" },
            })
        );
    }

    #[test]
    fn a_proxy_without_variables_writes_no_file() {
        let objects =
            ClusterObjects { proxy: Some(json!({ "spec": { "trustedCA": { "name": "" } } })), ..Default::default() };
        assert!(!repository(&objects).contains_key("proxy.yaml"));
    }
}
