//! Self-tests of the in-memory API server (tests/support/apiserver), all
//! through a real `kube::Client`.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, EvictParams, GroupVersionKind, ListParams, Patch, PatchParams,
    PostParams, WatchEvent, WatchParams,
};
use kube::runtime::watcher;
use serde_json::{Value, json};
use support::apiserver::fixtures::{machine_set, node, pdb, pod, proxy_cluster};
use support::apiserver::*;

fn api_error(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn machinesets(client: &kube::Client) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("machine.openshift.io", "v1beta1", "MachineSet"),
        "machinesets",
    );
    Api::namespaced_with(client.clone(), "openshift-machine-api", &ar)
}

fn names<T: kube::Resource>(items: &[T]) -> Vec<String> {
    items.iter().map(|o| o.meta().name.clone().unwrap()).collect()
}

fn rv(v: &Value) -> u64 {
    v["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap()
}

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

#[tokio::test]
async fn eviction_honours_pod_disruption_budgets() {
    let server = ApiServer::new();
    let pods: Api<Pod> = Api::namespaced(server.client(), "app");
    server.seed(pod("app", "ds", "w1", &[("name", "agent")], Some("DaemonSet")));
    server.seed(pod("app", "web1", "w1", &[("app", "web")], Some("ReplicaSet")));
    server.seed(pod("app", "web2", "w2", &[("app", "web")], Some("ReplicaSet")));
    server.seed(pdb("app", "web", &[("app", "web")], Some(json!(2)), None));

    // No PDB covers the DaemonSet pod.
    pods.evict("ds", &EvictParams::default()).await.unwrap();
    assert!(server.get("v1", "Pod", Some("app"), "ds").is_none());

    let e = api_error(pods.evict("web1", &EvictParams::default()).await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (429, "TooManyRequests"));
    assert_eq!(e.message, "Cannot evict pod as it would violate the pod's disruption budget.");
    assert!(server.get("v1", "Pod", Some("app"), "web1").is_some());

    let e = api_error(pods.evict("missing", &EvictParams::default()).await.unwrap_err());
    assert_eq!(e.code, 404);

    server.seed(pod("app", "web3", "w2", &[("app", "web")], Some("ReplicaSet")));
    let dry = EvictParams { post_options: PostParams { dry_run: true, ..Default::default() }, ..Default::default() };
    pods.evict("web1", &dry).await.unwrap();
    assert!(server.get("v1", "Pod", Some("app"), "web1").is_some());
    pods.evict("web1", &EvictParams::default()).await.unwrap();
    assert!(server.get("v1", "Pod", Some("app"), "web1").is_none());
    let evicted: Vec<String> = server.history().iter().filter(|w| w.verb == "evict").map(|w| w.name.clone()).collect();
    assert_eq!(evicted, ["ds", "web1"]);

    // Percentages round up: minAvailable 50% of 2 pods is 1, of 1 pod is 1.
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(server.client(), "app");
    pdbs.delete("web", &DeleteParams::default()).await.unwrap();
    server.seed(pdb("app", "web-pct", &[("app", "web")], Some(json!("50%")), None));
    pods.evict("web2", &EvictParams::default()).await.unwrap();
    let e = api_error(pods.evict("web3", &EvictParams::default()).await.unwrap_err());
    assert_eq!(e.code, 429);

    // A not-ready pod may go while the budget is met.
    server.seed(pod("app", "sick", "w2", &[("app", "web")], None));
    server.update("v1", "Pod", Some("app"), "sick", |p| p["status"]["conditions"][0]["status"] = json!("False"));
    pods.evict("sick", &EvictParams::default()).await.unwrap();

    // Two PDBs for one pod is a 500.
    server.seed(pdb("app", "web-2", &[("app", "web")], Some(json!(0)), None));
    let e = api_error(pods.evict("web3", &EvictParams::default()).await.unwrap_err());
    assert_eq!(e.code, 500);
    assert!(e.message.contains("more than one PodDisruptionBudget"), "{}", e.message);
}

#[tokio::test]
async fn eviction_status_body_is_like_the_real_one() {
    use tower::ServiceExt;
    let server = ApiServer::new();
    server.seed(pod("app", "web1", "w1", &[("app", "web")], None));
    server.seed(pdb("app", "web", &[("app", "web")], Some(json!(1)), None));
    let body = json!({ "apiVersion": "policy/v1", "kind": "Eviction", "metadata": { "name": "web1" } });
    let req = http::Request::post("/api/v1/namespaces/app/pods/web1/eviction")
        .header("content-type", "application/json")
        .body(axum::body::Body::from(body.to_string()))
        .unwrap();
    let resp = server.router().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), 429);
    let bytes = http_body_util::BodyExt::collect(resp.into_body()).await.unwrap().to_bytes();
    let status: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(
        status,
        json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "Cannot evict pod as it would violate the pod's disruption budget.",
            "reason": "TooManyRequests",
            "details": { "causes": [{
                "reason": "DisruptionBudget",
                "message": "The disruption budget web needs 1 healthy pods and has 1 currently",
            }] },
            "code": 429,
        })
    );
}

