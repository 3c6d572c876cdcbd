//! What one round says about one instance: the mapping from the round
//! report to a phase, a reason and an error class. Pure.
//!
//! | the round found                                         | phase       | reason                 | class       |
//! |---------------------------------------------------------|-------------|------------------------|-------------|
//! | not processed (`Pending`, or not in a partial round)    | kept        | kept                   | kept        |
//! | observe failed (SSH, script, report)                    | Failed      | `ObserveFailed`        | `transient` |
//! | an operation failed                                     | Failed      | `ApplyFailed`          | `transient` |
//! | its Node's metadata write failed                        | Failed      | `NodeUpdateFailed`     | `transient` |
//! | its Node's metadata write was rejected in the dry run   | Failed      | `NodeUpdateRejected`   | `invalid`, Stalled |
//! | the safe reboot failed to cordon, reboot or uncordon    | Failed      | `RebootFailed`         | `transient` |
//! | the node did not come back from its reboot              | Failed      | `NodeNotBack`          | `transient`, Stalled |
//! | the drain did not finish (PodDisruptionBudget, timeout) | Waiting     | `DrainBlocked`         | `waiting`   |
//! | reboot owed, no Node associated                         | Waiting     | `NoNode`               | `waiting`   |
//! | reboot owed, no cluster configured (SSH-only)           | Waiting     | `NoCluster`            | `waiting`   |
//! | reboot owed, the cluster could not be read              | Failed      | `ClusterUnavailable`   | `transient` |
//! | reboot owed, not started (no rollout slot)              | Progressing | `WaitingForRolloutSlot`| —           |
//! | reboot owed, to come                                    | Progressing | `RebootPending`        | —           |
//! | changes planned in a dry run that is no drift check     | Progressing | `ChangesPlanned`       | —           |
//! | joining or upgrading, the cluster's prerequisites refuse| Waiting     | `PrerequisitesNotMet`  | `waiting`, Stalled |
//! | the lifecycle is blocked (payload not the pinned one)   | Failed      | `LifecycleBlocked`     | `waiting`, Stalled |
//! | configured over SSH, no cluster to join (SSH-only)      | Waiting     | `NoCluster`            | `waiting`   |
//! | being configured; its join's step, or its plan          | Progressing | `Configuring`, `ConfigurePlanned` | — |
//! | its join stopped at a step                              | Failed      | `JoinFailed`           | `transient` |
//! | joined: Ready, labelled, uncordoned, versioned          | Ready       | `Joined`               | —           |
//! | the Node has an older winfleet version                  | Progressing | `UpgradePending`, `UpgradePlanned`, `WaitingForRolloutSlot` | — |
//! | its upgrade's drain did not finish                      | Waiting     | `DrainBlocked`         | `waiting`   |
//! | its upgrade stopped (the node stays cordoned)           | Failed      | `UpgradeFailed`        | `transient`, Stalled |
//! | upgraded                                                | Ready       | `Upgraded`             | —           |
//! | drift found in a warn-mode drift check (dry run)        | Drifted     | `DriftDetected`        | —           |
//! | changes found while winfleet is suspended (dry run)     | Drifted     | `Suspended`            | —           |
//! | drift found and corrected                               | Ready       | `DriftCorrected`       | —           |
//! | in sync (after a reboot too)                            | Ready       | `InSync`               | —           |
//!
//! Drift is a change on a node already at the applied revision, whichever
//! round meets it: a drift check, or a retry or cluster-change round that
//! corrects it (issue 23: a Waiting node is left out of drift checks, and
//! its retry corrected drift silently). A node still behind the revision is
//! catching up, not drifting. The applied revision is recorded when a
//! non-dry-run round finished the node with no failed operation (a reboot
//! still owed does not undo that).

use crate::cluster::join::JoinResult;
use crate::cluster::rollout::{RebootReport, RebootResult, RebootStage};
use crate::cluster::upgrade::{UpgradeResult, UpgradeStage};
use crate::engine::report::{LifecycleReport, NodeReport, NodeResult, Stage};
use crate::lifecycle::Mode;
use crate::node::outcome::Outcome;
use crate::reconcile::report::{ClusterReport, RoundReport};

use super::model::{ErrorClass, InstancePhase};

/// What one round says about one instance (`P` = [`InstancePhase`]) or
/// MachineSet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict<P> {
    /// The phase.
    pub phase: P,
    /// The reason of the Ready condition (and of the others when True).
    pub reason: &'static str,
    /// Why, for people (unredacted yet).
    pub message: String,
    /// Set when the message is an error.
    pub class: Option<ErrorClass>,
    /// winfleet cannot make progress alone.
    pub stalled: bool,
    /// Record the applied revision on the instance.
    pub record_applied: bool,
    /// Drift lines (operation headlines, field changes).
    pub drift: Vec<String>,
}

