//! The cluster side against the in-memory Kubernetes API (tests/support/
//! apiserver), reached through a real kube::Client: MachineSets, Node
//! metadata, association and the dry-run gate. The safe-reboot rollout is
//! in tests/safe_reboot.rs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeSet;

use serde_json::{Value, json};
use support::apiserver::{ApiServer, fixtures};
use support::cluster::*;
use winfleet::cluster::MANAGED_KEYS_ANNOTATION;
use winfleet::cluster::observe::observe;

#[tokio::test]
async fn machine_sets_are_created_updated_and_only_managed_ones_deleted() {
    let api = ApiServer::new();
    let mut theirs = fixtures::machine_set("theirs", 2, &[]);
    theirs["metadata"]["labels"] = json!({"owner": "someone-else"});
    api.seed(theirs);
    api.seed(fixtures::machine_set("old", 1, &[("app.kubernetes.io/managed-by", "winfleet")]));
    api.seed(fixtures::machine_set("linux-workers", 3, &[]));
    let repo = Repo::new();
    repo.machine_set("winb", 1, false);
    repo.machine_set("theirs", 5, false);

    let plan = round(&api, &repo, true).await;
    let cluster = plan.cluster.as_ref().unwrap();
    let actions: Vec<String> =
        cluster.machine_sets.iter().map(|m| format!("{} {:?}", m.change.name, m.change.action)).collect();
    assert_eq!(actions, ["old Delete", "winb Create"]);
    assert_eq!(cluster.conflicts.len(), 1);
    assert!(cluster.conflicts[0].reason.contains("winfleet does not manage it"), "{:?}", cluster.conflicts);
    assert!(api.history().iter().all(|w| w.resource != "machinesets"), "a dry run writes nothing");
    assert!(plan.render_text().contains("MachineSet theirs: ! conflict"), "{}", plan.render_text());

    let applied = round(&api, &repo, false).await;
    let cluster = applied.cluster.as_ref().unwrap();
    assert!(cluster.rejected.is_empty() && cluster.error.is_none(), "{cluster:?}");
    let created = api.get(MS, "MachineSet", Some(MAPI), "winb").expect("created");
    assert_eq!(created["metadata"]["labels"]["app.kubernetes.io/managed-by"], "winfleet");
    assert_eq!(created["spec"]["replicas"], 1);
    let managers: Vec<&str> = created["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["manager"].as_str().unwrap())
        .collect();
    assert_eq!(managers, ["winfleet"]);
    assert!(api.get(MS, "MachineSet", Some(MAPI), "old").is_none(), "managed and gone from the repository: deleted");
    assert_eq!(api.get(MS, "MachineSet", Some(MAPI), "theirs").unwrap()["spec"]["replicas"], 2, "unmanaged: untouched");
    assert_eq!(written(&api, "machinesets", "theirs"), 0);
    assert!(api.get(MS, "MachineSet", Some(MAPI), "linux-workers").is_some());
    assert_eq!(event_reasons(&api, "winb"), ["MachineSetCreated"]);
    assert_eq!(event_reasons(&api, "old"), ["MachineSetDeleted"]);
    assert_eq!(event_reasons(&api, "theirs"), ["MachineSetConflict"]);

    // In sync: nothing planned, nothing written.
    let before = api.history().len();
    let again = round(&api, &repo, false).await;
    assert!(again.cluster.as_ref().unwrap().machine_sets.is_empty());
    assert_eq!(api.history().iter().skip(before).filter(|w| w.resource == "machinesets").count(), 0);

    // A replica change is an update, shown plainly; adoption takes over "theirs".
    repo.machine_set("winb", 3, false);
    repo.machine_set("theirs", 5, true);
    let plan = round(&api, &repo, true).await;
    let text = plan.render_text();
    assert!(text.contains("MachineSet winb: ~ update, replicas 1 -> 3"), "{text}");
    assert!(text.contains("MachineSet theirs: ~ update, replicas 2 -> 5"), "{text}");
    round(&api, &repo, false).await;
    assert_eq!(api.get(MS, "MachineSet", Some(MAPI), "winb").unwrap()["spec"]["replicas"], 3);
    let adopted = api.get(MS, "MachineSet", Some(MAPI), "theirs").unwrap();
    assert_eq!(adopted["spec"]["replicas"], 5);
    assert_eq!(adopted["metadata"]["labels"]["app.kubernetes.io/managed-by"], "winfleet");
    assert_eq!(adopted["metadata"]["labels"]["owner"], "someone-else", "SSA leaves other managers' fields");
}

fn node_labels(api: &ApiServer, name: &str) -> Value {
    api.get("v1", "Node", None, name).unwrap()["metadata"]["labels"].clone()
}

fn node_taints(api: &ApiServer, name: &str) -> BTreeSet<String> {
    let node = api.get("v1", "Node", None, name).unwrap();
    node["spec"]["taints"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| {
                    format!(
                        "{}={}:{}",
                        t["key"].as_str().unwrap(),
                        t["value"].as_str().unwrap_or(""),
                        t["effect"].as_str().unwrap()
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn node_labels_taints_and_annotations_only_managed_keys_change() {
    let api = ApiServer::new();
    let mut node = fixtures::node(
        "win-a",
        &[("InternalIP", "10.1.0.5"), ("Hostname", "win-a")],
        true,
        &[("team", "old"), ("keep", "me")],
    );
    node["spec"]["taints"] = json!([{"key": "os", "value": "Windows", "effect": "NoSchedule"}]);
    api.seed(node);
    api.seed(fixtures::node("win-b", &[("InternalIP", "10.1.0.6")], true, &[]));
    let repo = Repo::new();
    repo.instances(
        "  - address: 10.1.0.5\n    labels:\n      team: payments\n      tier: gold\n    annotations:\n      example.com/owner: ops\n    taints:\n    - key: dedicated\n      value: payments\n      effect: NoSchedule\n  - address: 10.9.9.9\n",
    );
    let report = round(&api, &repo, false).await;
    let cluster = report.cluster.as_ref().unwrap();
    assert_eq!(cluster.unassociated.len(), 1);
    assert_eq!(cluster.unassociated[0].address, "10.9.9.9");
    assert!(cluster.unassociated[0].reason.contains("no Windows Node has address 10.9.9.9"));
    assert!(report.nodes.iter().all(|n| n.failed()), "SSH is refused, and that does not stop the cluster part");

    assert_eq!(node_labels(&api, "win-a")["team"], "payments");
    assert_eq!(node_labels(&api, "win-a")["tier"], "gold");
    assert_eq!(node_labels(&api, "win-a")["keep"], "me");
    let annotations = api.get("v1", "Node", None, "win-a").unwrap()["metadata"]["annotations"].clone();
    assert_eq!(annotations["example.com/owner"], "ops");
    assert!(annotations[MANAGED_KEYS_ANNOTATION].as_str().unwrap().contains("tier"));
    assert_eq!(
        node_taints(&api, "win-a"),
        ["dedicated=payments:NoSchedule".to_owned(), "os=Windows:NoSchedule".to_owned()].into()
    );
    assert_eq!(written(&api, "nodes", "win-b"), 0, "not an instance: untouched");
    assert_eq!(event_reasons(&api, "win-a"), ["NodeMetadataUpdated"]);

    // Keys leave the repository: removed; a hand-added key stays; a changed value is set.
    api.update("v1", "Node", None, "win-a", |n| n["metadata"]["labels"]["hand"] = json!("added"));
    repo.instances("  - address: 10.1.0.5\n    labels:\n      team: platform\n");
    round(&api, &repo, false).await;
    let labels = node_labels(&api, "win-a");
    assert_eq!(labels["team"], "platform");
    assert!(labels.get("tier").is_none());
    assert_eq!(labels["keep"], "me");
    assert_eq!(labels["hand"], "added");
    let annotations = api.get("v1", "Node", None, "win-a").unwrap()["metadata"]["annotations"].clone();
    assert!(annotations.get("example.com/owner").is_none());
    assert_eq!(node_taints(&api, "win-a"), ["os=Windows:NoSchedule".to_owned()].into());

    // In sync: no write.
    let before = written(&api, "nodes", "win-a");
    let again = round(&api, &repo, false).await;
    assert!(again.cluster.as_ref().unwrap().nodes.is_empty());
    assert_eq!(written(&api, "nodes", "win-a"), before);
}

#[tokio::test]
async fn a_dry_run_rejection_aborts_the_whole_cluster_plan() {
    let api = ApiServer::new();
    api.seed(fixtures::node("win-a", &[("InternalIP", "10.1.0.5")], true, &[]));
    api.seed(fixtures::node("win-b", &[("InternalIP", "10.1.0.6")], true, &[]));
    api.reject(|a| (a.resource == "nodes" && a.name == "win-b").then(|| "policy: no team label on win-b".to_owned()));
    let repo = Repo::new();
    repo.instances(
        "  - address: 10.1.0.5\n    labels:\n      team: a\n  - address: 10.1.0.6\n    labels:\n      team: b\n",
    );
    repo.machine_set("winb", 1, false);
    let before = api.history().len();
    let report = round(&api, &repo, false).await;
    let cluster = report.cluster.as_ref().unwrap();
    assert_eq!(cluster.rejected.len(), 1, "{cluster:?}");
    assert_eq!(cluster.rejected[0].target, "Node/win-b");
    assert!(cluster.rejected[0].outcome.to_string().contains("policy: no team label on win-b"));
    assert!(report.failed());
    let writes: Vec<String> = api
        .history()
        .iter()
        .skip(before)
        .filter(|w| w.resource != "events")
        .map(|w| format!("{} {}", w.verb, w.name))
        .collect();
    assert!(writes.is_empty(), "nothing written after a rejected dry run: {writes:?}");
    assert!(api.get(MS, "MachineSet", Some(MAPI), "winb").is_none());
    assert!(node_labels(&api, "win-a").get("team").is_none(), "win-a's own patch was fine, but nothing is written");
    assert_eq!(event_reasons(&api, "win-b"), ["DryRunRejected"]);
    assert!(report.render_text().contains("none of its MachineSet and Node metadata writes was made"));
}

#[tokio::test]
async fn the_cluster_proxy_no_proxy_and_node_readiness_are_observed() {
    let api = ApiServer::new();
    api.seed(fixtures::proxy_cluster(".cluster.local,.svc,10.128.0.0/14,api-int.example.com"));
    api.seed(fixtures::node("win-a", &[("InternalIP", "10.1.0.5")], false, &[]));
    let facts = observe(&api.client()).await.unwrap();
    assert_eq!(facts.cluster_no_proxy.as_deref(), Some(".cluster.local,.svc,10.128.0.0/14,api-int.example.com"));
    assert!(!facts.nodes["win-a"].ready);
    // The merge into NO_PROXY is checked end to end in tests/cluster_cli.rs.
}

/// A simulated host: a reboot takes the node down (SSH refused, Node
/// NotReady in the API server) and brings it back with a new boot id after
/// `boot_time`, unless it never comes back. Its kubelet posts a heartbeat
/// when the node is back (after `heartbeat_after` more) and every 10 s
/// while it is up. Paused-time tests run in well under a wall-clock second,
/// so heartbeats are stamped as the order of events says: after a reboot
/// 2 s ahead of the wall clock, before any reboot 2 s behind it.

#[tokio::test]
async fn running_windows_machines_join_the_round_unless_ignored() {
    let api = ApiServer::new();
    api.seed(fixtures::node("win-m1", &[("InternalIP", "10.3.0.1")], true, &[]));
    api.seed(fixtures::machine("ms-a-1", "Running", "10.3.0.1", "win-m1"));
    let mut ignored = fixtures::machine("ms-a-2", "Running", "10.3.0.2", "win-m2");
    ignored["metadata"]["labels"]["windowsmachineconfig.openshift.io/ignore"] = json!("true");
    api.seed(ignored);
    api.seed(fixtures::machine("ms-a-3", "Provisioning", "10.3.0.3", ""));
    let repo = Repo::new();
    repo.instances("  - address: 10.1.0.5\n");
    let report = round(&api, &repo, true).await;
    let addresses: Vec<&str> = report.nodes.iter().map(|n| n.address.as_str()).collect();
    assert_eq!(addresses, ["10.1.0.5", "10.3.0.1"]);
    let cluster = report.cluster.as_ref().unwrap();
    assert_eq!(cluster.unassociated.iter().map(|u| u.address.as_str()).collect::<Vec<_>>(), ["10.1.0.5"]);
    assert!(cluster.nodes.is_empty(), "Machine nodes get their metadata from the MachineSet template");
}
