//! Issue 35, item 12: a Node that changes between the round's observation
//! and its write (a kubelet's heartbeat) costs only that Node a re-read,
//! never the round's whole cluster plan. The heartbeat is the in-memory API
//! server's own out-of-band status update, landing just before winfleet's
//! patch of that Node is served (`ApiServer::before_request`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use serde_json::json;
use support::apiserver::{ApiServer, fixtures};
use support::cluster::*;
use winfleet::node::outcome::Outcome;

/// Two Windows Nodes whose instances set a label, and a MachineSet.
fn setup() -> (ApiServer, Repo) {
    let api = ApiServer::new();
    api.seed(fixtures::node("win-a", &[("InternalIP", "10.1.0.5")], true, &[]));
    api.seed(fixtures::node("win-b", &[("InternalIP", "10.1.0.6")], true, &[]));
    let repo = Repo::new();
    repo.instances(
        "  - address: 10.1.0.5\n    labels:\n      team: a\n  - address: 10.1.0.6\n    labels:\n      team: b\n",
    );
    repo.machine_set("winb", 1, false);
    (api, repo)
}

/// What a kubelet's status update does to its Node: a new heartbeat time,
/// so a new resourceVersion.
fn heartbeat(api: &ApiServer, name: &str, beat: usize) {
    api.update("v1", "Node", None, name, |node| {
        node["status"]["conditions"] = json!([{
            "type": "Ready", "status": "True", "reason": "KubeletReady",
            "lastHeartbeatTime": format!("2026-11-28T00:00:{:02}Z", beat % 60),
        }]);
    });
}

/// Beats `name` before each of winfleet's patches of it that `when` picks
/// (dry run or not), while `on` holds; the number of beats.
fn beat_before_patches(
    api: &ApiServer,
    name: &str,
    dry_run: bool,
    on: Arc<AtomicBool>,
    limit: usize,
) -> Arc<AtomicUsize> {
    let beats = Arc::new(AtomicUsize::new(0));
    let (counted, path) = (Arc::clone(&beats), format!("/api/v1/nodes/{name}?"));
    let name = name.to_owned();
    api.before_request(move |api, method, target| {
        let matches = method == "PATCH" && target.starts_with(&path) && target.contains("dryRun") == dry_run;
        if matches && on.load(Ordering::SeqCst) && counted.load(Ordering::SeqCst) < limit {
            let beat = counted.fetch_add(1, Ordering::SeqCst);
            heartbeat(api, &name, beat);
        }
    });
    beats
}

fn label(api: &ApiServer, node: &str) -> Option<String> {
    let node = api.get("v1", "Node", None, node).unwrap();
    node["metadata"]["labels"]["team"].as_str().map(str::to_owned)
}

#[tokio::test]
async fn issue_35_a_heartbeat_before_the_dry_run_replans_that_node_and_the_whole_plan_is_written() {
    let (api, repo) = setup();
    let beats = beat_before_patches(&api, "win-b", true, Arc::new(AtomicBool::new(true)), 1);
    let report = round(&api, &repo, false).await;
    let cluster = report.cluster.as_ref().unwrap();
    assert_eq!(beats.load(Ordering::SeqCst), 1, "the heartbeat landed before win-b's dry run");
    assert!(cluster.rejected.is_empty(), "one moved Node rejects nothing: {:?}", cluster.rejected);
    assert!(!cluster.failed(), "{:?}", cluster.failures());
    assert_eq!((label(&api, "win-a").as_deref(), label(&api, "win-b").as_deref()), (Some("a"), Some("b")));
    assert!(api.get(MS, "MachineSet", Some(MAPI), "winb").is_some(), "the MachineSet was written too");
    let outcomes: Vec<_> = cluster.nodes.iter().map(|n| (n.node.as_str(), n.outcome.clone())).collect();
    assert_eq!(outcomes, [("win-a", Some(Outcome::Applied)), ("win-b", Some(Outcome::Applied))]);
    assert_eq!(event_reasons(&api, "win-b"), ["NodeMetadataUpdated"], "no DryRunRejected");
    assert_eq!(written(&api, "nodes", "win-b"), 1, "win-b written once, after its heartbeat");
    assert!(!report.render_text().contains("nothing was written"), "{}", report.render_text());
}

