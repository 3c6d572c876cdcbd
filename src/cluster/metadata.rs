//! The pure plan of a Node's labels, annotations and taints.
//!
//! winfleet touches only the keys it manages: those the repository gives the
//! instance now, and those it gave before (recorded on the Node in
//! [`MANAGED_KEYS_ANNOTATION`], as kubectl's last-applied annotation does), so
//! a key that leaves the repository is removed and every other key is left
//! alone. The write is a merge patch conditional on the observed
//! resourceVersion: a Node changed since it was observed gives a 409, and
//! that Node is read and planned again (`super::replan`).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Taint as K8sTaint;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::{MANAGED_KEYS_ANNOTATION, NodeObs};
use crate::desired::kinds::instances::Taint;
use crate::desired::model::Instance;
use crate::desired::string_map::StringMap;
use crate::plan::SettingChange;

/// The keys winfleet manages on a Node, as recorded there.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ManagedKeys {
    /// Label keys.
    pub labels: BTreeSet<String>,
    /// Annotation keys.
    pub annotations: BTreeSet<String>,
    /// Taints as `key:Effect`.
    pub taints: BTreeSet<String>,
}

impl ManagedKeys {
    /// The record on a Node (empty when absent or unreadable).
    pub fn of(node: &NodeObs) -> Self {
        node.annotations.get(MANAGED_KEYS_ANNOTATION).and_then(|v| serde_json::from_str(v).ok()).unwrap_or_default()
    }

    fn of_instance(instance: &Instance) -> Self {
        Self {
            labels: instance.labels.keys().cloned().collect(),
            annotations: instance.annotations.keys().cloned().collect(),
            taints: instance.taints.iter().map(taint_id).collect(),
        }
    }
}

/// What winfleet changes on one Node.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeMetadataPlan {
    /// Node name.
    pub node: String,
    /// The instance it is.
    pub instance: String,
    /// `labels/<key>`, `annotations/<key>`, `taints/<key>:<Effect>` before and after.
    pub changes: Vec<SettingChange>,
    /// The merge patch (conditional on the observed resourceVersion).
    pub patch: Value,
}

fn taint_id(t: &Taint) -> String {
    format!("{}:{:?}", t.key, t.effect)
}

fn k8s_taint_id(t: &K8sTaint) -> String {
    format!("{}:{}", t.key, t.effect)
}

/// Plans the Node's metadata for its instance; `None` when in sync.
pub fn plan_node_metadata(instance: &Instance, node: &NodeObs) -> Option<NodeMetadataPlan> {
    let before = ManagedKeys::of(node);
    let after = ManagedKeys::of_instance(instance);
    let mut changes = Vec::new();
    let labels = plan_map("labels", &instance.labels, &before.labels, &node.labels, &mut changes);
    let mut annotations =
        plan_map("annotations", &instance.annotations, &before.annotations, &node.annotations, &mut changes);
    let taints = plan_taints(instance, &before, node, &mut changes);
    if changes.is_empty() && before == after && node.annotations.contains_key(MANAGED_KEYS_ANNOTATION) {
        return None;
    }
    if before != after || !node.annotations.contains_key(MANAGED_KEYS_ANNOTATION) {
        let record = serde_json::to_string(&after).unwrap_or_default();
        annotations.insert(MANAGED_KEYS_ANNOTATION.to_owned(), Value::String(record));
    }
    let mut metadata = Map::new();
    metadata.insert("resourceVersion".into(), Value::String(node.resource_version.clone()));
    if !labels.is_empty() {
        metadata.insert("labels".into(), Value::Object(labels));
    }
    metadata.insert("annotations".into(), Value::Object(annotations));
    let mut patch = json!({ "metadata": metadata });
    if let Some(taints) = taints {
        patch["spec"] = json!({ "taints": taints });
    }
    Some(NodeMetadataPlan { node: node.name.clone(), instance: instance.address.clone(), changes, patch })
}

/// Merge-patch entries for one map: desired keys set, previously managed
/// keys that left the repository removed (`null`).
fn plan_map(
    kind: &str,
    desired: &StringMap,
    managed_before: &BTreeSet<String>,
    live: &BTreeMap<String, String>,
    changes: &mut Vec<SettingChange>,
) -> Map<String, Value> {
    let mut patch = Map::new();
    for (key, value) in desired {
        if live.get(key) != Some(value) {
            changes.push(SettingChange {
                setting: format!("{kind}/{key}"),
                from: live.get(key).cloned(),
                to: Some(value.clone()),
            });
            patch.insert(key.clone(), Value::String(value.clone()));
        }
    }
    for key in managed_before.iter().filter(|k| !desired.contains_key(k)) {
        if let Some(old) = live.get(key) {
            changes.push(SettingChange { setting: format!("{kind}/{key}"), from: Some(old.clone()), to: None });
            patch.insert(key.clone(), Value::Null);
        }
    }
    patch
}