/// What the round knew about an instance or MachineSet besides its own
/// part of the report.
#[derive(Clone, Copy, Debug)]
pub struct Context<'a> {
    /// The round.
    pub round: &'a RoundReport,
    /// The round re-observed without a new commit.
    pub drift_check: bool,
    /// Drift mode `warn`: a drift check reports drift and changes nothing.
    pub warn: bool,
    /// It was already at the applied revision before the round.
    pub at_revision: bool,
    /// winfleet is suspended: the round was a dry run, whatever it found.
    pub suspended: bool,
}

impl<P> Verdict<P> {
    /// A verdict that is no error.
    pub fn new(phase: P, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            phase,
            reason,
            message: message.into(),
            class: None,
            stalled: false,
            record_applied: false,
            drift: Vec::new(),
        }
    }

    /// A verdict whose message is an error of `class`.
    pub fn error(phase: P, reason: &'static str, message: impl Into<String>, class: ErrorClass) -> Self {
        Self { class: Some(class), ..Self::new(phase, reason, message) }
    }

    /// The same, stalled.
    pub fn stalled(mut self) -> Self {
        self.stalled = true;
        self
    }
}

/// The verdict on `node`, or `None` when the round says nothing new about
/// it (the previous status stands).
pub fn instance(node: &NodeReport, ctx: Context<'_>) -> Option<Verdict<InstancePhase>> {
    let (operations, reboot_required) = match &node.result {
        NodeResult::Pending => return None,
        NodeResult::Failed { stage, reason } => {
            let rejected = ctx.round.cluster.iter().flat_map(|c| &c.keys).find_map(|k| match &k.result {
                crate::cluster::keys::KeyResult::KeyRejected { authorized_key, fingerprint }
                    if k.address == node.address =>
                {
                    Some((authorized_key, fingerprint))
                }
                _ => None,
            });
            if let Some((line, fingerprint)) = rejected {
                let message = format!(
                    "the host refuses the fleet's new SSH key; add this public key to its authorized_keys: {line} \
                     ({fingerprint}); the node is left running as it is"
                );
                return Some(Verdict::error(InstancePhase::Failed, "KeyRejected", message, ErrorClass::Waiting));
            }
            let reason_word = match stage {
                Stage::Observe => "ObserveFailed",
                Stage::Upload => "UploadFailed",
                Stage::Apply => "ApplyFailed",
            };
            let message = format!("{} failed: {reason}", stage.name());
            return Some(Verdict::error(InstancePhase::Failed, reason_word, message, ErrorClass::Transient));
        }
        NodeResult::Done { operations, reboot_required, .. } => (operations, *reboot_required),
    };
    let dry_run = ctx.round.dry_run;
    // A dry run that is no drift check only plans (`ChangesPlanned` below).
    let drift = if drifted(node, ctx.at_revision) && (ctx.drift_check || !dry_run) {
        operations.iter().map(|op| op.operation.headline()).collect()
    } else {
        Vec::new()
    };
    if dry_run && !operations.is_empty() {
        if ctx.suspended {
            let message = format!("{} change(s) pending; winfleet is suspended: nothing was changed", operations.len());
            let pending = operations.iter().map(|op| op.operation.headline()).collect();
            return Some(Verdict { drift: pending, ..Verdict::new(InstancePhase::Drifted, "Suspended", message) });
        }
        if !(ctx.drift_check && ctx.warn) {
            let message = format!("{} change(s) planned; nothing applied (dry run)", operations.len());
            return Some(Verdict::new(InstancePhase::Progressing, "ChangesPlanned", message));
        }
        if !ctx.at_revision {
            // Behind the applied revision and nothing applied: its catching
            // up is already described by its previous status.
            return None;
        }
        let message = format!("{} drifted item(s); drift mode is warn: nothing was changed", drift.len());
        return Some(Verdict { drift, ..Verdict::new(InstancePhase::Drifted, "DriftDetected", message) });
    }
    let failed: Vec<String> = operations
        .iter()
        .filter_map(|op| match &op.outcome {
            Some(Outcome::Failed(reason)) => Some(format!("{}: {reason}", op.operation.headline())),
            _ => None,
        })
        .collect();
    if !failed.is_empty() {
        let message = format!("{} operation(s) failed: {}", failed.len(), failed.join("; "));
        let verdict = Verdict::error(InstancePhase::Failed, "ApplyFailed", message, ErrorClass::Transient);
        return Some(Verdict { drift, ..verdict });
    }
    let mut verdict = after_apply(node, reboot_required, ctx.round);
    verdict.record_applied = !dry_run;
    if verdict.phase == InstancePhase::Ready && !drift.is_empty() {
        verdict.reason = "DriftCorrected";
        verdict.message = format!("{} drifted item(s) corrected", drift.len());
    }
    verdict.drift = drift;
    Some(verdict)
}

