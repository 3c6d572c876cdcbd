//! A round on the revision in force: which instances it covers (the whole
//! fleet, or the nodes its work names: [`super::scope`]), the options it
//! runs with (dry run when drift only warns or winfleet is suspended), the
//! reconcile round, and what it leaves behind (back-off, metrics, status,
//! the [`RoundRecord`]).

use std::sync::Arc;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::scope::{self, NodesScope};
use super::{Daemon, RoundKind, RoundRecord};
use crate::cluster::join::JoinOptions;
use crate::cluster::rollout::RolloutOptions;
use crate::daemon::source::short;
use crate::daemon::triggers::schedule::{Schedule, Work};
use crate::desired::kinds::fleet::DriftMode;
use crate::desired::model::{Desired, Instance};
use crate::engine::host::SshHost;
use crate::reconcile::report::ClusterReport;
use crate::reconcile::{self, Options, left_configured};
use crate::status::redact;

impl Daemon {
    /// Every instance (nodes backing off are left out of drift checks,
    /// unless their retry is part of this work).
    pub(super) async fn full_round(
        &mut self,
        kind: RoundKind,
        schedule: &mut Schedule,
        work: &Work,
        stop: &CancellationToken,
    ) -> Option<RoundRecord> {
        let desired = Arc::clone(&self.applied.as_ref()?.desired);
        let now = Instant::now();
        let instances = scope::fleet(&desired, kind == RoundKind::Commit, work, |a| schedule.backing_off(a, now));
        let record = self.execute(kind, &desired, &instances, true, schedule, work, stop).await;
        schedule.observed_all(Instant::now());
        Some(record)
    }

    /// The instances named by retries and cluster changes; an address that
    /// is no listed instance (a Machine-backed node) needs the whole fleet.
    pub(super) async fn nodes_round(
        &mut self,
        schedule: &mut Schedule,
        work: &Work,
        stop: &CancellationToken,
    ) -> Option<RoundRecord> {
        let applied = self.applied.as_ref()?;
        let desired = Arc::clone(&applied.desired);
        let revision = applied.revision.clone();
        let at_revision = |a: &str| self.status.applied_revision(a) == Some(revision.as_str());
        let (checks, catch_up) = match scope::nodes(work, &desired, at_revision) {
            NodesScope::Fleet => return self.full_round(RoundKind::Nodes, schedule, work, stop).await,
            NodesScope::Nodes { checks, catch_up } => (checks, catch_up),
        };
        if !checks.is_empty() {
            let record = self.execute(RoundKind::Drift, &desired, &checks, false, schedule, work, stop).await;
            if catch_up.is_empty() {
                return Some(record);
            }
            let _ = self.rounds.send(record);
        }
        Some(self.execute(RoundKind::Nodes, &desired, &catch_up, false, schedule, work, stop).await)
    }

    /// Runs the reconcile round and everything after it: back-off, metrics,
    /// status, the record.
    #[allow(clippy::too_many_arguments)]
    async fn execute(
        &mut self,
        kind: RoundKind,
        desired: &Desired,
        instances: &[&Instance],
        whole_fleet: bool,
        schedule: &mut Schedule,
        work: &Work,
        stop: &CancellationToken,
    ) -> RoundRecord {
        let started = Instant::now();
        let traffic = self.pool.activity.traffic();
        let revision = self.applied.as_ref().map(|a| a.revision.clone()).unwrap_or_default();
        let warn_only = kind == RoundKind::Drift && desired.fleet.drift_mode == DriftMode::Warn;
        let suspended = self.suspended_by();
        if let Some(by) = &suspended {
            tracing::info!(%by, "suspended: this round observes and reports, and changes nothing");
        }
        let options = Options {
            dry_run: warn_only || suspended.is_some(),
            max_parallel: self.config.max_parallel.unwrap_or(desired.fleet.max_parallel).max(1) as usize,
            whole_fleet,
            rollout: RolloutOptions {
                max_unavailable: desired.fleet.max_unavailable.max(1) as usize,
                drain_timeout: self.config.drain_timeout,
                reboot_timeout: self.config.reboot_timeout,
                ..RolloutOptions::default()
            },
            stop: stop.clone(),
            payload: self.payload.state().await,
            join: JoinOptions { max_parallel: 0, ..self.config.join },
            events: self.events.clone(),
        };
        let host = SshHost { pool: &self.pool };
        self.status.refresh_secrets();
        let secrets = self.status.secrets();
        let report = reconcile::round(self.cluster.as_ref(), &self.pool, &host, desired, instances, &options, |r| {
            // Node output can quote anything: logged redacted, like status.
            let line = redact(&crate::engine::report::node_line(r), secrets);
            if r.failed() {
                tracing::warn!("{line}");
            } else if r.has_changes() {
                tracing::info!("{line}");
            } else {
                tracing::debug!("{line}");
            }
        })
        .await;
        if whole_fleet {
            // Hosts that left the repository with no Node to drain them.
            let listed: Vec<String> = desired.instances.keys().cloned().collect();
            let left = self.status.left_candidates(&desired.fleet, &listed).await;
            let parallel = options.max_parallel;
            self.status.set_left(left_configured::probe(&self.pool, desired, &left, parallel).await);
        }
        let applied_at = Instant::now();
        let changed = self.after_round(&report, kind, schedule, suspended.is_some());
        // The verdict is `apply`'s exit status: a failed join, a write the
        // API refused or a cluster that could not be read fail the round as
        // a node does (the alert on failed rounds counts them).
        let cluster_failures = report.cluster.as_ref().map(ClusterReport::failures).unwrap_or_default();
        for failure in &cluster_failures {
            tracing::warn!("cluster: {}", redact(failure, self.status.secrets()));
        }
        let failed = report.nodes.iter().filter(|n| n.failed()).count() + cluster_failures.len();
        let result = if report.failed() { "failed" } else { "succeeded" };
        self.metrics.round_finished(result, started.elapsed());
        let traffic = self.pool.activity.traffic() - traffic;
        self.metrics.ssh_traffic(traffic);
        let ssh =
            format!("{} connections, {} channels, {} scripts", traffic.connections, traffic.channels, traffic.scripts);
        let seconds = started.elapsed().as_secs_f64();
        let (revision_short, nodes) = (short(&revision), report.nodes.len());
        if report.failed() {
            tracing::warn!(kind = ?kind, revision = %revision_short, nodes, changed, failed, seconds, %ssh, "round finished with failures");
        } else {
            tracing::info!(kind = ?kind, revision = %revision_short, nodes, changed, failed, seconds, %ssh, "round finished");
        }
        let status_commit = self.write_status(Some(&report), kind == RoundKind::Drift).await;
        RoundRecord {
            kind,
            revision,
            nodes: report.nodes.len(),
            changed,
            failed,
            webhook_received: work.webhook_received,
            applied_at,
            status_commit,
        }
    }
}
