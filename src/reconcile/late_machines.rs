//! Machines that get their address while a round runs are taken into that
//! round (issue 37). A cloud provisions a MachineSet's Machines over
//! seconds to minutes, and a round that configures and joins the first of
//! them takes as long: without this, a Machine that got its address just
//! after the round observed the cluster waited for the whole round.
//!
//! While a batch of the round is still configuring or joining, the Windows
//! Machines are read again every [`POLL`] (as long as one is expected: a
//! tracked Machine not yet addressed, or a MachineSet in the repository with
//! fewer Machines than its replicas). Those now `Provisioned` or `Running`
//! with an InternalIP that the round does not have are rendered as the
//! round's others were and configured and joined beside them, in a batch of
//! their own, while the round has room (maxParallel nodes in all). Once no
//! batch runs, none is taken: the next round takes the rest. Not in a dry
//! run.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;

use crate::cluster::associate::{associate, resolve_all};
use crate::cluster::{ClusterFacts, MachineObs, observe};
use crate::desired::model::{Desired, Instance};
use crate::engine::NodeContext;
use crate::engine::host::Host;
use crate::engine::report::NodeReport;

use super::configure::{self, Batch, Nodes, Stage};
use super::lifecycle;
use super::machines::{machine_instances, tracked};
use super::runtime::Runtime;

/// How often the Machines are read while a batch runs.
pub(super) const POLL: Duration = Duration::from_millis(500);

/// What the round knows when it starts taking Machines.
pub(super) struct Pull<'a> {
    pub(super) desired: &'a Desired,
    /// The instances listed in the repository (a Machine at one of their
    /// addresses is theirs).
    pub(super) listed: &'a [&'a Instance],
    pub(super) runtime: &'a Runtime<'a>,
    /// The round's observation.
    pub(super) facts: &'a ClusterFacts,
    /// The addresses the round has.
    pub(super) taken: BTreeSet<String>,
    /// Whether to take any (a round that writes, over the whole fleet,
    /// with its lifecycle managed).
    pub(super) enabled: bool,
}

/// A batch of Machines taken late.
pub(super) struct Late {
    /// As rendered for the round.
    pub(super) instances: Vec<Instance>,
    pub(super) contexts: BTreeMap<String, NodeContext>,
    /// These Machines, as read when they were taken.
    pub(super) machines: BTreeMap<String, MachineObs>,
    pub(super) batch: Batch,
}

/// Runs `first` (the round's batch) and, beside it, the batches of the
/// Machines that get their address meanwhile.
pub(super) async fn alongside<H: Host, F: FnMut(&NodeReport)>(
    first: impl Future<Output = Batch>,
    stage: &Stage<'_, H>,
    pull: Pull<'_>,
    on_node: &Mutex<F>,
) -> (Batch, Vec<Late>) {
    let mut first = std::pin::pin!(first);
    let mut first_done = None;
    let mut running = FuturesUnordered::new();
    let mut late = Vec::new();
    let mut taken = pull.taken;
    let mut expected = pull.enabled && expecting(pull.desired, pull.facts);
    let mut ticks = tokio::time::interval(POLL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await;
    while first_done.is_none() || !running.is_empty() {
        let room = stage.options.max_parallel.saturating_sub(taken.len());
        let taking = expected && room > 0 && !stage.options.stop.is_cancelled();
        tokio::select! {
            batch = &mut first, if first_done.is_none() => first_done = Some(batch),
            Some(done) = running.next(), if !running.is_empty() => late.push(done),
            _ = ticks.tick(), if taking => {
                let machines = match observe::machines(&stage.cluster.client).await {
                    Ok(machines) => machines,
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot read the Windows Machines mid-round; trying again");
                        continue;
                    }
                };
                let seen = ClusterFacts { machines, ..ClusterFacts::default() };
                expected = expecting(pull.desired, &seen);
                let newcomers = newcomers(pull.desired, &seen, pull.listed, &taken, room);
                if newcomers.is_empty() {
                    continue;
                }
                let Ok(instances) = pull.runtime.instances(&newcomers.iter().collect::<Vec<_>>()) else { continue };
                let fresh = ClusterFacts { machines: seen.machines, ..ClusterFacts::clone(pull.facts) };
                taken.extend(instances.iter().map(|i| i.address.clone()));
                tracing::info!(count = instances.len(), "Machines got their address during the round: taken into it");
                running.push(run_late(stage, instances, fresh, on_node));
            }
        }
    }
    (first_done.unwrap_or_default(), late)
}

/// Configures and joins Machines taken late.
async fn run_late<H: Host, F: FnMut(&NodeReport)>(
    stage: &Stage<'_, H>,
    instances: Vec<Instance>,
    fresh: ClusterFacts,
    on_node: &Mutex<F>,
) -> Late {
    let refs: Vec<&Instance> = instances.iter().collect();
    let resolved = resolve_all(refs.iter().map(|i| i.address.as_str())).await;
    let associations = associate(&resolved, &fresh.nodes);
    let contexts = lifecycle::contexts(&refs, &fresh, &associations);
    let machine_addresses: BTreeSet<String> = refs.iter().map(|i| i.address.clone()).collect();
    let nodes = Nodes {
        instances: &refs,
        byoh: 0,
        contexts: &contexts,
        resolved: &resolved,
        facts: &fresh,
        machine_addresses: &machine_addresses,
    };
    let batch = configure::run(stage, &nodes, |r| report_node(on_node, r)).await;
    drop(refs);
    let machines = fresh
        .machines
        .into_iter()
        .filter(|(_, m)| m.internal_ip.as_ref().is_some_and(|ip| machine_addresses.contains(ip)))
        .collect();
    Late { instances, contexts, machines, batch }
}

