//! What one round says about one MachineSet. Pure.
//!
//! | the round found                                   | phase       | reason               | class       |
//! |---------------------------------------------------|-------------|----------------------|-------------|
//! | no cluster part (SSH-only, or a node-only round)  | kept (Unknown at first) | kept     | kept        |
//! | the cluster could not be read                     | Failed      | `ClusterUnavailable` | `transient` |
//! | a MachineSet of that name winfleet does not manage| Conflict    | `NotManaged`         | `invalid`, Stalled |
//! | fields it sets that another field manager owns    | Conflict    | `FieldConflict`      | `invalid`, Stalled |
//! | the API rejected it in the dry run                | Failed      | `Rejected`           | `invalid`, Stalled |
//! | the write failed                                  | Failed      | `ApplyFailed`        | `transient` |
//! | a change not written (another write was rejected) | Progressing | `NotWritten`         | —           |
//! | a change planned in a dry run that is no drift check | Progressing | `ChangesPlanned`  | —           |
//! | drift found in a warn-mode drift check (dry run)  | Drifted     | `DriftDetected`      | —           |
//! | drift found and corrected                         | Ready       | `DriftCorrected`     | —           |
//! | written, or nothing to change                     | Ready       | `InSync`             | —           |
//! | …but its Machines are not all Ready Nodes at the desired version | Progressing | `MachinesProgressing` (`MachinesWaiting` while a VM does not answer, `MachinesFailed` when one failed, `KeyRotationStopped` when a failed replacement stops a key rotation) | — |
//!
//! A MachineHealthCheck that can delete its Machines while winfleet
//! configures them (issue 37, [`crate::cluster::health_checks`]) is said in
//! the message, whatever the phase.
//!
//! The last row (issue 26): Ready only when `status.readyReplicas` equals
//! the desired replicas and each Machine has a Ready Node configured at the
//! desired version; the message counts the Machines at each step.

use crate::cluster::keys::KeyResult;
use crate::node::outcome::Outcome;
use crate::plan::{MachineSetChange, replicas_text, show_value};
use crate::reconcile::report::MachineSetReport;

use super::model::{ErrorClass, MachineSetPhase};
use super::verdict::{Context, Verdict};

/// The verdict on MachineSet `name`, or `None` when the round says nothing
/// about it (the previous status stands).
pub fn machine_set(name: &str, ctx: Context<'_>) -> Option<Verdict<MachineSetPhase>> {
    let verdict = machines(name, ctx)?;
    Some(with_health_checks(name, ctx, verdict))
}

/// The verdict with the MachineHealthChecks that can delete its Machines
/// mid-configure said in its message (issue 37).
fn with_health_checks(name: &str, ctx: Context<'_>, mut verdict: Verdict<MachineSetPhase>) -> Verdict<MachineSetPhase> {
    let findings = ctx.round.cluster.iter().flat_map(|c| &c.machines.health_checks);
    for finding in findings.filter(|f| f.machine_set == name) {
        let sep = if verdict.message.is_empty() { "" } else { "; " };
        verdict.message = format!("{}{sep}warning: {}", verdict.message, finding.message());
    }
    verdict
}

/// The verdict on the MachineSet and its Machines.
fn machines(name: &str, ctx: Context<'_>) -> Option<Verdict<MachineSetPhase>> {
    let verdict = applied(name, ctx)?;
    let machines = ctx.round.cluster.as_ref().and_then(|c| c.machines.machine_set(name));
    match machines {
        Some(set) if verdict.phase == MachineSetPhase::Ready && !set.ready() => {
            let steps = &set.steps;
            let stopped = ctx.round.cluster.iter().flat_map(|c| &c.keys).find_map(|k| match &k.result {
                KeyResult::RotationStopped { machine_set, blocker, reason, .. } if machine_set == name => Some(
                    format!("; key rotation stopped: the replacement Machine {blocker} is not a Ready node: {reason}"),
                ),
                _ => None,
            });
            let reason = if stopped.is_some() {
                "KeyRotationStopped"
            } else if steps.contains_key("failed") {
                "MachinesFailed"
            } else if steps.contains_key("waiting") {
                "MachinesWaiting"
            } else {
                "MachinesProgressing"
            };
            let message = format!(
                "applied; its Machines are not all Ready Nodes yet: {}{}",
                set.counts(),
                stopped.unwrap_or_default()
            );
            Some(Verdict { phase: MachineSetPhase::Progressing, reason, message, ..verdict })
        }
        _ => Some(verdict),
    }
}

