//! Issue 24, item 5, against either API server ([`Backend`]): a new
//! payload pin upgrades three joined nodes one disruption slot at a time,
//! and a new fleet SSH key reaches every node while the old one stops
//! working. Against the real control plane (kube-apiserver and
//! kube-controller-manager v1.37.2) every kubelet is a real process that
//! joined through a real CSR, heartbeats its own Node, runs the pod bound
//! to it and confirms its eviction; the node lifecycle controller watches
//! the heartbeats through each kubelet's restart. The removal paths are in
//! tests/real_cluster_lifecycle_removal.rs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/lifecycle_real.rs"]
mod lifecycle_real;
mod support;

use std::fs;
use std::path::Path;

use lifecycle_real::{NodeHistory, events, is_ready, joined, pods_on, taint_keys, wait_until};
use support::controlplane::Backend;
use support::join::{Bench, logs, new_key};
use support::join_payload::executable;
use winfleet::cluster::keys::KeyResult;
use winfleet::cluster::upgrade::UpgradeResult;
use winfleet::cluster::{CORDONED_ANNOTATION, UPGRADING_ANNOTATION};
use winfleet::engine::report::NodeResult;
use winfleet::lifecycle::VERSION_ANNOTATION;
use winfleet::ssh::{KnownHosts, Pool, Settings, load_key};

#[test]
#[ignore = "entry point of the fake kubelet process that node tests start; not a test"]
fn fake_kubelet_process() {
    support::kubelet::main_from_env();
}

const NAMES: [&str; 3] = ["win-u1", "win-u2", "win-u3"];
const HASH: &str = "windowsmachineconfig.openshift.io/pub-key-hash";
/// The taint the node lifecycle controller puts on a cordoned Node.
const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// A new kubelet and hybrid-overlay-node build: both restart, containerd
/// does not.
fn new_builds(dir: &Path) {
    let kubelet = support::kubelet::wrapper_script().replacen("#!/bin/sh\n", "#!/bin/sh\n# build 2\n", 1);
    executable(&dir.join("kube-node/kubelet"), &kubelet);
    executable(
        &dir.join("hybrid-overlay-node"),
        "#!/bin/sh\n# build 2\necho \"hybrid overlay v2 for $2\"\nexec sleep 3600\n",
    );
}

/// Every node's report of the round has no operation.
fn nothing_to_do(report: &winfleet::reconcile::report::RoundReport) -> bool {
    report.nodes.iter().all(|n| matches!(&n.result, NodeResult::Done { operations, .. } if operations.is_empty()))
}

