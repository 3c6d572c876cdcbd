//! A MachineHealthCheck on the Windows MachineSet (issue 37, point 3), on
//! the real control plane with machine-api-operator's MachineSet, Machine,
//! nodelink and MachineHealthCheck controllers (tests/machineapi).
//!
//! Every VM of the cloud lacks the Containers feature and reboots slowly
//! (8 s), so a join takes longer than a 3 s `nodeStartupTimeout`: the
//! MachineHealthCheck counts from the Machine's `status.lastUpdated` (its
//! Provisioned) and deletes a Machine that has no Node by then. Nothing
//! winfleet could honestly set holds that clock (src/cluster/health_checks.rs),
//! so winfleet names the MachineHealthCheck and the `nodeStartupTimeout` it
//! needs (its reboot and registration waits: 10 s + 20 s here), and with
//! that value the Machine joins untouched.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;
use support::controlplane::{Backend, resource};
use support::machine_bench::{MAPI, MachineApi, MachineBench, SET, machine_set_ready};
use winfleet::cluster::join::JoinResult;
use winfleet::reconcile::report::RoundReport;
use winfleet::status::verdict::Context;

const CHECK: &str = "windows-startup";
/// The slow reboot of every VM, in seconds.
const REBOOT: u32 = 8;
/// The `nodeStartupTimeout` a join with that reboot cannot meet.
const SHORT: &str = "3s";
/// What winfleet says the MachineHealthCheck needs with the waits below.
const NEEDED: &str = "30s";

#[test]
#[ignore = "entry point of the fake kubelet process that node tests start; not a test"]
fn fake_kubelet_process() {
    support::kubelet::main_from_env();
}

/// On the in-memory API (the project's Machine API model), the same
/// finding reaches the round's text and the MachineSet's status, judged by
/// the round's waits (the default 15 min reboot wait and the bench's 60 s
/// registration wait: 16m); a long enough one is no finding.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_round_and_the_machine_set_status_name_a_health_check_too_short_for_a_windows_join() {
    let bench = MachineBench::start(Backend::InMemory, 1, Some(0)).await;
    health_check(&bench, "10m").await;
    let report = bench.round().await;
    let text = report.render_text();
    let finding = "MachineHealthCheck windows-startup selects the Machines of MachineSet winworker with \
                   nodeStartupTimeout 10m, shorter than a Windows join can take here";
    assert!(text.contains(finding), "{text}");
    assert!(text.contains("set its spec.nodeStartupTimeout to at least 16m plus the VM's boot time"), "{text}");
    let ctx = Context { round: &report, drift_check: false, warn: false, at_revision: false, suspended: false };
    let verdict = winfleet::status::machineset::machine_set(SET, ctx).unwrap();
    assert!(verdict.message.contains(finding), "{}", verdict.message);

    let patch = json!({ "spec": { "nodeStartupTimeout": "16m" } });
    health_checks(&bench).patch(CHECK, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    let report = bench.round().await;
    assert!(report.cluster.as_ref().unwrap().machines.health_checks.is_empty(), "{}", report.render_text());
}

