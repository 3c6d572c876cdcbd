//! Issue 24, item 5, against either API server ([`Backend`]): a commit
//! that removes more than `prune.maxRemovalPercent` of the instances
//! removes none and says why; one that removes a single instance
//! deconfigures that host (drained through the Eviction API, its services
//! and files gone) and deletes its Node, and the others are untouched.
//! Against the real control plane the Node is deleted on kube-apiserver
//! v1.37.2 (winfleet as the admin here: its RBAC is proven by
//! tests/real_cluster_rbac.rs) while the other kubelets keep heartbeating.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/lifecycle_real.rs"]
mod lifecycle_real;
mod support;

use lifecycle_real::{NodeHistory, events, is_ready, join, list_only, pods_on};
use support::controlplane::Backend;
use support::join::{Bench, bench, logs};
use winfleet::cluster::deconfigure::DeconfigureResult;
use winfleet::cluster::join::JoinResult;
use winfleet::engine::report::NodeResult;

#[test]
#[ignore = "entry point of the fake kubelet process that node tests start; not a test"]
fn fake_kubelet_process() {
    support::kubelet::main_from_env();
}

const NAMES: [&str; 3] = ["win-r1", "win-r2", "win-r3"];

async fn too_many_removed_removes_none_and_one_removed_is_deconfigured(mut bench: Bench) {
    let homes: Vec<_> = bench.fleet.nodes.iter().map(|n| n.files()).collect();
    join(&bench, &NAMES).await;
    let pids: Vec<_> = bench.fleet.nodes.iter().map(|n| n.service_pids()).collect();
    let mut nodes = Vec::new();
    for name in NAMES {
        nodes.push(bench.node(name).await);
    }
    let history = NodeHistory::start(&bench).await;

    // Two of three instances gone: the guard refuses, nobody leaves.
    list_only(&mut bench, &[0]);
    let report = bench.round().await;
    let text = report.render_text();
    let cluster = report.cluster.as_ref().unwrap();
    let refused = cluster.deconfigure_refused.as_deref().unwrap_or_default();
    assert!(refused.contains("deconfigure 2 of 3 instances"), "{text}");
    assert!(refused.contains("more than prune.maxRemovalPercent (50%)"), "{text}");
    assert!(text.contains("Deconfigure REFUSED"), "{text}");
    assert_eq!(cluster.deconfigures.len(), 2, "{text}");
    assert!(cluster.deconfigures.iter().all(|d| matches!(d.result, DeconfigureResult::NotStarted { .. })), "{text}");
    assert_eq!(events(&bench, "DeconfigureRefused").await, NAMES[1..], "one Event per node");
    for (i, name) in NAMES.iter().enumerate() {
        let node = bench.node(name).await;
        assert_ne!(node["spec"]["unschedulable"], true, "{name} is neither cordoned nor drained");
        assert!(is_ready(&node), "{name}");
        assert_eq!(pods_on(&bench, name).await, 1, "{name} keeps its pod");
        assert_eq!(bench.fleet.nodes[i].service_pids(), pids[i], "{name}: services untouched");
    }

    // A commit that lists win-r2 and win-r3 again: only win-r1 leaves.
    list_only(&mut bench, &[1, 2]);
    let report = bench.round().await;
    let text = report.render_text();
    let cluster = report.cluster.as_ref().unwrap();
    assert!(cluster.deconfigure_refused.is_none(), "{text}");
    assert!(
        matches!(&cluster.deconfigures[..], [d] if d.node == "win-r1"
            && matches!(d.result, DeconfigureResult::Deconfigured { evicted: 1, rebooted: false, .. })),
        "{text}\n{}",
        logs(&bench.fleet)
    );
    assert!(bench.api.get("v1", "Node", None, "win-r1").await.is_none(), "the Node is deleted");
    let seen = history.until("the deletion of win-r1", |s| s.iter().any(|s| s.name == "win-r1" && s.deleted)).await;
    let (most, cordoned) = NodeHistory::cordons(&seen);
    assert_eq!((most, cordoned), (1, vec!["win-r1".to_owned()]), "only win-r1 was ever cordoned");
    let host = &bench.fleet.nodes[0];
    for (service, pid) in &pids[0] {
        let alive = std::process::Command::new("kill")
            .args(["-0", &pid.to_string()])
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap()
            .success();
        assert!(!alive, "win-r1: {service} was stopped");
    }
    assert_eq!(host.files(), homes[0], "win-r1's files are as before it joined");
    assert!(!host.path("payload").exists() && !host.path(".winfleet").exists(), "win-r1: its directories are gone");
    for (i, name) in NAMES.iter().enumerate().skip(1) {
        let node = bench.node(name).await;
        assert_eq!(node["metadata"]["annotations"], nodes[i]["metadata"]["annotations"], "{name} untouched");
        assert_eq!(node["metadata"]["labels"], nodes[i]["metadata"]["labels"], "{name} untouched");
        assert_ne!(node["spec"]["unschedulable"], true, "{name}");
        assert!(is_ready(&node), "{name}");
        assert_eq!(pods_on(&bench, name).await, 1, "{name} keeps its pod");
        assert_eq!(bench.fleet.nodes[i].service_pids(), pids[i], "{name}: services untouched");
    }
    for reason in ["Deconfiguring", "Deconfigured"] {
        assert_eq!(events(&bench, reason).await, ["win-r1"], "{reason}");
    }

    let next = bench.round().await;
    assert!(next.cluster.as_ref().unwrap().deconfigures.is_empty(), "{}", next.render_text());
    let quiet =
        next.nodes.iter().all(|n| matches!(&n.result, NodeResult::Done { operations, .. } if operations.is_empty()));
    assert!(quiet, "{}", next.render_text());

    // Listed again, the host joins again: a new client CSR for the same
    // node name, signed, and the Node registered anew by its kubelet.
    list_only(&mut bench, &[0, 1, 2]);
    let again = bench.round().await;
    let joins = &again.cluster.as_ref().unwrap().joins;
    assert!(
        matches!(&joins[..], [j] if j.node.as_deref() == Some("win-r1") && j.result == JoinResult::Joined),
        "{}\n{}",
        again.render_text(),
        logs(&bench.fleet)
    );
    let node = bench.node("win-r1").await;
    assert!(is_ready(&node), "{:#}", node["status"]);
    assert_ne!(node["metadata"]["uid"], nodes[0]["metadata"]["uid"], "a new Node object");
    assert_ne!(node["spec"]["unschedulable"], true);
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removals_on_the_real_control_plane_guarded_then_one_deconfigured() {
    let bench = bench(Backend::Real, &NAMES).await;
    too_many_removed_removes_none_and_one_removed_is_deconfigured(bench).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removals_on_the_in_memory_server_guarded_then_one_deconfigured() {
    let bench = bench(Backend::InMemory, &NAMES).await;
    too_many_removed_removes_none_and_one_removed_is_deconfigured(bench).await;
}
