//! What a round found and did, per node: data first, then its text and
//! JSON forms. Every value shown is redacted (operations carry display
//! forms only).

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::Serialize;

use crate::lifecycle::Mode;
use crate::node::outcome::Outcome;
use crate::vocab::operation::Operation;

/// The version of the round report's JSON (docs/apply-format.md), apart
/// from the plan's.
pub const FORMAT_VERSION: u32 = 1;

/// Where a node failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Stage {
    /// Connecting or observing.
    Observe,
    /// Uploading payload files.
    Upload,
    /// Applying.
    Apply,
}

impl Stage {
    /// The stage in words (`observe`, `apply`).
    pub fn name(self) -> &'static str {
        match self {
            Stage::Observe => "observe",
            Stage::Upload => "upload",
            Stage::Apply => "apply",
        }
    }
}

/// One planned operation and, after an apply, its outcome.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OpReport {
    /// The operation (display form).
    #[serde(flatten)]
    pub operation: Operation,
    /// `None` in a dry run.
    #[serde(flatten)]
    pub outcome: Option<Outcome>,
}

/// How a node's round ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum NodeResult {
    /// Not processed (yet).
    Pending,
    /// Observed, planned and (unless a dry run) applied.
    Done {
        /// Planned operations with their outcomes.
        operations: Vec<OpReport>,
        /// Managed files and variables that already had their desired value.
        in_sync: usize,
        /// An environment change waits for a safe reboot.
        reboot_required: bool,
    },
    /// The node could not be observed or changed.
    Failed {
        /// Where it failed.
        stage: Stage,
        /// Why, in the node's or the transport's words.
        reason: String,
    },
}

/// One node's round.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeReport {
    /// Canonical address.
    pub address: String,
    /// Host name, once observed.
    pub hostname: Option<String>,
    /// The name the kubelet registers under when its `--hostname-override`
    /// gives another than the host name (AWS, GCP, vSphere), once known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// OS and build, once observed.
    pub os: Option<String>,
    /// State of each observed service (`running`, `stopped`, `absent`, …).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub services: BTreeMap<String, String>,
    /// The node lifecycle, when the repository has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<LifecycleReport>,
    /// What happened.
    #[serde(flatten)]
    pub result: NodeResult,
}

/// Where a node's lifecycle stands after its round.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LifecycleReport {
    /// What the round could do.
    pub mode: Mode,
    /// The desired version.
    pub version: String,
    /// What waits, and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub waiting: Vec<String>,
    /// Why the lifecycle could not be touched at all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Bytes uploaded this round.
    pub uploaded_bytes: u64,
    /// The host reboots before its configuration goes on (the Containers
    /// feature); a host with no Node is rebooted by the round itself.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub reboot_first: bool,
}

/// Operation counts of one node or a whole round.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    /// Operations applied.
    pub applied: usize,
    /// Items already in sync, and operations the script found done.
    pub unchanged: usize,
    /// Operations that failed (a failed node counts once).
    pub failed: usize,
    /// Operations planned and not applied (dry run).
    pub planned: usize,
}

impl NodeReport {
    /// A node not processed yet.
    pub fn new(address: &str) -> Self {
        Self {
            address: address.to_owned(),
            hostname: None,
            node_name: None,
            os: None,
            services: BTreeMap::new(),
            lifecycle: None,
            result: NodeResult::Pending,
        }
    }

    /// Whether the node failed, or any of its operations did, or its
    /// lifecycle could not be touched.
    pub fn failed(&self) -> bool {
        self.counts().failed > 0
            || !matches!(self.result, NodeResult::Done { .. })
            || self.lifecycle.as_ref().is_some_and(|l| l.error.is_some())
    }

    /// Whether the node has (or had, before the apply) anything to change.
    pub fn has_changes(&self) -> bool {
        matches!(&self.result, NodeResult::Done { operations, reboot_required, .. } if !operations.is_empty() || *reboot_required)
    }

