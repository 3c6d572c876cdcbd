//! Upgrades of Machine-backed nodes (issue 26, point 5), end to end on real
//! sshd VMs of the test Machine provider (tests/support/machine_provider.rs):
//! a new payload pin reaches every Machine-backed node in place, one
//! disruption slot at a time (cordon, drain, the changed files and
//! services, Ready, uncordon), sharing the budget with BYOH nodes; the
//! Machines are kept (same names, same VMs), never replaced.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::{WatchEvent, WatchParams};

use serde_json::Value;
use support::apiserver::ApiServer;
use support::controlplane::{Backend, TestApi};
use support::join_payload::executable;
use support::machine_bench::{MachineApi, MachineBench, SET, machine_set_ready};
use tokio_util::sync::CancellationToken;
use winfleet::cluster::UPGRADING_ANNOTATION;
use winfleet::cluster::upgrade::UpgradeResult;
use winfleet::lifecycle::VERSION_ANNOTATION;
use winfleet::reconcile::report::RoundReport;
use winfleet::status::model::MachineSetPhase;
use winfleet::status::verdict::Context;

#[test]
#[ignore = "entry point of the fake kubelet process that node tests start; not a test"]
fn fake_kubelet_process() {
    support::kubelet::main_from_env();
}

/// A new hybrid-overlay-node build: only it changes in the payload.
fn new_overlay(dir: &Path) {
    executable(
        &dir.join("hybrid-overlay-node"),
        "#!/bin/sh\n# build 2\necho \"hybrid overlay v2 for $2\"\nexec sleep 3600\n",
    );
}

fn server(bench: &MachineBench) -> &ApiServer {
    let TestApi::InMemory { server, .. } = &bench.api else { unreachable!("an in-memory bench") };
    server
}

/// A Node as the API stored it at one moment.
#[derive(Clone, Debug, Default)]
struct Seen {
    unschedulable: bool,
    version: Option<String>,
    ready: bool,
}

fn seen(node: &Value) -> Seen {
    let conditions = node["status"]["conditions"].as_array().cloned().unwrap_or_default();
    Seen {
        unschedulable: node["spec"]["unschedulable"] == true,
        version: node["metadata"]["annotations"][VERSION_ANNOTATION].as_str().map(str::to_owned),
        ready: conditions.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"),
    }
}

/// A cordon: the Node, and every Node as stored at that moment.
type Cordon = (String, BTreeMap<String, Seen>);

/// The in-memory API server's Node writes from write `from` on, each Node
/// as stored.
fn node_writes(server: &ApiServer, from: usize) -> Vec<(String, Value)> {
    let history = server.history();
    history.into_iter().skip(from).filter(|w| w.resource == "nodes").map(|w| (w.name, w.object)).collect()
}

