//! When the next round runs and what it covers: a pure state machine over
//! [`Instant`]s (no sleeping here; the loop sleeps until [`Schedule::next_wake`]).
//!
//! Triggers that arrive while a round runs are merged into one [`Work`];
//! the loop takes it as soon as the round ends, so any burst becomes exactly
//! one follow-up round. Per-node back-off keeps a failing node from being
//! hammered while the rest of the fleet carries on.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use tokio::time::Instant;

use crate::daemon::triggers::Trigger;
use crate::reconcile::report::RoundReport;
use crate::status::model::ErrorClass;
use crate::status::verdict::{self, Context};

/// First retry delay after a transient node failure.
pub const BACKOFF_BASE: Duration = Duration::from_secs(10);
/// Longest delay between retries of a failing node.
pub const BACKOFF_CAP: Duration = Duration::from_secs(600);
/// Retry delay for a node waiting on something outside winfleet (a
/// PodDisruptionBudget, a missing Node): no exponential growth.
pub const WAITING_RETRY: Duration = Duration::from_secs(60);

/// What the next round has to do, merged from every trigger since the last.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Work {
    /// Check the source for a new revision (start, poll, webhook, fs watch).
    pub check_source: bool,
    /// Re-observe every node (drift timer).
    pub drift: bool,
    /// Re-run these instances (their back-off expired).
    pub retry: BTreeSet<String>,
    /// Nodes or Machines that appeared in the cluster: the addresses of each.
    pub cluster: BTreeSet<Vec<String>>,
    /// The earliest webhook delivery merged into this work.
    pub webhook_received: Option<Instant>,
    /// Resumed: apply the revision in force to the whole fleet.
    pub resume: bool,
}

impl Work {
    fn is_empty(&self) -> bool {
        !self.check_source && !self.drift && !self.resume && self.retry.is_empty() && self.cluster.is_empty()
    }

    fn merge(&mut self, trigger: Trigger) {
        match trigger {
            Trigger::Poll | Trigger::FsChange => self.check_source = true,
            Trigger::Webhook { received } => {
                self.check_source = true;
                self.webhook_received = Some(self.webhook_received.map_or(received, |r| r.min(received)));
            }
            Trigger::Drift => self.drift = true,
            Trigger::Resumed => {
                self.resume = true;
                self.check_source = true;
            }
            Trigger::ClusterChange { addresses } => {
                self.cluster.insert(addresses);
            }
        }
    }
}

/// How a node's round ended, for its back-off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeOutcome {
    /// Done without failure: its back-off is cleared.
    Succeeded,
    /// Failed in a way that may pass by itself (SSH, the API): retried
    /// with exponential back-off and jitter.
    Transient,
    /// Waiting on something outside winfleet: retried at a fixed interval.
    Waiting,
}

#[derive(Clone, Copy, Debug)]
struct Backoff {
    failures: u32,
    until: Instant,
    /// Handed to a round whose outcome for it is not known yet.
    in_flight: bool,
}

/// The daemon's timers, pending work and per-node back-off.
#[derive(Debug)]
pub struct Schedule {
    poll_every: Duration,
    drift_every: Duration,
    next_poll: Instant,
    next_drift: Instant,
    pending: Work,
    backoff: BTreeMap<String, Backoff>,
    rng: fastrand::Rng,
}

impl Schedule {
    /// A schedule whose first round (a source check) is due at once.
    pub fn new(now: Instant, poll_every: Duration, drift_every: Duration, seed: u64) -> Self {
        let mut schedule = Self {
            poll_every,
            drift_every,
            next_poll: now,
            next_drift: later(now, drift_every),
            pending: Work { check_source: true, ..Work::default() },
            backoff: BTreeMap::new(),
            rng: fastrand::Rng::with_seed(seed),
        };
        schedule.next_poll = later(now, schedule.jittered(poll_every, 0.05));
        schedule
    }

    /// Merges a trigger into the pending work.
    pub fn trigger(&mut self, trigger: Trigger) {
        self.pending.merge(trigger);
    }

    /// The drift interval of the revision in force.
    pub fn set_drift_every(&mut self, drift_every: Duration, now: Instant) {
        if drift_every != self.drift_every {
            self.drift_every = drift_every;
            self.next_drift = self.next_drift.min(later(now, drift_every));
        }
    }

    /// When something is due next: now when work is pending.
    pub fn next_wake(&self, now: Instant) -> Instant {
        if !self.pending.is_empty() {
            return now;
        }
        let retry = self.backoff.values().filter(|b| !b.in_flight).map(|b| b.until).min();
        [Some(self.next_poll), Some(self.next_drift), retry].into_iter().flatten().min().unwrap_or(now)
    }

