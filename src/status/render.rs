//! The next status from the previous one and what a round found. Pure: no
//! IO, no clock (`now` is an input), so identical rounds give identical
//! status, and the only time written is when a condition's status flips.

use crate::desired::kinds::fleet::DriftMode;
use crate::reconcile::report::RoundReport;

use super::machineset;
use super::model::{
    Condition, ConditionType, InstancePhase, InstanceStatus, Invalid, MachineSetPhase, MachineSetStatus, RoundResult,
    Status, Summary, Suspended,
};
use super::redact::redact;
use super::summary::{instance_counts, machine_set_counts, round_result};
use super::verdict::{self, Context, Verdict};

/// What the daemon knows after a round. Its `Debug` leaves the secrets out.
#[derive(Clone, Copy)]
pub struct RoundInput<'a> {
    /// The time of the round (only written when a condition flips).
    pub now: jiff::Timestamp,
    /// The revision of the newest commit seen.
    pub attempted: &'a str,
    /// The revision in force after this round (the last valid one applied);
    /// `None` before any.
    pub applied: Option<&'a str>,
    /// When `attempted` failed validation: its diagnostics, one line each
    /// (`file:line: field: message`); nothing of it was applied.
    pub invalid: &'a [String],
    /// Every instance address of the revision in force, sorted.
    pub instances: &'a [String],
    /// Every MachineSet name of the revision in force.
    pub machine_sets: &'a [String],
    /// The round; `None` when none ran. It may cover only some instances
    /// (a retry or a cluster-change round): the others keep their status.
    pub report: Option<&'a RoundReport>,
    /// The round re-observed without a new commit (the drift timer).
    pub drift_check: bool,
    /// In `Warn` a drift check is a dry run: drift is reported, not changed.
    pub drift_mode: DriftMode,
    /// Text that must never appear in any file (pull-secret auths, tokens).
    pub secrets: &'a [String],
    /// Who suspended winfleet, while it is (the round was a dry run).
    pub suspended_by: Option<&'a str>,
}

impl std::fmt::Debug for RoundInput<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoundInput")
            .field("now", &self.now)
            .field("attempted", &self.attempted)
            .field("applied", &self.applied)
            .field("invalid", &self.invalid.len())
            .field("instances", &self.instances.len())
            .field("machine_sets", &self.machine_sets.len())
            .field("report", &self.report.is_some())
            .field("drift_check", &self.drift_check)
            .field("drift_mode", &self.drift_mode)
            .field("secrets", &format_args!("[{} redacted]", self.secrets.len()))
            .field("suspended_by", &self.suspended_by)
            .finish()
    }
}

/// The status after a round. Instances and MachineSets no longer in the
/// revision in force are dropped; those the round did not process keep
/// their previous status (an instance's Node name is still taken from the
/// round's associations); the round's verdicts are in [`super::verdict`]
/// and [`super::machineset`]. Every free text is redacted last.
pub fn render(previous: &Status, input: &RoundInput<'_>) -> Status {
    let now = whole_seconds(input.now);
    let mut status = Status::default();
    for address in input.instances {
        let before = previous.instances.get(address);
        let verdict = input.report.and_then(|round| {
            let node = round.nodes.iter().find(|n| &n.address == address)?;
            let at_revision =
                before.and_then(|b| b.applied_revision.as_deref()).is_some_and(|r| Some(r) == input.applied);
            verdict::instance(node, context(input, round, at_revision))
        });
        let mut instance = match (verdict, before) {
            (Some(v), _) => instance_from(before, address, v, input.applied, now),
            (None, Some(b)) => b.clone(),
            (None, None) => instance_from(
                None,
                address,
                Verdict::new(InstancePhase::Unknown, "NotProcessed", "not processed yet"),
                None,
                now,
            ),
        };
        instance.address.clone_from(address);
        let cluster = input.report.and_then(|r| r.cluster.as_ref());
        if let Some(node) = cluster.and_then(|c| c.associated.get(address)) {
            instance.node = Some(node.clone());
        }
        status.instances.insert(address.clone(), instance);
    }
    for name in input.machine_sets {
        let before = previous.machine_sets.get(name);
        let verdict = input.report.and_then(|round| {
            let at_revision =
                before.and_then(|b| b.applied_revision.as_deref()).is_some_and(|r| Some(r) == input.applied);
            machineset::machine_set(name, context(input, round, at_revision))
        });
        let mut machine_set = match (verdict, before) {
            (Some(v), _) => machine_set_from(before, v, input.applied, now),
            (None, Some(b)) => b.clone(),
            (None, None) => {
                let message = "no cluster report yet (SSH-only, or not processed)";
                machine_set_from(None, Verdict::new(MachineSetPhase::Unknown, "NoClusterReport", message), None, now)
            }
        };
        machine_set.name.clone_from(name);
        status.machine_sets.insert(name.clone(), machine_set);
    }
    status.summary = summary(&previous.summary, input, &status);
    redact_all(&mut status, input.secrets);
    status
}

