//! Plans: what would change, as data.
//!
//! [`offline`] computes the plan between two revisions for review (no
//! cluster, no SSH). A [`Plan`] serialises (the versioned JSON format in
//! docs/plan-format.md) and displays ([`text`], [`markdown`], the latter
//! within a byte budget). [`guard`] is the mass-removal guard over
//! instances, which the round applies too; [`leaving`] says what a leaving
//! node's deconfigure does. Planning is pure: the same inputs give the
//! same plan, byte for byte.

mod budget;
pub mod fields;
pub mod guard;
pub mod json;
pub mod leaving;
pub mod markdown;
mod markdown_blocks;
mod markdown_group;
mod markdown_sections;
pub mod offline;
pub mod same;
pub mod sources;
pub mod summary;
pub mod text;

use serde::Serialize;
use serde_json::Value;

use crate::vocab::operation::Operation;

/// The version of the JSON format; bumped on any incompatible change.
pub const FORMAT_VERSION: u32 = 2;

/// Everything that would change between two desired states.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// The base revision (full SHA), if read from Git.
    pub base: Option<String>,
    /// The head revision (full SHA), if read from Git.
    pub head: Option<String>,
    /// Instances to configure, deconfigure or update.
    pub instances: InstanceChanges,
    /// Node operations, grouped: nodes with identical operations share one
    /// group (a mirror change on 10,000 nodes is one group).
    pub nodes: Vec<NodeGroup>,
    /// MachineSets to create, update or delete.
    pub machine_sets: Vec<MachineSetChange>,
    /// What a reviewer should know before merging.
    pub warnings: Vec<Warning>,
    /// Warnings that hold on the base revision as well: not this change's doing.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings_before: Vec<Warning>,
    /// The mass-removal guard's line when it will refuse every deconfigure
    /// ([`guard::removal_guard`]): the leaving instances stay.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deconfigure_refused: Option<String>,
}

/// A warning in a plan: a validation finding of the head revision (with
/// its file, position and JSON pointer, so CI can annotate the line) or the
/// plan's own (about the change as a whole).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Warning {
    /// The repository file, for a validation finding.
    pub file: Option<String>,
    /// 1-based line.
    pub line: Option<usize>,
    /// 1-based column.
    pub column: Option<usize>,
    /// JSON pointer in the document.
    pub pointer: Option<String>,
    /// Always `warning` (errors make the head invalid: no plan).
    pub severity: &'static str,
    /// `validation` (the head's finding) or `plan` (the change's effect).
    pub code: &'static str,
    /// What it is and, where it helps, what to do.
    pub message: String,
}

impl Warning {
    /// One of the plan's own warnings.
    pub fn plan(message: impl Into<String>) -> Self {
        Self {
            file: None,
            line: None,
            column: None,
            pointer: None,
            severity: "warning",
            code: "plan",
            message: message.into(),
        }
    }

    /// A validation finding of the head revision.
    pub fn validation(d: &crate::diagnostic::Diagnostic) -> Self {
        Self {
            file: Some(d.path.clone()),
            line: Some(d.line),
            column: Some(d.column),
            pointer: (!d.pointer.is_empty()).then(|| d.pointer.clone()),
            severity: "warning",
            code: "validation",
            message: d.message.clone(),
        }
    }
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(file) = &self.file {
            write!(f, "{file}:{}:{}: ", self.line.unwrap_or(0), self.column.unwrap_or(0))?;
            if let Some(pointer) = &self.pointer {
                write!(f, "{pointer}: ")?;
            }
            f.write_str("warning: ")?;
        }
        f.write_str(&self.message)
    }
}

impl Plan {
    /// Whether anything would change (warnings alone are not changes).
    pub fn has_changes(&self) -> bool {
        !(self.instances.configure.is_empty()
            && self.instances.deconfigure.is_empty()
            && self.instances.update.is_empty()
            && self.nodes.is_empty()
            && self.machine_sets.is_empty())
    }

    /// Number of nodes with at least one operation that runs: leaving
    /// nodes the mass-removal guard holds back are not changed.
    pub fn changed_nodes(&self) -> usize {
        let held = self.deconfigure_refused.is_some();
        self.nodes.iter().filter(|g| !(g.deconfigure && held)).map(|g| g.nodes.len()).sum()
    }

    /// Instances that stay and change: their settings, or the files and
    /// services on their nodes. A joining or leaving instance is counted
    /// as a configure or a deconfigure, never here.
    pub fn updated(&self) -> usize {
        let moving = self.joining_or_leaving();
        let mut updated: std::collections::BTreeSet<&str> =
            self.instances.update.iter().map(|u| u.address.as_str()).collect();
        updated
            .extend(self.nodes.iter().flat_map(|g| g.nodes.iter().map(String::as_str)).filter(|n| !moving.contains(n)));
        updated.len()
    }

