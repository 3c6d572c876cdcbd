//! Leader election on a `coordination.k8s.io/v1` Lease, so that of the
//! daemon's replicas only one reconciles and the others stand ready to take
//! over. The semantics are client-go's `leaderelection` package with a
//! LeaseLock:
//!
//! - A candidate creates the Lease when there is none, and takes it over
//!   when its holder is empty or has not renewed it for
//!   `leaseDurationSeconds`. Expiry is judged on the candidate's own clock:
//!   it remembers when it last saw the Lease's spec change, so clock skew
//!   between pods does not matter (`renewTime` is for people to read).
//! - Every write is a replace carrying the resourceVersion that was read:
//!   of two candidates racing for the Lease, one gets 409 Conflict and reads
//!   again. A change of holder bumps `leaseTransitions`.
//! - The leader renews every renew period. It steps down at once when the
//!   Lease shows another holder, and when no renewal has succeeded for
//!   lease duration − renew period (client-go's RenewDeadline, 10 s with the
//!   defaults): strictly before any follower may see the Lease as expired.
//! - On shutdown a leader releases the Lease (holder cleared,
//!   `leaseDurationSeconds: 1`, like client-go's ReleaseOnCancel), so a
//!   follower takes over at its next try instead of waiting for expiry.
//!
//! - The leader advertises where its webhook answers in the Lease's
//!   `winfleet.io/webhook-url` annotation; every replica publishes the
//!   current holder's address ([`Elected::leader_webhook`]), so a follower
//!   that receives a webhook hands it to the leader (`forward.rs`).
//!
//! The decisions (expiry, the spec to write) are pure functions in `spec.rs`,
//! the configuration and the advertised webhook in `config.rs`; the task
//! started by [`spawn`] does the requests. It never panics: every API error
//! is logged and retried.
//!
//! Hand-written: kube-runtime 5 has no leader election; kube-lease-manager
//! 0.12 is on kube 4 (a second kube and k8s-openapi in the build) and
//! kube-leader-election 0.37 on kube 0.96 and judges expiry by timestamps
//! (clock skew matters); neither carries the webhook URL or the suspension
//! in the Lease's annotations (docs/dependencies.md).

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::Api;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

mod config;
mod spec;

pub use config::{DEFAULT_NAME, LeaseConfig, WEBHOOK_ANNOTATION, default_identity};

use crate::cluster::post_params;
use crate::daemon::leadership::suspend::{ANNOTATION as SUSPENDED, Suspension};

use config::{advertised, webhook_of};
use spec::{Timing, Verdict, claim, decide, expired, holder, released, timing};

/// A running election.
pub struct Elected {
    /// Whether this process leads right now; turns false at once when
    /// leadership is lost or shutdown begins.
    pub leading: watch::Receiver<bool>,
    /// The webhook URL the current holder advertises, as last read (None:
    /// no valid holder, or it advertises none).
    pub leader_webhook: watch::Receiver<Option<String>>,
    /// The election task; ends after shutdown (and the release).
    pub task: JoinHandle<()>,
}

/// Runs the election until `shutdown` is cancelled. On shutdown while
/// holding the Lease, the task releases it before it ends.
pub fn spawn(client: Client, config: LeaseConfig, shutdown: CancellationToken) -> Elected {
    spawn_with(client, config, shutdown, None)
}

/// [`spawn`], keeping `suspension` in the Lease: the leader writes it into
/// the `winfleet.io/suspended` annotation at every renewal, a follower
/// adopts what it reads (so a new leader stays suspended).
pub fn spawn_with(
    client: Client,
    config: LeaseConfig,
    shutdown: CancellationToken,
    suspension: Option<Suspension>,
) -> Elected {
    let (leading, rx) = watch::channel(false);
    let (leader_webhook, webhook_rx) = watch::channel(None);
    let elector = Elector {
        api: Api::namespaced(client, &config.namespace),
        timing: timing(&config),
        config,
        leading,
        leader_webhook,
        suspension,
        observed: None,
    };
    Elected { leading: rx, leader_webhook: webhook_rx, task: tokio::spawn(elector.run(shutdown)) }
}

/// A failed Lease request (logged, then retried).
#[derive(Debug, thiserror::Error)]
enum LeaseError {
    /// The API refused or failed a request.
    #[error("{verb} Lease {lease}: {message}")]
    Api {
        /// reading, creating or updating.
        verb: &'static str,
        /// namespace/name.
        lease: String,
        /// The API's words.
        message: String,
    },
    /// No answer in time.
    #[error("Lease {lease}: no answer within {after:?}")]
    Timeout {
        /// namespace/name.
        lease: String,
        /// How long the request was given.
        after: Duration,
    },
}

/// What one attempt to acquire or renew found.
enum Outcome {
    /// This process holds the Lease now.
    Leading,
    /// Another process holds it.
    Held(String),
    /// Another write came first (409); read again.
    Conflict,
}

