//! Events on the affected Node or MachineSet for every applied change and
//! failure (`events.k8s.io/v1`, through kube's Recorder). Reasons are stable
//! strings (docs/cluster.md lists them); a failing event never fails the
//! change it reports.
//!
//! An event the API server could not take for a reason that passes (it was
//! unreachable, 5xx, 429) waits in a [`Backlog`] and is published, in
//! order, before the next one, or when a round finds the API readable again
//! ([`Events::flush`]); the daemon keeps one backlog for its life.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

use super::{FIELD_MANAGER, MACHINE_API_NAMESPACE};

/// The longest note sent, in bytes (the API refuses one over 1 kB).
const NOTE_BYTES: usize = 1000;

/// Why an event is emitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// A MachineSet was created.
    MachineSetCreated,
    /// A MachineSet was updated.
    MachineSetUpdated,
    /// A MachineSet winfleet managed was deleted.
    MachineSetDeleted,
    /// Writing a MachineSet failed.
    MachineSetFailed,
    /// A MachineSet of the repository's name is not winfleet's.
    MachineSetConflict,
    /// Node labels, annotations or taints were changed.
    NodeMetadataUpdated,
    /// Changing them failed.
    NodeMetadataFailed,
    /// The API rejected the round's cluster plan in its dry run.
    DryRunRejected,
    /// Cordoned for a safe reboot.
    Cordoned,
    /// An eviction is blocked by a PodDisruptionBudget (retried).
    DrainBlocked,
    /// Draining failed or timed out; the node was uncordoned.
    DrainFailed,
    /// The reboot command was sent.
    Rebooting,
    /// The node answered again, Ready, with a new boot; uncordoned.
    Rebooted,
    /// The node did not come back in time; the rollout stopped.
    RebootFailed,
    /// A listed host's kubelet CSR was approved.
    CsrApproved,
    /// A listed host's kubelet CSR breaks the approval rules: left pending.
    CsrRefused,
    /// A CSR names a node close to a listed host's name: left pending.
    CsrNearMatch,
    /// A listed instance became a Ready worker.
    NodeJoined,
    /// Joining a listed instance stopped.
    JoinFailed,
    /// Cordoned for an upgrade to a new payload or services manifest.
    Upgrading,
    /// Upgraded, Ready and uncordoned.
    Upgraded,
    /// An upgrade stopped.
    UpgradeFailed,
    /// Cordoned to deconfigure: the instance left the repository.
    Deconfiguring,
    /// Deconfigured; the Node object is deleted next.
    Deconfigured,
    /// A deconfigure stopped.
    DeconfigureFailed,
    /// The commit would deconfigure more than prune.maxRemovalPercent of
    /// the instances: nobody is deconfigured.
    DeconfigureRefused,
    /// The host accepts the fleet's new SSH key: pub-key-hash updated.
    PublicKeyUpdated,
    /// The host refuses the fleet's new SSH key.
    PublicKeyRejected,
    /// A Machine whose Node trusts an older key was deleted to be replaced.
    MachineReplaced,
    /// A new head is not signed by a trusted key: nothing of it is applied.
    RevisionUntrusted,
    /// Configuring a Machine failed several rounds in a row (never deleted).
    MachineConfigureFailed,
    /// The cluster's prerequisites refuse joins and upgrades (the kubelet's
    /// version skew, the cluster network).
    PrerequisitesNotMet,
    /// Key rotation over a MachineSet stopped: a replacement Machine did
    /// not become a Ready node.
    KeyRotationStopped,
    /// The repository's Proxy or a mirror set differs from the cluster's own
    /// object (reported once per change; never blocks).
    ClusterDisagrees,
    /// A difference reported with `ClusterDisagrees` is gone.
    ClusterAgrees,
}

