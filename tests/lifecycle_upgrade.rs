//! A commit that changes the payload pin upgrades joined nodes one
//! disruption slot at a time, end to end: real sshd nodes running the fake
//! kubelet (tests/support/kubelet.rs) under the systemctl shim, the
//! in-memory API server with pods to drain.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use support::apiserver::{ApiServer, fixtures};
use support::join::{Setup, logs, node, round, setup};
use support::join_payload::executable;
use winfleet::cluster::join::JoinResult;
use winfleet::cluster::upgrade::{UpgradeResult, UpgradeStage};
use winfleet::cluster::{CORDONED_ANNOTATION, UPGRADING_ANNOTATION};
use winfleet::lifecycle::VERSION_ANNOTATION;

#[test]
#[ignore = "entry point of the fake kubelet process that node tests start; not a test"]
fn fake_kubelet_process() {
    support::kubelet::main_from_env();
}

const NAMES: [&str; 3] = ["win-a", "win-b", "win-c"];

/// Three joined nodes, each running a ReplicaSet pod.
async fn joined() -> Setup {
    let setup = setup(&NAMES).await;
    let report = round(&setup).await;
    let joins = &report.cluster.as_ref().unwrap().joins;
    assert!(
        joins.len() == 3 && joins.iter().all(|j| j.result == JoinResult::Joined),
        "{}\n{}",
        report.render_text(),
        logs(&setup.fleet)
    );
    for name in NAMES {
        setup.server.seed(fixtures::pod("shop", &format!("web-{name}"), name, &[("app", "web")], Some("ReplicaSet")));
    }
    setup
}

/// A new hybrid-overlay-node build: only it and nothing else changes.
fn new_overlay(dir: &std::path::Path) {
    executable(
        &dir.join("hybrid-overlay-node"),
        "#!/bin/sh\n# build 2\necho \"hybrid overlay v2 for $2\"\nexec sleep 3600\n",
    );
}

/// How many nodes were unschedulable at once, at most, over the API
/// server's write history from write `from` on (each write's stored
/// object), and the order in which nodes were cordoned.
fn cordons(server: &ApiServer, from: usize) -> (usize, Vec<String>) {
    let mut state: BTreeMap<String, bool> = BTreeMap::new();
    let mut most = 0;
    let mut order = Vec::new();
    for write in server.history().iter().skip(from).filter(|w| w.resource == "nodes") {
        let unschedulable = write.object["spec"]["unschedulable"] == true;
        let before = state.insert(write.name.clone(), unschedulable).unwrap_or(false);
        if unschedulable && !before {
            order.push(write.name.clone());
        }
        most = most.max(state.values().filter(|u| **u).count());
    }
    (most, order)
}