#[tokio::test]
async fn watch_streams_events_with_selectors() {
    let server = ApiServer::new();
    let pods: Api<Pod> = Api::namespaced(server.client(), "app");
    server.seed(pod("app", "old", "w1", &[("app", "web")], None));
    let mut stream = pods.watch(&WatchParams::default().labels("app=web").timeout(30), "0").await.unwrap().boxed();

    let name = |e: &WatchEvent<Pod>| match e {
        WatchEvent::Added(p) => format!("ADDED {}", p.metadata.name.clone().unwrap()),
        WatchEvent::Modified(p) => format!("MODIFIED {}", p.metadata.name.clone().unwrap()),
        WatchEvent::Deleted(p) => format!("DELETED {}", p.metadata.name.clone().unwrap()),
        WatchEvent::Bookmark(_) => "BOOKMARK".into(),
        WatchEvent::Error(e) => format!("ERROR {}", e.code),
    };
    assert_eq!(name(&stream.try_next().await.unwrap().unwrap()), "ADDED old");

    server.seed(pod("app", "other", "w1", &[("app", "db")], None));
    server.seed(pod("app", "new", "w1", &[("app", "web")], None));
    pods.patch("new", &PatchParams::default(), &Patch::Merge(json!({ "metadata": { "annotations": { "x": "y" } } })))
        .await
        .unwrap();
    // Leaves the selector: seen as DELETED.
    server.update("v1", "Pod", Some("app"), "old", |p| p["metadata"]["labels"]["app"] = json!("gone"));
    pods.delete("new", &DeleteParams::default()).await.unwrap();

    let mut seen = Vec::new();
    for _ in 0..4 {
        seen.push(name(&stream.try_next().await.unwrap().unwrap()));
    }
    assert_eq!(seen, ["ADDED new", "MODIFIED new", "DELETED old", "DELETED new"]);

    // Resuming from a resourceVersion replays what came after it.
    let first = server.history()[0].object.clone();
    let mut resumed = pods.watch(&WatchParams::default(), &rv(&first).to_string()).await.unwrap().boxed();
    assert_eq!(name(&resumed.try_next().await.unwrap().unwrap()), "MODIFIED old");
}

#[tokio::test]
async fn watch_too_old_resource_version_is_expired() {
    let server = ApiServer::new();
    server.seed(node("w1", &[], true, &[]));
    for i in 0..1005 {
        server.update("v1", "Node", None, "w1", |n| n["metadata"]["labels"]["i"] = json!(i.to_string()));
    }
    let nodes: Api<Node> = Api::all(server.client());
    let mut s = nodes.watch(&WatchParams::default(), "2").await.unwrap().boxed();
    match s.try_next().await.unwrap().unwrap() {
        WatchEvent::Error(e) => assert_eq!(e.code, 410),
        other => panic!("expected a 410 error event, got {other:?}"),
    }
    assert!(s.try_next().await.unwrap().is_none());
}