fn context<'a>(input: &RoundInput<'_>, round: &'a RoundReport, at_revision: bool) -> Context<'a> {
    // Suspended, every round is a dry run that reports drift.
    let suspended = input.suspended_by.is_some();
    Context {
        round,
        drift_check: input.drift_check || suspended,
        warn: input.drift_mode == DriftMode::Warn || suspended,
        at_revision,
        suspended,
    }
}

fn summary(previous: &Summary, input: &RoundInput<'_>, status: &Status) -> Summary {
    let invalid = (!input.invalid.is_empty())
        .then(|| Invalid { revision: input.attempted.to_owned(), errors: input.invalid.to_vec() });
    let kept = match previous.last_round {
        // The revision that was invalid has been replaced by a valid one.
        RoundResult::Invalid => RoundResult::NotRun,
        other => other,
    };
    let last_round =
        if invalid.is_some() { RoundResult::Invalid } else { input.report.and_then(round_result).unwrap_or(kept) };
    let suspended = input.suspended_by.map(|by| match &previous.suspended {
        Some(before) if before.by == by => before.clone(),
        _ => Suspended { since_revision: input.attempted.to_owned(), by: by.to_owned() },
    });
    // Suspended, a new revision is seen and checked but not applied.
    let last_applied_revision = match &suspended {
        Some(_) => previous.last_applied_revision.clone(),
        None => input.applied.map(str::to_owned),
    };
    Summary {
        last_applied_revision,
        last_attempted_revision: Some(input.attempted.to_owned()),
        last_round,
        instances: instance_counts(&status.instances),
        machine_sets: machine_set_counts(&status.machine_sets),
        platform: match input.report.and_then(|r| r.cluster.as_ref()).and_then(|c| c.platform) {
            Some(platform) => Some(platform.to_string()),
            None => previous.platform.clone(),
        },
        invalid,
        leaving: match input.report.and_then(|r| r.cluster.as_ref()) {
            Some(cluster) => cluster.deconfigures.iter().map(leaving).collect(),
            None => previous.leaving.clone(),
        },
        deconfigure_refused: match input.report.and_then(|r| r.cluster.as_ref()) {
            Some(cluster) => cluster.deconfigure_refused.clone(),
            None => previous.deconfigure_refused.clone(),
        },
        suspended,
        conditions: super::disagrees::conditions(
            &previous.conditions,
            input.report.and_then(|r| r.cluster.as_ref()),
            whole_seconds(input.now),
        ),
    }
}

fn leaving(d: &crate::cluster::deconfigure::DeconfigureReport) -> crate::status::model::Leaving {
    use crate::cluster::deconfigure::DeconfigureResult as R;
    let (state, reason) = match &d.result {
        R::Deconfigured { .. } => ("deconfigured", None),
        R::Failed { stage, reason } => ("failed", Some(format!("at {}: {reason}", stage.name()))),
        R::NotStarted { reason } => ("notStarted", Some(reason.clone())),
        R::Planned { .. } => ("planned", None),
    };
    crate::status::model::Leaving { node: d.node.clone(), address: d.address.clone(), state: state.to_owned(), reason }
}

