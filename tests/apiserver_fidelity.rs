//! The in-memory API server (tests/support/apiserver) as a faithful double
//! of the real one (tests/support/controlplane.rs, kube-apiserver v1.37.2
//! with the CRDs of tests/controlplane/crds): each body runs on both
//! backends ([`Backend`]) and asserts what the real server does with the
//! OpenShift custom resources (issue 24, "divergences found are fixed in
//! the in-memory API too"):
//! - a custom resource with a status subresource drops the `status` it is
//!   created with, and a write of the main resource keeps the stored one;
//! - the CRD's structural schema defaults missing fields and prunes the
//!   ones it does not declare (unless `x-kubernetes-preserve-unknown-fields`),
//!   on create, on update, on a `/status` write and on server-side apply;
//! - Network, which has no status subresource, takes its status with the
//!   object, has no `/status`, and a status change bumps its generation.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::controlplane::{Backend, TestApi, resource};

const MAPI: &str = "openshift-machine-api";

fn machine_sets(api: &TestApi) -> Api<DynamicObject> {
    let ar = resource("machine.openshift.io", "v1beta1", "MachineSet", "machinesets");
    Api::namespaced_with(api.client(), MAPI, &ar)
}

fn networks(api: &TestApi) -> Api<DynamicObject> {
    Api::all_with(api.client(), &resource("config.openshift.io", "v1", "Network", "networks"))
}

fn infrastructures(api: &TestApi) -> Api<DynamicObject> {
    Api::all_with(api.client(), &resource("config.openshift.io", "v1", "Infrastructure", "infrastructures"))
}

fn object(v: Value) -> DynamicObject {
    serde_json::from_value(v).unwrap()
}

fn value(o: DynamicObject) -> Value {
    serde_json::to_value(o).unwrap()
}

async fn create(api: &Api<DynamicObject>, v: Value) -> Value {
    value(api.create(&PostParams::default(), &object(v)).await.unwrap())
}

async fn get(api: &Api<DynamicObject>, name: &str) -> Value {
    value(api.get(name).await.unwrap())
}

/// A MachineSet as a user writes it: no replicas, no authoritativeAPI, a
/// field the CRD does not declare, and an open providerSpec.value.
fn machine_set(name: &str) -> Value {
    json!({
        "apiVersion": "machine.openshift.io/v1beta1",
        "kind": "MachineSet",
        "metadata": { "name": name, "namespace": MAPI },
        "spec": {
            "selector": { "matchLabels": { "machine.openshift.io/cluster-api-machineset": name } },
            "notInTheSchema": "pruned",
            "template": {
                "metadata": { "labels": { "machine.openshift.io/cluster-api-machineset": name } },
                "spec": { "providerSpec": { "value": { "instanceType": "m5a.large", "kept": { "any": 1 } } } },
            },
        },
        "status": { "replicas": 3, "readyReplicas": 3 },
    })
}

