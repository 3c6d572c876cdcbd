//! Self-tests of the in-memory API server (tests/support/apiserver), all
//! through a real `kube::Client`: evictions against disruption budgets,
//! watches (selectors, expiry, kube-runtime's watcher), Events, the
//! loopback server with a kubeconfig, the paused clock, validation and the
//! status subresource.

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
use support::api::*;
use support::apiserver::fixtures::{node, pdb, pod};
use support::apiserver::*;

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
