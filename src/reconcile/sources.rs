//! The round's step for the cluster's own Proxy and mirror sets (issue 27,
//! item 4), before anything is rendered for the nodes: read them (followed
//! where the Fleet's `spec.sources` says `cluster`, by `runtime`), compare
//! them with the repository's where it says `repository` (report, status,
//! Events once per change; never blocking).

use crate::cluster::connect::Cluster;
use crate::cluster::disagree;
use crate::cluster::events::Events;
use crate::cluster::sources::{self, ClusterConfig};
use crate::desired::model::{Desired, Instance};
use crate::engine::report::{NodeReport, NodeResult, Stage};

use super::report::{ClusterReport, RoundReport};

/// Reads and compares; fills the report's `disagreements` and
/// `sources_error`; publishes the Events (not in a dry run). Returns the
/// objects a Fleet that follows the cluster renders from (read this round,
/// or else last read in this process; `runtime::Runtime` follows them).
pub(super) async fn round(
    (cluster, events): (&Cluster, &Events),
    desired: &Desired,
    reachable: bool,
    dry_run: bool,
    report: &mut ClusterReport,
) -> Option<ClusterConfig> {
    let read = sources::for_round(&cluster.client, reachable).await;
    report.sources_error = read.error.clone().filter(|_| reachable);
    if let Some(fresh) = &read.fresh {
        report.disagreements = disagree::compare(desired, fresh);
        if !dry_run {
            disagree::publish(&cluster.client, events, fresh, &report.disagreements).await;
        }
    }
    read.usable
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