/// The Node's whole new taint list when it changes: unmanaged taints kept in
/// place, managed ones updated, removed or appended.
fn plan_taints(
    instance: &Instance,
    before: &ManagedKeys,
    node: &NodeObs,
    changes: &mut Vec<SettingChange>,
) -> Option<Vec<K8sTaint>> {
    let desired: BTreeMap<String, &Taint> = instance.taints.iter().map(|t| (taint_id(t), t)).collect();
    let mut result = Vec::new();
    let mut changed = false;
    let mut present = BTreeSet::new();
    for live in &node.taints {
        let id = k8s_taint_id(live);
        let live_value = live.value.clone().unwrap_or_default();
        match desired.get(&id) {
            Some(want) if present.insert(id.clone()) => {
                if want.value != live_value {
                    changes.push(SettingChange {
                        setting: format!("taints/{id}"),
                        from: Some(live_value),
                        to: Some(want.value.clone()),
                    });
                    changed = true;
                    result.push(K8sTaint { value: non_empty(&want.value), ..live.clone() });
                } else {
                    result.push(live.clone());
                }
            }
            Some(_) => changed = true, // a duplicate of a managed taint
            None if before.taints.contains(&id) => {
                changes.push(SettingChange { setting: format!("taints/{id}"), from: Some(live_value), to: None });
                changed = true;
            }
            None => result.push(live.clone()),
        }
    }
    for (id, want) in &desired {
        if !present.contains(id) {
            changes.push(SettingChange { setting: format!("taints/{id}"), from: None, to: Some(want.value.clone()) });
            changed = true;
            result.push(K8sTaint {
                key: want.key.clone(),
                value: non_empty(&want.value),
                effect: format!("{:?}", want.effect),
                time_added: None,
            });
        }
    }
    changed.then_some(result)
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_owned())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::desired::kinds::instances::TaintEffect;
    use crate::vocab::Shell;

    fn instance(labels: &[(&str, &str)], taints: &[(&str, &str, TaintEffect)]) -> Instance {
        Instance {
            address: "10.0.0.1".into(),
            username: "u".into(),
            port: 22,
            shell: Shell::Posix,
            labels: labels.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect(),
            annotations: Default::default(),
            taints: taints.iter().map(|(k, v, e)| Taint { key: (*k).into(), value: (*v).into(), effect: *e }).collect(),
            origin: "t".into(),
            spec: Arc::new(crate::node::NodeSpec::empty(Shell::Posix)),
        }
    }

    fn k8s_taint(key: &str, value: Option<&str>, effect: &str) -> K8sTaint {
        K8sTaint { key: key.into(), value: value.map(Into::into), effect: effect.into(), time_added: None }
    }

    #[test]
    fn only_managed_keys_change_and_removed_keys_go() {
        let mut node = NodeObs { name: "win-a".into(), resource_version: "7".into(), ..NodeObs::default() };
        node.labels = [("team".into(), "old".into()), ("other".into(), "x".into()), ("gone".into(), "1".into())].into();
        node.annotations
            .insert(MANAGED_KEYS_ANNOTATION.into(), r#"{"labels":["team","gone"],"taints":["old:NoSchedule"]}"#.into());
        node.taints = vec![
            k8s_taint("os", Some("Windows"), "NoSchedule"),
            k8s_taint("old", None, "NoSchedule"),
            k8s_taint("dedicated", Some("a"), "NoSchedule"),
        ];
        let want = instance(
            &[("team", "payments")],
            &[("dedicated", "b", TaintEffect::NoSchedule), ("new", "", TaintEffect::NoExecute)],
        );
        let plan = plan_node_metadata(&want, &node).unwrap();
        let settings: Vec<String> =
            plan.changes.iter().map(|c| format!("{} {:?}->{:?}", c.setting, c.from, c.to)).collect();
        assert_eq!(
            settings,
            [
                r#"labels/team Some("old")->Some("payments")"#,
                r#"labels/gone Some("1")->None"#,
                r#"taints/old:NoSchedule Some("")->None"#,
                r#"taints/dedicated:NoSchedule Some("a")->Some("b")"#,
                r#"taints/new:NoExecute None->Some("")"#,
            ]
        );
        assert_eq!(plan.patch["metadata"]["resourceVersion"], "7");
        assert_eq!(plan.patch["metadata"]["labels"], json!({"team": "payments", "gone": null}));
        assert!(plan.patch["metadata"]["labels"].get("other").is_none());
        let taints: Vec<String> = plan.patch["spec"]["taints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                format!(
                    "{}={}:{}",
                    t["key"].as_str().unwrap(),
                    t["value"].as_str().unwrap_or(""),
                    t["effect"].as_str().unwrap()
                )
            })
            .collect();
        assert_eq!(taints, ["os=Windows:NoSchedule", "dedicated=b:NoSchedule", "new=:NoExecute"]);
        let record: ManagedKeys =
            serde_json::from_str(plan.patch["metadata"]["annotations"][MANAGED_KEYS_ANNOTATION].as_str().unwrap())
                .unwrap();
        assert_eq!(record.labels, ["team".to_owned()].into());
        assert_eq!(record.taints.len(), 2);
    }

    #[test]
    fn in_sync_node_needs_no_patch_and_a_hand_removed_key_is_not_reported() {
        let want = instance(&[("team", "payments")], &[]);
        let mut node = NodeObs { name: "win-a".into(), ..NodeObs::default() };
        node.labels.insert("team".into(), "payments".into());
        node.annotations.insert(MANAGED_KEYS_ANNOTATION.into(), r#"{"labels":["team"]}"#.into());
        assert_eq!(plan_node_metadata(&want, &node), None);
        // A key managed before and already gone from the Node: only the record changes.
        node.annotations.insert(MANAGED_KEYS_ANNOTATION.into(), r#"{"labels":["team","gone"]}"#.into());
        let plan = plan_node_metadata(&want, &node).unwrap();
        assert!(plan.changes.is_empty());
        assert!(plan.patch["metadata"].get("labels").is_none());
    }
}
