//! What the API server does to a MachineSet winfleet applies, read from the
//! answer of the apply's server-side dry run (`dryRun=All`): its admission
//! chain (machine-api-operator's defaulting webhook on OpenShift) and the
//! CRD's defaults and pruning. Pure.
//!
//! A field is *defaulted* when the dry run's answer holds another value
//! than the object winfleet applies: one the repository sets and the
//! cluster changes or drops (the next apply would set it again), or one
//! the repository leaves out that the apply brings. A field the
//! repository leaves out that the live MachineSet already holds with that
//! value is the cluster's from before, not this apply's. Only the spec,
//! labels and annotations are compared: the rest of `metadata` and the
//! status are the server's own.

use serde_json::Value;

use crate::plan::fields::{FieldChange, leaves};

/// The parts of a MachineSet compared.
const SCOPE: [&str; 3] = ["/spec", "/metadata/labels", "/metadata/annotations"];

fn in_scope(pointer: &str) -> bool {
    SCOPE.iter().any(|s| pointer == *s || pointer.strip_prefix(s).is_some_and(|rest| rest.starts_with('/')))
}

/// The fields the API server sets differently from `applied`, as its dry
/// run `answered`, with `live` the MachineSet before (`None`: a create);
/// `from` is the repository's value (`None`: it leaves the field out),
/// `to` the server's. Sorted by pointer.
pub fn defaulted(applied: &Value, answered: &Value, live: Option<&Value>) -> Vec<FieldChange> {
    let (applied, answered) = (leaves(applied), leaves(answered));
    let live = live.map(leaves).unwrap_or_default();
    let mut pointers: Vec<&String> = applied.keys().chain(answered.keys()).filter(|p| in_scope(p)).collect();
    pointers.sort();
    pointers.dedup();
    pointers
        .into_iter()
        .filter_map(|p| {
            let (from, to) = (applied.get(p).copied(), answered.get(p).copied());
            let already = from.is_none() && live.get(p).copied() == to;
            (from != to && !already).then(|| FieldChange { pointer: p.clone(), from: from.cloned(), to: to.cloned() })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pointers(changes: &[FieldChange]) -> Vec<&str> {
        changes.iter().map(|c| c.pointer.as_str()).collect()
    }

    #[test]
    fn a_create_shows_every_field_the_server_adds_or_changes_in_spec_labels_and_annotations() {
        let applied = json!({"metadata": {"name": "w", "labels": {"a": "1"}}, "spec": {"replicas": 2, "x": "mine"}});
        let answered = json!({
            "metadata": {"name": "w", "uid": "u", "resourceVersion": "7", "labels": {"a": "1", "b": "2"}},
            "spec": {"replicas": 2, "x": "theirs", "template": {"spec": {"lifecycleHooks": {}}}},
            "status": {"replicas": 0},
        });
        let changes = defaulted(&applied, &answered, None);
        assert_eq!(pointers(&changes), ["/metadata/labels/b", "/spec/template/spec/lifecycleHooks", "/spec/x"]);
        assert_eq!((&changes[2].from, &changes[2].to), (&Some(json!("mine")), &Some(json!("theirs"))));
        assert_eq!((&changes[1].from, &changes[1].to), (&None, &Some(json!({}))));
    }

    #[test]
    fn a_field_the_repository_sets_and_the_server_drops_is_shown_as_dropped() {
        let applied = json!({"spec": {"unknown": 1, "replicas": 1}});
        let answered = json!({"spec": {"replicas": 1}});
        let changes = defaulted(&applied, &answered, None);
        assert_eq!(pointers(&changes), ["/spec/unknown"]);
        assert_eq!(changes[0].to, None);
    }

    #[test]
    fn an_update_leaves_out_what_the_live_machine_set_already_holds_but_not_a_value_the_server_sets_again() {
        let live = json!({"spec": {"replicas": 3, "hooks": {}, "deletePolicy": "Random"}});
        let applied = json!({"spec": {"replicas": 4, "deletePolicy": "Newest"}});
        let answered = json!({"spec": {"replicas": 4, "hooks": {}, "deletePolicy": "Random", "new": true}});
        let changes = defaulted(&applied, &answered, Some(&live));
        assert_eq!(pointers(&changes), ["/spec/deletePolicy", "/spec/new"]);
    }

    #[test]
    fn an_answer_equal_to_the_applied_object_defaults_nothing() {
        let applied = json!({"metadata": {"labels": {"a": "1"}}, "spec": {"replicas": 1}});
        assert!(defaulted(&applied, &applied.clone(), Some(&applied)).is_empty());
    }
}
