//! Machines become nodes under OpenShift's own Machine API (issue 37): on
//! the real control plane, machine-api-operator's MachineSet, Machine and
//! nodelink controllers (built by tests/machineapi from its Go module) drive
//! the tests' cloud through the Machine controller's actuator interface
//! (tests/support/machine_api_real.rs), instead of the project's model of
//! them (tests/support/machine_model.rs); winfleet configures each VM as it
//! does under the model.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::json;
use support::controlplane::Backend;
use support::machine_bench::{MAPI, MachineApi, MachineBench, SET, machine_set_ready};
use support::machine_provider::Refusal;
use winfleet::cluster::join::JoinResult;
use winfleet::reconcile::machines::MachineStep;

#[test]
#[ignore = "entry point of the fake kubelet process that node tests start; not a test"]
fn fake_kubelet_process() {
    support::kubelet::main_from_env();
}

#[ignore = "needs the real control plane and machine-api-operator's controllers (Go builds them): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_set_scaled_from_0_to_1_gets_its_machine_from_the_real_controllers_and_a_ready_node() {
    let mut bench = MachineBench::start_on(Backend::Real, MachineApi::Real, 1, 0, Some(0)).await;
    let first = bench.round().await;
    assert!(!first.failed(), "{}", first.render_text());
    bench.scale_in_git(Some(1));
    let reports = bench.rounds_until(90, machine_set_ready).await;
    let last = reports.last().unwrap();
    let machines = bench.machines().await;
    assert_eq!(machines.len(), 1, "{}", bench.cloud.controllers_log());
    let machine = &machines[0];
    let name = machine["metadata"]["name"].as_str().unwrap();
    // The MachineSet controller's Machine: a generated name, controlled by the set.
    assert!(name.starts_with(&format!("{SET}-")) && name.len() == SET.len() + 6, "{name}");
    let owner = &machine["metadata"]["ownerReferences"][0];
    assert_eq!(
        (&owner["kind"], &owner["name"], &owner["controller"]),
        (&json!("MachineSet"), &json!(SET), &json!(true))
    );
    // The Machine controller's: its finalizer, the actuator's provider ID, Running.
    assert_eq!(machine["metadata"]["finalizers"], json!(["machine.machine.openshift.io"]));
    assert_eq!(machine["spec"]["providerID"], "winfleet-test:///win-machine-0");
    assert_eq!(machine["status"]["phase"], "Running", "{machine:#}");
    // nodelink's: the Node found by its InternalIP, annotated with its
    // Machine and given the Machine's labels.
    let node_name = machine["status"]["nodeRef"]["name"].as_str().expect("nodeRef set by nodelink");
    let node = bench.node(node_name).await;
    assert_eq!(node["metadata"]["annotations"]["machine.openshift.io/machine"], format!("{MAPI}/{name}"));
    assert_eq!(node["metadata"]["labels"]["node-role.kubernetes.io/worker"], "");
    assert_eq!(node["metadata"]["annotations"]["windowsmachineconfig.openshift.io/version"], bench.version().as_str());
    // The cloud booted one VM, with the key of the user data winfleet wrote.
    let key = bench.pool.public_key_line();
    assert_eq!(bench.cloud.log().booted, [(name.to_owned(), Some(key))]);
    let cluster = last.cluster.as_ref().unwrap();
    assert!(cluster.machines.machines.iter().all(|m| m.step == MachineStep::Ready), "{}", last.render_text());
    // nodelink links the Node to its Machine rounds after winfleet joined
    // it: the Machine was configured and joined once, not again when its
    // nodeRef arrived (issue 37, point 5).
    let joined = reports
        .iter()
        .flat_map(|r| r.cluster.iter().flat_map(|c| c.joins.iter()))
        .filter(|j| matches!(j.result, JoinResult::Joined))
        .count();
    assert_eq!(joined, 1, "one join");
    let next = bench.round().await;
    assert!(!next.failed(), "{}", next.render_text());
    assert!(next.nodes.iter().all(|n| !n.has_changes()), "the next round writes nothing: {}", next.render_text());
    assert!(machine_set_ready(&next));
}