/// Why a leader stopped leading.
enum Stop {
    Shutdown,
    Lost(String),
}

struct Elector {
    api: Api<Lease>,
    config: LeaseConfig,
    timing: Timing,
    leading: watch::Sender<bool>,
    leader_webhook: watch::Sender<Option<String>>,
    suspension: Option<Suspension>,
    /// The spec last read and when this process first saw it.
    observed: Option<(LeaseSpec, Instant)>,
}

impl Elector {
    fn lease(&self) -> String {
        format!("{}/{}", self.config.namespace, self.config.name)
    }

    fn api_error(&self, verb: &'static str, e: &kube::Error) -> LeaseError {
        let message = match e {
            kube::Error::Api(s) => format!("{} {}: {}", s.code, s.reason, s.message),
            other => other.to_string(),
        };
        LeaseError::Api { verb, lease: self.lease(), message }
    }

    fn set_leading(&self, leading: bool) {
        self.leading.send_if_modified(|l| std::mem::replace(l, leading) != leading);
    }

    /// A follower (or a new leader) takes the suspension the Lease records.
    fn adopt_suspension(&self, metadata: &ObjectMeta) {
        if let Some(suspension) = &self.suspension {
            let reason = metadata.annotations.as_ref().and_then(|a| a.get(SUSPENDED));
            suspension.set(reason.map(String::as_str));
        }
    }

    /// The annotations a holder writes: its webhook URL and its suspension.
    fn annotate(&self, annotations: Option<BTreeMap<String, String>>) -> Option<BTreeMap<String, String>> {
        let mut annotations = advertised(annotations, self.config.advertise.as_deref()).unwrap_or_default();
        if let Some(suspension) = &self.suspension {
            match suspension.reason() {
                Some(reason) => annotations.insert(SUSPENDED.to_owned(), reason),
                None => annotations.remove(SUSPENDED),
            };
        }
        (!annotations.is_empty()).then_some(annotations)
    }

    fn set_leader_webhook(&self, url: Option<String>) {
        self.leader_webhook.send_if_modified(|u| {
            *u != url && {
                *u = url;
                true
            }
        });
    }

    /// When this process first saw `spec`.
    fn observe(&mut self, spec: &LeaseSpec) -> Instant {
        match &self.observed {
            Some((seen, at)) if seen == spec => *at,
            _ => {
                let at = Instant::now();
                self.observed = Some((spec.clone(), at));
                at
            }
        }
    }

    async fn run(mut self, shutdown: CancellationToken) {
        let lease = self.lease();
        let identity = self.config.identity.clone();
        loop {
            let Some(renewed) = self.follow(&shutdown).await else { break };
            self.set_leading(true);
            info!(lease = %lease, identity = %identity, "became leader");
            match self.lead(&shutdown, renewed).await {
                Stop::Shutdown => break,
                Stop::Lost(reason) => {
                    self.set_leading(false);
                    info!(lease = %lease, identity = %identity, reason = %reason, "lost leadership");
                }
            }
            if !pause(&shutdown, self.timing.retry_every).await {
                break;
            }
        }
        self.set_leading(false);
        // Also when following: an acquire cut short by the shutdown may
        // have been written. `release` only touches a Lease naming us.
        self.release().await;
    }

    /// Tries every retry period (with jitter, as client-go) until this
    /// process holds the Lease; returns when the winning attempt started,
    /// or None on shutdown.
    async fn follow(&mut self, shutdown: &CancellationToken) -> Option<Instant> {
        loop {
            let started = Instant::now();
            let attempt = tokio::select! {
                () = shutdown.cancelled() => return None,
                attempt = self.attempt(false) => attempt,
            };
            match attempt {
                Ok(Outcome::Leading) => return Some(started),
                Ok(Outcome::Held(holder)) => debug!(lease = %self.lease(), holder = %holder, "Lease held"),
                Ok(Outcome::Conflict) => debug!(lease = %self.lease(), "Lease changed while acquiring"),
                Err(e) => warn!(error = %e, "leader election: acquiring failed; retrying"),
            }
            if !pause(shutdown, jittered(self.timing.retry_every)).await {
                return None;
            }
        }
    }

    /// Renews until shutdown or until leadership is lost. `renewed` is when
    /// the last successful write was started: the Lease is ours until at
    /// least then + lease duration, so stepping down at then + renew
    /// deadline is always in time.
    async fn lead(&mut self, shutdown: &CancellationToken, mut renewed: Instant) -> Stop {
        let t = self.timing;
        let mut next = renewed + t.renew_every;
        loop {
            let deadline = renewed + t.renew_deadline;
            tokio::select! {
                () = shutdown.cancelled() => return Stop::Shutdown,
                () = tokio::time::sleep_until(next.min(deadline)) => {}
            }
            let started = Instant::now();
            let attempt = tokio::select! {
                () = shutdown.cancelled() => return Stop::Shutdown,
                () = tokio::time::sleep_until(deadline) => {
                    return Stop::Lost(format!("not renewed within {:?}", t.renew_deadline));
                }
                attempt = self.attempt(true) => attempt,
            };
            match attempt {
                Ok(Outcome::Leading) => {
                    renewed = started;
                    next = started + t.renew_every;
                    continue;
                }
                Ok(Outcome::Held(holder)) => return Stop::Lost(format!("the Lease is held by {holder}")),
                Ok(Outcome::Conflict) => debug!(lease = %self.lease(), "Lease changed while renewing"),
                Err(e) => warn!(error = %e, "leader election: renewing failed; retrying"),
            }
            next = Instant::now() + t.retry_every.min(t.renew_every);
        }
    }