async fn a_new_payload_is_upgraded_one_slot_at_a_time(mut bench: Bench) {
    let old = bench.version();
    let pids: Vec<_> = bench.fleet.nodes.iter().map(|n| n.service_pids()).collect();
    let history = NodeHistory::start(&bench).await;
    bench.repin(new_builds);
    let new = bench.version();
    assert_ne!(old, new);

    let report = bench.round().await;
    let text = report.render_text();
    let upgrades = &report.cluster.as_ref().unwrap().upgrades;
    let order: Vec<&str> = upgrades.iter().map(|u| u.node.as_str()).collect();
    assert_eq!(order, NAMES, "one after the other, by name: {text}");
    for upgrade in upgrades {
        assert!(matches!(upgrade.result, UpgradeResult::Upgraded { evicted: 1, .. }), "{text}\n{}", logs(&bench.fleet));
        assert_eq!((upgrade.from.as_str(), upgrade.to.as_str()), (old.as_str(), new.as_str()));
    }

    // What the API server saw, through a watch of Nodes: one Node out at a
    // time, in order, and each one's new version written with its uncordon.
    let at_new = |seen: &[lifecycle_real::Seen], name: &str| {
        NodeHistory::last(seen, name).is_some_and(|s| {
            !s.unschedulable && s.annotations.get(VERSION_ANNOTATION).map(String::as_str) == Some(new.as_str())
        })
    };
    let seen = history.until("every Node at the new version", |s| NAMES.iter().all(|n| at_new(s, n))).await;
    let (most, cordoned) = NodeHistory::cordons(&seen);
    assert_eq!(most, 1, "never two Nodes out at once (maxUnavailable 1)");
    assert_eq!(cordoned, NAMES, "each cordoned once, in order");
    let mut versioned = Vec::new();
    for s in &seen {
        let version = s.annotations.get(VERSION_ANNOTATION).map(String::as_str);
        if version == Some(new.as_str()) && !versioned.contains(&s.name) {
            assert!(!s.unschedulable, "{}: the new version and the uncordon in one write", s.name);
            versioned.push(s.name.clone());
        }
        if s.annotations.contains_key(UPGRADING_ANNOTATION) {
            assert!(s.unschedulable, "{}: the upgrade marker only on a cordoned Node", s.name);
        }
    }
    assert_eq!(versioned, NAMES, "upgraded in the rollout's order");

    for (i, name) in NAMES.iter().enumerate() {
        let node = bench.node(name).await;
        let annotations = &node["metadata"]["annotations"];
        assert_eq!(annotations[VERSION_ANNOTATION], new.as_str(), "{name}");
        assert!(annotations.get(UPGRADING_ANNOTATION).is_none(), "{name}: marker removed");
        assert!(annotations.get(CORDONED_ANNOTATION).is_none(), "{name}: winfleet's cordon lifted");
        // Uncordoned as if never cordoned: the real server does not store
        // a false `unschedulable` (Go's omitempty).
        assert!(node["spec"].get("unschedulable").is_none(), "{name} is schedulable again: {:#}", node["spec"]);
        assert!(is_ready(&node), "{name}: {:#}", node["status"]);
        assert_eq!(pods_on(&bench, name).await, 0, "{name} was drained");
        let host = &bench.fleet.nodes[i];
        let log = host.read("../services/hybrid-overlay-node.log").unwrap_or_default();
        assert!(log.contains(&format!("hybrid overlay v2 for {name}")), "{name} runs the new build: {log}");
        let now = host.service_pids();
        assert_ne!(now["kubelet"], pids[i]["kubelet"], "{name}: the new kubelet runs");
        assert_ne!(now["hybrid-overlay-node"], pids[i]["hybrid-overlay-node"], "{name}: restarted");
        assert_eq!(now["containerd"], pids[i]["containerd"], "{name}: containerd did not change and kept running");
    }
    // The real node lifecycle controller taints a cordoned Node and lifts
    // the taint after the uncordon (the in-memory API has no controller).
    wait_until("no Node tainted unschedulable", async || {
        let mut clear = true;
        for name in NAMES {
            clear &= !taint_keys(&bench.node(name).await).iter().any(|k| k == UNSCHEDULABLE_TAINT);
        }
        clear
    })
    .await;
    assert_eq!(events(&bench, "Upgraded").await, NAMES, "an Upgraded Event per node");

    let next = bench.round().await;
    assert!(next.cluster.as_ref().unwrap().upgrades.is_empty(), "{}", next.render_text());
    assert!(nothing_to_do(&next), "{}", next.render_text());
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_payload_is_upgraded_one_slot_at_a_time_on_the_real_control_plane() {
    let bench = joined(Backend::Real, &NAMES).await;
    a_new_payload_is_upgraded_one_slot_at_a_time(bench).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_payload_is_upgraded_one_slot_at_a_time_on_the_in_memory_server() {
    let bench = joined(Backend::InMemory, &NAMES).await;
    a_new_payload_is_upgraded_one_slot_at_a_time(bench).await;
}

/// Whether OpenSSH's client gets in to `node` with the private key `key`.
fn ssh_accepts(bench: &Bench, node: usize, key: &Path) -> bool {
    let host = &bench.fleet.nodes[node];
    std::process::Command::new("ssh")
        .args(["-F", "/dev/null", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "StrictHostKeyChecking=yes"])
        .arg("-o")
        .arg(format!("UserKnownHostsFile={}", bench.fleet.known_hosts.display()))
        .arg("-i")
        .arg(key)
        .args(["-p", &host.port.to_string()])
        .arg(format!("{}@{}", bench.fleet.user, host.address))
        .arg("true")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap()
        .success()
}

async fn hashes(bench: &Bench) -> Vec<String> {
    let mut out = Vec::new();
    for name in NAMES {
        out.push(bench.node(name).await["metadata"]["annotations"][HASH].as_str().unwrap_or_default().to_owned());
    }
    out
}

/// The administrator's side of a rotation is the hosts' authorized_keys
/// (winfleet holds only the private key it is given); winfleet's is the
/// Nodes' `pub-key-hash`, and a host that refuses the new key is named
/// with the line to add.
async fn a_new_fleet_key_reaches_every_node_and_the_old_one_stops_working(mut bench: Bench) {
    let old_key = bench.fleet.key.clone();
    let old_hash = bench.pool.public_key_hash();
    assert_eq!(hashes(&bench).await, [old_hash.as_str(); 3]);
    let pids: Vec<_> = bench.fleet.nodes.iter().map(|n| n.service_pids()).collect();
    let root = bench.fleet.dir().to_owned();
    let (new_key, new_public) = new_key(&bench.fleet);
    let line: String = new_public.split_whitespace().take(2).collect::<Vec<_>>().join(" ");
    // win-u3 still trusts only the old key; the others only the new one.
    let third = root.join("authorized_keys.win-u3");
    fs::copy(root.join("authorized_keys"), &third).unwrap();
    bench.fleet.nodes[2].use_authorized_keys(&third);
    fs::write(root.join("authorized_keys"), &new_public).unwrap();
    bench.pool = Pool::new(
        load_key(&new_key).unwrap(),
        KnownHosts::load(&bench.fleet.known_hosts, false).unwrap(),
        Settings::default(),
    );
    let new_hash = bench.pool.public_key_hash();
    assert_ne!(old_hash, new_hash);

    let report = bench.round().await;
    let text = report.render_text();
    let keys = &report.cluster.as_ref().unwrap().keys;
    let result = |name: &str| keys.iter().find(|k| k.node == name).map(|k| k.result.clone());
    for name in &NAMES[..2] {
        assert_eq!(result(name), Some(KeyResult::HashUpdated { done: true }), "{name}: {text}");
    }
    assert!(
        matches!(result("win-u3"), Some(KeyResult::KeyRejected { authorized_key, fingerprint })
            if authorized_key == line && fingerprint.starts_with("SHA256:")),
        "{text}"
    );
    assert!(text.contains(&format!("add this public key to its authorized_keys: {line}")), "{text}");
    assert_eq!(hashes(&bench).await, [new_hash.as_str(), new_hash.as_str(), old_hash.as_str()]);
    let u3 = bench.node("win-u3").await;
    assert_ne!(u3["spec"]["unschedulable"], true, "win-u3 is left running, not cordoned");
    assert!(is_ready(&u3), "{:#}", u3["status"]);
    assert_eq!(events(&bench, "PublicKeyUpdated").await, NAMES[..2]);
    assert_eq!(events(&bench, "PublicKeyRejected").await, ["win-u3"]);

    // The administrator puts the new key on win-u3 in place of the old.
    fs::write(&third, &new_public).unwrap();
    let report = bench.round().await;
    let keys = &report.cluster.as_ref().unwrap().keys;
    assert!(
        matches!(&keys[..], [k] if k.node == "win-u3" && k.result == KeyResult::HashUpdated { done: true }),
        "{}",
        report.render_text()
    );
    assert!(!report.failed(), "{}", report.render_text());
    assert_eq!(hashes(&bench).await, [new_hash.as_str(); 3]);
    for (i, name) in NAMES.iter().enumerate() {
        assert!(!ssh_accepts(&bench, i, &old_key), "{name}: the old key stopped working");
        assert!(ssh_accepts(&bench, i, &new_key), "{name}: the new key works");
        let node = bench.node(name).await;
        assert_ne!(node["spec"]["unschedulable"], true, "{name}: never cordoned");
        assert!(is_ready(&node), "{name}: {:#}", node["status"]);
        assert_eq!(bench.fleet.nodes[i].service_pids(), pids[i], "{name}: nothing restarted");
        assert_eq!(pods_on(&bench, name).await, 1, "{name}: its pod kept running");
    }
    // The kubelets keep heartbeating: each Node's Lease is renewed after
    // the rotation.
    let renewed = |lease: Option<serde_json::Value>| lease.map(|l| l["spec"]["renewTime"].clone());
    let mut before = Vec::new();
    for name in NAMES {
        before.push(renewed(bench.api.get("coordination.k8s.io/v1", "Lease", Some("kube-node-lease"), name).await));
    }
    wait_until("every node Lease renewed", async || {
        let mut all = true;
        for (name, then) in NAMES.iter().zip(&before) {
            let now = renewed(bench.api.get("coordination.k8s.io/v1", "Lease", Some("kube-node-lease"), name).await);
            all &= now.is_some() && now != *then;
        }
        all
    })
    .await;

    let next = bench.round().await;
    assert!(next.cluster.as_ref().unwrap().keys.is_empty(), "{}", next.render_text());
    assert!(nothing_to_do(&next), "{}", next.render_text());
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_fleet_key_reaches_every_node_on_the_real_control_plane() {
    let bench = joined(Backend::Real, &NAMES).await;
    a_new_fleet_key_reaches_every_node_and_the_old_one_stops_working(bench).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_fleet_key_reaches_every_node_on_the_in_memory_server() {
    let bench = joined(Backend::InMemory, &NAMES).await;
    a_new_fleet_key_reaches_every_node_and_the_old_one_stops_working(bench).await;
}
