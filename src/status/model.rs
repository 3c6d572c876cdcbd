//! The status winfleet writes back to Git, as data: the summary, one record
//! per instance and one per MachineSet. Field order is the order of the
//! files' keys; nothing here changes between two identical rounds (only
//! conditions carry a time, and only when their status flips).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The whole status directory.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// `summary.yaml`.
    pub summary: Summary,
    /// `instances/<address>.yaml`, by address.
    pub instances: BTreeMap<String, InstanceStatus>,
    /// `machinesets/<name>.yaml`, by name.
    pub machine_sets: BTreeMap<String, MachineSetStatus>,
}

/// `summary.yaml`: revisions, the last round's result and counts by phase.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Summary {
    /// The revision in force (the last valid one applied).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_applied_revision: Option<String>,
    /// The newest revision seen, valid or not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_attempted_revision: Option<String>,
    /// How the last round ended.
    pub last_round: RoundResult,
    /// Instances by phase (every phase, zeros included).
    pub instances: InstanceCounts,
    /// MachineSets by phase (every phase, zeros included).
    pub machine_sets: MachineSetCounts,
    /// The cluster's platform (Infrastructure `cluster`), kept from the
    /// last round that read the cluster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub platform: Option<String>,
    /// The attempted revision when it failed validation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub invalid: Option<Invalid>,
    /// Nodes whose instance left the repository and how their deconfigure
    /// went (kept from the last round that had a cluster).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub leaving: Vec<Leaving>,
    /// Why nobody is deconfigured (the mass-removal guard).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deconfigure_refused: Option<String>,
    /// Set while winfleet changes nothing: rounds observe and report drift.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suspended: Option<Suspended>,
    /// Fleet-wide conditions: `ClusterDisagrees`, once the repository has
    /// been found to differ from the cluster.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// `summary.yaml`'s `suspended`: since when, and who asked.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Suspended {
    /// The newest revision seen when the suspension began.
    pub since_revision: String,
    /// `spec.suspend` (the Fleet), or `winfleet suspend` and its reason.
    pub by: String,
}

/// A node that left the repository, in `summary.yaml`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Leaving {
    /// Node name.
    pub node: String,
    /// Its address.
    pub address: String,
    /// `deconfigured`, `failed`, `notStarted` or `planned`.
    pub state: String,
    /// Why, when it did not finish.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// An attempted revision that failed validation (nothing of it was applied).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Invalid {
    /// The revision.
    pub revision: String,
    /// Its diagnostics, one line each (`file:line: field: message`), redacted.
    pub errors: Vec<String>,
}

/// How a round ended, as `summary.yaml` says it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum RoundResult {
    /// No round has run yet.
    #[default]
    NotRun,
    /// Nothing failed.
    Succeeded,
    /// Some nodes or cluster writes failed, others did not.
    PartiallyFailed,
    /// Everything the round processed failed.
    Failed,
    /// The attempted revision failed validation; nothing of it was applied.
    Invalid,
}

/// Instances by phase.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct InstanceCounts {
    /// [`InstancePhase::Ready`].
    pub ready: usize,
    /// [`InstancePhase::Progressing`].
    pub progressing: usize,
    /// [`InstancePhase::Drifted`].
    pub drifted: usize,
    /// [`InstancePhase::Waiting`].
    pub waiting: usize,
    /// [`InstancePhase::Failed`].
    pub failed: usize,
    /// [`InstancePhase::Unknown`].
    pub unknown: usize,
}

/// MachineSets by phase.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct MachineSetCounts {
    /// [`MachineSetPhase::Ready`].
    pub ready: usize,
    /// [`MachineSetPhase::Progressing`].
    pub progressing: usize,
    /// [`MachineSetPhase::Drifted`].
    pub drifted: usize,
    /// [`MachineSetPhase::Conflict`].
    pub conflict: usize,
    /// [`MachineSetPhase::Failed`].
    pub failed: usize,
    /// [`MachineSetPhase::Unknown`].
    pub unknown: usize,
}

/// Where an instance stands. The mapping from a round is in
/// [`super::verdict`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum InstancePhase {
    /// In sync at the applied revision.
    Ready,
    /// Changes applied and a safe reboot owed or not yet started (waiting
    /// for a rollout slot), or changes planned in a dry run.
    Progressing,
    /// Drift found in `warn` drift mode: listed, nothing changed.
    Drifted,
    /// Held up by something outside winfleet (a PodDisruptionBudget blocks
    /// the drain, no Node for an owed reboot, no cluster configured);
    /// error class `waiting`.
    Waiting,
    /// SSH, observe, apply, a Node write or a reboot failed; error class
    /// `transient` (retried with back-off) unless the API rejected the
    /// write (`invalid`).
    Failed,
    /// Not processed yet.
    #[default]
    Unknown,
}

