//! A safe reboot that completes, end to end: nodes joined by the fake
//! kubelet, then a proxy change that needs a reboot. The test nodes
//! simulate it (`TestNode::simulate_reboots`: services stopped, a new boot
//! id seen over SSH, the enabled services started again, so the kubelet
//! heartbeats afresh), and winfleet must cordon, drain, reboot and wait for
//! the new boot and a fresh Ready on each node, one at a time.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::fs;

use support::join::{logs, node, round, setup};
use winfleet::cluster::join::JoinResult;
use winfleet::cluster::rollout::RebootResult;

#[test]
#[ignore = "entry point of the fake kubelet process that node tests start; not a test"]
fn fake_kubelet_process() {
    support::kubelet::main_from_env();
}

fn boot_id(dir: &std::path::Path) -> String {
    fs::read_to_string(dir.join("boot_id")).unwrap().trim().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_change_reboots_each_joined_node_in_turn_and_it_comes_back_ready_and_uncordoned() {
    let mut setup = setup(&["win-node-1", "win-node-2"]).await;
    let report = round(&setup).await;
    let joins = &report.cluster.as_ref().unwrap().joins;
    assert!(joins.iter().all(|j| j.result == JoinResult::Joined), "{}\n{}", report.render_text(), logs(&setup.fleet));
    let before: Vec<String> = setup.fleet.nodes.iter().map(|n| boot_id(&n.dir)).collect();
    for node in &setup.fleet.nodes {
        node.simulate_reboots();
    }

    fs::write(
        setup.repo.path().join("proxy.yaml"),
        "apiVersion: config.openshift.io/v1\nkind: Proxy\nmetadata:\n  name: cluster\nspec:\n  httpProxy: http://proxy.corp:3128\n",
    )
    .unwrap();
    setup.reload();
    let from = setup.server.history().len();
    let report = round(&setup).await;
    let reboots = &report.cluster.as_ref().unwrap().reboots;
    assert_eq!(reboots.len(), 2, "{}", report.render_text());
    for reboot in reboots {
        assert!(
            matches!(reboot.result, RebootResult::Rebooted { resumed: false, .. }),
            "{}: {:?}\n{}\n{}",
            reboot.node,
            reboot.result,
            report.render_text(),
            logs(&setup.fleet)
        );
    }
    for (node, old) in setup.fleet.nodes.iter().zip(&before) {
        assert_eq!(fs::read_to_string(node.dir.join("services/reboots")).unwrap(), "reboot\n", "rebooted once");
        assert_ne!(&boot_id(&node.dir), old, "a new boot");
        let kubelet = fs::read_to_string(node.dir.join("services/kubelet.log")).unwrap_or_default();
        assert!(node.service_pids().contains_key("kubelet"), "the kubelet runs again\n{kubelet}");
    }
    for name in ["win-node-1", "win-node-2"] {
        let node = node(&setup.server, name);
        assert_ne!(node["spec"]["unschedulable"], true, "{name} is uncordoned");
        let annotations = &node["metadata"]["annotations"];
        assert!(annotations.get("winfleet.io/cordoned").is_none(), "{name}: the marker is gone");
        assert!(
            annotations.get("windowsmachineconfig.openshift.io/reboot-required").is_none(),
            "{name}: the reboot is done"
        );
    }

    // One at a time: the second node was cordoned only after the first
    // one's cordon was lifted.
    let cordons: Vec<(String, bool)> = setup
        .server
        .history()
        .iter()
        .skip(from)
        .filter(|w| w.resource == "nodes")
        .map(|w| (w.name.clone(), w.object["spec"]["unschedulable"] == true))
        .collect();
    let mut cordoned: Vec<&str> = Vec::new();
    for (name, unschedulable) in &cordons {
        cordoned.retain(|n| n != name);
        if *unschedulable {
            cordoned.push(name);
        }
        assert!(cordoned.len() <= 1, "two nodes cordoned at once: {cordons:?}");
    }

    let report = round(&setup).await;
    assert!(report.cluster.as_ref().unwrap().reboots.is_empty(), "{}", report.render_text());
}
