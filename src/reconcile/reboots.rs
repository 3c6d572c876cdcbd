//! The safe reboot step of a round: which Nodes reboot (those whose node
//! round owes one, and those winfleet left disrupted), handed to the
//! rollout, and what holds it.

use std::collections::BTreeSet;

use super::{ClusterContext, Options};
use crate::cluster::REBOOTING_ANNOTATION;
use crate::cluster::associate::Association;
use crate::cluster::rollout::{self, Candidate, RebootReport, RebootResult, RebootStage};
use crate::desired::model::Instance;
use crate::engine::host::Host;
use crate::engine::report::{NodeReport, NodeResult};

/// The rollout: nodes that owe a reboot (from this round's observation;
/// only when `new_reboots`) and nodes winfleet left disrupted (a crash
/// mid-reboot), which are always finished.
pub(super) async fn reboots<H: Host>(
    context: &ClusterContext<'_>,
    host: &H,
    instances: &[&Instance],
    nodes: &[NodeReport],
    new_reboots: bool,
    options: &Options,
    still_disrupted: &[String],
) -> Vec<RebootReport> {
    let owed: BTreeSet<&str> = nodes
        .iter()
        .filter(|r| new_reboots && matches!(r.result, NodeResult::Done { reboot_required: true, .. }))
        .map(|r| r.address.as_str())
        .collect();
    let mut candidates = Vec::new();
    let mut unassociated = Vec::new();
    for instance in instances {
        let node = context
            .associations
            .get(&instance.address)
            .and_then(Association::node)
            .and_then(|n| context.facts.nodes.get(n));
        match node {
            Some(node) if owed.contains(instance.address.as_str()) || node.in_reboot() => {
                candidates.push(Candidate { instance, node: node.clone() });
            }
            None if owed.contains(instance.address.as_str()) => unassociated.push(RebootReport {
                node: String::new(),
                address: instance.address.clone(),
                result: RebootResult::NotStarted {
                    reason: "no Node is associated with this instance, so it cannot be drained; reboot it yourself"
                        .into(),
                },
            }),
            _ => {}
        }
    }
    let chosen: BTreeSet<&str> = candidates.iter().map(|c| c.node.name.as_str()).collect();
    let others: Vec<String> = context
        .facts
        .nodes
        .values()
        .filter(|n| n.in_disruption() && !chosen.contains(n.name.as_str()))
        .map(|n| n.name.clone())
        .chain(still_disrupted.iter().filter(|n| !chosen.contains(n.as_str())).cloned())
        .collect::<BTreeSet<String>>()
        .into_iter()
        .collect();
    let mut reports = rollout::rollout(
        &context.cluster.client,
        context.events,
        host,
        candidates,
        &others,
        options.rollout,
        &options.stop,
    )
    .await;
    // A disrupted Node no instance of this round stands for (its instance
    // left the repository, or is unassociated) holds the rollout: say so.
    reports.extend(others.iter().map(|name| RebootReport {
        node: name.clone(),
        address: String::new(),
        result: RebootResult::Failed {
            stage: RebootStage::WaitBack,
            reason: format!(
                "winfleet disrupted this node and no instance of this round is it; once it is healthy, \
                 remove the {REBOOTING_ANNOTATION} annotation and uncordon it (kubectl uncordon {name})"
            ),
        },
    }));
    reports.extend(unassociated);
    reports
}
