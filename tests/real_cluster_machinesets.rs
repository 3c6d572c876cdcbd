//! MachineSets by server-side apply against both API servers (switched by
//! [`Backend`]): create, update and prune; a field another field manager
//! changed is a conflict in the plan and the round report, never
//! overwritten; a MachineSet winfleet does not manage is never touched.
//! The first test pins what the real kube-apiserver v1.37.2 does with
//! conflicts, which the in-memory one must do alike.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use support::controlplane::{Backend, TestApi, resource};

const MAPI: &str = "openshift-machine-api";

fn machine_sets(api: &TestApi) -> Api<DynamicObject> {
    let ms = resource("machine.openshift.io", "v1beta1", "MachineSet", "machinesets");
    Api::namespaced_with(api.client(), MAPI, &ms)
}

fn managers(object: &DynamicObject) -> Vec<String> {
    let entries = object.metadata.managed_fields.clone().unwrap_or_default();
    entries.iter().map(|e| format!("{} {}", e.manager.clone().unwrap(), e.operation.clone().unwrap())).collect()
}

fn conflict(e: kube::Error) -> (String, Vec<(String, String)>) {
    let kube::Error::Api(status) = e else { panic!("not a Status: {e}") };
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"), "{status:?}");
    // Sorted: the real server's order of causes varies (a Go map).
    let mut causes: Vec<_> = status.details.unwrap().causes.into_iter().map(|c| (c.field, c.message)).collect();
    causes.sort();
    (status.message, causes)
}

/// Non-forced apply against another manager's field: 409 with one
/// `FieldManagerConflict` cause per field, the manager named without a
/// time; the applier's own `Update` entry is another manager; the same
/// value is shared, not a conflict; force takes the field from both.
async fn conflicts_as_the_real_server_reports_them(api: &TestApi) {
    let sets = machine_sets(api);
    let apply = PatchParams::apply("winfleet");
    let mut config = json!({
        "apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
        "metadata": {"name": "ssa", "namespace": MAPI, "labels": {"app": "w"}},
        "spec": {"replicas": 1, "template": {"spec": {"providerSpec": {"value": {"instanceType": "a"}}}}},
    });
    sets.patch("ssa", &apply, &Patch::Apply(&config)).await.unwrap();
    let edit = PatchParams { field_manager: Some("kubectl-edit".into()), ..Default::default() };
    sets.patch("ssa", &edit, &Patch::Merge(json!({"spec": {"replicas": 5}}))).await.unwrap();
    let own = PatchParams { field_manager: Some("winfleet".into()), ..Default::default() };
    let value = json!({"spec": {"template": {"spec": {"providerSpec": {"value": {"instanceType": "b"}}}}}});
    let edited = sets.patch("ssa", &own, &Patch::Merge(value)).await.unwrap();
    assert_eq!(managers(&edited), ["winfleet Apply", "kubectl-edit Update", "winfleet Update"]);

    config["spec"]["replicas"] = json!(3);
    for dry_run in [true, false] {
        let params = PatchParams { dry_run, ..apply.clone() };
        let (message, causes) = conflict(sets.patch("ssa", &params, &Patch::Apply(&config)).await.unwrap_err());
        let using = "using machine.openshift.io/v1beta1";
        assert_eq!(
            causes,
            [
                (".spec.replicas".to_owned(), format!("conflict with \"kubectl-edit\" {using}")),
                (
                    ".spec.template.spec.providerSpec.value.instanceType".to_owned(),
                    format!("conflict with \"winfleet\" {using}")
                ),
            ],
            "{message}"
        );
        assert!(message.starts_with("Apply failed with 2 conflicts: conflicts with \"kubectl-edit\" "), "{message}");
    }
    let stored = sets.get("ssa").await.unwrap();
    assert_eq!((stored.data["spec"]["replicas"].clone(), managers(&stored).len()), (json!(5), 3), "nothing written");

    // The values the others set: shared, no conflict, nothing taken.
    config["spec"]["replicas"] = json!(5);
    config["spec"]["template"]["spec"]["providerSpec"]["value"]["instanceType"] = json!("b");
    let shared = sets.patch("ssa", &apply, &Patch::Apply(&config)).await.unwrap();
    assert_eq!(managers(&shared), ["winfleet Apply", "kubectl-edit Update", "winfleet Update"]);

    config["spec"]["replicas"] = json!(2);
    let forced = sets.patch("ssa", &apply.clone().force(), &Patch::Apply(&config)).await.unwrap();
    assert_eq!(forced.data["spec"]["replicas"], 2);
    assert_eq!(managers(&forced), ["winfleet Apply", "winfleet Update"], "kubectl-edit lost its only field");
    let owned: Value = serde_json::to_value(&forced.metadata.managed_fields.unwrap()[0].fields_v1).unwrap();
    assert!(owned.pointer("/f:spec/f:replicas").is_some(), "{owned}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_conflicts_against_the_real_server() {
    let Some(api) = TestApi::start(Backend::Real).await else { return };
    conflicts_as_the_real_server_reports_them(&api).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_conflicts_against_the_in_memory_server() {
    let api = TestApi::start(Backend::InMemory).await.unwrap();
    conflicts_as_the_real_server_reports_them(&api).await;
}
