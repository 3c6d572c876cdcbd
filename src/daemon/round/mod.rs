//! One unit of work: check the source, then run the round the work calls
//! for (a new commit, a drift check, retries of some nodes), then write the
//! status. One commit is one transaction: an invalid commit changes nothing
//! and the last applied revision stays in force.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::broadcast;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::Config;
use super::report::StatusWriter;
use super::source::{GIT_TIMEOUT, Source, SourceFailure, short};
use crate::daemon::http::metrics::Metrics;
use crate::daemon::round::payload::PayloadCache;
use crate::daemon::round::scope::NodesScope;
use crate::daemon::triggers::schedule::{Schedule, Work};

mod payload;
mod record;
pub mod scope;
mod verify;
use crate::cluster::connect::Cluster;
use crate::cluster::join::JoinOptions;
use crate::cluster::rollout::RolloutOptions;
use crate::desired::kinds::fleet::DriftMode;
use crate::desired::model::{Desired, Instance};
use crate::desired::{self, LoadOptions, Loaded};
use crate::engine::host::SshHost;
use crate::reconcile::{self, Options};
use crate::ssh::Pool;
use crate::status::redact;

/// What kind of round ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoundKind {
    /// A new revision was applied to the whole fleet.
    Commit,
    /// A new revision failed validation; nothing was applied.
    Invalid,
    /// Every node re-observed without a new commit.
    Drift,
    /// Some nodes: retries after back-off, or new Nodes in the cluster.
    Nodes,
}

/// What a finished round leaves behind (for logs, tests and benchmarks).
#[derive(Clone, Debug)]
pub struct RoundRecord {
    /// Its kind.
    pub kind: RoundKind,
    /// The revision it applied (or rejected).
    pub revision: String,
    /// Nodes it covered.
    pub nodes: usize,
    /// Nodes it changed (or, in a dry run, found changes on).
    pub changed: usize,
    /// Nodes that failed.
    pub failed: usize,
    /// The earliest webhook delivery that led to it.
    pub webhook_received: Option<Instant>,
    /// When the apply finished (before the status write).
    pub applied_at: Instant,
    /// The status commit it made, if the status changed.
    pub status_commit: Option<String>,
}

/// The revision in force.
struct Applied {
    revision: String,
    desired: Arc<Desired>,
}

/// The daemon's state between rounds.
pub struct Daemon {
    config: Config,
    source: Arc<Source>,
    cluster: Option<Cluster>,
    pool: Pool,
    metrics: Arc<Metrics>,
    ready: Arc<AtomicBool>,
    rounds: broadcast::Sender<RoundRecord>,
    applied: Option<Applied>,
    /// The newest revision examined (status-only commits included).
    seen: Option<String>,
    /// The newest revision that carried more than status, valid or not.
    attempted: Option<String>,
    /// Its diagnostics when it is invalid.
    invalid: Vec<String>,
    /// Where the next `all-since-last-applied` signature check starts: the
    /// last revision applied after its check, or the one read back and
    /// checked (`--verify-since`, the status branch); None until then.
    verified_since: Option<String>,
    status: StatusWriter,
    suspension: crate::daemon::leadership::suspend::Suspension,
    /// The payload last read from `--payload-dir`.
    payload: PayloadCache,
}

impl Daemon {
    /// The daemon's metrics.
    pub(crate) fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The SSH connections the rounds share.
    pub(crate) fn pool(&self) -> &Pool {
        &self.pool
    }

    /// A daemon that has not run a round yet.
    pub fn new(
        config: Config,
        source: Source,
        cluster: Option<Cluster>,
        pool: Pool,
        metrics: Arc<Metrics>,
        ready: Arc<AtomicBool>,
        rounds: broadcast::Sender<RoundRecord>,
    ) -> Self {
        let status = StatusWriter::new(&config, &source);
        let payload = PayloadCache::new(config.payload_dir.clone());
        Self {
            config,
            source: Arc::new(source),
            cluster,
            pool,
            metrics,
            ready,
            rounds,
            applied: None,
            seen: None,
            attempted: None,
            invalid: Vec::new(),
            verified_since: None,
            status,
            payload,
            suspension: crate::daemon::leadership::suspend::Suspension::new(),
        }
    }