/// Whether the round found drift on `node`: operations on a node that was
/// already at the applied revision (`at_revision`), whatever the round.
pub fn drifted(node: &NodeReport, at_revision: bool) -> bool {
    at_revision && matches!(&node.result, NodeResult::Done { operations, .. } if !operations.is_empty())
}

/// The node's own changes went through: what the cluster side says.
fn after_apply(node: &NodeReport, reboot_required: bool, round: &RoundReport) -> Verdict<InstancePhase> {
    let address = node.address.as_str();
    let cluster = round.cluster.as_ref();
    if let Some(verdict) = cluster.and_then(|c| metadata(address, c)) {
        return verdict;
    }
    if let Some(verdict) = node.lifecycle.as_ref().and_then(|l| lifecycle(address, l, cluster)) {
        return verdict;
    }
    if let Some(reboot) = cluster.and_then(|c| c.reboots.iter().find(|r| r.address == address)) {
        return rebooted(reboot);
    }
    if !reboot_required {
        return Verdict::new(InstancePhase::Ready, "InSync", "");
    }
    let owed = "environment changes take effect after a safe reboot";
    match cluster {
        None => Verdict::error(
            InstancePhase::Waiting,
            "NoCluster",
            format!("{owed}; no cluster is configured to cordon and drain the node"),
            ErrorClass::Waiting,
        ),
        Some(c) if c.error.is_some() => Verdict::error(
            InstancePhase::Failed,
            "ClusterUnavailable",
            format!("{owed}; the cluster could not be read: {}", c.error.as_deref().unwrap_or_default()),
            ErrorClass::Transient,
        ),
        Some(c) => match c.unassociated.iter().find(|u| u.address == address) {
            Some(u) => Verdict::error(
                InstancePhase::Waiting,
                "NoNode",
                format!("{owed}; no Node is associated with the instance: {}", u.reason),
                ErrorClass::Waiting,
            ),
            None => Verdict::new(InstancePhase::Progressing, "RebootPending", format!("{owed}; it is owed")),
        },
    }
}

/// Where the node lifecycle stands: a blocked lifecycle, a join and its
/// step, a join waiting for a cluster, an upgrade to come. `None` when the
/// node is at the desired version (the rest of the verdict applies).
fn lifecycle(
    address: &str,
    report: &LifecycleReport,
    cluster: Option<&ClusterReport>,
) -> Option<Verdict<InstancePhase>> {
    let refused = cluster.and_then(|c| c.prerequisites.refused.as_deref());
    if let Some(why) = refused.filter(|_| matches!(report.mode, Mode::Join | Mode::UpgradePending)) {
        let message = format!("no node joins or upgrades while the cluster's prerequisites are not met: {why}");
        return Some(
            Verdict::error(InstancePhase::Waiting, "PrerequisitesNotMet", message, ErrorClass::Waiting).stalled(),
        );
    }
    if let Some(error) = &report.error {
        let message = format!("the node lifecycle cannot proceed: {error}");
        return Some(Verdict::error(InstancePhase::Failed, "LifecycleBlocked", message, ErrorClass::Waiting).stalled());
    }
    let join = cluster.and_then(|c| c.joins.iter().find(|j| j.address == address));
    match (report.mode, join) {
        (Mode::Prepare, _) => Some(Verdict::error(
            InstancePhase::Waiting,
            "NoCluster",
            format!(
                "configured as far as SSH goes (payload and service definitions); the join waits for a cluster: {}",
                report.waiting.join("; ")
            ),
            ErrorClass::Waiting,
        )),
        (Mode::UpgradePending, _) => Some(upgraded(address, report, cluster)),
        (_, Some(join)) => Some(match &join.result {
            JoinResult::Joined => {
                Verdict::new(InstancePhase::Ready, "Joined", format!("joined at version {}", report.version))
            }
            JoinResult::Failed { step, reason } => Verdict::error(
                InstancePhase::Failed,
                "JoinFailed",
                format!("configure stopped at {}: {reason}; the next round goes on from there", step.name()),
                ErrorClass::Transient,
            ),
            JoinResult::NotStarted { reason } => Verdict::error(
                InstancePhase::Progressing,
                "Configuring",
                format!("join not started: {reason}"),
                ErrorClass::Waiting,
            ),
            JoinResult::Planned { steps } => Verdict::new(
                InstancePhase::Progressing,
                "ConfigurePlanned",
                format!("configure steps to do: {}", steps.join("; ")),
            ),
        }),
        (Mode::Join, None) => Some(Verdict::new(
            InstancePhase::Progressing,
            "Configuring",
            format!("being configured: {}", report.waiting.join("; ")),
        )),
        // Instances that left the repository have no status entry: their
        // deconfigure is reported in the cluster part of the status.
        (Mode::Maintain | Mode::Upgrade | Mode::Deconfigure, None) => None,
    }
}

