//! One change of a node's lifecycle, as the plan orders them and the
//! dialects carry them out.

use super::facts::Definition;
use super::facts::Leftover;
use super::manifest::ServiceDef;
use super::{GeneratedFile, NodeFile};
use crate::vocab::operation::Operation;

/// One lifecycle change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LifecycleChange<'a> {
    /// Stop a running service before its files or definition change.
    Stop {
        /// The service.
        service: &'a ServiceDef,
    },
    /// Create a directory (recorded as winfleet's).
    CreateDir {
        /// Node path.
        path: &'a str,
    },
    /// Upload a payload file (temporary file, SHA-256 checked, renamed).
    Upload {
        /// The file.
        file: &'a NodeFile,
        /// SHA-256 on the node; `None` when absent.
        observed: Option<&'a str>,
    },
    /// Write a file rendered from cluster material.
    WriteGenerated {
        /// The file.
        file: &'a GeneratedFile,
        /// SHA-256 on the node; `None` when absent.
        observed: Option<&'a str>,
    },
    /// Create or update a service's definition.
    Define {
        /// The service.
        service: &'a ServiceDef,
        /// The definition it gets.
        definition: Definition,
        /// posix: the unit file.
        unit: Option<String>,
        /// The resolved command line.
        command: String,
        /// Whether the service is new.
        created: bool,
    },
    /// Stop and delete a service an older version installed that the
    /// manifest no longer has (from the install record).
    RemoveService {
        /// Its name.
        name: &'a str,
    },
    /// Remove a file an older version wrote that is no longer desired.
    RemoveFile {
        /// Node path.
        path: &'a str,
    },
    /// Deconfigure: remove the kubelet's certificates (`kubelet-*.pem`)
    /// from a directory recorded as a service's certificate directory.
    RemoveCerts {
        /// Node path.
        dir: &'a str,
    },
    /// Deconfigure: remove a directory winfleet created, when empty (what
    /// someone else put there stays, and so does the directory).
    RemoveDir {
        /// Node path.
        path: &'a str,
    },
    /// Remove what a crash left of winfleet's own: an upload's staging
    /// directory (with the partial files in it) or a write's temporary file.
    RemoveLeftover {
        /// Node path.
        path: &'a str,
        /// Which of the two.
        kind: Leftover,
    },
    /// Enable the Windows Containers feature (posix: write the
    /// modules-load.d file of its kernel modules); the host reboots before
    /// anything else is configured ([`super::containers`]).
    EnableContainers,
    /// Deconfigure: remove the install record itself, last, and only when
    /// every removal before it in the same script succeeded.
    ForgetRecord,
    /// Start a service (after its side-effect pre-scripts).
    Start {
        /// The service.
        service: &'a ServiceDef,
        /// Pre-scripts without a variable, node arguments in place.
        pre_scripts: Vec<String>,
        /// Why it (re)starts.
        why: String,
    },
}

impl LifecycleChange<'_> {
    /// The change as plans and reports show it (secrets redacted).
    pub fn operation(&self) -> Operation {
        match self {
            LifecycleChange::Stop { service } => Operation::StopService { name: service.name.clone() },
            LifecycleChange::CreateDir { path } => Operation::CreateDirectory { path: (*path).to_owned() },
            LifecycleChange::Upload { file, observed } => Operation::UploadFile {
                path: file.path.clone(),
                source: file.rel.clone(),
                size: file.size,
                created: observed.is_none(),
            },
            LifecycleChange::WriteGenerated { file, observed } => Operation::WriteSecret {
                path: file.path.clone(),
                created: observed.is_none(),
                content: file.file.display().to_owned(),
            },
            LifecycleChange::Define { service, command, created, .. } => {
                Operation::DefineService { name: service.name.clone(), created: *created, command: command.clone() }
            }
            LifecycleChange::Start { service, why, .. } => {
                Operation::StartService { name: service.name.clone(), why: why.clone() }
            }
            LifecycleChange::RemoveService { name } => Operation::RemoveService { name: (*name).to_owned() },
            LifecycleChange::RemoveFile { path } => Operation::RemoveFile { path: (*path).to_owned() },
            LifecycleChange::RemoveCerts { dir } => Operation::RemoveCertificates { dir: (*dir).to_owned() },
            LifecycleChange::RemoveDir { path } => Operation::RemoveDirectory { path: (*path).to_owned() },
            LifecycleChange::RemoveLeftover { path, kind } => {
                Operation::RemoveLeftover { path: (*path).to_owned(), staging: *kind == Leftover::Staging }
            }
            LifecycleChange::ForgetRecord => Operation::ForgetRecord,
            LifecycleChange::EnableContainers => {
                Operation::EnableFeature { name: super::containers::FEATURE.to_owned() }
            }
        }
    }

    /// Whether the change runs in the preparation script.
    pub fn is_preparation(&self) -> bool {
        matches!(self, LifecycleChange::CreateDir { .. })
    }
}

/// The lifecycle plan of one node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LifecyclePlan<'a> {
    /// What changes, in order.
    pub changes: Vec<LifecycleChange<'a>>,
    /// What cannot be done in this round, and why.
    pub waiting: Vec<String>,
    /// Why nothing of the lifecycle can be done (a payload that is not
    /// the pinned one, unreadable cluster material): an error.
    pub error: Option<String>,
    /// Items already as desired.
    pub in_sync: usize,
    /// The host reboots before its configuration goes on (the Containers
    /// feature was enabled, now or earlier).
    pub reboot: bool,
}