    /// Operation counts.
    pub fn counts(&self) -> Counts {
        let mut counts = Counts::default();
        match &self.result {
            NodeResult::Pending => {}
            NodeResult::Failed { .. } => counts.failed = 1,
            NodeResult::Done { operations, in_sync, .. } => {
                counts.unchanged = *in_sync;
                for op in operations {
                    match &op.outcome {
                        None => counts.planned += 1,
                        Some(Outcome::Applied) => counts.applied += 1,
                        Some(Outcome::Unchanged) => counts.unchanged += 1,
                        Some(Outcome::Failed(_)) => counts.failed += 1,
                    }
                }
            }
        }
        counts
    }
}

/// The line a node gets in progress output and in the summary:
/// `WHO: OUTCOME` (see [`node_who`] and [`node_outcome`]).
pub fn node_line(report: &NodeReport) -> String {
    format!("{}: {}", node_who(report), node_outcome(report))
}

/// The node: its address, with its hostname and OS once observed.
pub fn node_who(report: &NodeReport) -> String {
    match (&report.hostname, &report.os, &report.node_name) {
        (Some(h), Some(os), Some(name)) => format!("{} ({h}, {os}; node name {name})", report.address),
        (Some(h), Some(os), None) => format!("{} ({h}, {os})", report.address),
        _ => report.address.clone(),
    }
}

/// Why the node's lifecycle could not be touched at all (a payload that
/// is not the pinned one, unreadable cluster material), if so.
pub fn blocked(report: &NodeReport) -> Option<&str> {
    report.lifecycle.as_ref()?.error.as_deref()
}

/// How the node's round ended, in words (`in sync`, `3 applied, …`); a
/// blocked lifecycle first, with its reason (it fails the node).
pub fn node_outcome(report: &NodeReport) -> String {
    let outcome = files_outcome(report);
    match blocked(report) {
        Some(why) => format!("BLOCKED (lifecycle): {why}; otherwise {outcome}"),
        None => outcome,
    }
}

fn files_outcome(report: &NodeReport) -> String {
    let c = report.counts();
    match &report.result {
        NodeResult::Pending => "pending".to_owned(),
        NodeResult::Failed { stage, reason } => format!("FAILED ({}): {reason}", stage.name()),
        NodeResult::Done { operations, reboot_required, .. } if operations.is_empty() => {
            let reboot = if *reboot_required { ", reboot required" } else { "" };
            format!("in sync{reboot}")
        }
        NodeResult::Done { operations, reboot_required, .. } if operations.iter().all(|o| o.outcome.is_none()) => {
            let reboot = if *reboot_required { ", reboot required" } else { "" };
            format!("{} change(s){reboot}", operations.len())
        }
        NodeResult::Done { reboot_required, .. } => {
            let reboot = if *reboot_required { ", reboot required" } else { "" };
            format!("{} applied, {} unchanged, {} failed{reboot}", c.applied, c.unchanged, c.failed)
        }
    }
}

/// The round as text: a line per node, its operations, and a summary.
pub fn render_text(reports: &[NodeReport], dry_run: bool) -> String {
    let mut out = String::new();
    for report in reports {
        let _ = writeln!(out, "{}", node_line(report));
        let NodeResult::Done { operations, reboot_required, .. } = &report.result else { continue };
        for op in operations {
            let outcome = op.outcome.as_ref().map(|o| format!(": {o}")).unwrap_or_default();
            let _ = writeln!(out, "    {}{outcome}", op.operation.headline());
            if dry_run && let Operation::WriteFile { diff, .. } = &op.operation {
                for line in diff.lines() {
                    let _ = writeln!(out, "        {line}");
                }
            }
        }
        match report.lifecycle.as_ref().filter(|l| l.reboot_first) {
            Some(l) => {
                let _ = writeln!(out, "    ! reboot first: {}", l.waiting.join("; "));
            }
            None if *reboot_required => {
                let _ = writeln!(
                    out,
                    "    ! reboot owed: environment changes take effect after a safe reboot (cordon, drain, reboot, uncordon)"
                );
            }
            None => {}
        }
    }
    let _ = writeln!(out, "{}", summary(reports, dry_run));
    out
}