/// The verdict on the MachineSet object itself (written, in sync, …).
fn applied(name: &str, ctx: Context<'_>) -> Option<Verdict<MachineSetPhase>> {
    use MachineSetPhase::{Conflict, Drifted, Failed, Progressing, Ready};
    let cluster = ctx.round.cluster.as_ref()?;
    if let Some(error) = &cluster.error {
        let message = format!("the cluster could not be read: {error}");
        return Some(Verdict::error(Failed, "ClusterUnavailable", message, ErrorClass::Transient));
    }
    if let Some(c) = cluster.conflicts.iter().find(|c| c.name == name) {
        let message = format!("left alone: {}", c.reason);
        let reason = if c.fields.is_empty() { "NotManaged" } else { "FieldConflict" };
        return Some(Verdict::error(Conflict, reason, message, ErrorClass::Invalid).stalled());
    }
    if let Some(w) = cluster.rejected.iter().find(|w| w.target == format!("MachineSet/{name}")) {
        let message = format!("the API rejected it in the dry run: {}", w.outcome);
        return Some(Verdict::error(Failed, "Rejected", message, ErrorClass::Invalid).stalled());
    }
    let dry_run = ctx.round.dry_run;
    let Some(report) = cluster.machine_sets.iter().find(|m| m.change.name == name) else {
        let verdict = Verdict::new(Ready, "InSync", "");
        return Some(Verdict { record_applied: !dry_run, ..verdict });
    };
    let drift = if ctx.drift_check && ctx.at_revision { drift_lines(&report.change) } else { Vec::new() };
    match &report.outcome {
        Some(Outcome::Failed(reason)) => {
            let verdict =
                Verdict::error(Failed, "ApplyFailed", format!("write failed: {reason}"), ErrorClass::Transient);
            Some(Verdict { drift, ..verdict })
        }
        None if dry_run && ctx.suspended => {
            let message = "changes pending; winfleet is suspended: nothing was changed";
            Some(Verdict { drift: drift_lines(&report.change), ..Verdict::new(Drifted, "Suspended", message) })
        }
        None if dry_run && ctx.drift_check && ctx.warn => {
            if !ctx.at_revision {
                return None;
            }
            let message = format!("{} drifted field(s); drift mode is warn: nothing was changed", drift.len());
            Some(Verdict { drift, ..Verdict::new(Drifted, "DriftDetected", message) })
        }
        None if dry_run => {
            Some(Verdict::new(Progressing, "ChangesPlanned", "changes planned; nothing applied (dry run)"))
        }
        None => Some(not_written(report, !cluster.rejected.is_empty())),
        Some(outcome) => {
            let corrected = *outcome == Outcome::Applied && !drift.is_empty();
            let verdict = if corrected {
                Verdict::new(Ready, "DriftCorrected", format!("{} drifted field(s) corrected", drift.len()))
            } else {
                Verdict::new(Ready, "InSync", "")
            };
            Some(Verdict { record_applied: true, drift: if corrected { drift } else { Vec::new() }, ..verdict })
        }
    }
}

fn not_written(report: &MachineSetReport, rejected: bool) -> Verdict<MachineSetPhase> {
    let why = if rejected {
        "another write of the cluster plan was rejected in the dry run, so none of the plan's writes was made"
    } else {
        "it was not written this round"
    };
    let action = format!("{:?}", report.change.action).to_lowercase();
    Verdict::new(MachineSetPhase::Progressing, "NotWritten", format!("{action} planned; {why}"))
}

/// A change as drift lines: the replica count, then each field.
fn drift_lines(change: &MachineSetChange) -> Vec<String> {
    let show = |v: &Option<serde_json::Value>| v.as_ref().map_or_else(|| "(absent)".to_owned(), show_value);
    replicas_text(change, "->")
        .into_iter()
        .chain(change.fields.iter().map(|f| format!("{}: {} -> {}", f.pointer, show(&f.from), show(&f.to))))
        .collect()
}