#[ignore = "needs the real control plane and machine-api-operator's controllers (Go builds them): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaled_from_3_to_1_the_real_machine_set_controller_picks_two_the_machine_controller_drains_and_deletes_them_and_their_nodes()
 {
    let mut bench = MachineBench::start_on(Backend::Real, MachineApi::Real, 3, 0, Some(3)).await;
    bench.rounds_until(90, machine_set_ready).await;
    let machines = bench.machines().await;
    let before: Vec<String> = names(&machines);
    let nodes: Vec<String> =
        machines.iter().map(|m| m["status"]["nodeRef"]["name"].as_str().unwrap().to_owned()).collect();
    bench.scale_in_git(Some(1));
    let report = bench.round().await;
    assert!(!report.failed(), "{}", report.render_text());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    while bench.cloud.log().deleted.len() < 2 {
        assert!(std::time::Instant::now() < deadline, "two VMs not deleted: {}", bench.cloud.controllers_log());
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let reports = bench
        .rounds_until(60, |r| {
            machine_set_ready(r) && r.cluster.as_ref().is_some_and(|c| c.machines.machines.len() == 1)
        })
        .await;
    for report in &reports {
        assert!(
            report.cluster.as_ref().unwrap().deconfigures.is_empty(),
            "nothing deconfigured over SSH: {}",
            report.render_text()
        );
    }
    let after = names(&bench.machines().await);
    assert_eq!(after.len(), 1);
    let deleted = bench.cloud.log().deleted;
    assert_eq!(deleted.len(), 2, "{deleted:?}");
    for (machine, node) in before.iter().zip(&nodes) {
        let exists = bench.api.get("v1", "Node", None, node).await.is_some();
        if deleted.contains(machine) {
            assert!(!after.contains(machine), "{before:?} {after:?} {deleted:?}");
            // The Machine controller drained its Node, then deleted it
            // once the cloud had no VM for it.
            let reasons = bench.machine_events(machine).await;
            assert!(reasons.contains(&"DrainSucceeded".to_owned()), "{machine}: {reasons:?}");
            assert!(!exists, "the deleted Machine's Node {node} is deleted");
        } else {
            assert_eq!(after.as_slice(), std::slice::from_ref(machine));
            assert!(exists, "the kept Machine's Node {node} stays");
        }
    }
    // The MachineSet is reported truthfully: one Machine, Ready.
    let last = reports.last().unwrap();
    let set = last.cluster.as_ref().unwrap().machines.machine_set(SET).unwrap();
    assert!(set.ready(), "{}", last.render_text());
}

#[ignore = "needs the real control plane and machine-api-operator's controllers (Go builds them): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_the_cloud_refuses_for_capacity_is_tried_again_by_the_machine_controller_and_becomes_a_node() {
    let bench = MachineBench::start_on(Backend::Real, MachineApi::Real, 1, 0, Some(1)).await;
    let refusal = Refusal::Transient("insufficient capacity in the zone".to_owned());
    bench.cloud.refuse_creates([refusal.clone(), refusal]);
    bench.rounds_until(90, machine_set_ready).await;
    let log = bench.cloud.log();
    let machine = names(&bench.machines().await).remove(0);
    assert_eq!(log.refused.len(), 2, "{log:?}");
    assert!(log.refused.iter().all(|(m, _)| m == &machine), "{log:?}");
    assert_eq!(log.booted.len(), 1, "{log:?}");
}

#[ignore = "needs the real control plane and machine-api-operator's controllers (Go builds them): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_refused_as_invalid_fails_the_machine_which_winfleet_reports_provisioning_and_never_deletes() {
    let bench = MachineBench::start_on(Backend::Real, MachineApi::Real, 1, 0, Some(1)).await;
    bench.cloud.refuse_creates([Refusal::Permanent("instance type m9.huge does not exist".to_owned())]);
    let reports = bench
        .rounds_until(60, |r| {
            r.cluster.as_ref().is_some_and(|c| {
                c.machines
                    .machines
                    .iter()
                    .any(|m| matches!(&m.step, MachineStep::Provisioning { phase } if phase == "Failed"))
            })
        })
        .await;
    let last = reports.last().unwrap();
    assert!(!machine_set_ready(last), "{}", last.render_text());
    // Reported, never configured: no round wrote to a node or joined one,
    // the two after it included (issue 37, point 5).
    let mut reports = reports;
    reports.push(bench.round().await);
    reports.push(bench.round().await);
    for report in &reports {
        let text = report.render_text();
        assert!(report.nodes.iter().all(|n| !n.has_changes()), "nothing configured: {text}");
        let cluster = report.cluster.as_ref().unwrap();
        assert!(cluster.joins.is_empty(), "nothing joined: {text}");
        assert!(cluster.machines.machines.iter().all(|m| matches!(m.step, MachineStep::Provisioning { .. })), "{text}");
    }
    let machines = bench.machines().await;
    assert_eq!(machines.len(), 1, "never deleted");
    let status = &machines[0]["status"];
    assert_eq!(status["errorReason"], "InvalidConfiguration", "{status:#}");
    assert!(status["errorMessage"].as_str().unwrap().contains("instance type m9.huge does not exist"), "{status:#}");
    // Nothing is said of the cloud's VMs: the Machine controller may read
    // the Machine from its cache before its Failed phase arrives there and
    // create again (seen here: a Failed Machine with a VM).
    assert_eq!(bench.cloud.log().refused.len(), 1);
}

fn names(machines: &[serde_json::Value]) -> Vec<String> {
    machines.iter().map(|m| m["metadata"]["name"].as_str().unwrap().to_owned()).collect()
}