/// One line: nodes by state and operations by outcome. A node whose
/// lifecycle is blocked counts as failed, and the line says why.
pub fn summary(reports: &[NodeReport], dry_run: bool) -> String {
    let done = |r: &&NodeReport| matches!(r.result, NodeResult::Done { .. });
    let unfinished = reports.iter().filter(|r| !done(r)).count();
    let failed = reports.iter().filter(|r| !done(r) || blocked(r).is_some()).count();
    let mut reasons: Vec<&str> = reports.iter().filter_map(blocked).collect();
    let changed = reports
        .iter()
        .filter(|r| blocked(r).is_none())
        .filter(|r| matches!(&r.result, NodeResult::Done { operations, .. } if !operations.is_empty()))
        .count();
    let blocked = match reasons.len() {
        0 => String::new(),
        n => {
            reasons.sort_unstable();
            reasons.dedup();
            format!(" ({n} blocked: {})", reasons.join("; "))
        }
    };
    let reboots =
        reports.iter().filter(|r| matches!(&r.result, NodeResult::Done { reboot_required: true, .. })).count();
    let reboots = if reboots > 0 { format!(" ({reboots} owe a reboot)") } else { String::new() };
    let total = totals(reports);
    let in_sync = reports.len().saturating_sub(failed + changed);
    if dry_run {
        format!(
            "Dry run: {} node(s): {in_sync} in sync, {changed} with changes ({} operation(s)), {failed} failed{blocked}{reboots}.",
            reports.len(),
            total.planned
        )
    } else {
        format!(
            "Applied: {} node(s): {in_sync} in sync, {changed} changed, {failed} failed{blocked}{reboots}; operations: {} applied, {} unchanged, {} failed.",
            reports.len(),
            total.applied,
            total.unchanged,
            total.failed.saturating_sub(unfinished)
        )
    }
}

/// Counts over all nodes.
pub fn totals(reports: &[NodeReport]) -> Counts {
    reports.iter().map(NodeReport::counts).fold(Counts::default(), |a, c| Counts {
        applied: a.applied + c.applied,
        unchanged: a.unchanged + c.unchanged,
        failed: a.failed + c.failed,
        planned: a.planned + c.planned,
    })
}

/// The round as versioned JSON.
pub fn render_json(reports: &[NodeReport], dry_run: bool) -> String {
    let value = serde_json::json!({
        "formatVersion": FORMAT_VERSION,
        "dryRun": dry_run,
        "nodes": reports,
        "totals": totals(reports),
    });
    let mut text = serde_json::to_string_pretty(&value).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(address: &str, blocked: Option<&str>) -> NodeReport {
        let lifecycle = LifecycleReport {
            mode: Mode::Prepare,
            version: "v1".into(),
            waiting: Vec::new(),
            error: blocked.map(str::to_owned),
            uploaded_bytes: 0,
            reboot_first: false,
        };
        NodeReport {
            lifecycle: Some(lifecycle),
            result: NodeResult::Done { operations: Vec::new(), in_sync: 3, reboot_required: false },
            ..NodeReport::new(address)
        }
    }

    #[test]
    fn issue_23_a_blocked_lifecycle_fails_the_node_and_its_reason_is_on_its_line_and_in_the_summary() {
        let why = "the payload directory /p has digest sha256:aa, but the repository pins sha256:bb";
        let reports = [done("10.0.0.1", Some(why)), done("10.0.0.2", Some(why)), done("10.0.0.3", None)];
        assert_eq!(node_outcome(&reports[0]), format!("BLOCKED (lifecycle): {why}; otherwise in sync"));
        assert_eq!(node_outcome(&reports[2]), "in sync");
        assert!(reports[0].failed());
        assert_eq!(
            summary(&reports, false),
            format!(
                "Applied: 3 node(s): 1 in sync, 0 changed, 2 failed (2 blocked: {why}); operations: 0 applied, 9 unchanged, 0 failed."
            )
        );
        assert_eq!(
            summary(&reports, true),
            format!("Dry run: 3 node(s): 1 in sync, 0 with changes (0 operation(s)), 2 failed (2 blocked: {why}).")
        );
    }
}