fn pods_on(server: &ApiServer, name: &str) -> usize {
    server.list("v1", "Pod").iter().filter(|p| p["spec"]["nodeName"] == name).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_payload_upgrades_nodes_one_at_a_time_replacing_only_what_changed() {
    let mut setup = joined().await;
    let joined_at = setup.server.history().len();
    let old = setup.version();
    let pids: Vec<_> = setup.fleet.nodes.iter().map(|n| n.service_pids()).collect();
    setup.repin(new_overlay);
    let new = setup.version();
    assert_ne!(old, new);

    // The live plan first: which nodes, in what order, how many at a time,
    // what changes on each; nothing is written.
    let writes = setup.server.history().len();
    setup.options.dry_run = true;
    let preview = round(&setup).await;
    setup.options.dry_run = false;
    let text = preview.render_text();
    assert!(text.contains("Upgrades: 3 node(s), 1 at a time (rollout.maxUnavailable), in this order:"), "{text}");
    let positions: Vec<usize> = NAMES.iter().map(|n| text.find(&format!("Upgrade {n} (")).expect(n)).collect();
    assert!(positions.is_sorted(), "{text}");
    assert_eq!(text.matches("hybrid-overlay-node (upload hybrid-overlay-node").count(), 3, "{text}");
    assert!(!text.contains("upload kube-node/kubelet"), "only what changed: {text}");
    // The fake kubelets go on heartbeating meanwhile (node status and
    // node Lease, every second): their writes, not the plan's.
    let heartbeats = |w: &&support::apiserver::Write| {
        w.subresource.as_deref() == Some("status")
            || (w.resource == "leases" && w.namespace.as_deref() == Some(support::kubelet::LEASE_NAMESPACE))
    };
    let written: Vec<String> = setup
        .server
        .history()
        .iter()
        .skip(writes)
        .filter(|w| !heartbeats(w))
        .map(|w| format!("{} {} {:?}/{} by {:?}", w.verb, w.resource, w.namespace, w.name, w.field_manager))
        .collect();
    assert!(written.is_empty(), "the plan writes nothing: {written:#?}");
    for node in &setup.fleet.nodes {
        assert!(!node.read("payload/hybrid-overlay-node").unwrap().contains("build 2"), "nothing uploaded");
    }

    let report = round(&setup).await;
    let text = report.render_text();
    let upgrades = &report.cluster.as_ref().unwrap().upgrades;
    assert_eq!(upgrades.len(), 3, "{text}");
    for upgrade in upgrades {
        assert!(matches!(upgrade.result, UpgradeResult::Upgraded { evicted: 1, .. }), "{text}\n{}", logs(&setup.fleet));
        assert_eq!((upgrade.from.as_str(), upgrade.to.as_str()), (old.as_str(), new.as_str()));
    }
    let (most, order) = cordons(&setup.server, joined_at);
    assert_eq!(most, 1, "never two nodes out at once (maxUnavailable 1)");
    assert_eq!(order, NAMES, "one after the other, by name");
    for (i, name) in NAMES.iter().enumerate() {
        let object = node(&setup.server, name);
        let annotations = &object["metadata"]["annotations"];
        assert_eq!(annotations[VERSION_ANNOTATION], new.as_str(), "{name}");
        assert!(annotations.get(UPGRADING_ANNOTATION).is_none(), "{name}: marker removed");
        assert!(annotations.get(CORDONED_ANNOTATION).is_none(), "{name}: winfleet's cordon lifted");
        assert_ne!(object["spec"]["unschedulable"], true, "{name} is schedulable again");
        assert_eq!(pods_on(&setup.server, name), 0, "{name} was drained");
        let node = &setup.fleet.nodes[i];
        let log = node.read("../services/hybrid-overlay-node.log").unwrap_or_default();
        assert!(log.contains(&format!("hybrid overlay v2 for {name}")), "{name} runs the new build: {log}");
        let now = node.service_pids();
        assert_ne!(now["hybrid-overlay-node"], pids[i]["hybrid-overlay-node"], "{name}: restarted");
        assert_eq!(now["kubelet"], pids[i]["kubelet"], "{name}: the kubelet did not change and kept running");
        assert_eq!(now["containerd"], pids[i]["containerd"], "{name}: containerd kept running");
    }
    assert_eq!(text.matches("(upload hybrid-overlay-node").count(), 0, "the upgrade is not in the node round: {text}");
    let events = setup.server.list("events.k8s.io/v1", "Event");
    let upgraded = events.iter().filter(|e| e["reason"] == "Upgraded").count();
    assert_eq!(upgraded, 3, "an Upgraded Event per node");

    let next = round(&setup).await;
    assert!(next.cluster.as_ref().unwrap().upgrades.is_empty(), "{}", next.render_text());
    assert!(next.nodes.iter().all(|n| !n.has_changes()), "{}", next.render_text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_does_not_come_back_stops_the_rollout_and_stays_cordoned() {
    let mut setup = joined().await;
    let joined_at = setup.server.history().len();
    setup.options.join.ready_timeout = Duration::from_secs(4);
    let old = setup.version();
    // A kubelet build that does not start on win-b.
    setup.repin(|dir| {
        let wrapper = support::kubelet::wrapper_script();
        let body = wrapper.strip_prefix("#!/bin/sh\n").unwrap();
        let broken = format!(
            "#!/bin/sh\n[ \"$(cat /proc/sys/kernel/hostname)\" = win-b ] && {{ echo 'kubelet: broken on win-b'; exit 1; }}\n{body}"
        );
        executable(&dir.join("kube-node/kubelet"), &broken);
    });
    let new = setup.version();

    let report = round(&setup).await;
    let text = report.render_text();
    let upgrades: BTreeMap<&str, &UpgradeResult> =
        report.cluster.as_ref().unwrap().upgrades.iter().map(|u| (u.node.as_str(), &u.result)).collect();
    assert!(matches!(upgrades["win-a"], UpgradeResult::Upgraded { .. }), "{text}\n{}", logs(&setup.fleet));
    assert!(
        matches!(upgrades["win-b"], UpgradeResult::Failed { stage: UpgradeStage::Node | UpgradeStage::Ready, .. }),
        "{text}"
    );
    assert!(matches!(upgrades["win-c"], UpgradeResult::NotStarted { .. }), "{text}");
    assert!(text.contains("win-b"), "{text}");

    let b = node(&setup.server, "win-b");
    assert_eq!(b["spec"]["unschedulable"], true, "win-b stays cordoned");
    assert_eq!(b["metadata"]["annotations"][VERSION_ANNOTATION], old.as_str(), "win-b keeps its old version");
    let c = node(&setup.server, "win-c");
    assert_ne!(c["spec"]["unschedulable"], true, "win-c was never touched");
    assert_eq!(c["metadata"]["annotations"][VERSION_ANNOTATION], old.as_str());
    assert_eq!(pods_on(&setup.server, "win-c"), 1, "win-c was not drained");
    assert_eq!(node(&setup.server, "win-a")["metadata"]["annotations"][VERSION_ANNOTATION], new.as_str());
    let events = setup.server.list("events.k8s.io/v1", "Event");
    let failed: Vec<&str> = events
        .iter()
        .filter(|e| e["reason"] == "UpgradeFailed")
        .filter_map(|e| e["regarding"]["name"].as_str())
        .collect();
    assert_eq!(failed, ["win-b"]);

    // The next round tries win-b again first and still holds win-c back.
    let again = round(&setup).await;
    let upgrades: BTreeMap<&str, &UpgradeResult> =
        again.cluster.as_ref().unwrap().upgrades.iter().map(|u| (u.node.as_str(), &u.result)).collect();
    assert!(matches!(upgrades["win-b"], UpgradeResult::Failed { .. }), "{}", again.render_text());
    assert!(matches!(upgrades["win-c"], UpgradeResult::NotStarted { .. }), "{}", again.render_text());
    assert!(!upgrades.contains_key("win-a"));
    assert_eq!(cordons(&setup.server, joined_at).0, 1, "never two nodes out at once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn winfleet_killed_mid_upgrade_is_finished_by_the_next_round_and_nobody_stays_cordoned() {
    let mut setup = joined().await;
    let joined_at = setup.server.history().len();
    setup.repin(new_overlay);
    let new = setup.version();
    let mut apply = support::join::spawn_apply(&setup);
    // Killed as soon as the first node is marked and cordoned.
    support::join::wait_for("the upgrade of win-a", || {
        node(&setup.server, "win-a")["metadata"]["annotations"].get(UPGRADING_ANNOTATION).is_some()
    })
    .await;
    apply.kill().unwrap();
    let _ = apply.wait();
    assert_eq!(node(&setup.server, "win-a")["spec"]["unschedulable"], true, "killed while win-a is out");

    let report = round(&setup).await;
    let text = report.render_text();
    let upgrades = &report.cluster.as_ref().unwrap().upgrades;
    assert_eq!(upgrades[0].node, "win-a", "the node left marked is finished first: {text}");
    assert!(
        upgrades.iter().all(|u| matches!(u.result, UpgradeResult::Upgraded { .. })),
        "{text}\n{}",
        logs(&setup.fleet)
    );
    for name in NAMES {
        let object = node(&setup.server, name);
        assert_eq!(object["metadata"]["annotations"][VERSION_ANNOTATION], new.as_str(), "{name}");
        assert_ne!(object["spec"]["unschedulable"], true, "{name} is not left cordoned");
        assert!(object["metadata"]["annotations"].get(CORDONED_ANNOTATION).is_none(), "{name}");
    }
    let (most, order) = cordons(&setup.server, joined_at);
    assert_eq!(most, 1, "never two nodes out at once, across the crash");
    assert_eq!(order, NAMES, "win-a was cordoned once");
}
