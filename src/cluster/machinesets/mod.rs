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
//! - Applies are not forced: a field winfleet would set that another field
//!   manager owns with another value ([`ownership`]) is a conflict, reported
//!   with the field and the manager, and nothing is written to that
//!   MachineSet. Two explicit exceptions force, each listing what it takes
//!   over: adopting a MachineSet (the apply that labels it), and a
//!   repository MachineSet annotated `winfleet.io/force-fields: "true"`.

pub mod defaults;
pub mod ownership;

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value};

use self::ownership::FieldConflict;
use super::{MANAGED_BY, is_managed};
use crate::desired::model::MachineSetDesired;
use crate::desired::rules::machinesets::{ADOPT_ANNOTATION, FORCE_FIELDS_ANNOTATION};
use crate::plan::fields;
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
        /// Forced: the adoption of an unlabelled MachineSet, or the
        /// repository's `winfleet.io/force-fields: "true"`.
        force: bool,
        /// Fields another manager owns that the forced apply takes over.
        taken_over: Vec<FieldConflict>,
    },
    /// Delete a MachineSet winfleet manages that left the repository.
    Delete {
        /// What goes.
        change: MachineSetChange,
        /// The observed UID (the delete is conditional on it).
        uid: String,
    },
    /// Nothing is written to it.
    Conflict(Conflict),
}

/// A MachineSet winfleet leaves alone: a MachineSet of that name exists
/// that winfleet does not manage (`fields` empty), or fields winfleet would
/// set are another field manager's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Conflict {
    /// Name.
    pub name: String,
    /// Why nothing is done, and what resolves it.
    pub reason: String,
    /// The fields another manager owns (empty: not winfleet's MachineSet).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<FieldConflict>,
}

impl Conflict {
    /// MachineSet `name`'s fields another manager owns, and what resolves it.
    pub fn of_fields(name: &str, fields: Vec<FieldConflict>) -> Self {
        let shown: Vec<String> = fields.iter().map(ToString::to_string).collect();
        let reason = format!(
            "{} field(s) of MachineSet {name} that the repository sets are owned by another field manager with \
             another value: {}. Nothing is written to this MachineSet until that is resolved: give the repository \
             the cluster's value, have that manager give the field up, or annotate the repository's MachineSet \
             {FORCE_FIELDS_ANNOTATION}: \"true\" to take the field(s) over",
            fields.len(),
            shown.join("; ")
        );
        Conflict { name: name.to_owned(), reason, fields }
    }
}

impl MachineSetStep {
    /// The MachineSet's name.
    pub fn name(&self) -> &str {
        match self {
            MachineSetStep::Apply { change, .. } | MachineSetStep::Delete { change, .. } => &change.name,
            MachineSetStep::Conflict(c) => &c.name,
        }
    }

    /// The fields a forced apply takes over from other managers.
    pub fn taken_over(&self) -> &[FieldConflict] {
        match self {
            MachineSetStep::Apply { taken_over, .. } => taken_over,
            _ => &[],
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
            steps.push(MachineSetStep::Apply { change, object, force: false, taken_over: Vec::new() });
            continue;
        };
        let managed = is_managed(current.pointer("/metadata/labels"));
        if !managed && !want.adopt {
            steps.push(MachineSetStep::Conflict(Conflict {
                name: name.clone(),
                reason: format!(
                    "MachineSet {name} exists and winfleet does not manage it (no {}={} label); it is left alone. \
                     Annotate the repository's MachineSet {ADOPT_ANNOTATION}: \"true\" to take it over",
                    MANAGED_BY.0, MANAGED_BY.1
                ),
                fields: Vec::new(),
            }));
            continue;
        }
        let mut changes = fields::diff(Some(&project(current, &object)), Some(&object));
        changes.extend(ownership::dropped_fields(current, &object));
        changes.sort_by(|a, b| a.pointer.cmp(&b.pointer));
        if changes.is_empty() {
            continue;
        }
        let conflicts = ownership::conflicts(current, &object);
        let force = !managed || want.force_fields;
        if !conflicts.is_empty() && !force {
            steps.push(MachineSetStep::Conflict(Conflict::of_fields(name, conflicts)));
            continue;
        }
        let live_replicas = current.pointer("/spec/replicas").and_then(Value::as_i64);
        let replicas =
            (want.replicas.is_some() && live_replicas != want.replicas).then_some((live_replicas, want.replicas));
        let change =
            MachineSetChange { name: name.clone(), action: MachineSetAction::Update, replicas, fields: changes };
        steps.push(MachineSetStep::Apply { change, object, force, taken_over: conflicts });
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

#[cfg(test)]
mod tests;
