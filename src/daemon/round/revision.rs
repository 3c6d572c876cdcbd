//! A new revision: the source read off the async threads (bounded by
//! [`GIT_TIMEOUT`]), whether its head is new and carries more than status,
//! and the revision loaded and validated; a valid one is taken in force and
//! applied to the whole fleet, an invalid one is rejected (see
//! [`super::record`]) and the revision in force stays.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Applied, Daemon, RoundKind, RoundRecord};
use crate::daemon::source::{GIT_TIMEOUT, Source, SourceFailure};
use crate::daemon::triggers::schedule::{Schedule, Work};
use crate::desired::{self, LoadOptions, Loaded};

impl Daemon {
    /// Runs a Git operation on the source off the async threads, bounded
    /// by [`GIT_TIMEOUT`] (libgit2 has no timeout of its own here).
    pub(super) async fn git<T: Send + 'static>(
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
    pub(super) async fn check_source(&mut self) -> Option<String> {
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
    pub(super) async fn new_revision(
        &mut self,
        revision: String,
        schedule: &mut Schedule,
        work: &Work,
        stop: &CancellationToken,
    ) -> Option<RoundRecord> {
        self.seen = Some(revision.clone());
        self.attempted = Some(revision.clone());
        let started = Instant::now();
        // Loaded before its signatures are checked (loading is pure and
        // applies nothing): its Fleet says where its status is, and so which
        // commits are winfleet's own and which status branch to read back.
        let Some(loaded) = self.load(&revision).await else {
            // Not the commit's fault: try again on the next check.
            self.seen = None;
            return None;
        };
        self.head_status = super::verify::HeadStatus::of(&loaded);
        self.status.place_unapplied(&self.head_status.fleet);
        if let Some(refusal) = self.untrusted(&revision).await {
            let record = self.reject(revision, vec![refusal.why], started, schedule, work).await;
            if refusal.retry {
                // Not the commit's fault: checked again at the next poll.
                self.seen = None;
            }
            return Some(record);
        }
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
        self.metrics.set_applied_revision(&revision);
        self.applied = Some(Applied { revision: revision.clone(), desired: Arc::new(desired) });
        let record = self.full_round(RoundKind::Commit, schedule, work, stop).await;
        if record.as_ref().is_some_and(|r| r.failed == 0) {
            self.commit_latency(revision).await;
        }
        record
    }

    /// Observes how long `revision` took from its commit to applied.
    async fn commit_latency(&self, revision: String) {
        match self.git("reading the commit time", move |source| source.committed_at(&revision)).await {
            Ok(committed) => self.metrics.revision_applied((jiff::Timestamp::now().as_second() - committed) as f64),
            Err(e) => tracing::debug!(error = %e, "cannot read the commit time; the latency is not measured"),
        }
    }

    /// Reads and validates `revision`; `None` when it cannot be read.
    pub(super) async fn load(&self, revision: &str) -> Option<Loaded> {
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
}
