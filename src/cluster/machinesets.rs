//! The pure MachineSet plan: the repository's MachineSets against the
//! cluster's.
//!
//! - A MachineSet the cluster lacks is created, one that differs is updated,
//!   both by server-side apply with field manager `winfleet`; what is applied
//!   carries `app.kubernetes.io/managed-by: winfleet`.
//! - "Differs" means a field the repository sets has another value live, or a
//!   field winfleet applied before (its `managedFields` entry) is no longer in
//!   the repository and server-side apply will remove it. Fields other
//!   managers own (status, defaults, an autoscaler's replicas when the
//!   repository leaves replicas out) are not winfleet's business.
//! - Only MachineSets carrying the managed-by label are deleted when they
//!   leave the repository. An existing MachineSet without it is a conflict,
//!   reported and left alone, unless the repository marks its MachineSet
//!   `winfleet.io/adopt: "true"`.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::{FIELD_MANAGER, MANAGED_BY, is_managed};
use crate::desired::model::MachineSetDesired;
use crate::desired::rules::machinesets::ADOPT_ANNOTATION;
use crate::diagnostic::child;
use crate::plan::fields::{self, FieldChange};
use crate::plan::{MachineSetAction, MachineSetChange};

/// One step of the MachineSet plan.
#[derive(Clone, Debug, PartialEq)]
pub enum MachineSetStep {
    /// Create or update by server-side apply.
    Apply {
        /// What changes.
        change: MachineSetChange,
        /// The object to apply.
        object: Value,
    },
    /// Delete a MachineSet winfleet manages that left the repository.
    Delete {
        /// What goes.
        change: MachineSetChange,
        /// The observed UID (the delete is conditional on it).
        uid: String,
    },
    /// A MachineSet of that name exists and winfleet does not manage it.
    Conflict {
        /// Name.
        name: String,
        /// Why nothing is done.
        reason: String,
    },
}

impl MachineSetStep {
    /// The MachineSet's name.
    pub fn name(&self) -> &str {
        match self {
            MachineSetStep::Apply { change, .. } | MachineSetStep::Delete { change, .. } => &change.name,
            MachineSetStep::Conflict { name, .. } => name,
        }
    }
}

/// The object winfleet applies for a desired MachineSet.
pub fn applied_object(desired: &MachineSetDesired) -> Value {
    let mut object = desired.object.clone();
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        let labels = meta.entry("labels").or_insert_with(|| Value::Object(Map::new()));
        if let Some(labels) = labels.as_object_mut() {
            labels.insert(MANAGED_BY.0.into(), Value::String(MANAGED_BY.1.into()));
        }
    }
    object
}

/// Plans every MachineSet; in-sync ones produce no step. Sorted by name.
pub fn plan_machine_sets(
    desired: &BTreeMap<String, MachineSetDesired>,
    live: &BTreeMap<String, Value>,
) -> Vec<MachineSetStep> {
    let mut steps = Vec::new();
    for (name, want) in desired {
        let object = applied_object(want);
        let Some(current) = live.get(name) else {
            let change = MachineSetChange {
                name: name.clone(),
                action: MachineSetAction::Create,
                replicas: Some((None, want.replicas)),
                fields: fields::diff(None, Some(&object)),
            };
            steps.push(MachineSetStep::Apply { change, object });
            continue;
        };
        if !is_managed(current.pointer("/metadata/labels")) && !want.adopt {
            steps.push(MachineSetStep::Conflict {
                name: name.clone(),
                reason: format!(
                    "MachineSet {name} exists and winfleet does not manage it (no {}={} label); it is left alone. \
                     Annotate the repository's MachineSet {ADOPT_ANNOTATION}: \"true\" to take it over",
                    MANAGED_BY.0, MANAGED_BY.1
                ),
            });
            continue;
        }
        let mut changes = fields::diff(Some(&project(current, &object)), Some(&object));
        changes.extend(dropped_fields(current, &object));
        changes.sort_by(|a, b| a.pointer.cmp(&b.pointer));
        if changes.is_empty() {
            continue;
        }
        let live_replicas = current.pointer("/spec/replicas").and_then(Value::as_i64);
        let replicas =
            (want.replicas.is_some() && live_replicas != want.replicas).then_some((live_replicas, want.replicas));
        let change =
            MachineSetChange { name: name.clone(), action: MachineSetAction::Update, replicas, fields: changes };
        steps.push(MachineSetStep::Apply { change, object });
    }
    for (name, current) in live {
        if desired.contains_key(name) || !is_managed(current.pointer("/metadata/labels")) {
            continue;
        }
        let change = MachineSetChange {
            name: name.clone(),
            action: MachineSetAction::Delete,
            replicas: Some((current.pointer("/spec/replicas").and_then(Value::as_i64), None)),
            fields: Vec::new(),
        };
        let uid = current.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default().to_owned();
        steps.push(MachineSetStep::Delete { change, uid });
    }
    steps.sort_by(|a, b| a.name().cmp(b.name()));
    steps
}

/// The live object cut down to the shape of `shape`: the fields the
/// repository sets, with their live values (lists whole).
fn project(live: &Value, shape: &Value) -> Value {
    match (live, shape) {
        (Value::Object(live), Value::Object(shape)) => {
            Value::Object(shape.iter().filter_map(|(k, s)| live.get(k).map(|l| (k.clone(), project(l, s)))).collect())
        }
        (live, _) => live.clone(),
    }
}

