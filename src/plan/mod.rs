//! Plans: what would change, as data (STYLE.md habit 2).
//!
//! [`offline`] computes the plan between two revisions for review (no
//! cluster, no SSH). A [`Plan`] serialises (the versioned JSON format in
//! docs/plan-format.md) and displays ([`text`], [`markdown`]). Planning is
//! pure: the same inputs give the same plan, byte for byte.

pub mod fields;
pub mod json;
pub mod markdown;
pub mod offline;
pub mod text;

use serde::Serialize;
use serde_json::Value;

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

    /// Number of nodes with at least one operation.
    pub fn changed_nodes(&self) -> usize {
        self.nodes.iter().map(|g| g.nodes.len()).sum()
    }

    /// Instances that stay and change: their settings, or the files and
    /// services on their nodes.
    pub fn updated(&self) -> usize {
        let new: std::collections::BTreeSet<&str> =
            self.instances.configure.iter().map(|s| s.address.as_str()).collect();
        let mut updated: std::collections::BTreeSet<&str> =
            self.instances.update.iter().map(|u| u.address.as_str()).collect();
        updated.extend(self.nodes.iter().flat_map(|g| g.nodes.iter().map(String::as_str)).filter(|n| !new.contains(n)));
        updated.len()
    }

    /// Safe reboots (cordon, drain, reboot, uncordon) the change causes.
    pub fn reboots(&self) -> usize {
        self.nodes.iter().filter(|g| g.reboot_required).map(|g| g.nodes.len()).sum()
    }
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
    /// Canonical addresses, sorted.
    pub nodes: Vec<String>,
    /// Operations, files first (by path), then environment (by name).
    pub operations: Vec<Operation>,
    /// Whether the operations need a safe reboot (cordon, drain, reboot).
    pub reboot_required: bool,
}

/// One operation on a node. Every displayed value is redacted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "op", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum Operation {
    /// Write a registry's hosts.toml (new or changed).
    WriteFile {
        /// Full path on the node.
        path: String,
        /// Whether the file is new.
        created: bool,
        /// Unified diff of the displayed (redacted) content.
        diff: String,
    },
    /// Remove a registry directory that is no longer desired.
    RemoveRegistry {
        /// Full path of the directory on the node.
        path: String,
        /// Why the removal is held back (the mass-removal guard).
        #[serde(skip_serializing_if = "Option::is_none")]
        refused: Option<String>,
    },
    /// Set a machine-scope environment variable (needs a safe reboot).
    SetEnv {
        /// Variable name.
        name: String,
        /// Previous value (redacted), if set.
        from: Option<String>,
        /// New value (redacted).
        to: String,
    },
    /// Remove a machine-scope environment variable (needs a safe reboot).
    UnsetEnv {
        /// Variable name.
        name: String,
        /// Previous value (redacted).
        from: String,
    },
    /// Create a directory (recorded as winfleet's).
    CreateDirectory {
        /// Node path.
        path: String,
    },
    /// Upload a payload file over SFTP.
    UploadFile {
        /// Node path.
        path: String,
        /// Path in the payload.
        source: String,
        /// Size in bytes.
        size: u64,
        /// Whether the file is new on the node.
        created: bool,
    },
    /// Write a file rendered from cluster material (secret: only a hash
    /// prefix is shown).
    WriteSecret {
        /// Node path.
        path: String,
        /// Whether the file is new on the node.
        created: bool,
        /// `<redacted> sha256:<prefix>`.
        content: String,
    },
    /// Create or update a service.
    DefineService {
        /// Service name.
        name: String,
        /// Whether the service is new.
        created: bool,
        /// Its command line, variables resolved (or with their names, in
        /// an offline plan).
        command: String,
    },
    /// Change the pinned payload (every file whose content differs is
    /// replaced, with an upgrade).
    PinPayload {
        /// The digest before (`None`: no payload yet).
        from: Option<String>,
        /// The digest after.
        to: String,
    },
    /// Stop and delete a service an older version installed.
    RemoveService {
        /// Service name.
        name: String,
    },
    /// Remove a file an older version wrote.
    RemoveFile {
        /// Node path.
        path: String,
    },
    /// Remove the kubelet's certificates from a directory (deconfigure).
    RemoveCertificates {
        /// Node path.
        dir: String,
    },
    /// Remove a directory winfleet created, when empty (deconfigure).
    RemoveDirectory {
        /// Node path.
        path: String,
    },
    /// Remove what a crash left of winfleet's own: an upload's staging
    /// directory or a write's temporary file.
    RemoveLeftover {
        /// Node path.
        path: String,
        /// Whether it is a staging directory (else a temporary file).
        staging: bool,
    },
    /// Remove winfleet's install record (the last step of a deconfigure).
    ForgetRecord,
    /// Stop a service before its files or definition change.
    StopService {
        /// Service name.
        name: String,
    },
    /// Start (or restart) a service.
    StartService {
        /// Service name.
        name: String,
        /// Why.
        why: String,
    },
}

