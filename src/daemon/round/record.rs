//! What a round leaves behind: the verdict on a revision that may not be
//! applied (invalid, or not signed by a trusted key: see [`super::verify`]),
//! the per-node back-off and metrics after a round, and the status written
//! for it.

use std::collections::BTreeSet;
use std::sync::Arc;

use tokio::time::Instant;

use super::{Applied, Daemon, RoundKind, RoundRecord};
use crate::cluster::rollout::{RebootResult, RebootStage};
use crate::daemon::source::short;
use crate::daemon::triggers::schedule::{Schedule, Work, node_outcomes};
use crate::desired::kinds::fleet::DriftMode;
use crate::engine::report::NodeResult;
use crate::reconcile::report::RoundReport;

impl Daemon {
    /// A revision that may not be applied (invalid, or not signed by a
    /// trusted key): its errors go into status; the revision in force stays.
    pub(super) async fn reject(
        &mut self,
        revision: String,
        errors: Vec<String>,
        started: Instant,
        schedule: &mut Schedule,
        work: &Work,
    ) -> RoundRecord {
        self.invalid = errors;
        tracing::warn!(revision = %revision, errors = self.invalid.len(), "the revision is invalid; nothing applied, the last applied revision stays in force");
        for line in &self.invalid {
            tracing::warn!("{line}");
        }
        self.metrics.round_finished("invalid", started.elapsed());
        if self.applied.is_none() {
            // A restart on an invalid head: what was applied before it
            // stays in force (its revision is in the status branch).
            self.recover_applied().await;
            if let Some(applied) = &self.applied {
                schedule.set_drift_every(applied.desired.fleet.drift_interval, Instant::now());
            }
        }
        let applied_at = Instant::now();
        let status_commit = self.write_status(None, false).await;
        RoundRecord {
            kind: RoundKind::Invalid,
            revision,
            nodes: 0,
            changed: 0,
            failed: 0,
            webhook_received: work.webhook_received,
            applied_at,
            status_commit,
        }
    }

    /// After a restart on an invalid head: the last applied revision the
    /// status branch the head's Fleet configures records, when it can still be read and is valid (and,
    /// when signatures are required, signed by a trusted key).
    pub(super) async fn recover_applied(&mut self) {
        let fleet = self.head_status.fleet.clone();
        let Some(revision) = self.status.last_applied(&fleet).await else { return };
        if !self.trusted_in_force(&revision).await {
            return;
        }
        let Some(desired) = self.load(&revision).await.and_then(|l| l.desired) else {
            tracing::warn!(revision = %revision, "the last applied revision cannot be read any more; nothing is in force");
            return;
        };
        tracing::info!(revision = %short(&revision), "the last applied revision stays in force");
        self.metrics.set_applied_revision(&revision);
        self.applied = Some(Applied { revision, desired: Arc::new(desired) });
    }

    /// Back-off per node and the metrics of a round; the nodes changed.
    pub(super) fn after_round(
        &self,
        report: &RoundReport,
        kind: RoundKind,
        schedule: &mut Schedule,
        suspended: bool,
    ) -> usize {
        let now = Instant::now();
        let warn = suspended || self.applied.as_ref().is_some_and(|a| a.desired.fleet.drift_mode == DriftMode::Warn);
        for (address, outcome) in node_outcomes(report, kind == RoundKind::Drift || suspended, warn) {
            schedule.node_done(address, outcome, now);
        }
        let processed = report.nodes.iter().filter(|n| !matches!(n.result, NodeResult::Pending));
        let changed = processed.filter(|n| n.has_changes()).count();
        for node in &report.nodes {
            if let NodeResult::Failed { stage, .. } = &node.result {
                self.metrics.ssh_error(stage.name());
            }
        }
        if let Some(cluster) = &report.cluster {
            self.metrics.set_deconfigure_refused(cluster.deconfigure_refused.is_some());
        }
        for reboot in report.cluster.iter().flat_map(|c| &c.reboots) {
            if let RebootResult::Failed { stage: RebootStage::Reboot, .. } = &reboot.result {
                self.metrics.ssh_error("reboot");
            }
        }
        // Machine-backed nodes are not listed instances but keep their back-off.
        let addresses: BTreeSet<&str> = self
            .applied
            .iter()
            .flat_map(|a| a.desired.instances.keys())
            .chain(report.nodes.iter().map(|n| &n.address))
            .map(String::as_str)
            .collect();
        schedule.retain(|a| addresses.contains(a));
        changed
    }

    /// Writes the status files for this round; the commit, when they changed.
    pub(super) async fn write_status(&mut self, report: Option<&RoundReport>, drift_check: bool) -> Option<String> {
        let applied = self.applied.as_ref().map(|a| (a.revision.clone(), Arc::clone(&a.desired)));
        let attempted = self.attempted.clone().unwrap_or_default();
        let suspended_by = self.suspended_by();
        let published =
            self.status.write(&attempted, applied, &self.invalid, report, drift_check, suspended_by.as_deref()).await;
        if let Some(counts) = self.status.phase_counts() {
            self.metrics.set_nodes_by_phase(&counts);
        }
        if report.is_some() {
            // Whatever round it was: drift is what the status lists as such.
            self.metrics.drift_detected(self.status.drifted());
        }
        published
    }
}
