//! Self-tests of the in-memory API server (tests/support/apiserver), all
//! through a real `kube::Client`: objects, conflicts, selectors, scopes,
//! server-side apply, dry runs and admission. Watches, evictions, Events
//! and the server's own ways are in tests/apiserver_watch.rs.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

mod support;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use serde_json::json;
use support::api::*;
use support::apiserver::fixtures::{machine_set, node, pod, proxy_cluster};
use support::apiserver::*;

#[tokio::test]
async fn create_get_list_replace_delete() {
    let server = ApiServer::new();
    let nodes: Api<Node> = Api::all(server.client());

    let created = nodes
        .create(&PostParams::default(), &serde_json::from_value(node("w1", &[], true, &[])).unwrap())
        .await
        .unwrap();
    assert!(created.metadata.uid.is_some());
    assert!(created.metadata.creation_timestamp.is_some());
    assert_eq!(created.metadata.generation, Some(1));
    assert_eq!(created.metadata.resource_version.as_deref(), Some("1"));

    let again =
        nodes.create(&PostParams::default(), &serde_json::from_value(node("w1", &[], true, &[])).unwrap()).await;
    let e = api_error(again.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(e.message, "nodes \"w1\" already exists");

    let e = api_error(nodes.get("nope").await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str(), e.message.as_str()), (404, "NotFound", "nodes \"nope\" not found"));

    server.seed(node("w2", &[("InternalIP", "10.0.0.2")], false, &[]));
    let list = nodes.list(&ListParams::default()).await.unwrap();
    assert_eq!(names(&list.items), ["w1", "w2"]);
    assert_eq!(list.metadata.resource_version.as_deref(), Some("2"));

    let mut w1 = nodes.get("w1").await.unwrap();
    w1.spec.as_mut().unwrap().unschedulable = Some(true);
    let replaced = nodes.replace("w1", &PostParams::default(), &w1).await.unwrap();
    assert_eq!(replaced.metadata.resource_version.as_deref(), Some("3"));
    assert_eq!(replaced.metadata.generation, Some(2));

    // Status is not changed through the main resource.
    let mut w1 = replaced.clone();
    w1.status.as_mut().unwrap().conditions = None;
    let replaced = nodes.replace("w1", &PostParams::default(), &w1).await.unwrap();
    assert!(replaced.status.unwrap().conditions.is_some());

    let deleted = nodes.delete("w1", &DeleteParams::default()).await.unwrap();
    assert!(deleted.is_left());
    assert!(server.get("v1", "Node", None, "w1").is_none());
    let e = api_error(nodes.delete("w1", &DeleteParams::default()).await.unwrap_err());
    assert_eq!(e.code, 404);

    let verbs: Vec<_> = server.history().iter().map(|w| (w.verb.clone(), w.name.clone())).collect();
    assert_eq!(verbs, [("create".into(), "w1".into()), ("update".into(), "w1".into()), ("delete".into(), "w1".into())]);
}