pub(super) fn instance_from(
    before: Option<&InstanceStatus>,
    address: &str,
    v: Verdict<InstancePhase>,
    applied: Option<&str>,
    now: jiff::Timestamp,
) -> InstanceStatus {
    use InstancePhase::{Failed, Progressing, Unknown, Waiting};
    let active = matches!(v.phase, Progressing | Waiting | Failed | Unknown) && !v.stalled;
    let previous = before.map_or(&[][..], |b| b.conditions.as_slice());
    InstanceStatus {
        address: address.to_owned(),
        phase: v.phase,
        node: before.and_then(|b| b.node.clone()),
        applied_revision: revision(v.record_applied, applied, before.and_then(|b| b.applied_revision.as_deref())),
        conditions: conditions(previous, &v, v.phase == InstancePhase::Ready, active, now),
        drift: v.drift,
        last_error: v.class.map(|_| v.message),
        error_class: v.class,
    }
}

fn machine_set_from(
    before: Option<&MachineSetStatus>,
    v: Verdict<MachineSetPhase>,
    applied: Option<&str>,
    now: jiff::Timestamp,
) -> MachineSetStatus {
    let active = matches!(v.phase, MachineSetPhase::Progressing | MachineSetPhase::Failed) && !v.stalled;
    let previous = before.map_or(&[][..], |b| b.conditions.as_slice());
    MachineSetStatus {
        name: String::new(),
        phase: v.phase,
        applied_revision: revision(v.record_applied, applied, before.and_then(|b| b.applied_revision.as_deref())),
        conditions: conditions(previous, &v, v.phase == MachineSetPhase::Ready, active, now),
        drift: v.drift,
        last_error: v.class.map(|_| v.message),
        error_class: v.class,
    }
}

fn revision(record: bool, applied: Option<&str>, before: Option<&str>) -> Option<String> {
    match applied {
        Some(r) if record => Some(r.to_owned()),
        _ => before.map(str::to_owned),
    }
}

/// Ready, Reconciling, Stalled. Ready always carries the verdict's reason
/// and message; the others carry the reason when True and `AsExpected`
/// (Reconciling of a stalled object: `Stalled`) when False.
fn conditions<P>(
    previous: &[Condition],
    v: &Verdict<P>,
    ready: bool,
    active: bool,
    now: jiff::Timestamp,
) -> Vec<Condition> {
    let make = |kind, status: bool, reason: &str, message: &str| {
        Condition::after(previous, kind, status, reason, message.to_owned(), now)
    };
    let ready = make(ConditionType::Ready, ready, v.reason, &v.message);
    // The message is on Ready (and Stalled) already; once is enough.
    let reconciling = if active {
        make(ConditionType::Reconciling, true, v.reason, "")
    } else {
        make(ConditionType::Reconciling, false, if v.stalled { "Stalled" } else { "AsExpected" }, "")
    };
    let stalled = if v.stalled {
        make(ConditionType::Stalled, true, v.reason, &v.message)
    } else {
        make(ConditionType::Stalled, false, "AsExpected", "")
    };
    vec![ready, reconciling, stalled]
}

/// Kubernetes writes condition times in whole seconds.
pub(super) fn whole_seconds(now: jiff::Timestamp) -> jiff::Timestamp {
    jiff::Timestamp::from_second(now.as_second()).unwrap_or(now)
}

/// Every free text, carried over or new, through [`redact`]: a secret
/// added since an earlier round is scrubbed from old text too.
fn redact_all(status: &mut Status, secrets: &[String]) {
    let scrub = |t: &mut String| *t = redact(t, secrets);
    for i in status.instances.values_mut() {
        i.conditions.iter_mut().for_each(|c| scrub(&mut c.message));
        i.drift.iter_mut().for_each(scrub);
        i.last_error.iter_mut().for_each(scrub);
    }
    for m in status.machine_sets.values_mut() {
        m.conditions.iter_mut().for_each(|c| scrub(&mut c.message));
        m.drift.iter_mut().for_each(scrub);
        m.last_error.iter_mut().for_each(scrub);
    }
    if let Some(invalid) = &mut status.summary.invalid {
        invalid.errors.iter_mut().for_each(scrub);
    }
}