#[tokio::test]
async fn runtime_watcher_sees_changes() {
    let server = ApiServer::new();
    server.seed(node("w1", &[], true, &[]));
    let nodes: Api<Node> = Api::all(server.client());
    let mut events = watcher(nodes, watcher::Config::default().labels("kubernetes.io/os=windows")).boxed();

    let mut got = Vec::new();
    while got.len() < 3 {
        match events.try_next().await.unwrap().unwrap() {
            watcher::Event::Init => got.push("init".to_string()),
            watcher::Event::InitApply(n) => got.push(format!("init-apply {}", n.metadata.name.unwrap())),
            watcher::Event::InitDone => got.push("init-done".to_string()),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(got, ["init", "init-apply w1", "init-done"]);

    server.update("v1", "Node", None, "w1", |n| n["status"]["conditions"][0]["status"] = json!("False"));
    match events.try_next().await.unwrap().unwrap() {
        watcher::Event::Apply(n) => {
            assert_eq!(n.status.unwrap().conditions.unwrap()[0].status, "False");
        }
        other => panic!("unexpected {other:?}"),
    }
    server.delete("v1", "Node", None, "w1");
    assert!(matches!(events.try_next().await.unwrap().unwrap(), watcher::Event::Delete(_)));

    // The streaming-list strategy works too.
    server.seed(node("w2", &[], true, &[]));
    let nodes: Api<Node> = Api::all(server.client());
    let mut streaming = watcher(nodes, watcher::Config::default().streaming_lists()).boxed();
    let mut got = Vec::new();
    while got.len() < 3 {
        match streaming.try_next().await.unwrap().unwrap() {
            watcher::Event::Init => got.push("init".to_string()),
            watcher::Event::InitApply(n) => got.push(format!("init-apply {}", n.metadata.name.unwrap())),
            watcher::Event::InitDone => got.push("init-done".to_string()),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(got, ["init", "init-apply w2", "init-done"]);
}

#[tokio::test]
async fn events_recorder_writes_events() {
    use kube::runtime::events::{Event, EventType, Recorder, Reporter};
    let server = ApiServer::new();
    let created = server.seed(node("w1", &[], true, &[]));
    let node: Node = serde_json::from_value(created).unwrap();
    let recorder = Recorder::new(server.client(), Reporter { controller: "winfleet".into(), instance: None });
    let ev = Event {
        type_: EventType::Normal,
        reason: "Reconciled".into(),
        note: Some("all good".into()),
        action: "Reconcile".into(),
        secondary: None,
    };
    let reference = kube::Resource::object_ref(&node, &());
    recorder.publish(&ev, &reference).await.unwrap();
    recorder.publish(&ev, &reference).await.unwrap();
    let events = server.list("events.k8s.io/v1", "Event");
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["reason"], "Reconciled");
    assert_eq!(events[0]["series"]["count"], 2);
    let verbs: Vec<String> = server.history().iter().map(|w| w.verb.clone()).collect();
    assert_eq!(verbs, ["create", "patch"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loopback_server_with_kubeconfig() {
    let server = ApiServer::new();
    server.seed(node("w1", &[("InternalIP", "10.0.0.1")], true, &[]));
    let served = server.serve().await;
    assert!(served.url.starts_with("http://127.0.0.1:"));
    let kc = kube::config::Kubeconfig::read_from(&served.kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await.unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    assert_eq!(names(&nodes.list(&ListParams::default()).await.unwrap().items), ["w1"]);
    nodes.cordon("w1").await.unwrap();
    assert_eq!(server.history().len(), 1);
    assert_eq!(client.default_namespace(), "default");

    let mut w = nodes.watch(&WatchParams::default().timeout(10), "0").await.unwrap().boxed();
    assert!(matches!(w.try_next().await.unwrap().unwrap(), WatchEvent::Added(_)));
    server.update("v1", "Node", None, "w1", |n| n["metadata"]["labels"]["x"] = json!("1"));
    assert!(matches!(w.try_next().await.unwrap().unwrap(), WatchEvent::Modified(_)));

    // kube 5's Client::try_from(Config) retries 429 (up to 15 times, backing
    // off from 5 ms); with default_retry off a PDB-blocked eviction surfaces at once.
    server.seed(pod("app", "web1", "w1", &[("app", "web")], None));
    server.seed(pdb("app", "web", &[("app", "web")], Some(json!(1)), None));
    let kc = kube::config::Kubeconfig::read_from(&served.kubeconfig).unwrap();
    let mut config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await.unwrap();
    config.default_retry = false;
    let pods: Api<Pod> = Api::namespaced(kube::Client::try_from(config).unwrap(), "app");
    assert_eq!(api_error(pods.evict("web1", &EvictParams::default()).await.unwrap_err()).code, 429);

    drop(served);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(nodes.list(&ListParams::default()).await.is_err());
}

#[tokio::test(start_paused = true)]
async fn works_under_a_paused_clock() {
    let server = ApiServer::new();
    server.seed(node("w1", &[], true, &[]));
    let nodes: Api<Node> = Api::all(server.client());
    let start = tokio::time::Instant::now();

    // A watch with a timeout ends after that much virtual time.
    let mut w = nodes.watch(&WatchParams::default().timeout(60), "0").await.unwrap().boxed();
    assert!(matches!(w.try_next().await.unwrap().unwrap(), WatchEvent::Added(_)));
    let s2 = server.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(30)).await;
        s2.update("v1", "Node", None, "w1", |n| n["status"]["conditions"][0]["status"] = json!("False"));
    });
    assert!(matches!(w.try_next().await.unwrap().unwrap(), WatchEvent::Modified(_)));
    assert_eq!(start.elapsed(), Duration::from_secs(30));
    assert!(w.try_next().await.unwrap().is_none());
    assert_eq!(start.elapsed(), Duration::from_secs(60));

    let n = nodes.get("w1").await.unwrap();
    assert_eq!(n.status.unwrap().conditions.unwrap()[0].status, "False");
    let history = server.history();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].at - start, Duration::from_secs(30));
    assert_eq!(history[0].field_manager.as_deref(), Some("test"));
}

#[tokio::test]
async fn validation_and_status_subresource() {
    let server = ApiServer::new();
    let client = server.client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "app");
    server.seed(pod("app", "p1", "w1", &[], None));

    let mut nameless = pod("app", "", "w1", &[], None);
    let e = api_error(
        pods.create(&PostParams::default(), &serde_json::from_value(nameless.clone()).unwrap()).await.unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    nameless["metadata"]["generateName"] = json!("p-");
    let made = pods.create(&PostParams::default(), &serde_json::from_value(nameless).unwrap()).await.unwrap();
    assert!(made.metadata.name.unwrap().starts_with("p-"));

    let mut p1 = pods.get("p1").await.unwrap();
    p1.metadata.name = Some("p2".into());
    let e = api_error(pods.replace("p1", &PostParams::default(), &p1).await.unwrap_err());
    assert_eq!(e.code, 400);
    assert!(e.message.contains("does not match the name on the URL"), "{}", e.message);

    // apiVersion/kind must name the resource.
    let nodes_as_pods = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "Node"), "pods");
    let wrong: Api<DynamicObject> = Api::namespaced_with(client.clone(), "app", &nodes_as_pods);
    let obj: DynamicObject =
        serde_json::from_value(json!({ "apiVersion": "v1", "kind": "Node", "metadata": { "name": "x" } })).unwrap();
    assert_eq!(api_error(wrong.create(&PostParams::default(), &obj).await.unwrap_err()).code, 400);

    // The status subresource changes only status.
    let patch = json!({ "metadata": { "labels": { "ignored": "yes" } }, "status": { "phase": "Failed" } });
    let p = pods.patch_status("p1", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    assert_eq!(p.status.unwrap().phase.as_deref(), Some("Failed"));
    assert!(!p.metadata.labels.unwrap_or_default().contains_key("ignored"));
    let last = server.history().pop().unwrap();
    assert_eq!(last.subresource.as_deref(), Some("status"));

    // Leases (leader election) are plain namespaced objects.
    use k8s_openapi::api::coordination::v1::Lease;
    let leases: Api<Lease> = Api::namespaced(client.clone(), "winfleet");
    let lease: Lease = serde_json::from_value(json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": { "name": "winfleet-leader" },
        "spec": { "holderIdentity": "a", "leaseDurationSeconds": 15 },
    }))
    .unwrap();
    let mut held = leases.create(&PostParams::default(), &lease).await.unwrap();
    held.spec.as_mut().unwrap().holder_identity = Some("b".into());
    leases.replace("winfleet-leader", &PostParams::default(), &held).await.unwrap();
    let e = api_error(leases.replace("winfleet-leader", &PostParams::default(), &held).await.unwrap_err());
    assert_eq!(e.code, 409);
}