impl Reason {
    /// The stable reason string.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::MachineSetCreated => "MachineSetCreated",
            Reason::MachineSetUpdated => "MachineSetUpdated",
            Reason::MachineSetDeleted => "MachineSetDeleted",
            Reason::MachineSetFailed => "MachineSetFailed",
            Reason::MachineSetConflict => "MachineSetConflict",
            Reason::NodeMetadataUpdated => "NodeMetadataUpdated",
            Reason::NodeMetadataFailed => "NodeMetadataFailed",
            Reason::DryRunRejected => "DryRunRejected",
            Reason::Cordoned => "Cordoned",
            Reason::DrainBlocked => "DrainBlocked",
            Reason::DrainFailed => "DrainFailed",
            Reason::Rebooting => "Rebooting",
            Reason::Rebooted => "Rebooted",
            Reason::RebootFailed => "RebootFailed",
            Reason::CsrApproved => "CsrApproved",
            Reason::CsrRefused => "CsrRefused",
            Reason::CsrNearMatch => "CsrNearMatch",
            Reason::NodeJoined => "NodeJoined",
            Reason::JoinFailed => "JoinFailed",
            Reason::Upgrading => "Upgrading",
            Reason::Upgraded => "Upgraded",
            Reason::UpgradeFailed => "UpgradeFailed",
            Reason::Deconfiguring => "Deconfiguring",
            Reason::Deconfigured => "Deconfigured",
            Reason::DeconfigureFailed => "DeconfigureFailed",
            Reason::DeconfigureRefused => "DeconfigureRefused",
            Reason::PublicKeyUpdated => "PublicKeyUpdated",
            Reason::PublicKeyRejected => "PublicKeyRejected",
            Reason::MachineReplaced => "MachineReplaced",
            Reason::RevisionUntrusted => "RevisionUntrusted",
            Reason::MachineConfigureFailed => "MachineConfigureFailed",
            Reason::PrerequisitesNotMet => "PrerequisitesNotMet",
            Reason::KeyRotationStopped => "KeyRotationStopped",
            Reason::ClusterDisagrees => "ClusterDisagrees",
            Reason::ClusterAgrees => "ClusterAgrees",
        }
    }

    fn is_warning(self) -> bool {
        matches!(
            self,
            Reason::MachineSetFailed
                | Reason::MachineSetConflict
                | Reason::NodeMetadataFailed
                | Reason::DryRunRejected
                | Reason::DrainBlocked
                | Reason::DrainFailed
                | Reason::RebootFailed
                | Reason::CsrRefused
                | Reason::DeconfigureFailed
                | Reason::DeconfigureRefused
                | Reason::PublicKeyRejected
                | Reason::CsrNearMatch
                | Reason::JoinFailed
                | Reason::MachineConfigureFailed
                | Reason::PrerequisitesNotMet
                | Reason::KeyRotationStopped
                | Reason::UpgradeFailed
                | Reason::RevisionUntrusted
                | Reason::ClusterDisagrees
        )
    }
}

/// What an event is about.
#[derive(Clone, Debug)]
pub enum Regarding<'a> {
    /// A Node by name and UID.
    Node(&'a str, &'a str),
    /// A MachineSet by name and UID (empty before creation).
    MachineSet(&'a str, &'a str),
    /// A CertificateSigningRequest by name and UID.
    Csr(&'a str, &'a str),
    /// A Pod by namespace and name (winfleet's own, for what concerns the daemon).
    Pod(&'a str, &'a str),
    /// A Machine by name and UID.
    Machine(&'a str, &'a str),
    /// A cluster-scoped `config.openshift.io/v1` object by kind, name and
    /// UID (empty when the cluster has none of that name).
    Config(&'a str, &'a str, &'a str),
}

impl Regarding<'_> {
    fn reference(&self) -> ObjectReference {
        let (api_version, kind, namespace, name, uid) = match self {
            Regarding::Node(name, uid) => ("v1", "Node", None, name, uid),
            Regarding::MachineSet(name, uid) => {
                ("machine.openshift.io/v1beta1", "MachineSet", Some(MACHINE_API_NAMESPACE.to_owned()), name, uid)
            }
            Regarding::Csr(name, uid) => ("certificates.k8s.io/v1", "CertificateSigningRequest", None, name, uid),
            Regarding::Pod(namespace, name) => ("v1", "Pod", Some((*namespace).to_owned()), name, &""),
            Regarding::Machine(name, uid) => {
                ("machine.openshift.io/v1beta1", "Machine", Some(MACHINE_API_NAMESPACE.to_owned()), name, uid)
            }
            Regarding::Config(kind, name, uid) => ("config.openshift.io/v1", *kind, None, name, uid),
        };
        ObjectReference {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
            namespace,
            name: Some((*name).to_owned()),
            uid: (!uid.is_empty()).then(|| (*uid).to_owned()),
            ..ObjectReference::default()
        }
    }
}

/// At most this many events wait for the API server; the oldest goes first.
const BACKLOG_LIMIT: usize = 200;

/// Events not published yet because the API server could not take them.
/// Clones share the same queue.
#[derive(Clone, Debug, Default)]
pub struct Backlog(Arc<Mutex<VecDeque<Pending>>>);

