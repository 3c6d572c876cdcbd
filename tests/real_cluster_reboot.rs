//! Issue 24, item 4: a safe reboot with a real PodDisruptionBudget, against
//! either API server ([`Backend`]). Against the real control plane the
//! budget's status is kube-controller-manager's disruption controller's,
//! the 429 is kube-apiserver's, and an evicted pod bound to a node stays
//! terminating until its kubelet confirms: the fake kubelet of each joined
//! node runs the pods bound to it (Running and Ready) and confirms their
//! deletion (tests/support/pods.rs). No scheduler: pods are bound by
//! `spec.nodeName`.
//!
//! Two joined posix sshd nodes, one `app=db` pod on each, a budget
//! `minAvailable: 2`, and a proxy change that owes both a reboot:
//! 1. the drains are refused (429 with the budget's words), the round says
//!    so for each node, nothing is rebooted and both are uncordoned;
//! 2. `minAvailable: 1` allows one disruption: win-node-1 is drained,
//!    rebooted and back with a new boot ID, Ready and uncordoned, while
//!    win-node-2's drain is refused again (one healthy pod left, one needed);
//! 3. a new pod on win-node-1 allows one disruption again: win-node-2 goes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::fs;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, EvictParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::controlplane::{Backend, TestApi};
use support::join::{Bench, bench, logs};
use winfleet::cluster::join::JoinResult;
use winfleet::cluster::rollout::{RebootResult, RebootStage};

const NAMES: [&str; 2] = ["win-node-1", "win-node-2"];
/// The namespace of the test's pods: one both servers have.
const NS: &str = "default";

#[test]
#[ignore = "entry point of the fake kubelet process that node tests start; not a test"]
fn fake_kubelet_process() {
    support::kubelet::main_from_env();
}

/// A bare pod of the budgeted app bound to `node` (no grace period given:
/// the server's default, 30 s, so an eviction waits for the kubelet).
fn db_pod(name: &str, node: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": name, "namespace": NS, "labels": { "app": "db" } },
        "spec": { "nodeName": node, "containers": [{ "name": "db", "image": "registry.invalid/db:1" }] },
    }))
    .unwrap()
}