impl Operation {
    /// Whether the operation disrupts workloads (needs cordon and drain).
    pub fn is_disruptive(&self) -> bool {
        matches!(self, Operation::SetEnv { .. } | Operation::UnsetEnv { .. })
    }

    /// The operation on one line (a file's diff comes separately).
    pub fn headline(&self) -> String {
        match self {
            Operation::WriteFile { path, created, .. } => format!("{} {path}", if *created { "+" } else { "~" }),
            Operation::RemoveRegistry { path, refused: None } => format!("- {path} (registry directory removed)"),
            Operation::RemoveRegistry { path, refused: Some(reason) } => {
                format!("! {path} (registry directory kept: {reason})")
            }
            Operation::SetEnv { name, from, to } => {
                let from = from.as_ref().map_or_else(|| "(unset)".to_owned(), |f| format!("{f:?}"));
                format!("~ environment {name}: {from} -> {to:?}")
            }
            Operation::UnsetEnv { name, from } => format!("- environment {name}: {from:?} -> (unset)"),
            Operation::CreateDirectory { path } => format!("+ {path}/ (directory)"),
            Operation::UploadFile { path, source, size, created } => {
                format!("{} {path} (upload {source}, {})", if *created { "+" } else { "~" }, bytes(*size))
            }
            Operation::WriteSecret { path, created, content } => {
                format!("{} {path} ({content})", if *created { "+" } else { "~" })
            }
            Operation::DefineService { name, created, command } => {
                format!("{} service {name}: {command}", if *created { "+" } else { "~" })
            }
            Operation::PinPayload { from: None, to } => format!("+ payload {to} (the files from --payload-dir)"),
            Operation::PinPayload { from: Some(from), to } => format!("~ payload {from} -> {to}"),
            Operation::StopService { name } => format!("■ stop service {name}"),
            Operation::RemoveService { name } => format!("- service {name} (installed for the node)"),
            Operation::RemoveFile { path } => format!("- {path} (installed for the node)"),
            Operation::RemoveCertificates { dir } => format!("- {dir}/kubelet-*.pem (the kubelet's certificates)"),
            Operation::RemoveDirectory { path } => format!("- {path}/ (created for the node; kept if not empty)"),
            Operation::RemoveLeftover { path, staging: true } => {
                format!("- {path}/ (staging left by an interrupted upload)")
            }
            Operation::RemoveLeftover { path, staging: false } => {
                format!("- {path} (temporary file left by an interrupted write)")
            }
            Operation::ForgetRecord => "- install record".to_owned(),
            Operation::StartService { name, why } => format!("▶ start service {name} ({why})"),
        }
    }
}

/// A size for people: `812 B`, `3.4 KiB`, `50.0 MiB`.
pub fn bytes(n: u64) -> String {
    match n {
        n if n < 1024 => format!("{n} B"),
        n if n < 1 << 20 => format!("{:.1} KiB", n as f64 / 1024.0),
        n if n < 1 << 30 => format!("{:.1} MiB", n as f64 / f64::from(1u32 << 20)),
        n => format!("{:.1} GiB", n as f64 / f64::from(1u32 << 30)),
    }
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

/// A unified diff of two displayed (redacted) texts, as plans show files.
pub fn unified_diff(old_label: &str, new_label: &str, before: &str, after: &str) -> String {
    similar::TextDiff::from_lines(before, after)
        .unified_diff()
        .context_radius(3)
        .header(old_label, new_label)
        .to_string()
}

/// JSON value as shown in plans: strings bare, everything else as JSON.
pub fn show_value(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}