    /// Safe reboots (cordon, drain, reboot, uncordon) the change causes on
    /// nodes that stay: a joining node is configured before it is a Node,
    /// and a leaving node's reboot is part of its deconfigure.
    pub fn reboots(&self) -> usize {
        let moving = self.joining_or_leaving();
        self.nodes.iter().map(|g| safely_rebooted(g, &moving)).sum()
    }

    /// The safe reboots of `group`'s nodes (as [`Plan::reboots`] counts
    /// them).
    pub fn group_reboots(&self, group: &NodeGroup) -> usize {
        match group.reboot_required && !group.deconfigure {
            // The set of moving nodes is only built when it can matter.
            true => safely_rebooted(group, &self.joining_or_leaving()),
            false => 0,
        }
    }

    fn joining_or_leaving(&self) -> std::collections::BTreeSet<&str> {
        let i = &self.instances;
        i.configure.iter().chain(&i.deconfigure).map(|s| s.address.as_str()).collect()
    }
}

/// The nodes of `group` that a safe reboot takes: none of a leaving group
/// (its reboot is part of its deconfigure), and none that join or leave.
fn safely_rebooted(group: &NodeGroup, moving: &std::collections::BTreeSet<&str>) -> usize {
    if !group.reboot_required || group.deconfigure {
        return 0;
    }
    group.nodes.iter().filter(|n| !moving.contains(n.as_str())).count()
}

/// Instance-level changes.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceChanges {
    /// New instances, to join the cluster.
    pub configure: Vec<InstanceSummary>,
    /// Instances that left the repository, to be removed from the cluster.
    pub deconfigure: Vec<InstanceSummary>,
    /// Instances whose settings changed.
    pub update: Vec<InstanceUpdate>,
}

/// An instance as listed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceSummary {
    /// Canonical address.
    pub address: String,
    /// SSH user.
    pub username: String,
    /// SSH port.
    pub port: u16,
    /// Shell dialect.
    pub shell: String,
    /// The file that lists it.
    pub origin: String,
}

/// An instance whose settings changed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceUpdate {
    /// Canonical address.
    pub address: String,
    /// The changed settings.
    pub changes: Vec<SettingChange>,
}

/// One setting before and after (`None` = absent).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SettingChange {
    /// `username`, `port`, `shell`, `labels/<key>`, `taints/<key>:<effect>`.
    pub setting: String,
    /// Value in the base.
    pub from: Option<String>,
    /// Value in the head.
    pub to: Option<String>,
}

/// Nodes that get the same operations.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeGroup {
    /// Canonical addresses, addresses numerically, then names naturally
    /// ([`crate::vocab::order::address`]).
    pub nodes: Vec<String>,
    /// Operations, files first (by path, in natural order), then the
    /// lifecycle's, then environment (by name).
    pub operations: Vec<Operation>,
    /// Whether the operations need a safe reboot (cordon, drain, reboot);
    /// for leaving nodes, whether their deconfigure reboots them.
    pub reboot_required: bool,
    /// The nodes leave (their instances left the repository): the
    /// operations are what their deconfigure removes ([`leaving`]).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub deconfigure: bool,
}

/// What happens to a MachineSet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum MachineSetAction {
    /// Created (server-side apply).
    Create,
    /// Updated (server-side apply).
    Update,
    /// Deleted (only MachineSets winfleet manages).
    Delete,
}

/// A MachineSet change with its field-level diff.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineSetChange {
    /// MachineSet name.
    pub name: String,
    /// Create, update or delete.
    pub action: MachineSetAction,
    /// Replicas before (base) and after (head), when they differ.
    pub replicas: Option<(Option<i64>, Option<i64>)>,
    /// Changed leaf fields, sorted by pointer.
    pub fields: Vec<fields::FieldChange>,
}

/// The replica count as shown: `replicas 3` for a create or delete,
/// `replicas 2 -> 3` for an update that changes it.
pub fn replicas_text(change: &MachineSetChange, arrow: &str) -> Option<String> {
    let show = |r: Option<i64>| r.map_or_else(|| "unset".to_owned(), |r| r.to_string());
    let (from, to) = change.replicas?;
    Some(match change.action {
        MachineSetAction::Create => format!("replicas {}", show(to)),
        MachineSetAction::Delete => format!("replicas {}", show(from)),
        MachineSetAction::Update => format!("replicas {} {arrow} {}", show(from), show(to)),
    })
}

/// Shortens a revision for display.
pub fn short(revision: Option<&str>) -> String {
    revision.map_or_else(|| "working tree".to_owned(), |r| r.chars().take(12).collect())
}

/// JSON value as shown in plans: strings bare, everything else as JSON.
pub fn show_value(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}
