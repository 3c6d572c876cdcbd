//! What a crash can leave of winfleet's own on a node, and when the next
//! round removes it (issue 23). Pure.
//!
//! An upload lands in `<dir>/.winfleet-staging/<name>` and a write goes
//! through `<dir>/.<name>.winfleet-tmp` (on Windows a replaced file is kept
//! as `<path>.winfleet-old` for a moment too); a connection or a script cut
//! off leaves a partial file or an empty staging directory behind. The
//! observation looks for exactly those names next to the files winfleet
//! writes: the spec's payload and generated files and unit files, and, when
//! it reads the install record, the recorded files and directories (an
//! older layout, or a leaving node whose payload is not at hand). A file of
//! someone else's named alike anywhere else is never looked at, let alone
//! removed.
//!
//! A staging directory is removed only when no upload goes into it this
//! round (the apply script runs after the uploads: they are in it by
//! then); a temporary file is removed before any write, which makes its
//! own.

use super::change::LifecycleChange;
use super::facts::{Leftover, LifecycleFacts};
use super::{LifecycleSpec, NodeFile};
use crate::vocab::Shell;

/// The staging directory of uploads into a directory: `<dir>/.winfleet-staging`.
pub const STAGING: &str = ".winfleet-staging";

/// The staging directory a file's upload goes through.
pub fn staging_of(shell: Shell, path: &str) -> String {
    let sep = separator(shell);
    let dir = path.rfind(sep).map_or(".", |i| &path[..i]);
    format!("{dir}{sep}{STAGING}")
}

fn separator(shell: Shell) -> char {
    match shell {
        Shell::Posix => '/',
        Shell::Powershell => '\\',
    }
}

/// Paths compare as the node's file system does (Windows: case-insensitive,
/// either separator).
pub(super) fn fold(shell: Shell, path: &str) -> String {
    match shell {
        Shell::Powershell => path.to_lowercase().replace('/', "\\"),
        Shell::Posix => path.to_owned(),
    }
}

/// The removals of the observed leftovers: every temporary file, and every
/// staging directory none of this round's `uploads` goes through.
pub(super) fn removals<'a>(
    spec: &LifecycleSpec,
    facts: &'a LifecycleFacts,
    uploads: &[&NodeFile],
) -> Vec<LifecycleChange<'a>> {
    let in_use: Vec<String> = uploads.iter().map(|f| fold(spec.shell, &staging_of(spec.shell, &f.path))).collect();
    facts
        .leftovers
        .iter()
        .filter(|(path, kind)| **kind == Leftover::Temporary || !in_use.contains(&fold(spec.shell, path)))
        .map(|(path, kind)| LifecycleChange::RemoveLeftover { path, kind: *kind })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_upload_stages_next_to_its_target() {
        assert_eq!(staging_of(Shell::Posix, "payload/kube-node/kubelet"), "payload/kube-node/.winfleet-staging");
        assert_eq!(staging_of(Shell::Posix, "kubelet"), "./.winfleet-staging");
        assert_eq!(staging_of(Shell::Powershell, r"C:\k\kubelet.exe"), r"C:\k\.winfleet-staging");
        assert_eq!(Leftover::parse("staging"), Leftover::Staging);
        assert_eq!(Leftover::parse("temp"), Leftover::Temporary);
    }
}
