//! What a plan shows and a report counts, one change on a node at a time:
//! [`Operation`], with every displayed value already redacted, and the
//! unified diff plans show files with. Pure.

use serde::Serialize;

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
    /// Remove a registry directory that is no longer desired: winfleet's
    /// own files in it, then the directory when nothing else is there.
    RemoveRegistry {
        /// Full path of the directory on the node.
        path: String,
        /// Why the removal is held back (the mass-removal guard).
        #[serde(skip_serializing_if = "Option::is_none")]
        refused: Option<String>,
        /// The entries winfleet did not write: they stay, and so does the
        /// directory (empty when none, or unknown in an offline plan).
        #[serde(skip_serializing_if = "Vec::is_empty")]
        kept: Vec<String>,
    },
    /// A desired registry directory winfleet does not write into (it is
    /// a symbolic link): the apply reports it failed.
    KeepRegistry {
        /// Full path of the directory on the node.
        path: String,
        /// Why.
        reason: String,
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
    /// Enable a Windows feature (the host reboots for it).
    EnableFeature {
        /// The feature.
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
        matches!(self, Operation::SetEnv { .. } | Operation::UnsetEnv { .. } | Operation::EnableFeature { .. })
    }

    /// The operation on one line (a file's diff comes separately).
    pub fn headline(&self) -> String {
        match self {
            Operation::WriteFile { path, created, .. } => format!("{} {path}", if *created { "+" } else { "~" }),
            Operation::RemoveRegistry { path, refused: None, kept } if kept.is_empty() => {
                format!("- {path} (registry directory removed)")
            }
            Operation::RemoveRegistry { path, refused: None, kept } => format!(
                "- {path} (winfleet's hosts.toml and marker removed; registry directory kept: {})",
                not_winfleets(kept)
            ),
            Operation::RemoveRegistry { path, refused: Some(reason), .. } => {
                format!("! {path} (registry directory kept: {reason})")
            }
            Operation::KeepRegistry { path, reason } => format!("! {path} (registry directory not written: {reason})"),
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
            Operation::EnableFeature { name } => format!("+ Windows feature {name} (enabled; the host reboots)"),
            Operation::StartService { name, why } => format!("▶ start service {name} ({why})"),
        }
    }
}

/// `ca.crt, client.key are not winfleet's`: the first few names (control
/// characters escaped), and how many more.
fn not_winfleets(kept: &[String]) -> String {
    const SHOWN: usize = 5;
    let mut names: Vec<String> = kept
        .iter()
        .take(SHOWN)
        .map(|k| k.chars().flat_map(|c| if c.is_control() { c.escape_default().collect() } else { vec![c] }).collect())
        .collect();
    if kept.len() > SHOWN {
        names.push(format!("{} more", kept.len() - SHOWN));
    }
    let verb = if kept.len() == 1 { "is" } else { "are" };
    format!("{} {verb} not winfleet's", names.join(", "))
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

/// A unified diff of two displayed (redacted) texts, as plans show files.
pub fn unified_diff(old_label: &str, new_label: &str, before: &str, after: &str) -> String {
    similar::TextDiff::from_lines(before, after)
        .unified_diff()
        .context_radius(3)
        .header(old_label, new_label)
        .to_string()
}