    /// The out-of-band suspension this daemon follows.
    pub(crate) fn suspension(&self) -> &crate::daemon::leadership::suspend::Suspension {
        &self.suspension
    }

    /// Follows this out-of-band suspension (`winfleet suspend`).
    pub fn with_suspension(mut self, suspension: crate::daemon::leadership::suspend::Suspension) -> Self {
        self.suspension = suspension;
        self
    }

    /// Who suspended winfleet, while it is: `winfleet suspend`, or the
    /// Fleet's `spec.suspend` in the revision in force.
    fn suspended_by(&self) -> Option<String> {
        if let Some(reason) = self.suspension.reason() {
            return Some(format!("winfleet suspend: {reason}"));
        }
        let by_fleet = self.applied.as_ref().is_some_and(|a| a.desired.fleet.suspend);
        by_fleet.then(|| "spec.suspend in the Fleet".to_owned())
    }

    /// How long running work may take to finish on shutdown.
    pub fn shutdown_timeout(&self) -> Duration {
        self.config.shutdown_timeout
    }

    /// Does `work`; any round it runs is recorded and broadcast.
    pub async fn run(&mut self, work: Work, schedule: &mut Schedule, stop: &CancellationToken) {
        if work.check_source
            && let Some(revision) = self.check_source().await
            && let Some(record) = self.new_revision(revision, schedule, &work, stop).await
        {
            let applied = record.kind == RoundKind::Commit;
            let _ = self.rounds.send(record);
            if applied {
                // The whole fleet was just worked on: that covers the rest.
                schedule.settle(Instant::now());
                return;
            }
        }
        // No new valid revision: the rest of the work runs on the one in force.
        let record = if work.resume {
            self.full_round(RoundKind::Commit, schedule, &work, stop).await
        } else if work.drift {
            self.full_round(RoundKind::Drift, schedule, &work, stop).await
        } else if !work.retry.is_empty() || !work.cluster.is_empty() {
            self.nodes_round(schedule, &work, stop).await
        } else {
            None
        };
        if let Some(record) = record {
            let _ = self.rounds.send(record);
        }
        schedule.settle(Instant::now());
    }

