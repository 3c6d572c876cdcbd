//! The Containers feature (issue 27, item 6): a host without it gets it,
//! with its reboot, before anything else is configured; WMCO's order. Real
//! sshd nodes whose posix stand-in for the feature is two kernel modules
//! (their own `/sys/module` and `/etc/modules-load.d`, bind-mounted as
//! root; a simulated reboot loads what modules-load.d names: see
//! tests/support/fleet.rs), the fake kubelet, and either API server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::fs;
use std::time::Duration;

use support::controlplane::Backend;
use support::join::{Bench, bench, logs};
use winfleet::cluster::join::JoinResult;
use winfleet::engine::report::NodeResult;
use winfleet::node::outcome::Outcome;
use winfleet::reconcile::report::RoundReport;

const NAME: &str = "win-ctr-1";
const CONF: &str = "modules-load.d/90-winfleet-containers.conf";

#[test]
#[ignore = "entry point of the fake kubelet process that node tests start; not a test"]
fn fake_kubelet_process() {
    support::kubelet::main_from_env();
}

fn reboots(bench: &Bench) -> usize {
    fs::read_to_string(bench.fleet.nodes[0].dir.join("services/reboots")).map_or(0, |s| s.lines().count())
}

fn boot_id(bench: &Bench) -> String {
    fs::read_to_string(bench.fleet.nodes[0].dir.join("boot_id")).unwrap()
}

/// The operations' headlines of the round's only node, with their outcome.
fn operations(report: &RoundReport) -> Vec<(String, Option<Outcome>)> {
    let NodeResult::Done { operations, .. } = &report.nodes[0].result else { panic!("{}", report.render_text()) };
    operations.iter().map(|o| (o.operation.headline(), o.outcome.clone())).collect()
}

