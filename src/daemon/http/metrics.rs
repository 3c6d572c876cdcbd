//! The daemon's Prometheus metrics: one registry, the `winfleet_` families,
//! and their OpenMetrics text encoding for `GET /metrics`.
//!
//! This module only counts what the daemon tells it; it never reads the
//! clock, the cluster or the repository itself. Label values come from the
//! daemon's own small vocabularies (round results, phases, SSH stages,
//! webhook results), never from request bodies, so the label cardinality
//! stays bounded.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::{Registry, Unit};

/// One label: `(name, value)`.
type Label = [(&'static str, String); 1];

/// The round results [`Metrics::round_finished`] expects; pre-created at 0.
const ROUND_RESULTS: [&str; 3] = ["succeeded", "failed", "invalid"];
/// The SSH stages [`Metrics::ssh_error`] expects; pre-created at 0.
const SSH_STAGES: [&str; 3] = ["observe", "apply", "reboot"];
/// The kinds of SSH traffic [`Metrics::ssh_traffic`] counts; pre-created at 0.
const SSH_TRAFFIC: [&str; 3] = ["connections", "channels", "scripts"];
/// The webhook results [`Metrics::webhook_request`] expects; pre-created at 0.
const WEBHOOK_RESULTS: [&str; 6] = ["accepted", "forwarded", "ignored", "unauthorized", "bad_request", "too_large"];

/// Round durations from 50 ms doubling to about 27 minutes (16 buckets): a
/// no-op round is sub-second, a rolling reboot of a fleet takes many minutes.
fn round_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.05, 2.0, 16))
}

/// From a commit to its revision applied: 1 s doubling to about 2.3 hours
/// (14 buckets); a webhook-driven rollout takes seconds, a rolling reboot
/// of a large fleet an hour or more.
fn commit_buckets() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 2.0, 14))
}

/// Fetch durations from 10 ms doubling to about 2.7 minutes (15 buckets).
fn fetch_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.01, 2.0, 15))
}

fn label(name: &'static str, value: &str) -> Label {
    [(name, value.to_owned())]
}

/// Locks a mutex, recovering the data if a panicking holder poisoned it:
/// the guarded values are plain bookkeeping that stays consistent.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Every metric the daemon exposes, registered under the `winfleet_` prefix.
///
/// Cheap to share behind an `Arc`: every method takes `&self`.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    round_duration: Histogram,
    commit_to_applied: Histogram,
    rounds: Family<Label, Counter>,
    nodes: Family<Label, Gauge>,
    /// Every phase ever set, so phases that vanish can be reset to 0.
    phases_seen: Mutex<BTreeSet<String>>,
    drift_detected: Counter,
    ssh_errors: Family<Label, Counter>,
    ssh_traffic: Family<Label, Counter>,
    git_fetch: Family<Label, Histogram, fn() -> Histogram>,
    webhook_requests: Family<Label, Counter>,
    applied_revision: Arc<Mutex<Option<String>>>,
    deconfigure_refused: Gauge,
    leader: Gauge,
    suspended: Gauge,
    last_success: Gauge,
}

impl Metrics {
    /// A fresh registry with every family registered and the known label
    /// values of counters at 0 (so `rate()` sees the first increment).
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("winfleet");
        let round_duration = round_buckets();
        registry.register_with_unit(
            "reconcile_duration",
            "Duration of reconcile rounds",
            Unit::Seconds,
            round_duration.clone(),
        );
        let commit_to_applied = commit_buckets();
        registry.register_with_unit(
            "commit_to_applied",
            "From a revision's commit to the end of the round that applied it, when that round had no failures",
            Unit::Seconds,
            commit_to_applied.clone(),
        );
        let rounds = Family::<Label, Counter>::default();
        registry.register("rounds", "Reconcile rounds by result", rounds.clone());
        let nodes = Family::<Label, Gauge>::default();
        registry.register("nodes", "Managed Windows nodes by phase", nodes.clone());
        let drift_detected = Counter::default();
        registry.register("drift_detected", "Nodes found drifted from their desired state", drift_detected.clone());
        let ssh_errors = Family::<Label, Counter>::default();
        registry.register("ssh_errors", "SSH failures by stage", ssh_errors.clone());
        let ssh_traffic = Family::<Label, Counter>::default();
        registry.register(
            "ssh_traffic",
            "What rounds asked of the nodes over SSH: connections made, channels opened, scripts run (a warm round \
             is one script a node on its kept shell, no connection and no channel)",
            ssh_traffic.clone(),
        );
        let git_fetch = Family::<Label, Histogram, fn() -> Histogram>::new_with_constructor(fetch_buckets);
        registry.register_with_unit(
            "git_fetch_duration",
            "Duration of fetches of the config repository by result",
            Unit::Seconds,
            git_fetch.clone(),
        );
        let webhook_requests = Family::<Label, Counter>::default();
        registry.register("webhook_requests", "Webhook requests by result", webhook_requests.clone());
        let deconfigure_refused = Gauge::default();
        registry.register(
            "deconfigure_refused",
            "1 while the mass-removal guard (prune.maxRemovalPercent) holds every deconfigure back",
            deconfigure_refused.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "leader",
            "1 while this replica reconciles (it holds the Lease, or runs alone)",
            leader.clone(),
        );
        let suspended = Gauge::default();
        registry.register(
            "suspended",
            "1 while winfleet is suspended (winfleet suspend, or the Fleet's spec.suspend): it changes nothing",
            suspended.clone(),
        );
        let last_success = Gauge::default();
        registry.register_with_unit(
            "last_successful_round_timestamp",
            "When the last round that succeeded ended (Unix time)",
            Unit::Seconds,
            last_success.clone(),
        );
        let applied_revision = Arc::new(Mutex::new(None));
        registry.register_collector(Box::new(AppliedRevision(Arc::clone(&applied_revision))));