    /// Runs a Git operation on the source off the async threads, bounded
    /// by [`GIT_TIMEOUT`] (libgit2 has no timeout of its own here).
    async fn git<T: Send + 'static>(
        &self,
        what: &str,
        f: impl FnOnce(&Source) -> Result<T, SourceFailure> + Send + 'static,
    ) -> Result<T, String> {
        let source = Arc::clone(&self.source);
        match tokio::time::timeout(GIT_TIMEOUT, tokio::task::spawn_blocking(move || f(&source))).await {
            Ok(Ok(result)) => result.map_err(|e| e.to_string()),
            Ok(Err(e)) => Err(format!("{what}: {e}")),
            Err(_) => Err(format!("{what} took longer than {}s; the next check tries again", GIT_TIMEOUT.as_secs())),
        }
    }

    /// Fetches without running a round (a follower stays ready for handover).
    pub async fn probe_source(&mut self) {
        let started = Instant::now();
        let head = self.git("reading the source", Source::head).await;
        self.metrics.git_fetch(started.elapsed(), head.is_ok());
        match head {
            Ok(_) => self.ready.store(true, Ordering::Relaxed),
            Err(e) => tracing::warn!(error = %e, "cannot read the source"),
        }
    }

    /// The newest revision when it is new and carries more than status.
    async fn check_source(&mut self) -> Option<String> {
        let started = Instant::now();
        let head = self.git("reading the source", Source::head).await;
        self.metrics.git_fetch(started.elapsed(), head.is_ok());
        let head = match head {
            Ok(head) => head,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the source; the revision in force stays");
                return None;
            }
        };
        self.ready.store(true, Ordering::Relaxed);
        let seen = match self.seen.clone() {
            None => return Some(head),
            Some(seen) if seen == head => return None,
            Some(seen) => seen,
        };
        // Status commits on the tracked branch (or a human touching only
        // status files) never trigger a round.
        let status_path = self.applied.as_ref().map(|a| a.desired.fleet.status_path.clone());
        if let Some(path) = status_path {
            let (from, to) = (seen.clone(), head.clone());
            let compared =
                self.git("comparing revisions", move |source| source.only_status_changes(&from, &to, &path)).await;
            match compared {
                Ok(true) => {
                    tracing::debug!(revision = %head, "only status changed; no round");
                    self.seen = Some(head);
                    return None;
                }
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "cannot compare revisions; treating the head as new"),
            }
        }
        Some(head)
    }

    /// Loads `revision`; applies it when valid, records its diagnostics
    /// when not (nothing applied; the revision in force stays).
    async fn new_revision(
        &mut self,
        revision: String,
        schedule: &mut Schedule,
        work: &Work,
        stop: &CancellationToken,
    ) -> Option<RoundRecord> {
        self.seen = Some(revision.clone());
        self.attempted = Some(revision.clone());
        let started = Instant::now();
        if let Some(refusal) = self.untrusted(&revision).await {
            let record = self.reject(revision, vec![refusal.why], started, schedule, work).await;
            if refusal.retry {
                // Not the commit's fault: checked again at the next poll.
                self.seen = None;
            }
            return Some(record);
        }
        let Some(loaded) = self.load(&revision).await else {
            // Not the commit's fault: try again on the next check.
            self.seen = None;
            return None;
        };
        let Some(desired) = loaded.desired else {
            let errors = loaded.diagnostics.iter().filter(|d| d.is_error()).map(ToString::to_string).collect();
            return Some(self.reject(revision, errors, started, schedule, work).await);
        };
        self.invalid.clear();
        schedule.reset_backoff();
        schedule.set_drift_every(desired.fleet.drift_interval, Instant::now());
        if self.config.verify.is_some() {
            self.verified_since = Some(revision.clone());
        }
        self.applied = Some(Applied { revision, desired: Arc::new(desired) });
        self.metrics.set_applied_revision(self.applied.as_ref().map_or("", |a| a.revision.as_str()));
        self.full_round(RoundKind::Commit, schedule, work, stop).await
    }

    /// Reads and validates `revision`; `None` when it cannot be read.
    async fn load(&self, revision: &str) -> Option<Loaded> {
        let (rev, path) = (revision.to_owned(), self.config.path.clone());
        let read = move |source: &Source| Ok(crate::source::select(source.snapshot(&rev)?, path.as_deref())?);
        match self.git("reading the revision", read).await {
            Ok(snapshot) => {
                Some(desired::load(&snapshot, LoadOptions { pull_secret: self.config.pull_secret.as_ref() }))
            }
            Err(e) => {
                tracing::warn!(revision = %revision, error = %e, "cannot read the revision");
                None
            }
        }
    }

    /// Every instance (nodes backing off are left out of drift checks,
    /// unless their retry is part of this work).
    async fn full_round(
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
    async fn nodes_round(
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
        let applied_at = Instant::now();
        let (changed, failed) = self.after_round(&report, kind, schedule, suspended.is_some());
        let result = if failed > 0 { "failed" } else { "succeeded" };
        self.metrics.round_finished(result, started.elapsed());
        let seconds = started.elapsed().as_secs_f64();
        let (revision_short, nodes) = (short(&revision), report.nodes.len());
        if failed > 0 {
            tracing::warn!(kind = ?kind, revision = %revision_short, nodes, changed, failed, seconds, "round finished with failures");
        } else {
            tracing::info!(kind = ?kind, revision = %revision_short, nodes, changed, failed, seconds, "round finished");
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
