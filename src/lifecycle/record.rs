//! winfleet's install record on a node: what it created there, so that a
//! deconfigure removes exactly that and nothing an administrator or another
//! tool put beside it (WMCO-SPEC decision 10).
//!
//! The apply scripts append a line *before* they create anything, so a
//! crash between the two leaves a record of something that may not exist
//! (harmless: removal skips it), never something unrecorded. Later lines
//! win for a file's SHA-256. One entry per line (node paths cannot hold a
//! newline: validation and the payload reader refuse them):
//!
//! ```text
//! dir <path>              a directory winfleet created (it did not exist)
//! file <sha256> <path>    a file winfleet wrote, with the content it wrote
//! service <name>          a service winfleet created
//! state <path>            a file a service of winfleet's writes (the
//!                         kubelet's kubeconfig)
//! certs <dir>             a directory where a service of winfleet's
//!                         writes kubelet-*.pem certificates
//! ```

use std::collections::{BTreeMap, BTreeSet};

use crate::vocab::Shell;

/// Where the record lives: outside every directory it lists, in a
/// directory of winfleet's own (relative = from the SSH user's home).
pub fn record_path(shell: Shell) -> &'static str {
    match shell {
        Shell::Powershell => r"C:\ProgramData\winfleet\install-record.txt",
        Shell::Posix => ".winfleet/install-record",
    }
}

/// The record's first line.
pub const HEADER: &str =
    "# winfleet install record: what winfleet created on this node; deconfigure removes exactly this";

/// A parsed install record.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InstallRecord {
    /// Directories winfleet created, in creation order.
    pub dirs: Vec<String>,
    /// Files winfleet wrote, with the SHA-256 of what it wrote last.
    pub files: BTreeMap<String, String>,
    /// Services winfleet created.
    pub services: BTreeSet<String>,
    /// Files its services write.
    pub state: BTreeSet<String>,
    /// Certificate directories of its services.
    pub cert_dirs: BTreeSet<String>,
}

impl InstallRecord {
    /// Whether the record holds nothing.
    pub fn is_empty(&self) -> bool {
        self.dirs.is_empty()
            && self.files.is_empty()
            && self.services.is_empty()
            && self.state.is_empty()
            && self.cert_dirs.is_empty()
    }
}

/// Parses a record; lines it does not know are ignored (a newer winfleet
/// may add kinds).
pub fn parse(text: &str) -> InstallRecord {
    let mut record = InstallRecord::default();
    for line in text.lines() {
        let Some((kind, rest)) = line.split_once(' ') else { continue };
        match kind {
            "dir" if !record.dirs.iter().any(|d| d == rest) => record.dirs.push(rest.to_owned()),
            "file" => {
                if let Some((sha, path)) = rest.split_once(' ') {
                    record.files.insert(path.to_owned(), sha.to_owned());
                }
            }
            "service" => {
                record.services.insert(rest.to_owned());
            }
            "state" => {
                record.state.insert(rest.to_owned());
            }
            "certs" => {
                record.cert_dirs.insert(rest.to_owned());
            }
            _ => {}
        }
    }
    record
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_lines_win_and_unknown_lines_are_ignored() {
        let record = parse(&format!(
            "{HEADER}\ndir /a\ndir /a/b\nfile 00 /a/b/f\nservice kubelet\nfile 11 /a/b/f\nfuture thing\ndir /a\nstate /k/kubeconfig\ncerts /pki\n"
        ));
        assert!(record.state.contains("/k/kubeconfig") && record.cert_dirs.contains("/pki"));
        assert_eq!(record.dirs, vec!["/a", "/a/b"]);
        assert_eq!(record.files["/a/b/f"], "11");
        assert!(record.services.contains("kubelet"));
    }
}