async fn enabled_rebooted_then_joined(backend: Backend) {
    let bench = bench(backend, &[NAME]).await;
    let node = &bench.fleet.nodes[0];
    node.without_containers_feature();
    node.simulate_reboots();
    let (files, boot) = (node.files(), boot_id(&bench));

    // plan --live: the feature and its reboot, the join after; nothing done.
    let plan = bench.plan().await;
    let text = plan.render_text();
    assert!(text.contains("+ Windows feature Containers (enabled; the host reboots)"), "{text}");
    assert!(text.contains("the Containers feature is not enabled (Disabled)"), "{text}");
    let cluster = plan.cluster.as_ref().unwrap();
    let JoinResult::NotStarted { reason } = &cluster.joins[0].result else { panic!("{text}") };
    assert!(reason.contains("reboots first, for the Containers feature"), "{reason}");
    assert_eq!(operations(&plan).len(), 1, "nothing else is planned before the reboot: {text}");
    assert_eq!((node.files(), boot_id(&bench), reboots(&bench)), (files, boot.clone(), 0), "a plan changes nothing");
    assert!(!node.dir.join(CONF).exists());

    // The round: enabled, rebooted (no Node yet: nothing to drain), then
    // configured and joined, all in one round.
    let report = bench.round().await;
    let text = report.render_text();
    let ops = operations(&report);
    assert_eq!(ops[0], ("+ Windows feature Containers (enabled; the host reboots)".into(), Some(Outcome::Applied)));
    assert!(ops.len() > 5 && ops.iter().all(|(_, o)| *o == Some(Outcome::Applied)), "{text}");
    assert_eq!(reboots(&bench), 1, "{text}");
    assert_ne!(boot_id(&bench), boot, "the host booted again");
    assert_eq!(fs::read_to_string(node.dir.join(CONF)).unwrap(), "overlay\nbr_netfilter\n");
    let cluster = report.cluster.as_ref().unwrap();
    assert_eq!(cluster.joins[0].result, JoinResult::Joined, "{text}\n{}", logs(&bench.fleet));
    assert!(cluster.reboots.is_empty(), "the safe reboot rollout had nothing left to do: {text}");
    let joined = bench.node(NAME).await;
    assert_eq!(joined["metadata"]["annotations"][winfleet::lifecycle::VERSION_ANNOTATION], bench.version());

    // Joined, the feature is never asked about again; nothing reboots.
    let again = bench.round().await;
    assert!(!again.nodes[0].has_changes(), "{}", again.render_text());
    assert_eq!(reboots(&bench), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_without_the_containers_feature_gets_it_reboots_and_joins_in_one_round_in_memory() {
    enabled_rebooted_then_joined(Backend::InMemory).await;
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_without_the_containers_feature_gets_it_reboots_and_joins_in_one_round_on_the_real_control_plane() {
    enabled_rebooted_then_joined(Backend::Real).await;
}

/// A host that does not come back fails with the reason and nothing else
/// is configured; the next round finds the feature pending (a crash after
/// the enable looks the same), reboots it without enabling it again, and
/// goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_not_back_from_its_reboot_fails_and_the_next_round_reboots_it_and_goes_on() {
    let mut bench = bench(Backend::InMemory, &[NAME]).await;
    let node = &bench.fleet.nodes[0];
    node.without_containers_feature();
    let files = node.files();
    bench.options.rollout.reboot_timeout = Duration::from_secs(2);

    // The shim only records the reboot: the host never comes back.
    let report = bench.round().await;
    let text = report.render_text();
    let NodeResult::Failed { reason, .. } = &report.nodes[0].result else { panic!("{text}") };
    assert!(
        reason.starts_with("rebooting to enable the Containers feature: not back from the reboot within 2s"),
        "{reason}"
    );
    assert_eq!(reboots(&bench), 1);
    assert!(bench.fleet.nodes[0].dir.join(CONF).exists(), "the feature was enabled");
    assert_eq!(bench.fleet.nodes[0].files(), files, "nothing else was configured");
    let JoinResult::NotStarted { .. } = &report.cluster.as_ref().unwrap().joins[0].result else { panic!("{text}") };
    assert!(bench.api.get("v1", "Node", None, NAME).await.is_none());

    // Back in order: pending, so only the reboot, then the configuration.
    bench.fleet.nodes[0].simulate_reboots();
    bench.options.rollout.reboot_timeout = Duration::from_secs(60);
    let plan = bench.plan().await;
    assert!(plan.render_text().contains("takes effect at the host's next boot"), "{}", plan.render_text());
    assert!(operations(&plan).is_empty(), "{}", plan.render_text());
    let report = bench.round().await;
    let text = report.render_text();
    assert_eq!(reboots(&bench), 2, "{text}");
    assert!(operations(&report).iter().all(|(h, o)| !h.contains("Windows feature") && *o == Some(Outcome::Applied)));
    assert_eq!(report.cluster.as_ref().unwrap().joins[0].result, JoinResult::Joined, "{text}");
}

/// A host WMCO configured (a Node with WMCO's version, no install record of
/// winfleet's) that lacks the feature: it has a Node, so its reboot goes
/// through the safe reboot rollout (cordon, drain, reboot, Ready,
/// uncordon); the round after adopts and joins it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_with_a_node_gets_the_feature_through_the_safe_reboot_then_joins() {
    use winfleet::cluster::rollout::RebootResult;
    let bench = bench(Backend::InMemory, &[NAME]).await;
    let first = bench.round().await;
    assert_eq!(first.cluster.as_ref().unwrap().joins[0].result, JoinResult::Joined, "{}", first.render_text());
    let support::controlplane::TestApi::InMemory { server, .. } = &bench.api else { unreachable!() };
    let node = &bench.fleet.nodes[0];
    fs::remove_dir_all(node.path(".winfleet")).unwrap();
    server.update("v1", "Node", None, NAME, |n| {
        n["metadata"]["annotations"][winfleet::lifecycle::VERSION_ANNOTATION] = "10.19.0-4f1e0f9".into();
    });
    node.without_containers_feature();
    node.simulate_reboots();

    let report = bench.round().await;
    let text = report.render_text();
    assert_eq!(operations(&report).len(), 1, "only the feature: {text}");
    let cluster = report.cluster.as_ref().unwrap();
    assert_eq!(cluster.reboots.len(), 1, "{text}");
    assert!(matches!(cluster.reboots[0].result, RebootResult::Rebooted { .. }), "{text}\n{}", logs(&bench.fleet));
    assert!(matches!(cluster.joins[0].result, JoinResult::NotStarted { .. }), "{text}");
    assert_eq!(reboots(&bench), 1);
    let events = server.list("events.k8s.io/v1", "Event");
    assert!(events.iter().any(|e| e["reason"] == "Cordoned"), "cordoned for the safe reboot");
    assert_ne!(bench.node(NAME).await["spec"]["unschedulable"], true, "uncordoned once back");

    let report = bench.round().await;
    let text = report.render_text();
    assert_eq!(report.cluster.as_ref().unwrap().joins[0].result, JoinResult::Joined, "{text}");
    assert!(!text.contains("Windows feature"), "{text}");
    assert_eq!(reboots(&bench), 1);
}