#[tokio::test]
async fn stale_resource_version_conflicts() {
    let server = ApiServer::new();
    let nodes: Api<Node> = Api::all(server.client());
    server.seed(node("w1", &[], true, &[]));
    let stale = nodes.get("w1").await.unwrap();
    server.update("v1", "Node", None, "w1", |n| n["metadata"]["labels"]["touched"] = json!("yes"));

    let e = api_error(nodes.replace("w1", &PostParams::default(), &stale).await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    assert!(e.message.contains("the object has been modified"), "{}", e.message);

    let patch = json!({ "metadata": { "resourceVersion": "1", "labels": { "a": "b" } } });
    let e = api_error(nodes.patch("w1", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap_err());
    assert_eq!(e.code, 409);

    let current = server.get("v1", "Node", None, "w1").unwrap();
    let patch =
        json!({ "metadata": { "resourceVersion": current["metadata"]["resourceVersion"], "labels": { "a": "b" } } });
    let patched = nodes.patch("w1", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    assert_eq!(patched.metadata.labels.unwrap()["a"], "b");

    // A failing JSON patch test operation is 422.
    let p: json_patch::Patch =
        serde_json::from_value(json!([{ "op": "test", "path": "/metadata/labels/a", "value": "x" }])).unwrap();
    let e = api_error(nodes.patch("w1", &PatchParams::default(), &Patch::Json::<()>(p)).await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
}

#[tokio::test]
async fn cordon_and_no_op_writes() {
    let server = ApiServer::new();
    let nodes: Api<Node> = Api::all(server.client());
    server.seed(node("w1", &[], true, &[]));
    let n = nodes.cordon("w1").await.unwrap();
    assert_eq!(n.spec.unwrap().unschedulable, Some(true));
    let rv_after = server.resource_version();
    // Cordoning again changes nothing: no write.
    nodes.cordon("w1").await.unwrap();
    assert_eq!(server.resource_version(), rv_after);
    assert_eq!(server.history().len(), 1);
    assert_eq!(server.history()[0].verb, "patch");
    let fields = server.get("v1", "Node", None, "w1").unwrap()["metadata"]["managedFields"].clone();
    let unknown = fields.as_array().unwrap().iter().find(|e| e["manager"] == "unknown").unwrap();
    assert_eq!(unknown["fieldsV1"], json!({ "f:spec": { "f:unschedulable": {} } }));
    nodes.uncordon("w1").await.unwrap();
    let list = nodes.list(&ListParams::default().fields("spec.unschedulable=false")).await.unwrap();
    assert_eq!(names(&list.items), ["w1"]);
}

#[tokio::test]
async fn label_and_field_selectors() {
    let server = ApiServer::new();
    server.seed(pod("a", "web1", "n1", &[("app", "web"), ("tier", "front")], None));
    server.seed(pod("a", "web2", "n2", &[("app", "web")], None));
    server.seed(pod("b", "db1", "n1", &[("app", "db")], None));
    server.seed(pod("b", "other", "n2", &[], None));
    let pods: Api<Pod> = Api::all(server.client());
    let sel = |s: &'static str| {
        let pods = pods.clone();
        async move { names(&pods.list(&ListParams::default().labels(s)).await.unwrap().items) }
    };
    assert_eq!(sel("app=web").await, ["web1", "web2"]);
    assert_eq!(sel("app==web,tier").await, ["web1"]);
    assert_eq!(sel("app!=web").await, ["db1", "other"]);
    assert_eq!(sel("app in (web, db)").await, ["web1", "web2", "db1"]);
    assert_eq!(sel("app notin (web)").await, ["db1", "other"]);
    assert_eq!(sel("!tier,app").await, ["web2", "db1"]);

    let on_n1 = pods.list(&ListParams::default().fields("spec.nodeName=n1")).await.unwrap();
    assert_eq!(names(&on_n1.items), ["web1", "db1"]);
    let mixed = pods.list(&ListParams::default().fields("spec.nodeName!=n1,metadata.namespace=b")).await.unwrap();
    assert_eq!(names(&mixed.items), ["other"]);
    let running = pods.list(&ListParams::default().fields("status.phase=Running")).await.unwrap();
    assert_eq!(running.items.len(), 4);

    let e = api_error(pods.list(&ListParams::default().labels("app in (web")).await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (400, "BadRequest"));
    let e = api_error(pods.list(&ListParams::default().fields("spec.bogus=x")).await.unwrap_err());
    assert_eq!(e.code, 400);
    assert!(e.message.contains("field label not supported"), "{}", e.message);

    // Paging.
    let page = pods.list(&ListParams::default().limit(3)).await.unwrap();
    assert_eq!(names(&page.items), ["web1", "web2", "db1"]);
    let rest = pods
        .list(&ListParams::default().limit(3).continue_token(page.metadata.continue_.as_deref().unwrap()))
        .await
        .unwrap();
    assert_eq!(rest.items.len(), 1);
}

#[tokio::test]
async fn cluster_and_namespaced_scoping() {
    let server = ApiServer::new();
    let client = server.client();
    server.seed(node("w1", &[], true, &[]));
    server.seed(pod("a", "p1", "w1", &[], None));
    server.seed(pod("b", "p2", "w1", &[], None));
    server.seed(proxy_cluster("10.0.0.0/16"));

    let node_ar = ApiResource::erase::<Node>(&());
    let wrong: Api<DynamicObject> = Api::namespaced_with(client.clone(), "a", &node_ar);
    assert_eq!(api_error(wrong.get("w1").await.unwrap_err()).code, 404);
    assert_eq!(api_error(wrong.list(&ListParams::default()).await.unwrap_err()).code, 404);

    let all: Api<Pod> = Api::all(client.clone());
    assert_eq!(names(&all.list(&ListParams::default()).await.unwrap().items), ["p1", "p2"]);
    let in_a: Api<Pod> = Api::namespaced(client.clone(), "a");
    assert_eq!(names(&in_a.list(&ListParams::default()).await.unwrap().items), ["p1"]);
    assert_eq!(api_error(in_a.get("p2").await.unwrap_err()).code, 404);

    // A body namespace that disagrees with the URL is 400.
    let mut p = pod("b", "p3", "w1", &[], None);
    p["metadata"]["namespace"] = json!("b");
    let e = api_error(in_a.create(&PostParams::default(), &serde_json::from_value(p).unwrap()).await.unwrap_err());
    assert_eq!(e.code, 400);

    let proxy_ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("config.openshift.io", "v1", "Proxy"), "proxies");
    let proxies: Api<DynamicObject> = Api::all_with(client.clone(), &proxy_ar);
    let cluster = proxies.get("cluster").await.unwrap();
    assert_eq!(cluster.data["status"]["noProxy"], "10.0.0.0/16");

    let unknown = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("apps", "v1", "Deployment"), "deployments");
    let deployments: Api<DynamicObject> = Api::namespaced_with(client.clone(), "a", &unknown);
    assert_eq!(api_error(deployments.list(&ListParams::default()).await.unwrap_err()).code, 404);

    let info = client.apiserver_version().await.unwrap();
    assert_eq!(info.major, "1");
}

#[tokio::test]
async fn server_side_apply() {
    let server = ApiServer::new();
    let client = server.client();
    let ms = machinesets(&client);
    let pp = PatchParams::apply("winfleet");

    let cfg = json!({
        "apiVersion": "machine.openshift.io/v1beta1",
        "kind": "MachineSet",
        "metadata": { "name": "win", "namespace": "openshift-machine-api", "labels": { "app": "w", "owner": "winfleet" } },
        "spec": { "replicas": 2 },
    });
    let created = ms.patch("win", &pp, &Patch::Apply(&cfg)).await.unwrap();
    assert_eq!(created.data["spec"]["replicas"], 2);
    let mf = created.metadata.managed_fields.clone().unwrap();
    assert_eq!(mf.len(), 1);
    assert_eq!(mf[0].manager.as_deref(), Some("winfleet"));
    assert_eq!(mf[0].operation.as_deref(), Some("Apply"));
    assert_eq!(
        mf[0].fields_v1.as_ref().unwrap().0,
        json!({ "f:metadata": { "f:labels": { "f:app": {}, "f:owner": {} } }, "f:spec": { "f:replicas": {} } })
    );

    // Applying the same config again changes nothing.
    let before = server.resource_version();
    ms.patch("win", &pp, &Patch::Apply(&cfg)).await.unwrap();
    assert_eq!(server.resource_version(), before);

    // Someone edits replicas: they own it now.
    let edit = PatchParams { field_manager: Some("kubectl-edit".into()), ..Default::default() };
    ms.patch("win", &edit, &Patch::Merge(json!({ "spec": { "replicas": 5 } }))).await.unwrap();

    let mut cfg3 = cfg.clone();
    cfg3["spec"]["replicas"] = json!(3);
    let e = api_error(ms.patch("win", &pp, &Patch::Apply(&cfg3)).await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    assert!(
        e.message.starts_with(
            "Apply failed with 1 conflict: conflict with \"kubectl-edit\" using machine.openshift.io/v1beta1"
        ),
        "{}",
        e.message
    );
    assert!(e.message.ends_with(": .spec.replicas"), "{}", e.message);
    assert_eq!(
        server.get("machine.openshift.io/v1beta1", "MachineSet", Some("openshift-machine-api"), "win").unwrap()["spec"]
            ["replicas"],
        5
    );

    // The same value is shared, not a conflict.
    let mut cfg5 = cfg.clone();
    cfg5["spec"]["replicas"] = json!(5);
    ms.patch("win", &pp, &Patch::Apply(&cfg5)).await.unwrap();

    // Force takes ownership; omitting a label removes it.
    let mut forced = cfg3.clone();
    forced["metadata"]["labels"].as_object_mut().unwrap().remove("owner");
    let after = ms.patch("win", &pp.clone().force(), &Patch::Apply(&forced)).await.unwrap();
    assert_eq!(after.data["spec"]["replicas"], 3);
    let labels = after.metadata.labels.clone().unwrap();
    assert!(!labels.contains_key("owner"), "{labels:?}");
    assert_eq!(labels["app"], "w");
    let mf = after.metadata.managed_fields.unwrap();
    let edit_entry = mf.iter().find(|e| e.manager.as_deref() == Some("kubectl-edit"));
    assert!(edit_entry.is_none(), "kubectl-edit lost its only field: {mf:?}");
    assert_eq!(after.metadata.generation, Some(3));

    // apply without a field manager is refused, as by the real PatchOptions validation.
    let e = api_error(ms.patch("win", &PatchParams::default(), &Patch::Apply(&cfg)).await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert!(e.message.contains("fieldManager: Required value"), "{}", e.message);
}

#[tokio::test]
async fn dry_run_persists_nothing() {
    let server = ApiServer::new();
    let client = server.client();
    server.seed(node("w1", &[], true, &[]));
    let nodes: Api<Node> = Api::all(client.clone());
    let before = server.resource_version();

    let dry = PostParams { dry_run: true, ..Default::default() };
    let n = nodes.create(&dry, &serde_json::from_value(node("w2", &[], true, &[])).unwrap()).await.unwrap();
    assert_eq!(n.metadata.name.as_deref(), Some("w2"));
    let p = nodes
        .patch("w1", &PatchParams::default().dry_run(), &Patch::Merge(json!({ "spec": { "unschedulable": true } })))
        .await
        .unwrap();
    assert_eq!(p.spec.unwrap().unschedulable, Some(true));
    let ms = machinesets(&client);
    let cfg = machine_set("win", 2, &[]);
    ms.patch("win", &PatchParams::apply("winfleet").dry_run(), &Patch::Apply(&cfg)).await.unwrap();
    nodes.delete("w1", &DeleteParams { dry_run: true, ..Default::default() }).await.unwrap();

    assert!(server.history().is_empty());
    assert_eq!(server.resource_version(), before);
    assert!(server.get("v1", "Node", None, "w2").is_none());
    assert!(server.get("v1", "Node", None, "w1").unwrap()["spec"].get("unschedulable").is_none());
    assert!(server.list("machine.openshift.io/v1beta1", "MachineSet").is_empty());
    let verbs: Vec<String> = server.dry_runs().iter().map(|w| w.verb.clone()).collect();
    assert_eq!(verbs, ["create", "patch", "apply", "delete"]);
}

#[tokio::test]
async fn admission_rejects() {
    let server = ApiServer::new();
    server.seed(node("w1", &[], true, &[]));
    server.reject(|a| {
        (a.resource == "nodes" && a.object["spec"]["unschedulable"] == true).then(|| "no cordons today".to_string())
    });
    let nodes: Api<Node> = Api::all(server.client());
    let e = api_error(nodes.cordon("w1").await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str(), e.message.as_str()), (422, "Invalid", "no cordons today"));
    let e = api_error(
        nodes
            .patch(
                "w1",
                &PatchParams::default().dry_run(),
                &Patch::Strategic(json!({ "spec": { "unschedulable": true } })),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 422);
    assert!(server.history().is_empty());
    assert!(server.dry_runs().is_empty());
    assert!(server.get("v1", "Node", None, "w1").unwrap()["spec"].get("unschedulable").is_none());
}
