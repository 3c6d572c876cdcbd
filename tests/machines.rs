//! Machines become nodes (issue 26), end to end on real sshd nodes: the
//! test Machine API provider of tests/support/machine_provider.rs creates
//! Machines for the MachineSet winfleet applies from Git and plays the
//! cloud (a VM per Machine, reachable with the key the `windows-user-data`
//! Secret authorizes); winfleet configures each Provisioned Machine as it
//! does a BYOH instance.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use support::controlplane::Backend;
use support::machine_bench::{MAPI, MachineBench, SET, machine_set_ready};
use winfleet::reconcile::machines::MachineStep;

#[test]
#[ignore = "entry point of the fake kubelet process that node tests start; not a test"]
fn fake_kubelet_process() {
    support::kubelet::main_from_env();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_set_scaled_from_0_to_3_in_git_gives_three_ready_nodes_and_status_is_ready_only_at_the_end() {
    let mut bench = MachineBench::start(Backend::InMemory, 3, Some(0)).await.unwrap();
    let first = bench.round().await;
    assert!(!first.failed(), "{}", first.render_text());
    let secret = bench.api.get("v1", "Secret", Some(MAPI), "windows-user-data").await.expect("user data kept");
    assert_eq!(
        secret["metadata"]["annotations"]["winfleet.io/authorized-key-fingerprint"],
        bench.pool.public_key_fingerprint()
    );

    bench.scale_in_git(Some(3));
    let reports = bench.rounds_until(30, machine_set_ready).await;
    let last = reports.last().unwrap();
    for earlier in &reports[..reports.len() - 1] {
        assert!(!machine_set_ready(earlier), "Ready before every Machine was: {}", earlier.render_text());
    }
    let machines = bench.machines().await;
    assert_eq!(machines.len(), 3);
    let version = bench.version();
    for machine in &machines {
        assert_eq!(machine["status"]["phase"], "Running", "{machine:#}");
        let node = bench.node(machine["status"]["nodeRef"]["name"].as_str().unwrap()).await;
        let labels = &node["metadata"]["labels"];
        assert!(labels.get("windowsmachineconfig.openshift.io/byoh").is_none(), "a Machine's node is no BYOH node");
        assert_eq!(labels["node-role.kubernetes.io/worker"], "");
        assert_eq!(node["metadata"]["annotations"]["windowsmachineconfig.openshift.io/version"], version.as_str());
        assert_ne!(node["spec"]["unschedulable"], true);
    }
    let cluster = last.cluster.as_ref().unwrap();
    assert!(cluster.machines.machines.iter().all(|m| m.step == MachineStep::Ready), "{}", last.render_text());
    assert!(
        bench.cloud.log().booted.iter().all(|(_, key)| key.as_deref() == Some(bench.pool.public_key_line().as_str()))
    );

    let next = bench.round().await;
    assert!(!next.failed(), "{}", next.render_text());
    assert!(next.nodes.iter().all(|n| !n.has_changes()), "the next round writes nothing: {}", next.render_text());
    let c = next.cluster.as_ref().unwrap();
    assert!(c.joins.is_empty() && c.machine_sets.is_empty() && c.nodes.is_empty(), "{}", next.render_text());
    assert!(machine_set_ready(&next));
    let _ = SET;
}
