//! What the lifecycle suites against either API server share
//! (tests/real_cluster_lifecycle*.rs): a joined [`Bench`] with a pod on
//! each node, the Nodes' history as a watch saw it (the one record that
//! both API servers give alike), Events by reason, and the instance list
//! edited as a commit would.
//!
//! Not declared in tests/support/mod.rs: a suite takes it with
//! `#[path = "support/lifecycle_real.rs"] mod lifecycle_real;`.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::fs;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use serde_json::{Value, json};
use winfleet::cluster::join::JoinResult;

use crate::support::controlplane::Backend;
use crate::support::join::{Bench, bench, logs};

/// The namespace of the pods the drains evict.
pub const NAMESPACE: &str = "shop";

/// `names` joined on `backend` (every join asserted), each running one
/// pod.
pub async fn joined(backend: Backend, names: &[&str]) -> Bench {
    let bench = bench(backend, names).await;
    join(&bench, names).await;
    bench
}

/// The first round: every node joins; then a pod is bound to each.
pub async fn join(bench: &Bench, names: &[&str]) {
    let report = bench.round().await;
    let joins = &report.cluster.as_ref().unwrap().joins;
    assert!(
        joins.len() == names.len() && joins.iter().all(|j| j.result == JoinResult::Joined),
        "{}\n{}",
        report.render_text(),
        logs(&bench.fleet)
    );
    seed_pods(bench, names).await;
}

/// One pod bound to each node (no owner: on the real server an owner that
/// does not exist has its dependents collected), and waits until each
/// kubelet reports its pod Running and Ready.
pub async fn seed_pods(bench: &Bench, names: &[&str]) {
    bench.api.seed(json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": NAMESPACE } })).await;
    if bench.api.backend() == Backend::Real {
        // The ServiceAccount admission wants the namespace's default
        // account, which a controller creates.
        let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> = Api::namespaced(bench.api.client(), NAMESPACE);
        wait_until("the default ServiceAccount of shop", async || accounts.get_opt("default").await.unwrap().is_some())
            .await;
    }
    for name in names {
        let node = name.to_lowercase();
        bench
            .api
            .seed(json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": { "name": format!("web-{node}"), "namespace": NAMESPACE, "labels": { "app": "web" } },
                "spec": {
                    "nodeName": node,
                    "containers": [{ "name": "main", "image": "mcr.microsoft.com/windows/nanoserver:ltsc2022" }],
                    "tolerations": [{ "key": "os", "operator": "Exists" }],
                },
            }))
            .await;
    }
    let pods: Api<Pod> = Api::namespaced(bench.api.client(), NAMESPACE);
    wait_until("every pod Running and Ready", async || {
        let list = pods.list(&ListParams::default()).await.unwrap().items;
        list.len() == names.len() && list.iter().all(pod_ready)
    })
    .await;
}

fn pod_ready(pod: &Pod) -> bool {
    let status = pod.status.as_ref();
    status.and_then(|s| s.phase.as_deref()) == Some("Running")
        && status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The pods bound to `node`.
pub async fn pods_on(bench: &Bench, node: &str) -> usize {
    let pods: Api<Pod> = Api::all(bench.api.client());
    pods.list(&ListParams::default()).await.unwrap().items.iter().filter(|p| on(p, node)).count()
}

fn on(pod: &Pod, node: &str) -> bool {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node)
}