/// Every Node as a watch on either API server sees it change, in order,
/// until dropped.
struct NodeWatch {
    seen: Arc<Mutex<Vec<(String, Value)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl NodeWatch {
    async fn start(client: kube::Client) -> Self {
        let nodes: kube::Api<Node> = kube::Api::all(client);
        let mut stream = nodes.watch(&WatchParams::default().timeout(290), "0").await.unwrap().boxed();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        let task = tokio::spawn(async move {
            while let Some(Ok(event)) = stream.next().await {
                if let WatchEvent::Added(node) | WatchEvent::Modified(node) = event {
                    let name = node.metadata.name.clone().unwrap_or_default();
                    log.lock().unwrap().push((name, serde_json::to_value(node).unwrap()));
                }
            }
        });
        NodeWatch { seen, task }
    }

    /// What the watch saw once `done` holds for the Nodes as last seen.
    async fn until(&self, done: impl Fn(&BTreeMap<String, Seen>) -> bool) -> Vec<(String, Value)> {
        support::join::wait_for("the watch to see the rollout end", || {
            let last: BTreeMap<String, Seen> =
                self.seen.lock().unwrap().iter().map(|(n, o)| (n.clone(), seen(o))).collect();
            done(&last)
        })
        .await;
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for NodeWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Node changes replayed in order: the most Nodes unschedulable at once,
/// and for each cordon (a Node becoming unschedulable) its name and every
/// Node as it stood at that moment.
fn cordons(writes: &[(String, Value)]) -> (usize, Vec<Cordon>) {
    let mut state: BTreeMap<String, Seen> = BTreeMap::new();
    let mut most = 0;
    let mut order = Vec::new();
    for (name, object) in writes {
        let now = seen(object);
        let was = state.insert(name.clone(), now.clone()).unwrap_or_default();
        if now.unschedulable && !was.unschedulable {
            order.push((name.clone(), state.clone()));
        }
        most = most.max(state.values().filter(|s| s.unschedulable).count());
    }
    (most, order)
}

/// One slot at a time, observed from the API: never two Nodes
/// unschedulable at once, and each Node upgraded before the next is
/// cordoned: when a Node is cordoned, every Node cordoned before it is
/// Ready, schedulable and at `version`. Returns the cordon order.
fn assert_one_slot_at_a_time(writes: &[(String, Value)], version: &str) -> Vec<String> {
    let (most, cordoned) = cordons(writes);
    assert_eq!(most, 1, "never two Nodes out at once (rollout.maxUnavailable 1)");
    let order: Vec<String> = cordoned.iter().map(|(n, _)| n.clone()).collect();
    for (i, (name, at)) in cordoned.iter().enumerate() {
        for earlier in &order[..i] {
            let s = &at[earlier];
            assert!(
                s.ready && !s.unschedulable && s.version.as_deref() == Some(version),
                "{earlier} was not Ready, uncordoned and at {version} when {name} was cordoned: {s:?}"
            );
        }
    }
    order
}

/// The MachineSet's status verdict after `report` (`winfleet status`).
fn status(report: &RoundReport) -> (MachineSetPhase, &'static str) {
    let ctx = Context { round: report, drift_check: false, warn: false, at_revision: false, suspended: false };
    let verdict = winfleet::status::machineset::machine_set(SET, ctx).unwrap();
    (verdict.phase, verdict.reason)
}

/// Each Machine by name: (uid, its Node).
async fn machines(bench: &MachineBench) -> BTreeMap<String, (String, String)> {
    bench
        .machines()
        .await
        .iter()
        .map(|m| {
            let name = m["metadata"]["name"].as_str().unwrap().to_owned();
            let uid = m["metadata"]["uid"].as_str().unwrap().to_owned();
            (name, (uid, m["status"]["nodeRef"]["name"].as_str().unwrap_or_default().to_owned()))
        })
        .collect()
}

fn upgraded(report: &RoundReport) -> Vec<&str> {
    let upgrades = &report.cluster.as_ref().unwrap().upgrades;
    upgrades.iter().filter(|u| matches!(u.result, UpgradeResult::Upgraded { .. })).map(|u| u.node.as_str()).collect()
}

/// The line of `text` that starts with `prefix`.
fn line<'a>(text: &'a str, prefix: &str) -> &'a str {
    text.lines().find(|l| l.starts_with(prefix)).unwrap_or_else(|| panic!("no line {prefix:?} in:\n{text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_payload_pin_upgrades_machine_backed_nodes_in_place_one_slot_at_a_time() {
    let mut bench = MachineBench::start(Backend::InMemory, 3, Some(3)).await;
    bench.rounds_until(30, machine_set_ready).await;
    let before = machines(&bench).await;
    assert_eq!(before.len(), 3);
    let booted = bench.cloud.log().booted.len();
    let mut nodes: Vec<String> = before.values().map(|(_, node)| node.clone()).collect();
    nodes.sort();
    let addresses = bench.cloud.addresses();
    let address = |node: &str| {
        let machine = before.iter().find(|(_, (_, n))| n == node).unwrap().0;
        (machine.clone(), addresses[machine].clone())
    };
    let old = bench.version();
    bench.repin(new_overlay);
    let new = bench.version();
    assert_ne!(old, new);
    let from = server(&bench).history().len();

    // plan --live: each Machine-backed node is upgraded in place, its
    // Machine named and kept; the MachineSet is Progressing.
    let plan = bench.plan().await;
    let text = plan.render_text();
    assert!(text.contains("Upgrades: 3 node(s), 1 at a time (rollout.maxUnavailable), in this order:"), "{text}");
    for node in &nodes {
        let (machine, ip) = address(node);
        let head = format!("  Upgrade {node} ({ip}) {old} -> {new}: ");
        assert_eq!(
            line(&text, &head),
            format!(
                "{head}upgrade in place (Machine-backed: {machine}; not replaced): to do: cordon, drain; \
                 \u{25a0} stop service hybrid-overlay-node; ~ payload/hybrid-overlay-node (upload hybrid-overlay-node, \
                 68 B); \u{25b6} start service hybrid-overlay-node (restart: payload/hybrid-overlay-node changed); \
                 Ready; uncordon"
            ),
        );
    }
    assert!(!text.contains("replace Machine"), "{text}");
    assert_eq!(status(&plan), (MachineSetPhase::Progressing, "MachinesProgressing"));
    let writes = server(&bench).history().iter().skip(from).filter(|w| w.resource == "nodes").count();
    let heartbeats = server(&bench)
        .history()
        .iter()
        .skip(from)
        .filter(|w| w.resource == "nodes" && w.subresource.as_deref() == Some("status"))
        .count();
    assert_eq!(writes, heartbeats, "the plan writes no Node");

    // winfleet stops taking work once the first node is cordoned for its
    // upgrade (a shutdown): that node finishes, the others wait.
    let stop = CancellationToken::new();
    bench.options.stop = stop.clone();
    let first = nodes[0].clone();
    server(&bench).reject(move |a| {
        let upgrading = a.object["metadata"]["annotations"].get(UPGRADING_ANNOTATION).is_some();
        if a.resource == "nodes" && a.name == first && !a.dry_run && upgrading {
            stop.cancel();
        }
        None
    });
    let stopped = bench.round().await;
    let text = stopped.render_text();
    assert_eq!(upgraded(&stopped), [nodes[0].as_str()], "{text}");
    assert!(text.contains("not started: winfleet is stopping"), "{text}");
    assert!(!machine_set_ready(&stopped), "{text}");
    assert_eq!(status(&stopped), (MachineSetPhase::Progressing, "MachinesProgressing"));
    let set = stopped.cluster.as_ref().unwrap().machines.machine_set(SET).unwrap();
    assert_eq!((set.steps.get("ready"), set.steps.get("configuring")), (Some(&1), Some(&2)), "{text}");
    assert!(line(&text, &format!("  Upgrade {} (", nodes[0])).contains("upgrade in place (Machine-backed: "));

    // The next round finishes the others, one after the other.
    bench.options.stop = CancellationToken::new();
    let finished = bench.round().await;
    let text = finished.render_text();
    assert_eq!(upgraded(&finished), [nodes[1].as_str(), nodes[2].as_str()], "{text}");
    assert!(machine_set_ready(&finished), "{text}");
    assert_eq!(status(&finished), (MachineSetPhase::Ready, "InSync"));

    let order = assert_one_slot_at_a_time(&node_writes(server(&bench), from), &new);
    assert_eq!(order, nodes, "by name, each once");
    // In place: the same Machines (names and uids), the same VMs and Nodes.
    assert_eq!(machines(&bench).await, before, "no Machine deleted or replaced");
    let log = bench.cloud.log();
    assert_eq!((log.booted.len(), log.deleted.len()), (booted, 0), "no VM created or deleted: {log:?}");
    for node in &nodes {
        let object = bench.node(node).await;
        assert_eq!(object["metadata"]["annotations"][VERSION_ANNOTATION], new.as_str(), "{node}");
        assert!(object["metadata"]["annotations"].get(UPGRADING_ANNOTATION).is_none(), "{node}");
        assert_ne!(object["spec"]["unschedulable"], true, "{node}");
    }
    {
        let fleet = bench.cloud.fleet();
        for vm in fleet.nodes.iter().filter(|vm| nodes.contains(&vm.hostname)) {
            let log = vm.read("../services/hybrid-overlay-node.log").unwrap_or_default();
            assert!(log.contains(&format!("hybrid overlay v2 for {}", vm.hostname)), "{}: {log}", vm.hostname);
        }
    }

    let next = bench.round().await;
    assert!(!next.failed(), "{}", next.render_text());
    assert!(next.nodes.iter().all(|n| !n.has_changes()), "the next round writes nothing: {}", next.render_text());
    let c = next.cluster.as_ref().unwrap();
    assert!(c.upgrades.is_empty() && c.joins.is_empty() && c.nodes.is_empty(), "{}", next.render_text());
    assert_eq!(status(&next), (MachineSetPhase::Ready, "InSync"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn machine_backed_and_byoh_nodes_share_one_disruption_budget() {
    // Two Machines and one BYOH host listed in the repository.
    let mut bench = MachineBench::start_with_hosts(Backend::InMemory, 2, 1, Some(2)).await;
    let byoh = (bench.cloud.hosts()[0].clone(), "win-byoh-0".to_owned());
    let everyone_ready = |r: &RoundReport| {
        let byoh_joined = r.cluster.as_ref().is_some_and(|c| c.associated.contains_key(&byoh.0));
        machine_set_ready(r) && byoh_joined && !r.failed() && r.cluster.as_ref().unwrap().joins.is_empty()
    };
    bench.rounds_until(30, everyone_ready).await;
    let before = machines(&bench).await;
    let node = bench.node(&byoh.1).await;
    assert_eq!(node["metadata"]["labels"]["windowsmachineconfig.openshift.io/byoh"], "true");
    bench.repin(new_overlay);
    let new = bench.version();
    let from = server(&bench).history().len();

    let plan = bench.plan().await;
    let text = plan.render_text();
    assert!(text.contains("Upgrades: 3 node(s), 1 at a time (rollout.maxUnavailable), in this order:"), "{text}");
    let byoh_line = line(&text, &format!("  Upgrade {} (", byoh.1));
    assert!(byoh_line.contains(": to do: cordon, drain; ") && !byoh_line.contains("Machine"), "{text}");

    let report = bench.round().await;
    let text = report.render_text();
    let mut all: Vec<String> = before.values().map(|(_, n)| n.clone()).chain([byoh.1.clone()]).collect();
    all.sort();
    let done: Vec<&str> = upgraded(&report);
    assert_eq!(done, all.iter().map(String::as_str).collect::<Vec<_>>(), "{text}");
    let order = assert_one_slot_at_a_time(&node_writes(server(&bench), from), &new);
    assert_eq!(order, all, "Machines and the BYOH node in one rollout, one at a time");
    assert_eq!(machines(&bench).await, before, "no Machine replaced");
    assert!(machine_set_ready(&report), "{text}");
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_payload_pin_upgrades_machine_backed_nodes_in_place_on_the_real_control_plane() {
    upgrade_in_place_on_the_real_control_plane(MachineApi::Model).await;
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_payload_pin_upgrades_machine_backed_nodes_in_place_under_machine_api_operators_controllers() {
    upgrade_in_place_on_the_real_control_plane(MachineApi::Real).await;
}

async fn upgrade_in_place_on_the_real_control_plane(machine_api: MachineApi) {
    let mut bench = MachineBench::start_on(Backend::Real, machine_api, 2, 0, Some(2)).await;
    bench.rounds_until(60, machine_set_ready).await;
    let before = machines(&bench).await;
    let mut nodes: Vec<String> = before.values().map(|(_, node)| node.clone()).collect();
    nodes.sort();
    let booted = bench.cloud.log().booted.len();
    bench.repin(new_overlay);
    let new = bench.version();

    let plan = bench.plan().await;
    let text = plan.render_text();
    for (machine, (_, node)) in &before {
        let upgrade = line(&text, &format!("  Upgrade {node} ("));
        let way = format!("upgrade in place (Machine-backed: {machine}; not replaced): to do: cordon, drain; ");
        assert!(upgrade.contains(&way), "{text}");
    }
    assert_eq!(status(&plan), (MachineSetPhase::Progressing, "MachinesProgressing"));

    let watch = NodeWatch::start(bench.api.client()).await;
    let report = bench.round().await;
    let text = report.render_text();
    assert_eq!(upgraded(&report), nodes.iter().map(String::as_str).collect::<Vec<_>>(), "{text}");
    assert!(machine_set_ready(&report), "{text}");
    assert_eq!(status(&report), (MachineSetPhase::Ready, "InSync"));
    let all_done = |last: &BTreeMap<String, Seen>| {
        nodes.iter().all(|n| last.get(n).is_some_and(|s| !s.unschedulable && s.version.as_deref() == Some(&new)))
    };
    let order = assert_one_slot_at_a_time(&watch.until(all_done).await, &new);
    assert_eq!(order, nodes, "by name, each once");
    assert_eq!(machines(&bench).await, before, "no Machine deleted or replaced");
    let log = bench.cloud.log();
    assert_eq!((log.booted.len(), log.deleted.len()), (booted, 0), "no VM created or deleted: {log:?}");

    let next = bench.round().await;
    assert!(next.nodes.iter().all(|n| !n.has_changes()), "the next round writes nothing: {}", next.render_text());
    assert!(next.cluster.as_ref().unwrap().upgrades.is_empty(), "{}", next.render_text());
    assert_eq!(status(&next), (MachineSetPhase::Ready, "InSync"));
}
