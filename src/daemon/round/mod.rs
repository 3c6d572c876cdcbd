//! One unit of work: check the source, then run the round the work calls
//! for (a new commit, a drift check, retries of some nodes), then write the
//! status. One commit is one transaction: an invalid commit changes nothing
//! and the last applied revision stays in force.
//!
//! Here: the daemon's state between rounds and the dispatch of one unit of
//! work. A new revision is read, checked and loaded in [`revision`] (its
//! signatures in [`verify`]); a round on the revision in force runs in
//! [`execute`], over the instances [`scope`] picks, with the payload
//! [`payload`] keeps; what it leaves behind is [`record`]'s.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use tokio::sync::broadcast;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::Config;
use super::report::StatusWriter;
use super::source::Source;
use crate::cluster::connect::Cluster;
use crate::cluster::events::Backlog;
use crate::daemon::http::metrics::Metrics;
use crate::daemon::round::payload::PayloadCache;
use crate::daemon::triggers::schedule::{Schedule, Work};
use crate::desired::model::Desired;
use crate::ssh::Pool;

mod execute;
mod payload;
mod record;
mod revision;
pub mod scope;
mod verify;

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
    /// What failed: nodes (a node the round did not finish included), and
    /// each failure of the cluster part (a join, a write, a reboot, a
    /// cluster that could not be read). Above zero exactly when
    /// [`crate::reconcile::report::RoundReport::failed`] is, `apply`'s exit
    /// status 1: the round is counted `failed`.
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
    /// Where the newest head loaded puts its status (the defaults until one is).
    head_status: verify::HeadStatus,
    status: StatusWriter,
    suspension: crate::daemon::leadership::suspend::Suspension,
    /// The payload last read from `--payload-dir`.
    payload: PayloadCache,
    /// Events the API server could not take yet, kept between rounds.
    events: Backlog,
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
            head_status: verify::HeadStatus::default(),
            status,
            payload,
            suspension: crate::daemon::leadership::suspend::Suspension::new(),
            events: Backlog::default(),
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
    pub(crate) fn suspended_by(&self) -> Option<String> {
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
}