#[ignore = "needs the real control plane and machine-api-operator's controllers (Go builds them): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_startup_timeout_shorter_than_the_join_deletes_the_machine_mid_configure_and_winfleet_names_the_value_needed()
 {
    let mut bench = slow_joins(6).await;
    health_check(&bench, SHORT).await;
    // Named before any Machine exists: the repository's MachineSet is a
    // Windows one the MachineHealthCheck selects.
    let first = bench.round().await;
    let findings = &first.cluster.as_ref().unwrap().machines.health_checks;
    assert_eq!(findings.len(), 1, "{}", first.render_text());
    let finding = &findings[0];
    assert_eq!(
        (finding.health_check.as_str(), finding.machine_set.as_str(), finding.node_startup_timeout.as_str()),
        (CHECK, SET, SHORT)
    );
    assert_eq!(finding.needed, NEEDED);
    let text = first.render_text();
    assert!(text.contains(&format!("set its spec.nodeStartupTimeout to at least {NEEDED}")), "{text}");

    // What the MachineHealthCheck does: it deletes the first Machine while
    // winfleet waits for its VM back from the Containers feature's reboot.
    // The administrator then sets the value winfleet named. (The check is
    // paused, with its own annotation, until that VM reboots: the 3 s
    // clock would otherwise race winfleet's first SSH on a loaded machine.)
    set_paused(&bench, true).await;
    let paused = bench.round().await;
    assert!(paused.cluster.as_ref().unwrap().machines.health_checks.is_empty(), "a paused check deletes nothing");
    bench.scale_in_git(Some(1));
    let deleted = std::sync::Mutex::new(None);
    let watch = async { *deleted.lock().unwrap() = fix_once_a_machine_is_deleted(&bench).await };
    let rounds = async {
        let mut reports = Vec::new();
        for _ in 0..30 {
            reports.push(bench.round().await);
            if deleted.lock().unwrap().is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        reports
    };
    let ((), mut reports) = tokio::join!(watch, rounds);
    let remediated = deleted.into_inner().unwrap().expect("the MachineHealthCheck deleted no Machine");
    let reasons = bench.machine_events(&remediated).await;
    assert!(reasons.contains(&"MachineDeleted".to_owned()), "deleted by the MachineHealthCheck: {reasons:?}");
    let first_vm = bench.cloud.log().booted[0].0.clone();
    assert_eq!(first_vm, remediated);
    assert_eq!(reboots(&bench, 0), 1, "winfleet was configuring it: its VM got the Containers feature's reboot");
    assert!(bench.api.get("v1", "Node", None, "win-machine-0").await.is_none(), "it never had a Node");

    // With the value named, the replacement joins and the set converges;
    // the finding is gone, and no VM was configured twice.
    bench.rounds_until(60, machine_set_ready).await.into_iter().for_each(|r| reports.push(r));
    let last = reports.last().unwrap();
    assert!(last.cluster.as_ref().unwrap().machines.health_checks.is_empty(), "{}", last.render_text());
    let machines = bench.machines().await;
    assert_eq!(machines.len(), 1);
    assert_ne!(machines[0]["metadata"]["name"], remediated.as_str());
    let booted = bench.cloud.log().booted.len();
    for slot in 0..booted {
        assert!(reboots(&bench, slot) <= 1, "VM {slot} rebooted {} times", reboots(&bench, slot));
    }
    assert_eq!(joined_per_address(&reports).values().max(), Some(&1), "each VM joined once");
}

#[ignore = "needs the real control plane and machine-api-operator's controllers (Go builds them): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_node_startup_timeout_winfleet_names_the_machine_joins_through_its_reboot_untouched() {
    let mut bench = slow_joins(2).await;
    health_check(&bench, NEEDED).await;
    bench.scale_in_git(Some(1));
    let reports = bench.rounds_until(60, machine_set_ready).await;
    for report in &reports {
        let findings = &report.cluster.as_ref().unwrap().machines.health_checks;
        assert!(findings.is_empty(), "{}", report.render_text());
    }
    let log = bench.cloud.log();
    assert_eq!(log.booted.len(), 1, "{log:?}");
    assert!(log.deleted.is_empty(), "no Machine remediated: {log:?}");
    assert_eq!(reboots(&bench, 0), 1, "its join included the reboot");
    let machine = log.booted[0].0.clone();
    assert!(!bench.machine_events(&machine).await.contains(&"MachineDeleted".to_owned()));
    // The MachineHealthCheck counts it healthy (once it has looked again).
    let mut status = json!(null);
    for _ in 0..100 {
        status = health_checks(&bench).get(CHECK).await.unwrap().data["status"].clone();
        if status["currentHealthy"] == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!((&status["expectedMachines"], &status["currentHealthy"]), (&json!(1), &json!(1)), "{status:#}");
}

/// The Machine bench with the real Machine API, the MachineSet at 0, and
/// `vms` VMs that lack the Containers feature and reboot in [`REBOOT`]
/// seconds; the round waits 10 s for a reboot and 20 s for a registration.
async fn slow_joins(vms: usize) -> MachineBench {
    let mut bench = MachineBench::start_on(Backend::Real, MachineApi::Real, vms, 0, Some(0)).await;
    for node in bench.cloud.fleet().nodes.iter().take(vms) {
        node.without_containers_feature();
        node.simulate_reboots_taking(REBOOT);
    }
    bench.options.rollout.reboot_timeout = Duration::from_secs(10);
    bench.options.join.register_timeout = Duration::from_secs(20);
    bench
}

fn health_checks(bench: &MachineBench) -> Api<DynamicObject> {
    let resource = resource("machine.openshift.io", "v1beta1", "MachineHealthCheck", "machinehealthchecks");
    Api::namespaced_with(bench.api.client(), MAPI, &resource)
}

/// The MachineHealthCheck on the Windows MachineSet's Machines, as
/// OpenShift's documentation writes one.
async fn health_check(bench: &MachineBench, node_startup_timeout: &str) {
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "machine.openshift.io/v1beta1",
        "kind": "MachineHealthCheck",
        "metadata": { "name": CHECK, "namespace": MAPI },
        "spec": {
            "selector": { "matchLabels": { "machine.openshift.io/cluster-api-machineset": SET } },
            "unhealthyConditions": [
                { "type": "Ready", "status": "False", "timeout": "300s" },
                { "type": "Ready", "status": "Unknown", "timeout": "300s" },
            ],
            "nodeStartupTimeout": node_startup_timeout,
        },
    }))
    .unwrap();
    health_checks(bench).create(&PostParams::default(), &object).await.unwrap();
}