/// Where a MachineSet stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum MachineSetPhase {
    /// Applied (or already as the revision says).
    Ready,
    /// Changes planned and not written this round.
    Progressing,
    /// Drift found in `warn` drift mode: listed, nothing changed.
    Drifted,
    /// A MachineSet of that name exists that winfleet does not manage, or
    /// fields it sets are another field manager's: nothing written.
    Conflict,
    /// The write failed, the API rejected it, or the cluster could not be read.
    Failed,
    /// No cluster report yet (SSH-only, or never processed).
    #[default]
    Unknown,
}

/// What kind of error holds an instance or MachineSet back, which decides
/// how it is retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ErrorClass {
    /// Retrying cannot help until a new revision (or a human) changes
    /// something: a rejected write, a MachineSet winfleet does not manage.
    Invalid,
    /// An external condition; requeued after a set delay.
    Waiting,
    /// Retried with back-off and jitter.
    Transient,
}

/// The kind of a condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ConditionType {
    /// In sync at the applied revision.
    Ready,
    /// winfleet still has work to do here and will do it by itself.
    Reconciling,
    /// winfleet cannot make progress without a human or a new revision.
    Stalled,
    /// The repository's Proxy or mirror sets differ from the cluster's own
    /// objects (the summary's; never blocking).
    ClusterDisagrees,
}

/// One condition, Kubernetes style.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// Which condition.
    #[serde(rename = "type")]
    pub kind: ConditionType,
    /// `True` or `False`.
    #[serde(with = "truth")]
    pub status: bool,
    /// Why, in one CamelCase word.
    pub reason: String,
    /// Why, for people (redacted).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// When `status` last changed (RFC 3339, seconds).
    #[serde(with = "timestamp")]
    pub last_transition_time: jiff::Timestamp,
}

impl Condition {
    /// The condition as a round finds it: its `last_transition_time` is
    /// kept from `previous` while its status is unchanged, `now` otherwise.
    pub fn after(
        previous: &[Condition],
        kind: ConditionType,
        status: bool,
        reason: &str,
        message: String,
        now: jiff::Timestamp,
    ) -> Condition {
        let last_transition_time =
            previous.iter().find(|c| c.kind == kind && c.status == status).map_or(now, |c| c.last_transition_time);
        Condition { kind, status, reason: reason.to_owned(), message, last_transition_time }
    }
}

/// `instances/<address>.yaml`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct InstanceStatus {
    /// Canonical address.
    pub address: String,
    /// Where it stands.
    pub phase: InstancePhase,
    /// The Node associated with it, once known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The revision last applied to it without a failed operation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub applied_revision: Option<String>,
    /// Ready, Reconciling, Stalled, in that order.
    pub conditions: Vec<Condition>,
    /// What the last drift check found changed on the node (operation
    /// headlines, redacted).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub drift: Vec<String>,
    /// The last error, until the instance succeeds again (redacted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// The class of `last_error`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_class: Option<ErrorClass>,
}

/// `machinesets/<name>.yaml`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct MachineSetStatus {
    /// Name.
    pub name: String,
    /// Where it stands.
    pub phase: MachineSetPhase,
    /// The revision last applied to it successfully.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub applied_revision: Option<String>,
    /// Ready, Reconciling, Stalled, in that order.
    pub conditions: Vec<Condition>,
    /// What the last drift check found changed (field changes, redacted).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub drift: Vec<String>,
    /// The last error, until the MachineSet succeeds again (redacted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// The class of `last_error`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_class: Option<ErrorClass>,
}

impl InstanceStatus {
    /// A condition, if present.
    pub fn condition(&self, kind: ConditionType) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.kind == kind)
    }
}

impl MachineSetStatus {
    /// A condition, if present.
    pub fn condition(&self, kind: ConditionType) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.kind == kind)
    }
}

/// `True`/`False` as Kubernetes writes condition statuses.
mod truth {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(value: &bool, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(if *value { "True" } else { "False" })
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
        match String::deserialize(d)?.as_str() {
            "True" => Ok(true),
            "False" => Ok(false),
            other => Err(serde::de::Error::custom(format!("condition status {other:?} is neither True nor False"))),
        }
    }
}

/// RFC 3339 text (jiff's serde support is a feature this crate does not enable).
mod timestamp {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(value: &jiff::Timestamp, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(value)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<jiff::Timestamp, D::Error> {
        String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}