/// Hands a node's report to the round's callback, shared by its batches.
pub(super) fn report_node<F: FnMut(&NodeReport)>(on_node: &Mutex<F>, report: &NodeReport) {
    if let Ok(mut on_node) = on_node.lock() {
        on_node(report);
    }
}

/// Whether a Windows Machine may still get an address: a tracked Machine
/// not yet addressed (and not `Failed`), or a MachineSet in the repository
/// with fewer tracked Machines than its replicas.
pub(super) fn expecting(desired: &Desired, facts: &ClusterFacts) -> bool {
    let addressed =
        |m: &MachineObs| m.internal_ip.is_some() && matches!(m.phase.as_deref(), Some("Provisioned" | "Running"));
    let provisioning = tracked(facts).any(|m| !addressed(m) && m.phase.as_deref() != Some("Failed"));
    let short = desired.machine_sets.iter().any(|(name, set)| {
        let have = tracked(facts).filter(|m| m.machine_set.as_deref() == Some(name)).count();
        set.replicas.and_then(|r| usize::try_from(r).ok()).is_some_and(|want| have < want)
    });
    provisioning || short
}

/// The Machines of `seen` the round can take: addressed, not at an address
/// it has (`taken`) or one listed, at most `room`, by name.
pub(super) fn newcomers(
    desired: &Desired,
    seen: &ClusterFacts,
    listed: &[&Instance],
    taken: &BTreeSet<String>,
    room: usize,
) -> Vec<Instance> {
    machine_instances(desired, seen, listed).into_iter().filter(|i| !taken.contains(&i.address)).take(room).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reconcile::machines_tests::{FLEET, desired_of as desired, machine};

    const SET: &str = "apiVersion: machine.openshift.io/v1beta1
kind: MachineSet
metadata:
  name: win
  namespace: openshift-machine-api
spec:
  replicas: 2
  selector:
    matchLabels:
      machine.openshift.io/cluster-api-machineset: win
  template:
    metadata:
      labels:
        machine.openshift.io/cluster-api-machineset: win
        machine.openshift.io/cluster-api-machine-role: worker
        machine.openshift.io/cluster-api-machine-type: worker
        machine.openshift.io/os-id: Windows
    spec:
      metadata:
        labels:
          node-role.kubernetes.io/worker: \"\"
      providerSpec:
        value:
          userDataSecret:
            name: windows-user-data
";

    fn seen(machines: Vec<MachineObs>) -> ClusterFacts {
        ClusterFacts {
            machines: machines.into_iter().map(|m| (m.name.clone(), m)).collect(),
            ..ClusterFacts::default()
        }
    }

    #[test]
    fn a_machine_still_provisioning_is_expected_a_failed_or_ignored_one_is_not() {
        let desired = desired(&[("fleet.yaml", FLEET)]);
        assert!(expecting(&desired, &seen(vec![machine("a", "Provisioning", None)])));
        assert!(expecting(&desired, &seen(vec![machine("a", "Provisioned", None)])), "no address yet");
        assert!(!expecting(&desired, &seen(vec![machine("a", "Provisioned", Some("10.0.0.1"))])));
        assert!(!expecting(&desired, &seen(vec![machine("a", "Failed", None)])));
        let ignored = MachineObs { ignored: true, ..machine("a", "Provisioning", None) };
        assert!(!expecting(&desired, &seen(vec![ignored])));
        assert!(!expecting(&desired, &seen(Vec::new())), "no MachineSet in the repository, no Machine");
    }

    #[test]
    fn a_machine_set_in_git_with_fewer_machines_than_its_replicas_is_expected_to_get_more() {
        let desired = desired(&[("fleet.yaml", FLEET), ("machinesets/win.yaml", SET)]);
        assert_eq!(desired.machine_sets.get("win").and_then(|s| s.replicas), Some(2));
        assert!(expecting(&desired, &seen(Vec::new())));
        assert!(expecting(&desired, &seen(vec![machine("a", "Running", Some("10.0.0.1"))])));
        let two = vec![machine("a", "Running", Some("10.0.0.1")), machine("b", "Provisioned", Some("10.0.0.2"))];
        assert!(!expecting(&desired, &seen(two)));
    }

    #[test]
    fn newcomers_are_the_addressed_machines_the_round_does_not_have_within_its_room() {
        let desired = desired(&[("fleet.yaml", FLEET)]);
        let machines = vec![
            machine("a", "Running", Some("10.0.0.1")),
            machine("b", "Provisioned", Some("10.0.0.2")),
            machine("c", "Provisioned", Some("10.0.0.3")),
            machine("d", "Provisioning", None),
        ];
        let taken = BTreeSet::from(["10.0.0.1".to_owned()]);
        let addresses = |room| -> Vec<String> {
            newcomers(&desired, &seen(machines.clone()), &[], &taken, room).into_iter().map(|i| i.address).collect()
        };
        assert_eq!(addresses(8), ["10.0.0.2", "10.0.0.3"]);
        assert_eq!(addresses(1), ["10.0.0.2"]);
        assert!(addresses(0).is_empty());
    }
}
