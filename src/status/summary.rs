//! The summary's numbers and words: counts by phase, the round's result,
//! the one-line summary and the status commit message. Pure.

use std::collections::BTreeMap;

use crate::reconcile::report::{ClusterReport, RoundReport};

use super::model::{
    InstanceCounts, InstancePhase, InstanceStatus, MachineSetCounts, MachineSetPhase, MachineSetStatus, RoundResult,
    Status,
};

/// Instances by phase.
pub fn instance_counts(instances: &BTreeMap<String, InstanceStatus>) -> InstanceCounts {
    let mut c = InstanceCounts::default();
    for status in instances.values() {
        let slot = match status.phase {
            InstancePhase::Ready => &mut c.ready,
            InstancePhase::Progressing => &mut c.progressing,
            InstancePhase::Drifted => &mut c.drifted,
            InstancePhase::Waiting => &mut c.waiting,
            InstancePhase::Failed => &mut c.failed,
            InstancePhase::Unknown => &mut c.unknown,
        };
        *slot += 1;
    }
    c
}

/// MachineSets by phase.
pub fn machine_set_counts(machine_sets: &BTreeMap<String, MachineSetStatus>) -> MachineSetCounts {
    let mut c = MachineSetCounts::default();
    for status in machine_sets.values() {
        let slot = match status.phase {
            MachineSetPhase::Ready => &mut c.ready,
            MachineSetPhase::Progressing => &mut c.progressing,
            MachineSetPhase::Drifted => &mut c.drifted,
            MachineSetPhase::Conflict => &mut c.conflict,
            MachineSetPhase::Failed => &mut c.failed,
            MachineSetPhase::Unknown => &mut c.unknown,
        };
        *slot += 1;
    }
    c
}

/// How a round ended: `None` when it processed nothing (every node
/// pending, no cluster part), so the previous result stands.
pub fn round_result(round: &RoundReport) -> Option<RoundResult> {
    let processed = round.nodes.iter().filter(|n| !matches!(n.result, crate::engine::report::NodeResult::Pending));
    let (mut units, mut failed) = (0, 0);
    for node in processed {
        units += 1;
        failed += usize::from(node.failed());
    }
    if let Some(cluster) = &round.cluster {
        units += 1;
        failed += usize::from(ClusterReport::failed(cluster));
    }
    match (units, failed) {
        (0, _) => None,
        (_, 0) => Some(RoundResult::Succeeded),
        (u, f) if u == f => Some(RoundResult::Failed),
        _ => Some(RoundResult::PartiallyFailed),
    }
}

/// One line about the fleet: `12 ready, 1 failed; MachineSets: 2 ready`,
/// or `invalid: 3 error(s)` when the attempted revision is invalid.
pub fn summary_line(status: &Status) -> String {
    if let Some(invalid) = &status.summary.invalid {
        return format!("invalid: {} error(s)", invalid.errors.len());
    }
    let i = instance_counts(&status.instances);
    let instances = phases(&[
        (i.ready, "ready"),
        (i.progressing, "progressing"),
        (i.drifted, "drifted"),
        (i.waiting, "waiting"),
        (i.failed, "failed"),
        (i.unknown, "unknown"),
    ]);
    let mut line = if instances.is_empty() { "no instances".to_owned() } else { instances };
    let m = machine_set_counts(&status.machine_sets);
    let machine_sets = phases(&[
        (m.ready, "ready"),
        (m.progressing, "progressing"),
        (m.drifted, "drifted"),
        (m.conflict, "conflict"),
        (m.failed, "failed"),
        (m.unknown, "unknown"),
    ]);
    if !machine_sets.is_empty() {
        line.push_str("; MachineSets: ");
        line.push_str(&machine_sets);
    }
    line
}

fn phases(counts: &[(usize, &str)]) -> String {
    counts.iter().filter(|(n, _)| *n > 0).map(|(n, word)| format!("{n} {word}")).collect::<Vec<_>>().join(", ")
}

/// The status commit's message: a subject naming the short revision and
/// the summary line, and a trailer naming the full source revision.
pub fn commit_message(revision: &str, status: &Status) -> String {
    let short: String = revision.chars().take(7).collect();
    format!("status: {short} {}\n\nWinfleet-Revision: {revision}\n", summary_line(status))
}