/// Leaf fields winfleet applied before (its Apply entry in managedFields)
/// that the repository no longer sets: server-side apply removes them.
fn dropped_fields(live: &Value, object: &Value) -> Vec<FieldChange> {
    let Some(entries) = live.pointer("/metadata/managedFields").and_then(Value::as_array) else { return Vec::new() };
    let mut owned = Vec::new();
    for entry in entries {
        let manager = entry.get("manager").and_then(Value::as_str);
        let operation = entry.get("operation").and_then(Value::as_str);
        if manager == Some(FIELD_MANAGER)
            && operation == Some("Apply")
            && let Some(set) = entry.get("fieldsV1")
        {
            owned_leaves(set, String::new(), &mut owned);
        }
    }
    owned
        .into_iter()
        .filter(|pointer| object.pointer(pointer).is_none())
        .filter_map(|pointer| {
            let from = live.pointer(&pointer)?.clone();
            Some(FieldChange { pointer, from: Some(from), to: None })
        })
        .collect()
}

/// Leaf pointers of a `fieldsV1` set: `f:<name>` descends into a field; a
/// field whose set is empty or holds list-element keys (`k:`, `v:`, `i:`) is
/// a leaf (lists are compared whole).
fn owned_leaves(set: &Value, at: String, out: &mut Vec<String>) {
    let Some(map) = set.as_object() else { return };
    let fields: Vec<(&str, &Value)> = map.iter().filter_map(|(k, v)| Some((k.strip_prefix("f:")?, v))).collect();
    let elements = map.keys().any(|k| k.starts_with("k:") || k.starts_with("v:") || k.starts_with("i:"));
    if fields.is_empty() || elements {
        if !at.is_empty() {
            out.push(at);
        }
        return;
    }
    for (name, sub) in fields {
        owned_leaves(sub, child(&at, name), out);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn desired(name: &str, replicas: i64, adopt: bool) -> MachineSetDesired {
        MachineSetDesired {
            name: name.into(),
            namespace: "openshift-machine-api".into(),
            replicas: Some(replicas),
            adopt,
            object: json!({
                "apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
                "metadata": {"name": name, "namespace": "openshift-machine-api"},
                "spec": {"replicas": replicas, "template": {"spec": {"providerSpec": {"value": {"ami": "a"}}}}}
            }),
            origin: "machinesets/x.yaml".into(),
        }
    }

    #[test]
    fn create_update_delete_conflict_and_adopt() {
        let want: BTreeMap<_, _> = [
            ("new".to_owned(), desired("new", 1, false)),
            ("same".to_owned(), desired("same", 2, false)),
            ("scaled".to_owned(), desired("scaled", 3, false)),
            ("theirs".to_owned(), desired("theirs", 1, false)),
            ("adopted".to_owned(), desired("adopted", 1, true)),
        ]
        .into();
        let mut live = BTreeMap::new();
        for (name, r) in [("same", 2), ("scaled", 2)] {
            let mut o = applied_object(&want[name]);
            o["spec"]["replicas"] = json!(r);
            o["status"] = json!({"replicas": r});
            o["metadata"]["uid"] = json!(format!("uid-{name}"));
            live.insert(name.to_owned(), o);
        }
        live.insert("theirs".into(), desired("theirs", 1, false).object);
        live.insert("adopted".into(), desired("adopted", 1, false).object);
        let mut old = applied_object(&desired("old", 4, false));
        old["metadata"]["uid"] = json!("uid-old");
        live.insert("old".into(), old);
        live.insert("linux-workers".into(), json!({"metadata": {"name": "linux-workers"}}));

        let steps = plan_machine_sets(&want, &live);
        let names: Vec<(&str, String)> = steps
            .iter()
            .map(|s| match s {
                MachineSetStep::Apply { change, .. } => (s.name(), format!("{:?}", change.action)),
                MachineSetStep::Delete { uid, .. } => (s.name(), format!("Delete {uid}")),
                MachineSetStep::Conflict { .. } => (s.name(), "Conflict".into()),
            })
            .collect();
        assert_eq!(
            names,
            [
                ("adopted", "Update".to_owned()),
                ("new", "Create".into()),
                ("old", "Delete uid-old".into()),
                ("scaled", "Update".into()),
                ("theirs", "Conflict".into()),
            ]
        );
        let MachineSetStep::Apply { change, object } = &steps[3] else { panic!() };
        assert_eq!(change.replicas, Some((Some(2), Some(3))));
        assert_eq!(change.fields.iter().map(|f| f.pointer.as_str()).collect::<Vec<_>>(), ["/spec/replicas"]);
        assert_eq!(object["metadata"]["labels"][MANAGED_BY.0], "winfleet");
    }

    #[test]
    fn a_field_winfleet_applied_and_the_repository_dropped_is_a_change() {
        let want = desired("ms", 1, false);
        let mut live = applied_object(&want);
        live["spec"]["minReadySeconds"] = json!(30);
        live["metadata"]["managedFields"] = json!([
            {"manager": "winfleet", "operation": "Apply", "fieldsV1": {"f:spec": {"f:minReadySeconds": {}, "f:replicas": {}}}},
            {"manager": "other", "operation": "Update", "fieldsV1": {"f:spec": {"f:paused": {}}}}
        ]);
        let steps = plan_machine_sets(&[("ms".to_owned(), want)].into(), &[("ms".to_owned(), live)].into());
        let MachineSetStep::Apply { change, .. } = &steps[0] else { panic!("{steps:?}") };
        assert_eq!(
            change.fields,
            [FieldChange { pointer: "/spec/minReadySeconds".into(), from: Some(json!(30)), to: None }]
        );
        assert_eq!(change.replicas, None);
    }
}