    /// Takes the pending work, with every timer due by `now` merged in.
    pub fn take(&mut self, now: Instant) -> Option<Work> {
        if now >= self.next_poll {
            self.pending.check_source = true;
            self.next_poll = later(now, self.jittered(self.poll_every, 0.05));
        }
        if now >= self.next_drift {
            self.pending.drift = true;
            // Pushed again when the round ends; this keeps a slow round
            // from being re-triggered by its own timer.
            self.next_drift = later(now, self.drift_every);
        }
        for (address, backoff) in &mut self.backoff {
            if now >= backoff.until && !backoff.in_flight {
                // Until the round reports on it (see `settle`).
                backoff.in_flight = true;
                self.pending.retry.insert(address.clone());
            }
        }
        if self.pending.is_empty() {
            return None;
        }
        Some(std::mem::take(&mut self.pending))
    }

    /// After a round: retries it did not report on (it stopped, the new
    /// head was invalid, a follower took the work) are due again soon.
    pub fn settle(&mut self, now: Instant) {
        for backoff in self.backoff.values_mut().filter(|b| b.in_flight) {
            backoff.in_flight = false;
            backoff.until = later(now, BACKOFF_BASE);
        }
    }

    /// A round observed every node: the next drift check is a whole
    /// interval away.
    pub fn observed_all(&mut self, now: Instant) {
        self.next_drift = later(now, self.drift_every);
    }

    /// A new revision: every node gets a fresh start.
    pub fn reset_backoff(&mut self) {
        self.backoff.clear();
    }

    /// Whether a node is waiting out its back-off (left out of drift rounds).
    pub fn backing_off(&self, address: &str, now: Instant) -> bool {
        self.backoff.get(address).is_some_and(|b| b.in_flight || now < b.until)
    }

    /// Records how a node's round ended; returns the delay before its retry.
    pub fn node_done(&mut self, address: &str, outcome: NodeOutcome, now: Instant) -> Option<Duration> {
        let delay = match outcome {
            NodeOutcome::Succeeded => {
                self.backoff.remove(address);
                return None;
            }
            NodeOutcome::Waiting => {
                self.backoff.remove(address);
                self.jittered(WAITING_RETRY, 0.1)
            }
            NodeOutcome::Transient => {
                let failures = self.backoff.get(address).map_or(0, |b| b.failures) + 1;
                let exponent = failures.saturating_sub(1).min(16);
                let delay = BACKOFF_BASE.saturating_mul(1 << exponent).min(BACKOFF_CAP);
                let delay = self.jittered(delay, 0.2);
                self.backoff
                    .insert(address.to_owned(), Backoff { failures, until: later(now, delay), in_flight: false });
                return Some(delay);
            }
        };
        self.backoff.insert(address.to_owned(), Backoff { failures: 0, until: later(now, delay), in_flight: false });
        Some(delay)
    }

    /// Forgets nodes no longer in the fleet.
    pub fn retain(&mut self, keep: impl Fn(&str) -> bool) {
        self.backoff.retain(|address, _| keep(address));
    }

    /// `base` scaled by a random factor in `1 ± spread`.
    fn jittered(&mut self, base: Duration, spread: f64) -> Duration {
        let factor = 1.0 + spread * (self.rng.f64() * 2.0 - 1.0);
        Duration::try_from_secs_f64(base.as_secs_f64() * factor).unwrap_or(base)
    }
}

/// How each node of a round ended, for its back-off. The node's status
/// verdict is the one classification ([`crate::status::verdict::instance`]):
/// its error class decides (transient: back-off with jitter; waiting: the
/// set delay; invalid, or no error: nothing to retry until a new revision
/// or the next drift check). Nodes the round says nothing new about are
/// absent.
pub fn node_outcomes(report: &RoundReport, drift_check: bool, warn: bool) -> BTreeMap<&str, NodeOutcome> {
    let ctx = Context { round: report, drift_check, warn, at_revision: true, suspended: false };
    report
        .nodes
        .iter()
        .filter_map(|node| Some((node.address.as_str(), outcome(verdict::instance(node, ctx)?.class))))
        .collect()
}

/// The schedule's reading of a status error class.
pub fn outcome(class: Option<ErrorClass>) -> NodeOutcome {
    match class {
        Some(ErrorClass::Transient) => NodeOutcome::Transient,
        Some(ErrorClass::Waiting) => NodeOutcome::Waiting,
        Some(ErrorClass::Invalid) | None => NodeOutcome::Succeeded,
    }
}

/// `now + delay`, saturating (a drift interval of centuries must not panic).
fn later(now: Instant, delay: Duration) -> Instant {
    now.checked_add(delay).unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 24 * 3600))
}

#[cfg(test)]
#[path = "schedule_tests.rs"]
mod tests;
