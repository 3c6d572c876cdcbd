//! The round's step for the cluster's own Proxy and mirror sets (issue 27,
//! item 4), before anything is rendered for the nodes: read them, follow
//! them where the Fleet's `spec.sources` says `cluster`, compare them with
//! the repository's where it says `repository` (report, status, Events once
//! per change; never blocking).

use crate::cluster::connect::Cluster;
use crate::cluster::disagree;
use crate::cluster::events::Events;
use crate::cluster::sources::{self, follows_cluster};
use crate::desired::model::{Desired, Instance};
use crate::engine::report::{NodeReport, NodeResult, Stage};
use crate::render::mirrors::RegistryMirrors;

use super::report::{ClusterReport, RoundReport};

/// What the round renders from.
#[derive(Debug, Default)]
pub(super) struct Sourced {
    /// The instances rebuilt from the cluster's objects (when followed).
    pub(super) instances: Option<Vec<Instance>>,
    /// The mirror sets merged per registry (the cluster's when followed).
    pub(super) registries: Option<Vec<RegistryMirrors>>,
    /// Why no node can be rendered this round.
    pub(super) refused: Option<String>,
}

/// Reads, follows and compares; fills the report's `disagreements` and
/// `sources_error`; publishes the Events (not in a dry run).
pub(super) async fn round(
    (cluster, events): (&Cluster, &Events),
    desired: &Desired,
    listed: &[&Instance],
    reachable: bool,
    dry_run: bool,
    report: &mut ClusterReport,
) -> Sourced {
    let read = sources::for_round(&cluster.client, reachable).await;
    report.sources_error = read.error.clone().filter(|_| reachable);
    if let Some(fresh) = &read.fresh {
        report.disagreements = disagree::compare(desired, fresh);
        if !dry_run {
            disagree::publish(&cluster.client, events, fresh, &report.disagreements).await;
        }
    }
    if !follows_cluster(desired) {
        return Sourced::default();
    }
    match sources::follow(desired, listed, read.usable.as_ref()) {
        Ok(followed) => {
            Sourced { instances: Some(followed.instances), registries: Some(followed.registries), refused: None }
        }
        Err(reason) => Sourced { refused: Some(reason), ..Sourced::default() },
    }
}

/// A round that changes no node: each is reported failed with `reason`.
pub(super) fn refused(
    instances: &[&Instance],
    reason: &str,
    dry_run: bool,
    cluster: Option<ClusterReport>,
) -> RoundReport {
    let nodes = instances
        .iter()
        .map(|i| NodeReport {
            result: NodeResult::Failed { stage: Stage::Observe, reason: reason.to_owned() },
            ..NodeReport::new(&i.address)
        })
        .collect();
    RoundReport { dry_run, nodes, cluster }
}

/// Why an SSH-only round cannot follow the cluster.
pub(super) const NO_CLUSTER: &str = "the Fleet's spec.sources follows the cluster's Proxy or mirror sets, and no \
                                     cluster is configured: no node is changed (give a kubeconfig, or set \
                                     spec.sources to repository)";
