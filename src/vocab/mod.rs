//! The vocabulary every stage shares: the shell dialect a node speaks
//! ([`Shell`]), the files winfleet writes ([`file`]), the framing of node
//! reports ([`report`]), the operations plans show ([`operation`]), the
//! order lists are read in ([`order`]), systemd's file formats
//! ([`systemd`]), Kubernetes versions ([`kube_version`]), the cluster's
//! platform ([`platform`]). A leaf: it imports nothing of winfleet's, so
//! any stage may use it. Pure: no IO.

pub mod file;
pub mod kube_version;
pub mod operation;
pub mod order;
pub mod platform;
pub mod report;
pub mod systemd;

use serde::{Deserialize, Serialize};

/// The shell dialect winfleet speaks to a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Shell {
    /// Windows PowerShell, run as `powershell.exe … -Command -`.
    Powershell,
    /// POSIX sh (Linux nodes and the test fleet).
    Posix,
}

impl Shell {
    /// The name as written in the repository.
    pub fn as_str(self) -> &'static str {
        match self {
            Shell::Powershell => "powershell",
            Shell::Posix => "posix",
        }
    }
}