async fn a_custom_resource_with_a_status_subresource_drops_the_status_it_is_created_with(api: &TestApi) {
    let sets = machine_sets(api);
    let created = create(&sets, machine_set("ms-status")).await;
    assert!(created.get("status").is_none(), "{created:#}");
    assert!(get(&sets, "ms-status").await.get("status").is_none());

    // Status is written through /status, as a controller does.
    let status = json!({ "status": { "replicas": 2, "readyReplicas": 1 } });
    let written = value(sets.patch_status("ms-status", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap());
    assert_eq!(written["status"], json!({ "replicas": 2, "readyReplicas": 1 }));

    // A write of the main resource keeps the stored status, whatever it sends.
    let mut replaced = written.clone();
    replaced["status"] = json!({ "replicas": 9 });
    replaced["spec"]["replicas"] = json!(4);
    let replaced = value(sets.replace("ms-status", &PostParams::default(), &object(replaced)).await.unwrap());
    assert_eq!(replaced["spec"]["replicas"], 4);
    assert_eq!(replaced["status"], json!({ "replicas": 2, "readyReplicas": 1 }));
    assert_eq!(replaced["metadata"]["generation"], 2, "a spec change bumps the generation");

    // Infrastructure too (cluster-scoped, status subresource).
    let infra = infrastructures(api);
    let created = create(
        &infra,
        json!({
            "apiVersion": "config.openshift.io/v1", "kind": "Infrastructure",
            "metadata": { "name": "other" }, "spec": {},
            "status": { "apiServerInternalURI": "https://api-int.other:6443" },
        }),
    )
    .await;
    assert!(created.get("status").is_none(), "{created:#}");
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_is_dropped_on_create_against_the_real_server() {
    let api = TestApi::start(Backend::Real).await;
    a_custom_resource_with_a_status_subresource_drops_the_status_it_is_created_with(&api).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_is_dropped_on_create_against_the_in_memory_server() {
    let api = TestApi::start(Backend::InMemory).await;
    a_custom_resource_with_a_status_subresource_drops_the_status_it_is_created_with(&api).await;
}

async fn the_crd_schema_defaults_and_prunes(api: &TestApi) {
    let sets = machine_sets(api);
    let created = create(&sets, machine_set("ms-schema")).await;
    let spec = &created["spec"];
    assert_eq!(spec["replicas"], 1, "defaulted: {created:#}");
    assert_eq!(spec["authoritativeAPI"], "MachineAPI", "defaulted");
    assert!(spec.get("notInTheSchema").is_none(), "pruned: {created:#}");
    assert_eq!(spec["template"]["spec"]["providerSpec"]["value"]["kept"], json!({ "any": 1 }), "preserved");
    assert_eq!(get(&sets, "ms-schema").await["spec"], created["spec"], "stored as answered");

    // An update: a null for a defaulted field gets the default back,
    // unknown fields are pruned again.
    let patch = json!({ "spec": { "replicas": null, "alsoUnknown": true, "deletePolicy": "Oldest" } });
    let patched = value(sets.patch("ms-schema", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap());
    assert_eq!(patched["spec"]["replicas"], 1, "{patched:#}");
    assert_eq!(patched["spec"]["deletePolicy"], "Oldest");
    assert!(patched["spec"].get("alsoUnknown").is_none(), "{patched:#}");

    // A /status write prunes too.
    let status = json!({ "status": { "replicas": 1, "bogus": "x" } });
    let written = value(sets.patch_status("ms-schema", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap());
    assert_eq!(written["status"], json!({ "replicas": 1 }));

    // Server-side apply refuses a field the schema does not declare (500,
    // the typed patch cannot be built), and defaults what it creates.
    let mut applied = machine_set("ms-applied");
    applied.as_object_mut().unwrap().remove("status");
    let params = PatchParams::apply("fidelity").force();
    match sets.patch("ms-applied", &params, &Patch::Apply(&applied)).await {
        Err(kube::Error::Api(e)) => {
            assert_eq!(e.code, 500, "{e:?}");
            assert!(e.message.contains(".spec.notInTheSchema: field not declared in schema"), "{e:?}");
        }
        other => panic!("an apply with an undeclared field: {other:?}"),
    }
    applied["spec"].as_object_mut().unwrap().remove("notInTheSchema");
    let out = value(sets.patch("ms-applied", &params, &Patch::Apply(&applied)).await.unwrap());
    assert_eq!(out["spec"]["replicas"], 1, "{out:#}");
    assert_eq!(out["spec"]["authoritativeAPI"], "MachineAPI");
    assert_eq!(out["spec"]["template"]["spec"]["providerSpec"]["value"]["kept"], json!({ "any": 1 }));
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_crd_schema_defaults_and_prunes_on_the_real_server() {
    let api = TestApi::start(Backend::Real).await;
    the_crd_schema_defaults_and_prunes(&api).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_crd_schema_defaults_and_prunes_on_the_in_memory_server() {
    let api = TestApi::start(Backend::InMemory).await;
    the_crd_schema_defaults_and_prunes(&api).await;
}

async fn a_network_takes_its_status_with_the_object(api: &TestApi) {
    let nets = networks(api);
    let created = create(
        &nets,
        json!({
            "apiVersion": "config.openshift.io/v1", "kind": "Network",
            "metadata": { "name": "other" },
            "spec": { "serviceNetwork": ["10.0.0.0/16"] },
            "status": { "serviceNetwork": ["10.0.0.0/16"], "unknown": 1 },
        }),
    )
    .await;
    assert_eq!(created["status"], json!({ "serviceNetwork": ["10.0.0.0/16"] }), "kept, and pruned");
    assert_eq!(created["metadata"]["generation"], 1);

    // No /status: 404.
    let status = json!({ "status": { "networkType": "OVNKubernetes" } });
    match nets.patch_status("other", &PatchParams::default(), &Patch::Merge(&status)).await {
        Err(kube::Error::Api(e)) => assert_eq!(e.code, 404, "{e:?}"),
        other => panic!("a /status write on a Network: {other:?}"),
    }

    // The main resource writes status, and a status change is a new generation.
    let patched = value(nets.patch("other", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap());
    assert_eq!(patched["status"]["networkType"], "OVNKubernetes");
    assert_eq!(patched["metadata"]["generation"], 2, "{patched:#}");

    // The seeded Network `cluster` kept the status it was seeded with.
    let cluster = get(&nets, "cluster").await;
    assert_eq!(cluster["status"]["serviceNetwork"], json!([support::controlplane::SERVICE_NETWORK]));
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_network_takes_its_status_with_the_object_on_the_real_server() {
    let api = TestApi::start(Backend::Real).await;
    a_network_takes_its_status_with_the_object(&api).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_network_takes_its_status_with_the_object_on_the_in_memory_server() {
    let api = TestApi::start(Backend::InMemory).await;
    a_network_takes_its_status_with_the_object(&api).await;
}