/// Unpauses the MachineHealthCheck once the first VM reboots, then waits (a
/// minute at most) until that VM's Machine is being deleted or gone;
/// then sets the MachineHealthCheck's timeout to [`NEEDED`] and returns the
/// Machine.
async fn fix_once_a_machine_is_deleted(bench: &MachineBench) -> Option<String> {
    for _ in 0..600 {
        if reboots(bench, 0) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let first = bench.cloud.log().booted.first()?.0.clone();
    set_paused(bench, false).await;
    // Deleting, or already gone (its deletion takes a tenth of a second).
    for _ in 0..600 {
        let machines = bench.machines().await;
        let it = machines.iter().find(|m| m["metadata"]["name"] == first.as_str());
        if it.is_none_or(|m| !m["metadata"]["deletionTimestamp"].is_null()) {
            let patch = json!({ "spec": { "nodeStartupTimeout": NEEDED } });
            health_checks(bench).patch(CHECK, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
            return Some(first);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// Pauses or unpauses the MachineHealthCheck (`cluster.x-k8s.io/paused`).
async fn set_paused(bench: &MachineBench, paused: bool) {
    let value = if paused { json!("") } else { json!(null) };
    let patch = json!({ "metadata": { "annotations": { "cluster.x-k8s.io/paused": value } } });
    health_checks(bench).patch(CHECK, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
}

/// The reboots VM `slot` recorded.
fn reboots(bench: &MachineBench, slot: usize) -> usize {
    let file = bench.cloud.fleet().nodes[slot].dir.join("services/reboots");
    std::fs::read_to_string(file).map(|t| t.lines().count()).unwrap_or(0)
}

/// How many rounds joined each address.
fn joined_per_address(reports: &[RoundReport]) -> std::collections::BTreeMap<String, usize> {
    let mut joined = std::collections::BTreeMap::new();
    for join in reports.iter().filter_map(|r| r.cluster.as_ref()).flat_map(|c| &c.joins) {
        if join.result == JoinResult::Joined {
            *joined.entry(join.address.clone()).or_default() += 1;
        }
    }
    joined
}
