//! The MachineSet plan, pure: steps, changes, conflicts.

use serde_json::json;

use super::ownership::{Manager, from_causes};
use super::*;
use crate::plan::fields::FieldChange;

fn desired(name: &str, replicas: i64, adopt: bool) -> MachineSetDesired {
    MachineSetDesired {
        name: name.into(),
        namespace: "openshift-machine-api".into(),
        replicas: Some(replicas),
        adopt,
        force_fields: false,
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
            MachineSetStep::Conflict(_) => (s.name(), "Conflict".into()),
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
    let MachineSetStep::Apply { change, object, force: false, .. } = &steps[3] else { panic!() };
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

/// A MachineSet winfleet applied with replicas 1, whose replicas another
/// manager set to 5 since (its entry as the API server writes it).
fn edited_by(manager: Value, replicas: i64) -> Value {
    let mut live = applied_object(&desired("ms", 1, false));
    live["spec"]["replicas"] = json!(replicas);
    live["metadata"]["managedFields"] = json!([
        {"manager": "winfleet", "operation": "Apply",
         "fieldsV1": {"f:metadata": {"f:labels": {"f:app.kubernetes.io/managed-by": {}}},
                      "f:spec": {"f:template": {"f:spec": {"f:providerSpec": {"f:value": {"f:ami": {}}}}}}}},
        manager,
    ]);
    live
}

fn plan_one(want: MachineSetDesired, live: Value) -> Vec<MachineSetStep> {
    plan_machine_sets(&[("ms".to_owned(), want)].into(), &[("ms".to_owned(), live)].into())
}

#[test]
fn a_field_another_manager_owns_with_another_value_is_a_conflict_and_nothing_is_written() {
    let edit = json!({"manager": "kubectl-edit", "operation": "Update", "fieldsV1": {"f:spec": {"f:replicas": {}}}});
    let steps = plan_one(desired("ms", 3, false), edited_by(edit, 5));
    let [MachineSetStep::Conflict(Conflict { name, reason, fields })] = &steps[..] else { panic!("{steps:?}") };
    assert_eq!(name, "ms");
    let manager = Manager { name: "kubectl-edit".into(), operation: "Update".into(), subresource: None };
    assert_eq!(
        fields,
        &[FieldConflict { pointer: "/spec/replicas".into(), manager, live: Some(json!(5)), wanted: Some(json!(3)) }]
    );
    assert!(
        reason.starts_with(
            "1 field(s) of MachineSet ms that the repository sets are owned by another field manager with another \
             value: /spec/replicas owned by \"kubectl-edit\" (Update), live 5, repository 3. Nothing is written"
        ),
        "{reason}"
    );
    assert!(reason.ends_with("winfleet.io/force-fields: \"true\" to take the field(s) over"), "{reason}");

    // The repository takes the cluster's value: nothing to change, no conflict.
    let edit = json!({"manager": "kubectl-edit", "operation": "Update", "fieldsV1": {"f:spec": {"f:replicas": {}}}});
    assert_eq!(plan_one(desired("ms", 5, false), edited_by(edit, 5)), []);
}

#[test]
fn a_conflict_holds_the_whole_machine_set_and_the_owner_is_named_as_the_server_tells_managers_apart() {
    // kubectl scale: an Update through the scale subresource (no time).
    let scale = json!({"manager": "kubectl", "operation": "Update", "subresource": "scale",
                       "fieldsV1": {"f:spec": {"f:replicas": {}}}});
    let mut want = desired("ms", 3, false);
    want.object["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"] = json!("b");
    let steps = plan_one(want, edited_by(scale, 7));
    let [MachineSetStep::Conflict(Conflict { fields, .. })] = &steps[..] else { panic!("{steps:?}") };
    assert_eq!(
        fields.iter().map(ToString::to_string).collect::<Vec<_>>(),
        ["/spec/replicas owned by \"kubectl\" (Update, subresource scale), live 7, repository 3"]
    );

    // winfleet's own Update entry is another manager than its Apply.
    let own = json!({"manager": "winfleet", "operation": "Update",
                     "fieldsV1": {"f:spec": {"f:replicas": {}}}});
    let steps = plan_one(desired("ms", 3, false), edited_by(own, 5));
    let [MachineSetStep::Conflict(Conflict { fields, .. })] = &steps[..] else { panic!("{steps:?}") };
    assert_eq!(fields[0].manager.to_string(), "\"winfleet\" (Update)");

    // Fields the repository leaves out are the other manager's business.
    let status = json!({"manager": "machineset-controller", "operation": "Update", "subresource": "status",
                        "fieldsV1": {"f:status": {"f:replicas": {}}, "f:spec": {"f:paused": {}}}});
    let mut live = edited_by(status, 1);
    live["status"] = json!({"replicas": 0});
    live["spec"]["paused"] = json!(true);
    assert_eq!(plan_one(desired("ms", 1, false), live), []);
}

#[test]
fn force_fields_and_adoption_take_the_fields_over_and_say_so() {
    let edit = || json!({"manager": "kubectl-edit", "operation": "Update", "fieldsV1": {"f:spec": {"f:replicas": {}}}});
    let mut want = desired("ms", 3, false);
    want.force_fields = true;
    let steps = plan_one(want, edited_by(edit(), 5));
    let [MachineSetStep::Apply { change, force: true, taken_over, .. }] = &steps[..] else { panic!("{steps:?}") };
    assert_eq!(change.replicas, Some((Some(5), Some(3))));
    assert_eq!(taken_over.iter().map(|t| t.pointer.as_str()).collect::<Vec<_>>(), ["/spec/replicas"]);

    // Adoption: the MachineSet has no managed-by label yet; its creator owns every field.
    let mut live = desired("ms", 2, false).object;
    live["metadata"]["managedFields"] = json!([
        {"manager": "kubectl-create", "operation": "Update", "fieldsV1": {"f:spec": {"f:replicas": {}, "f:template": {}}}}
    ]);
    let steps = plan_one(desired("ms", 3, true), live.clone());
    let [MachineSetStep::Apply { force: true, taken_over, .. }] = &steps[..] else { panic!("{steps:?}") };
    assert_eq!(taken_over[0].manager.name, "kubectl-create");
    // Without adopt it is not winfleet's at all.
    let steps = plan_one(desired("ms", 3, false), live);
    let [MachineSetStep::Conflict(Conflict { fields, reason, .. })] = &steps[..] else { panic!("{steps:?}") };
    assert!(fields.is_empty() && reason.contains("winfleet does not manage it"), "{reason}");
}

#[test]
fn a_409_names_its_fields_as_pointers_and_its_managers() {
    let object = applied_object(&desired("ms", 3, false));
    let causes = [
        (
            ".spec.replicas",
            "conflict with \"autoscaler\" with subresource \"scale\" using machine.openshift.io/v1beta1",
        ),
        (".metadata.labels.app.kubernetes.io/managed-by", "conflict with \"helm\""),
        (".spec.other", "not a conflict message"),
    ];
    let fields = from_causes(causes, &object);
    let shown: Vec<String> = fields.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "/spec/replicas owned by \"autoscaler\" (Update, subresource scale), repository 3",
            "/metadata/labels/app.kubernetes.io~1managed-by owned by \"helm\" (Apply), repository \"winfleet\"",
        ]
    );
}