        // Creating a series is enough to expose it at 0.
        for result in ROUND_RESULTS {
            drop(rounds.get_or_create(&label("result", result)));
        }
        for stage in SSH_STAGES {
            drop(ssh_errors.get_or_create(&label("stage", stage)));
        }
        for kind in SSH_TRAFFIC {
            drop(ssh_traffic.get_or_create(&label("kind", kind)));
        }
        for result in WEBHOOK_RESULTS {
            drop(webhook_requests.get_or_create(&label("result", result)));
        }
        Self {
            registry,
            round_duration,
            commit_to_applied,
            rounds,
            nodes,
            phases_seen: Mutex::new(BTreeSet::new()),
            drift_detected,
            ssh_errors,
            ssh_traffic,
            git_fetch,
            webhook_requests,
            applied_revision,
            deconfigure_refused,
            leader,
            suspended,
            last_success,
        }
    }

    /// Whether this replica reconciles.
    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// Whether winfleet is suspended (out of band or by the Fleet).
    pub fn set_suspended(&self, suspended: bool) {
        self.suspended.set(i64::from(suspended));
    }

    /// Whether the mass-removal guard refused this round's deconfigures.
    pub fn set_deconfigure_refused(&self, refused: bool) {
        self.deconfigure_refused.set(i64::from(refused));
    }

    /// A round ended with `result` (`succeeded`, `failed` or `invalid`)
    /// after `duration`.
    pub fn round_finished(&self, result: &str, duration: Duration) {
        self.round_duration.observe(duration.as_secs_f64());
        self.rounds.get_or_create(&label("result", result)).inc();
        if result == "succeeded" {
            self.last_success.set(jiff::Timestamp::now().as_second());
        }
    }

    /// What a round asked of the nodes over SSH.
    pub fn ssh_traffic(&self, traffic: crate::ssh::Traffic) {
        for (kind, count) in SSH_TRAFFIC.into_iter().zip([traffic.connections, traffic.channels, traffic.scripts]) {
            self.ssh_traffic.get_or_create(&label("kind", kind)).inc_by(count);
        }
    }

    /// The round that applied a new revision ended without failures `seconds` after
    /// its commit (0 when the committer's clock is ahead).
    pub fn revision_applied(&self, seconds: f64) {
        self.commit_to_applied.observe(seconds.max(0.0));
    }

    /// The number of nodes in each phase after a round. Phases set before
    /// but missing from `counts` drop to 0 rather than keep a stale count.
    pub fn set_nodes_by_phase(&self, counts: &BTreeMap<String, u64>) {
        let mut seen = lock(&self.phases_seen);
        for phase in seen.iter().filter(|phase| !counts.contains_key(*phase)) {
            self.nodes.get_or_create(&label("phase", phase)).set(0);
        }
        for (phase, count) in counts {
            let count = i64::try_from(*count).unwrap_or(i64::MAX);
            self.nodes.get_or_create(&label("phase", phase)).set(count);
            seen.insert(phase.clone());
        }
    }

    /// An observation found `nodes` nodes drifted from their desired state.
    pub fn drift_detected(&self, nodes: u64) {
        self.drift_detected.inc_by(nodes);
    }

    /// An SSH session failed at `stage` (`observe`, `apply` or `reboot`).
    pub fn ssh_error(&self, stage: &str) {
        self.ssh_errors.get_or_create(&label("stage", stage)).inc();
    }

    /// A fetch of the config repository took `duration` and succeeded (`ok`)
    /// or failed.
    pub fn git_fetch(&self, duration: Duration, ok: bool) {
        let result = if ok { "ok" } else { "error" };
        self.git_fetch.get_or_create(&label("result", result)).observe(duration.as_secs_f64());
    }

    /// A webhook request ended with `result` (`accepted`, `ignored`,
    /// `unauthorized`, `bad_request` or `too_large`).
    pub fn webhook_request(&self, result: &str) {
        self.webhook_requests.get_or_create(&label("result", result)).inc();
    }

    /// The revision now applied; the previous revision's series disappears.
    pub fn set_applied_revision(&self, revision: &str) {
        *lock(&self.applied_revision) = Some(revision.to_owned());
    }

    /// Every family in the OpenMetrics text format, ending with `# EOF`.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail; an error could only come from a
        // metric's own encoder, and a partial scrape beats a failed one.
        if let Err(error) = prometheus_client::encoding::text::encode(&mut text, &self.registry) {
            tracing::warn!(%error, "encoding metrics failed");
        }
        text
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// `winfleet_applied_revision_info{revision="…"} 1`, for the current
/// revision only. A collector rather than a family because an OpenMetrics
/// info metric has exactly one label set, which changes with each applied
/// revision.
#[derive(Debug)]
struct AppliedRevision(Arc<Mutex<Option<String>>>);

impl Collector for AppliedRevision {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(revision) = lock(&self.0).clone() else { return Ok(()) };
        let info = Info::new(label("revision", &revision));
        let metric = encoder.encode_descriptor(
            "applied_revision",
            "The revision of the config repository last applied",
            None,
            info.metric_type(),
        )?;
        info.encode(metric)
    }
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