/// An event as it was meant to be published.
#[derive(Clone, Debug)]
struct Pending {
    regarding: ObjectReference,
    related: Option<ObjectReference>,
    reason: Reason,
    note: String,
}

impl Backlog {
    /// How many events wait.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether none waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Pending>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues `pending` at the back, dropping the oldest beyond the limit.
    fn push(&self, pending: Pending) {
        let mut queue = self.lock();
        queue.push_back(pending);
        while queue.len() > BACKLOG_LIMIT {
            if let Some(dropped) = queue.pop_front() {
                tracing::warn!(
                    reason = dropped.reason.as_str(),
                    "an event waited too long for the API server; dropped"
                );
            }
        }
    }

    /// Puts `events` back in front of whatever was queued meanwhile.
    fn put_back(&self, events: VecDeque<Pending>) {
        let mut queue = self.lock();
        let later = std::mem::replace(&mut *queue, events);
        queue.extend(later);
    }
}

/// Whether an event refused with `e` may be taken later: the API server
/// unreachable, unavailable or throttling (not a refusal that would stay).
fn passes(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(status) => status.code == 429 || status.code >= 500,
        _ => true,
    }
}

/// Publishes winfleet's events.
#[derive(Clone)]
pub struct Events {
    recorder: Recorder,
    backlog: Backlog,
}

impl Events {
    /// A publisher reporting as controller `winfleet`, with a backlog of its own.
    pub fn new(client: Client) -> Self {
        Self::with_backlog(client, Backlog::default())
    }

    /// A publisher whose events the API server cannot take wait in `backlog`.
    pub fn with_backlog(client: Client, backlog: Backlog) -> Self {
        let reporter = Reporter { controller: FIELD_MANAGER.into(), instance: std::env::var("HOSTNAME").ok() };
        Self { recorder: Recorder::new(client, reporter), backlog }
    }

    /// Publishes the events that wait, in order; stops at the first the API
    /// server still cannot take. Whether none waits any more.
    pub async fn flush(&self) -> bool {
        let mut queued = std::mem::take(&mut *self.backlog.lock());
        let waited = queued.len();
        while let Some(pending) = queued.pop_front() {
            if let Err(e) = self.send(&pending).await {
                if passes(&e) {
                    queued.push_front(pending);
                    self.backlog.put_back(queued);
                    return false;
                }
                tracing::warn!(reason = pending.reason.as_str(), error = %e, "cannot publish an event");
            }
        }
        if waited > 0 {
            tracing::info!(events = waited, "published the events that waited for the API server");
        }
        true
    }

    async fn send(&self, pending: &Pending) -> Result<(), kube::Error> {
        let event = Event {
            type_: if pending.reason.is_warning() { EventType::Warning } else { EventType::Normal },
            reason: pending.reason.as_str().into(),
            note: Some(pending.note.clone()),
            action: pending.reason.as_str().into(),
            secondary: pending.related.clone(),
        };
        self.recorder.publish(&event, &pending.regarding).await
    }

    /// Publishes one event; a failure is logged, never returned.
    pub async fn publish(&self, regarding: Regarding<'_>, reason: Reason, note: impl Into<String>) {
        self.publish_about(regarding, None, reason, note).await;
    }

    /// Publishes one event that also concerns `related` (e.g. the pod whose
    /// eviction is blocked; kube's Recorder folds repeats of the same
    /// reason, object and related object into one series).
    pub async fn publish_about(
        &self,
        regarding: Regarding<'_>,
        related: Option<ObjectReference>,
        reason: Reason,
        note: impl Into<String>,
    ) {
        // The API takes a note of at most 1 kB; values in it are shown by
        // the one rule (invisible characters as code points, cut with size).
        let note = crate::diagnostic::shown_within(&note.into(), NOTE_BYTES);
        let pending = Pending { regarding: regarding.reference(), related, reason, note };
        // Events keep their order: one that waits goes out first.
        if !self.flush().await {
            tracing::warn!(reason = reason.as_str(), "the API server cannot take events now; this one waits");
            self.backlog.push(pending);
            return;
        }
        if let Err(e) = self.send(&pending).await {
            if passes(&e) {
                tracing::warn!(reason = reason.as_str(), error = %e, "cannot publish an event now; it waits for the API server");
                self.backlog.push(pending);
            } else {
                tracing::warn!(reason = reason.as_str(), error = %e, "cannot publish an event");
            }
        }
    }
}