#[tokio::test]
async fn issue_35_a_heartbeat_between_the_dry_run_and_the_write_replans_that_node() {
    let (api, repo) = setup();
    let beats = beat_before_patches(&api, "win-b", false, Arc::new(AtomicBool::new(true)), 1);
    let report = round(&api, &repo, false).await;
    let cluster = report.cluster.as_ref().unwrap();
    assert_eq!(beats.load(Ordering::SeqCst), 1, "the heartbeat landed before win-b's write");
    assert!(!cluster.failed(), "{:?}", cluster.failures());
    assert_eq!(label(&api, "win-b").as_deref(), Some("b"));
    assert_eq!(event_reasons(&api, "win-b"), ["NodeMetadataUpdated"], "no NodeMetadataFailed");
    assert_eq!(written(&api, "nodes", "win-b"), 1);
}

#[tokio::test]
async fn issue_35_a_node_that_changes_each_time_it_is_read_is_left_for_the_next_round_alone() {
    let (api, repo) = setup();
    let beating = Arc::new(AtomicBool::new(true));
    beat_before_patches(&api, "win-b", true, Arc::clone(&beating), usize::MAX);
    let report = round(&api, &repo, false).await;
    let cluster = report.cluster.as_ref().unwrap();
    assert!(cluster.rejected.is_empty(), "the rest of the plan is not rejected: {:?}", cluster.rejected);
    assert_eq!(label(&api, "win-a").as_deref(), Some("a"), "win-a written");
    assert!(api.get(MS, "MachineSet", Some(MAPI), "winb").is_some(), "the MachineSet written");
    assert_eq!(label(&api, "win-b"), None, "win-b left as it is");
    let left = cluster.nodes.iter().find(|n| n.node == "win-b").unwrap();
    let Some(Outcome::Failed(why)) = &left.outcome else { panic!("win-b is reported: {left:?}") };
    assert!(why.contains("the next round plans it again"), "{why}");
    assert!(report.render_text().contains("Node win-b (10.1.0.6)"), "{}", report.render_text());
    assert!(cluster.failed(), "a Node not written fails the round, as apply's exit status says");
    assert!(event_reasons(&api, "win-b").is_empty(), "no DryRunRejected: {:?}", event_reasons(&api, "win-b"));

    // Its kubelet calms down: the next round writes it.
    beating.store(false, Ordering::SeqCst);
    let report = round(&api, &repo, false).await;
    assert!(!report.cluster.as_ref().unwrap().failed());
    assert_eq!(label(&api, "win-b").as_deref(), Some("b"));
}

#[tokio::test]
async fn issue_35_a_rejected_plan_never_says_nothing_was_written() {
    let (api, repo) = setup();
    api.reject(|a| (a.resource == "nodes" && a.name == "win-b").then(|| "policy: no team label on win-b".to_owned()));
    let report = round(&api, &repo, false).await;
    let cluster = report.cluster.as_ref().unwrap();
    assert_eq!(cluster.rejected.len(), 1, "{cluster:?}");
    let text = report.render_text();
    assert!(!text.contains("nothing was written"), "{text}");
    assert!(text.contains("none of its MachineSet and Node metadata writes was made"), "{text}");
    let notes: Vec<String> = api
        .list("events.k8s.io/v1", "Event")
        .iter()
        .filter(|e| e["reason"] == "DryRunRejected")
        .map(|e| e["note"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(notes.len(), 1);
    assert!(!notes[0].contains("nothing was written"), "{}", notes[0]);
}