/// Creates `pod`, waiting (at most 60 s) for what a fresh cluster lacks at
/// first: the ServiceAccount admission needs the namespace's `default`
/// ServiceAccount, which kube-controller-manager creates.
async fn create_pod(api: &TestApi, pod: &Pod) {
    let pods: Api<Pod> = Api::namespaced(api.client(), NS);
    let mut last = String::new();
    for _ in 0..300 {
        match pods.create(&PostParams::default(), pod).await {
            Ok(_) => return,
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("pod {:?} not created within 60 s: {last}", pod.metadata.name);
}

/// Waits (at most 90 s) until `check` says nothing is missing.
async fn wait_until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let mut last = String::new();
    for _ in 0..450 {
        match check().await {
            Ok(()) => return,
            Err(why) => last = why,
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("{what} never happened: {last}");
}

/// The budget's status as the disruption controller has it, once it has
/// observed the budget's latest spec: (currentHealthy, desiredHealthy,
/// expectedPods, disruptionsAllowed).
async fn budget(api: &TestApi, name: &str) -> Result<(i64, i64, i64, i64), String> {
    let pdb = api.get("policy/v1", "PodDisruptionBudget", Some(NS), name).await.ok_or("no budget")?;
    let status = &pdb["status"];
    if status["observedGeneration"] != pdb["metadata"]["generation"] {
        return Err(format!("the budget's status is not observed yet: {pdb:#}"));
    }
    let n = |field: &str| status[field].as_i64().unwrap_or_default();
    Ok((n("currentHealthy"), n("desiredHealthy"), n("expectedPods"), n("disruptionsAllowed")))
}

async fn wait_budget(api: &TestApi, name: &str, want: (i64, i64, i64, i64)) {
    wait_until(&format!("budget {name} at {want:?}"), || async {
        let have = budget(api, name).await?;
        if have == want { Ok(()) } else { Err(format!("{have:?}")) }
    })
    .await;
}

fn pod_json(pod: &Pod) -> Value {
    serde_json::to_value(pod).unwrap()
}

/// Whether pod `name` exists, and whether it is marked for deletion.
async fn pod_state(api: &TestApi, name: &str) -> Option<bool> {
    let pod = api.get("v1", "Pod", Some(NS), name).await?;
    Some(!pod["metadata"]["deletionTimestamp"].is_null())
}

fn boot_id(bench: &Bench, i: usize) -> String {
    fs::read_to_string(bench.fleet.nodes[i].dir.join("boot_id")).unwrap().trim().to_owned()
}

fn reboot_log(bench: &Bench, i: usize) -> String {
    fs::read_to_string(bench.fleet.nodes[i].dir.join("services/reboots")).unwrap_or_default()
}

/// The round's safe reboots by node: (result, the round's text).
async fn reboot_round(bench: &Bench) -> (Vec<(String, RebootResult)>, String) {
    let report = bench.round().await;
    let text = format!("{}\n{}", report.render_text(), logs(&bench.fleet));
    let reboots = report.cluster.as_ref().unwrap().reboots.iter().map(|r| (r.node.clone(), r.result.clone()));
    (reboots.collect(), text)
}

/// Asserts node `i` is schedulable, without winfleet's markers, and
/// whether it still owes its reboot.
async fn assert_uncordoned(bench: &Bench, i: usize, owes_reboot: bool) {
    let node = bench.node(NAMES[i]).await;
    assert_ne!(node["spec"]["unschedulable"], true, "{} is uncordoned: {node:#}", NAMES[i]);
    let annotations = &node["metadata"]["annotations"];
    assert!(annotations.get("winfleet.io/cordoned").is_none(), "{}: {annotations:#}", NAMES[i]);
    assert!(annotations.get("winfleet.io/rebooting").is_none(), "{}: {annotations:#}", NAMES[i]);
    let owed = annotations.get("windowsmachineconfig.openshift.io/reboot-required").is_some();
    assert_eq!(owed, owes_reboot, "{}: reboot-required {annotations:#}", NAMES[i]);
}

/// Asserts node `i` rebooted once since `before`: a new boot ID over SSH
/// and on its Node (reported by its kubelet, started again in the new
/// boot), Ready, uncordoned.
async fn assert_back(bench: &Bench, i: usize, before: &str) {
    assert_eq!(reboot_log(bench, i), "reboot\n", "{} rebooted once", NAMES[i]);
    let now = boot_id(bench, i);
    assert_ne!(now, before, "{}: a new boot", NAMES[i]);
    let node = bench.node(NAMES[i]).await;
    assert_eq!(node["status"]["nodeInfo"]["bootID"], now.as_str(), "{}: {:#}", NAMES[i], node["status"]);
    let conditions = node["status"]["conditions"].as_array().cloned().unwrap_or_default();
    assert!(conditions.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"), "{conditions:#?}");
    assert_uncordoned(bench, i, false).await;
}

fn refused_by_the_budget(result: &RebootResult, words: &str) -> bool {
    matches!(result, RebootResult::Failed { stage: RebootStage::Drain, reason } if reason.contains(words))
}

async fn a_budget_holds_the_drain_until_it_allows_a_disruption(bench: &mut Bench) {
    let report = bench.round().await;
    let joins = &report.cluster.as_ref().unwrap().joins;
    assert!(joins.iter().all(|j| j.result == JoinResult::Joined), "{}\n{}", report.render_text(), logs(&bench.fleet));
    for node in &bench.fleet.nodes {
        node.simulate_reboots();
    }
    let boots: Vec<String> = (0..2).map(|i| boot_id(bench, i)).collect();

    // One db pod on each node, run by its kubelet; the budget needs both.
    create_pod(&bench.api, &db_pod("db-0", NAMES[0])).await;
    create_pod(&bench.api, &db_pod("db-1", NAMES[1])).await;
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": { "name": "db", "namespace": NS },
        "spec": { "minAvailable": 2, "selector": { "matchLabels": { "app": "db" } } },
    }))
    .unwrap();
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(bench.api.client(), NS);
    pdbs.create(&PostParams::default(), &pdb).await.unwrap();
    wait_budget(&bench.api, "db", (2, 2, 2, 0)).await;

    // The Eviction API refuses, in the budget's words.
    let pods: Api<Pod> = Api::namespaced(bench.cluster.client.clone(), NS);
    let Err(kube::Error::Api(refused)) = pods.evict("db-0", &EvictParams::default()).await else {
        panic!("the eviction of db-0 was not refused")
    };
    assert_eq!((refused.code, refused.reason.as_str()), (429, "TooManyRequests"), "{refused:?}");
    assert_eq!(refused.message, "Cannot evict pod as it would violate the pod's disruption budget.");
    let causes: Vec<(String, String)> =
        refused.details.iter().flat_map(|d| &d.causes).map(|c| (c.reason.clone(), c.message.clone())).collect();
    let words = "The disruption budget db needs 2 healthy pods and has 2 currently";
    assert_eq!(causes, [("DisruptionBudget".to_owned(), words.to_owned())], "{refused:?}");

    // 1. A proxy change owes both nodes a reboot; the budget holds both drains.
    fs::write(
        bench.repo.path().join("proxy.yaml"),
        "apiVersion: config.openshift.io/v1\nkind: Proxy\nmetadata:\n  name: cluster\nspec:\n  httpProxy: http://proxy.corp:3128\n",
    )
    .unwrap();
    let loaded =
        winfleet::desired::load(&winfleet::source::read_worktree(bench.repo.path()).unwrap(), Default::default());
    bench.desired = loaded.desired.unwrap_or_else(|| panic!("{:#?}", loaded.diagnostics));
    // A blocked drain gives up after this long; a drain the budget allows
    // ends when the kubelet confirms the deletion, long before.
    bench.options.rollout.drain_timeout = Duration::from_secs(15);
    let (reboots, text) = reboot_round(bench).await;
    assert_eq!(reboots.len(), 2, "{text}");
    for (node, result) in &reboots {
        assert!(
            refused_by_the_budget(result, &format!("blocked by its PodDisruptionBudget: {words}")),
            "{node}: {text}"
        );
    }
    assert!(text.contains(words), "the round says why: {text}");
    for i in 0..2 {
        assert_eq!(reboot_log(bench, i), "", "{} is not rebooted", NAMES[i]);
        assert_eq!(boot_id(bench, i), boots[i]);
        assert_uncordoned(bench, i, true).await;
    }
    assert_eq!(pod_state(&bench.api, "db-0").await, Some(false), "db-0 runs on");
    assert_eq!(pod_state(&bench.api, "db-1").await, Some(false), "db-1 runs on");
    let events: Api<Event> = Api::all(bench.api.client());
    let events = events.list(&ListParams::default()).await.unwrap().items;
    for name in NAMES {
        assert!(
            events.iter().any(|e| e.reason.as_deref() == Some("DrainBlocked")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                && e.note.as_deref().is_some_and(|n| n.contains(words))),
            "{name}: {events:#?}"
        );
    }

    // 2. One disruption allowed: win-node-1 goes, win-node-2 waits again.
    let relax = json!({ "spec": { "minAvailable": 1 } });
    pdbs.patch("db", &PatchParams::default(), &Patch::Merge(&relax)).await.unwrap();
    wait_budget(&bench.api, "db", (2, 1, 2, 1)).await;
    let (reboots, text) = reboot_round(bench).await;
    assert_eq!(reboots.len(), 2, "{text}");
    assert_eq!(reboots[0].0, NAMES[0], "{text}");
    assert_eq!(reboots[0].1, RebootResult::Rebooted { evicted: 1, resumed: false }, "{text}");
    let one_left = "The disruption budget db needs 1 healthy pods and has 1 currently";
    assert!(refused_by_the_budget(&reboots[1].1, one_left), "{text}");
    assert_back(bench, 0, &boots[0]).await;
    assert_eq!(pod_state(&bench.api, "db-0").await, None, "db-0 evicted, its deletion confirmed by the kubelet");
    assert_eq!(reboot_log(bench, 1), "", "win-node-2 is not rebooted");
    assert_uncordoned(bench, 1, true).await;

    // 3. A new replica on win-node-1 allows one disruption again.
    create_pod(&bench.api, &db_pod("db-2", NAMES[0])).await;
    wait_budget(&bench.api, "db", (2, 1, 2, 1)).await;
    let (reboots, text) = reboot_round(bench).await;
    assert_eq!(reboots.len(), 1, "only win-node-2 owes a reboot: {text}");
    assert_eq!(reboots[0], (NAMES[1].to_owned(), RebootResult::Rebooted { evicted: 1, resumed: false }), "{text}");
    assert_back(bench, 1, &boots[1]).await;
    assert_eq!(pod_state(&bench.api, "db-1").await, None, "db-1 evicted");
    assert_eq!(pod_state(&bench.api, "db-2").await, Some(false), "db-2 runs on win-node-1");
    assert_eq!(reboot_log(bench, 0), "reboot\n", "win-node-1 is not rebooted twice");
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_budget_holds_the_drain_until_it_allows_a_disruption_then_the_node_reboots() {
    let mut bench = bench(Backend::Real, &NAMES).await;
    a_budget_holds_the_drain_until_it_allows_a_disruption(&mut bench).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_memory_budget_holds_the_drain_until_it_allows_a_disruption_then_the_node_reboots() {
    let mut bench = bench(Backend::InMemory, &NAMES).await;
    a_budget_holds_the_drain_until_it_allows_a_disruption(&mut bench).await;
}

/// What an eviction does to a pod bound to a node, and the budget status
/// around it, the same on both servers: the pod is marked (deletionTimestamp,
/// grace period 30) and stays until its kubelet deletes it with grace 0;
/// the status counts it healthy, then not.
async fn an_evicted_pod_waits_for_its_kubelet(api: &TestApi) {
    create_pod(api, &db_pod("lone", "no-kubelet-here")).await;
    let pods: Api<Pod> = Api::namespaced(api.client(), NS);
    let running = support::kubelet::pods::running_status();
    pods.patch_status("lone", &PatchParams::default(), &Patch::Merge(&running)).await.unwrap();
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": { "name": "lone", "namespace": NS },
        "spec": { "minAvailable": 0, "selector": { "matchLabels": { "app": "db" } } },
    }))
    .unwrap();
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(api.client(), NS);
    pdbs.create(&PostParams::default(), &pdb).await.unwrap();
    wait_budget(api, "lone", (1, 0, 1, 1)).await;
    let status = api.get("policy/v1", "PodDisruptionBudget", Some(NS), "lone").await.unwrap()["status"].clone();
    let mut condition = status["conditions"][0].clone();
    condition.as_object_mut().unwrap().remove("lastTransitionTime");
    assert_eq!(
        condition,
        json!({
            "type": "DisruptionAllowed", "status": "True", "reason": "SufficientPods", "message": "",
            "observedGeneration": 1,
        }),
        "{status:#}"
    );
    assert!(status.get("disruptedPods").is_none(), "{status:#}");

    pods.evict("lone", &EvictParams::default()).await.unwrap();
    let marked = pod_json(&pods.get("lone").await.unwrap());
    assert!(marked["metadata"]["deletionTimestamp"].is_string(), "{marked:#}");
    assert_eq!(marked["metadata"]["deletionGracePeriodSeconds"], 30, "{marked:#}");
    wait_budget(api, "lone", (0, 0, 1, 0)).await;
    let condition =
        api.get("policy/v1", "PodDisruptionBudget", Some(NS), "lone").await.unwrap()["status"]["conditions"][0].clone();
    assert_eq!((&condition["status"], &condition["reason"]), (&json!("False"), &json!("InsufficientPods")));

    // The kubelet's confirmation.
    let uid = marked["metadata"]["uid"].as_str().map(str::to_owned);
    let confirm = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(kube::api::Preconditions { uid, resource_version: None }),
        ..DeleteParams::default()
    };
    pods.delete("lone", &confirm).await.unwrap();
    assert!(pods.get_opt("lone").await.unwrap().is_none(), "gone once the kubelet confirms");
    wait_budget(api, "lone", (0, 0, 0, 0)).await;
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_the_real_server_an_evicted_pod_waits_for_its_kubelet() {
    let api = TestApi::start(Backend::Real).await;
    an_evicted_pod_waits_for_its_kubelet(&api).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_the_in_memory_server_an_evicted_pod_waits_for_its_kubelet() {
    let api = TestApi::start(Backend::InMemory).await;
    an_evicted_pod_waits_for_its_kubelet(&api).await;
}