/// An instance whose Node runs an older winfleet version: its upgrade.
fn upgraded(address: &str, report: &LifecycleReport, cluster: Option<&ClusterReport>) -> Verdict<InstancePhase> {
    let upgrade = cluster.and_then(|c| c.upgrades.iter().find(|u| u.address == address));
    match upgrade.map(|u| &u.result) {
        Some(UpgradeResult::Upgraded { .. }) => {
            Verdict::new(InstancePhase::Ready, "Upgraded", format!("upgraded to {}", report.version))
        }
        Some(UpgradeResult::Failed { stage: UpgradeStage::Drain, reason }) => Verdict::error(
            InstancePhase::Waiting,
            "DrainBlocked",
            format!("upgrade: the drain did not finish: {reason}"),
            ErrorClass::Waiting,
        ),
        Some(UpgradeResult::Failed { stage, reason }) => Verdict::error(
            InstancePhase::Failed,
            "UpgradeFailed",
            format!("upgrade to {} stopped at {}: {reason}", report.version, stage.name()),
            ErrorClass::Transient,
        )
        .stalled(),
        Some(UpgradeResult::NotStarted { reason }) => Verdict::error(
            InstancePhase::Progressing,
            "WaitingForRolloutSlot",
            format!("upgrade not started: {reason}"),
            ErrorClass::Waiting,
        ),
        Some(UpgradeResult::Planned { operations }) => Verdict::new(
            InstancePhase::Progressing,
            "UpgradePlanned",
            format!("upgrade to {}: {}", report.version, operations.join("; ")),
        ),
        None => Verdict::new(
            InstancePhase::Progressing,
            "UpgradePending",
            format!("the Node runs an older winfleet version; {} comes with its upgrade", report.version),
        ),
    }
}

/// A failed or rejected write of the instance's Node metadata.
fn metadata(address: &str, cluster: &ClusterReport) -> Option<Verdict<InstancePhase>> {
    let node = cluster.associated.get(address)?;
    let rejected = cluster.rejected.iter().find(|w| w.target == format!("Node/{node}"));
    if let Some(w) = rejected {
        let message = format!("the API rejected the Node {node} metadata in the dry run: {}", w.outcome);
        return Some(
            Verdict::error(InstancePhase::Failed, "NodeUpdateRejected", message, ErrorClass::Invalid).stalled(),
        );
    }
    cluster.nodes.iter().filter(|n| n.instance == address).find_map(|n| match &n.outcome {
        Some(Outcome::Failed(reason)) => Some(Verdict::error(
            InstancePhase::Failed,
            "NodeUpdateFailed",
            format!("writing the Node {} metadata failed: {reason}", n.node),
            ErrorClass::Transient,
        )),
        _ => None,
    })
}

fn rebooted(reboot: &RebootReport) -> Verdict<InstancePhase> {
    match &reboot.result {
        RebootResult::Rebooted { .. } => Verdict::new(InstancePhase::Ready, "InSync", ""),
        RebootResult::NotStarted { reason } => {
            let why = if reason.is_empty() { "waiting for a rollout slot (maxUnavailable)" } else { reason };
            let message = format!("safe reboot not started: {why}");
            Verdict::error(InstancePhase::Progressing, "WaitingForRolloutSlot", message, ErrorClass::Waiting)
        }
        // A drain that cannot finish was undone (uncordoned): the reboot
        // stays owed and is tried again after the set delay.
        RebootResult::Failed { stage: RebootStage::Drain, reason } => Verdict::error(
            InstancePhase::Waiting,
            "DrainBlocked",
            format!("safe reboot: drain did not finish: {reason}"),
            ErrorClass::Waiting,
        ),
        // The node stays cordoned and the rollout stops: a human must look.
        RebootResult::Failed { stage: RebootStage::WaitBack, reason } => Verdict::error(
            InstancePhase::Failed,
            "NodeNotBack",
            format!("safe reboot: {reason}; the node stays cordoned and the rollout stopped"),
            ErrorClass::Transient,
        )
        .stalled(),
        RebootResult::Failed { stage, reason } => Verdict::error(
            InstancePhase::Failed,
            "RebootFailed",
            format!("safe reboot failed ({}): {reason}", stage.name()),
            ErrorClass::Transient,
        ),
    }
}