    /// One acquire-or-renew, bounded in time.
    async fn attempt(&mut self, leading: bool) -> Result<Outcome, LeaseError> {
        let after = self.timing.renew_deadline;
        match tokio::time::timeout(after, self.try_acquire_or_renew(leading)).await {
            Ok(result) => result,
            Err(_) => Err(LeaseError::Timeout { lease: self.lease(), after }),
        }
    }

    async fn try_acquire_or_renew(&mut self, leading: bool) -> Result<Outcome, LeaseError> {
        let name = self.config.name.clone();
        let found = self.api.get_opt(&name).await.map_err(|e| self.api_error("reading", &e))?;
        let me = self.config.identity.clone();
        let Some(mut lease) = found else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(name),
                    namespace: Some(self.config.namespace.clone()),
                    annotations: self.annotate(None),
                    ..ObjectMeta::default()
                },
                spec: Some(claim(None, &me, self.timing.lease_seconds, Timestamp::now())),
            };
            return match self.api.create(&post_params(), &lease).await {
                Ok(stored) => {
                    self.observe(&stored.spec.unwrap_or_default());
                    self.set_leader_webhook(self.config.advertise.clone());
                    Ok(Outcome::Leading)
                }
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(Outcome::Conflict),
                Err(e) => Err(self.api_error("creating", &e)),
            };
        };
        let old = lease.spec.take().unwrap_or_default();
        let seen = self.observe(&old);
        let expired = expired(&old, seen, Instant::now());
        match decide(&old, expired, leading, &me, self.timing.lease_seconds, Timestamp::now()) {
            Verdict::Held(holder) => {
                self.set_leader_webhook(webhook_of(&lease.metadata));
                self.adopt_suspension(&lease.metadata);
                Ok(Outcome::Held(holder))
            }
            Verdict::Write(spec) => {
                if !leading {
                    // Taking the Lease over: a suspension recorded in it holds.
                    self.adopt_suspension(&lease.metadata);
                }
                lease.spec = Some(spec);
                lease.metadata.annotations = self.annotate(lease.metadata.annotations.take());
                match self.api.replace(&name, &post_params(), &lease).await {
                    Ok(stored) => {
                        self.observe(&stored.spec.unwrap_or_default());
                        self.set_leader_webhook(self.config.advertise.clone());
                        Ok(Outcome::Leading)
                    }
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(Outcome::Conflict),
                    Err(e) => Err(self.api_error("updating", &e)),
                }
            }
        }
    }

    /// Gives the Lease up if it names this process, within the renew deadline.
    async fn release(&self) {
        let after = self.timing.renew_deadline;
        match tokio::time::timeout(after, self.try_release()).await {
            Ok(Ok(true)) => info!(lease = %self.lease(), identity = %self.config.identity, "released"),
            Ok(Ok(false)) => {}
            Ok(Err(e)) => warn!(error = %e, "leader election: releasing failed"),
            Err(_) => {
                warn!(error = %LeaseError::Timeout { lease: self.lease(), after }, "leader election: releasing failed")
            }
        }
    }

    async fn try_release(&self) -> Result<bool, LeaseError> {
        let name = &self.config.name;
        let found = self.api.get_opt(name).await.map_err(|e| self.api_error("reading", &e))?;
        let Some(mut lease) = found else { return Ok(false) };
        let old = lease.spec.take().unwrap_or_default();
        if holder(&old) != Some(self.config.identity.as_str()) {
            return Ok(false);
        }
        lease.spec = Some(released(&old, Timestamp::now()));
        lease.metadata.annotations = advertised(lease.metadata.annotations.take(), None);
        self.api.replace(name, &post_params(), &lease).await.map_err(|e| self.api_error("updating", &e))?;
        Ok(true)
    }
}

/// Waits `period`; false if `shutdown` came first.
async fn pause(shutdown: &CancellationToken, period: Duration) -> bool {
    tokio::select! {
        () = shutdown.cancelled() => false,
        () = tokio::time::sleep(period) => true,
    }
}

/// `period` plus up to a fifth more, so followers started together spread
/// their tries (client-go's JitterUntil with factor 1.2).
fn jittered(period: Duration) -> Duration {
    let extra = u64::try_from(period.as_millis() / 5).unwrap_or(0);
    period + Duration::from_millis(fastrand::u64(0..=extra))
}