/// Waits (at most two minutes) until `ready` holds: the real controllers
/// and kubelets act on their own time.
pub async fn wait_until(what: &str, mut ready: impl AsyncFnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while !ready().await {
        assert!(std::time::Instant::now() < deadline, "{what} never happened");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Whether the Node's Ready condition is True.
pub fn is_ready(node: &Value) -> bool {
    node["status"]["conditions"]
        .as_array()
        .is_some_and(|c| c.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
}

/// The Node's taints' keys.
pub fn taint_keys(node: &Value) -> Vec<String> {
    let taints = node["spec"]["taints"].as_array().cloned().unwrap_or_default();
    taints.iter().filter_map(|t| t["key"].as_str().map(str::to_owned)).collect()
}

/// A Node's state in one watch event.
#[derive(Clone, Debug)]
pub struct Seen {
    pub name: String,
    pub unschedulable: bool,
    pub annotations: BTreeMap<String, String>,
    pub deleted: bool,
}

/// Every state of every Node from when it was started, as a watch of
/// Nodes reports them: the same on both API servers, so a test asserts
/// on it alike (the in-memory server's write history exists only there).
pub struct NodeHistory {
    seen: Arc<Mutex<Vec<Seen>>>,
    failed: Arc<Mutex<Option<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl NodeHistory {
    /// Lists the Nodes (their states now) and watches from there; a watch
    /// the server closes is resumed from the last resourceVersion.
    pub async fn start(bench: &Bench) -> Self {
        let api: Api<Node> = Api::all(bench.api.client());
        let list = api.list(&ListParams::default()).await.unwrap();
        let seen = Arc::new(Mutex::new(list.items.iter().map(|n| seen(n, false)).collect::<Vec<_>>()));
        let failed = Arc::new(Mutex::new(None));
        let version = list.metadata.resource_version.unwrap_or_default();
        let task = tokio::spawn(watch(api, version, Arc::clone(&seen), Arc::clone(&failed)));
        NodeHistory { seen, failed, task }
    }

    /// Waits until the history satisfies `done` (the watch runs behind the
    /// writes), then returns it.
    pub async fn until(&self, what: &str, done: impl Fn(&[Seen]) -> bool) -> Vec<Seen> {
        wait_until(what, async || {
            if let Some(e) = self.failed.lock().unwrap().as_ref() {
                panic!("the watch of Nodes failed: {e}");
            }
            done(&self.seen.lock().unwrap())
        })
        .await;
        self.seen.lock().unwrap().clone()
    }

    /// The last state seen of Node `name`.
    pub fn last(seen: &[Seen], name: &str) -> Option<Seen> {
        seen.iter().rev().find(|s| s.name == name).cloned()
    }

    /// How many Nodes were unschedulable at once, at most, and the order
    /// in which Nodes became unschedulable.
    pub fn cordons(seen: &[Seen]) -> (usize, Vec<String>) {
        let mut state: BTreeMap<&str, bool> = BTreeMap::new();
        let (mut most, mut order) = (0, Vec::new());
        for s in seen {
            let out = s.unschedulable && !s.deleted;
            if state.insert(&s.name, out) != Some(true) && out {
                order.push(s.name.clone());
            }
            most = most.max(state.values().filter(|u| **u).count());
        }
        (most, order)
    }
}

impl Drop for NodeHistory {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn seen(node: &Node, deleted: bool) -> Seen {
    Seen {
        name: node.metadata.name.clone().unwrap_or_default(),
        unschedulable: node.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false),
        annotations: node.metadata.annotations.clone().unwrap_or_default(),
        deleted,
    }
}

/// Records every Node event from `version` on into `out`; what ends the
/// watch otherwise goes into `failed`.
async fn watch(api: Api<Node>, mut version: String, out: Arc<Mutex<Vec<Seen>>>, failed: Arc<Mutex<Option<String>>>) {
    loop {
        let stream = match api.watch(&WatchParams::default().timeout(60), &version).await {
            Ok(s) => s,
            Err(e) => {
                *failed.lock().unwrap() = Some(e.to_string());
                return;
            }
        };
        let mut stream = stream.boxed();
        while let Some(event) = stream.next().await {
            let (node, deleted) = match event {
                Ok(WatchEvent::Added(n) | WatchEvent::Modified(n)) => (n, false),
                Ok(WatchEvent::Deleted(n)) => (n, true),
                Ok(WatchEvent::Bookmark(b)) => {
                    version = b.metadata.resource_version;
                    continue;
                }
                Ok(WatchEvent::Error(e)) => {
                    *failed.lock().unwrap() = Some(format!("{e:?}"));
                    return;
                }
                Err(e) => {
                    *failed.lock().unwrap() = Some(e.to_string());
                    return;
                }
            };
            version = node.metadata.resource_version.clone().unwrap_or_default();
            out.lock().unwrap().push(seen(&node, deleted));
        }
    }
}

/// winfleet's Events with `reason`: the name of the object each regards.
pub async fn events(bench: &Bench, reason: &str) -> Vec<String> {
    let api: Api<Event> = Api::all(bench.api.client());
    let mut out: Vec<String> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter_map(|e| e.regarding.as_ref().and_then(|r| r.name.clone()))
        .collect();
    out.sort();
    out
}

/// Lists exactly the fleet's nodes at indexes `keep` in instances.yaml
/// (as a commit removing or restoring instances would), and loads it.
pub fn list_only(bench: &mut Bench, keep: &[usize]) {
    let path = bench.repo.path().join("instances.yaml");
    let text = fs::read_to_string(&path).unwrap();
    let header = &text[..text.find("  - address: ").unwrap_or(text.len())];
    let mut out = header.to_owned();
    for (_, node) in bench.fleet.nodes.iter().enumerate().filter(|(i, _)| keep.contains(i)) {
        out.push_str(&format!("  - address: {}\n    labels: {{example.com/team: payments}}\n", node.address));
    }
    fs::write(&path, out).unwrap();
    bench.reload();
}
