//! Node directories named by the Fleet (registries, environment, payload,
//! services): each must be a directory of its own, never a root, a system
//! directory or a user's home, because winfleet writes inside it and
//! removes there what it no longer wants. Pure.
//!
//! Removal itself only ever touches what winfleet created (the marker in
//! each registry directory, the install record for everything else); this
//! check refuses the setting before any of that is planned, so that a typo
//! such as `posixDir: /` is an error at review time, not a surprise on a
//! node.

use crate::diagnostic::{shown, shown_bare};
use crate::vocab::Shell;

/// posix directories of the system that a Fleet directory may not be:
/// winfleet writes and removes entries directly inside its directory.
const POSIX_SYSTEM: &[&str] = &[
    "/etc/containerd",
    "/etc/systemd",
    "/etc/ssh",
    "/etc/default",
    "/etc/sysconfig",
    "/etc/kubernetes",
    "/etc/cni",
    "/var/lib",
    "/var/log",
    "/var/cache",
    "/var/tmp",
    "/var/run",
    "/var/spool",
    "/var/lib/containerd",
    "/var/lib/kubelet",
    "/var/lib/systemd",
    "/run/systemd",
    "/run/containerd",
    "/opt/cni",
];

/// posix trees winfleet never writes into at all.
const POSIX_FORBIDDEN_TREES: &[&str] = &["/usr", "/proc", "/sys", "/dev", "/boot", "/bin", "/sbin", "/lib", "/lib64"];

/// Windows directories (lower case, `\`-separated, without the drive) that
/// a Fleet directory may not be.
const WINDOWS_SYSTEM: &[&str] = &[r"\k", r"\k\containerd", r"\programdata", r"\program files", r"\program files (x86)"];

/// Windows trees winfleet never writes into at all: the system, OpenSSH's
/// configuration and host keys (`C:\ProgramData\ssh`), and the directories
/// Windows keeps for itself at a drive's root.
const WINDOWS_FORBIDDEN_TREES: &[&str] =
    &[r"\windows", r"\programdata\ssh", r"\system volume information", r"\$recycle.bin", r"\recovery", r"\boot"];

/// Directory names that hold a user's or the SSH server's keys on either
/// system (`~/.ssh`, `C:\Users\Administrator\.ssh`): never one of
/// winfleet's, wherever they are.
const KEY_DIRECTORIES: &[&str] = &[".ssh", ".gnupg"];

/// Windows' old name for the directory of users' homes, still a junction
/// to `C:\Users`.
const WINDOWS_HOMES_ALIAS: &str = "documents and settings";

/// The longest node directory accepted, in characters (either dialect).
pub const MAX_DIR: usize = 160;

/// Checks a Fleet node directory for a dialect. `allowed` is the Fleet's
/// `spec.allowedDirectories` (empty: no list). The reason says which rule
/// and why.
pub fn check_node_dir(shell: Shell, dir: &str, allowed: &[String]) -> Result<(), String> {
    if dir.is_empty() || dir.chars().any(crate::diagnostic::is_unseen) {
        return Err(format!(
            "the directory must be a non-empty path without control or invisible characters, not {}",
            shown(dir)
        ));
    }
    if dir.chars().count() > MAX_DIR {
        return Err(format!(
            "{} is longer than {MAX_DIR} characters: Windows paths stop at 260 (MAX_PATH), and winfleet writes \
             a registry's directory and its hosts.toml inside",
            shown(dir)
        ));
    }
    let path = match shell {
        Shell::Posix => Path::posix(dir),
        Shell::Powershell => Path::windows(dir),
    }?;
    path.refuse_system()?;
    if !allowed.is_empty() {
        let inside = allowed.iter().any(|prefix| {
            let prefix = match shell {
                Shell::Posix => Path::posix(prefix),
                Shell::Powershell => Path::windows(prefix),
            };
            prefix.is_ok_and(|p| path.is_within(&p))
        });
        if !inside {
            return Err(format!(
                "{} is outside the directories the Fleet allows (spec.allowedDirectories: {}): \
                 add its parent there or choose a directory inside one of them",
                shown(dir),
                allowed.iter().map(|a| shown(a)).collect::<Vec<_>>().join(", ")
            ));
        }
    }
    Ok(())
}

/// A directory split into its components.
struct Path<'a> {
    written: &'a str,
    windows: bool,
    /// `None`: relative to the SSH user's home. `Some("c:")`: a drive.
    root: Option<String>,
    parts: Vec<String>,
}

const WHY: &str = "winfleet writes inside this directory and removes there what it no longer wants, \
                   so it must be a directory of winfleet's own";

impl<'a> Path<'a> {
    fn posix(written: &'a str) -> Result<Self, String> {
        let root = written.starts_with('/').then(String::new);
        Self::split(written, false, root, written.split('/'))
    }

    fn windows(written: &'a str) -> Result<Self, String> {
        let shown = shown(written);
        let bytes = written.as_bytes();
        if written.starts_with(r"\\") || written.starts_with("//") {
            return Err(format!("{shown} is a network path: use a local directory of the node"));
        }
        let (root, rest) = if bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':' {
            let rest = &written[2..];
            if !rest.starts_with(['\\', '/']) {
                return Err(format!("{shown} is relative to a drive's current directory: write {}\\…", &written[..2]));
            }
            (Some(written[..2].to_ascii_lowercase()), rest)
        } else if written.starts_with(['\\', '/']) {
            return Err(format!("{shown} has no drive: write it with one, such as C:{}", shown_bare(written)));
        } else {
            (None, written)
        };
        Self::split(written, true, root, rest.split(['\\', '/']))
    }

    fn split<'s>(
        written: &'a str,
        windows: bool,
        root: Option<String>,
        parts: impl Iterator<Item = &'s str>,
    ) -> Result<Self, String> {
        let shown = shown(written);
        let mut out = Vec::new();
        for part in parts.filter(|p| !p.is_empty() && *p != ".") {
            if part == ".." {
                return Err(format!("{shown} contains '..': write the directory without it"));
            }
            if windows && part.contains('~') {
                return Err(format!(
                    "{shown} contains '~', an 8.3 short name (such as PROGRA~1 for Program Files): it may name any \
                     directory, the system's among them, so write the directory's full name"
                ));
            }
            if KEY_DIRECTORIES.iter().any(|k| part.eq_ignore_ascii_case(k)) {
                return Err(format!(
                    "{shown} is inside {part}, where keys of a user or the SSH server are kept: {WHY}"
                ));
            }
            let part = if windows { part.trim_end_matches([' ', '.']).to_lowercase() } else { part.to_owned() };
            // `C:\Documents and Settings` is a junction to `C:\Users`.
            let part = if windows && out.is_empty() && part == WINDOWS_HOMES_ALIAS { "users".to_owned() } else { part };
            out.push(part);
        }
        if root.is_none() && out.first().is_some_and(|p| p.starts_with('~')) {
            return Err(format!(
                "{shown} starts with '~', which is not expanded: a relative directory is already taken from the \
                 SSH user's home, so leave '~/' out"
            ));
        }
        Ok(Self { written, windows, root, parts: out })
    }

    fn refuse_system(&self) -> Result<(), String> {
        let shown = shown(self.written);
        if self.root.is_none() {
            if self.parts.is_empty() {
                return Err(format!("{shown} is the SSH user's home directory itself: {WHY} (such as certs.d)"));
            }
            return Ok(());
        }
        if self.parts.is_empty() {
            let what = if self.windows { "the root of a drive" } else { "the root of the file system" };
            return Err(format!("{shown} is {what}: {WHY}"));
        }
        let joined = self.joined();
        let (system, trees, home_parent) = if self.windows {
            (WINDOWS_SYSTEM, WINDOWS_FORBIDDEN_TREES, "users")
        } else {
            (POSIX_SYSTEM, POSIX_FORBIDDEN_TREES, "home")
        };
        if let Some(tree) = trees.iter().find(|t| joined == **t || joined.starts_with(&format!("{}{}", t, self.sep())))
        {
            return Err(format!("{shown} is inside {}, which belongs to the operating system: {WHY}", self.show(tree)));
        }
        let top = self.parts.len() == 1;
        if top && self.parts[0] == home_parent {
            return Err(format!("{shown} is the directory of users' homes: {WHY}"));
        }
        if top && !self.windows {
            return Err(format!("{shown} is a top-level directory: {WHY}, one level deeper at least"));
        }
        if self.parts.len() == 2 && self.parts[0] == home_parent {
            return Err(format!("{shown} is a user's home directory: {WHY} (a directory inside it, at least)"));
        }
        if system.contains(&joined.as_str()) {
            return Err(format!("{shown} is a system directory: {WHY} (such as {})", self.example()));
        }
        Ok(())
    }

    fn sep(&self) -> char {
        if self.windows { '\\' } else { '/' }
    }

    /// `/a/b` or `\a\b` (no drive), lower case on Windows.
    fn joined(&self) -> String {
        let sep = self.sep();
        self.parts.iter().fold(String::new(), |mut s, p| {
            s.push(sep);
            s.push_str(p);
            s
        })
    }

    fn show(&self, tree: &str) -> String {
        match (&self.root, self.windows) {
            (Some(drive), true) => format!("{}{tree}", drive.to_ascii_uppercase()),
            _ => tree.to_owned(),
        }
    }

    fn example(&self) -> &'static str {
        if self.windows { r"C:\k\containerd\registries" } else { "/etc/containerd/certs.d" }
    }

    fn is_within(&self, prefix: &Path<'_>) -> bool {
        self.root == prefix.root && self.parts.len() >= prefix.parts.len() && self.parts.starts_with(&prefix.parts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn posix(dir: &str) -> Result<(), String> {
        check_node_dir(Shell::Posix, dir, &[])
    }

    fn windows(dir: &str) -> Result<(), String> {
        check_node_dir(Shell::Powershell, dir, &[])
    }

    #[test]
    fn roots_system_directories_and_homes_are_refused_on_posix() {
        for dir in ["/", "//", "/etc", "/etc/", "/etc/containerd", "/home/admin", "/root", "/usr/local/x", "/var/lib"] {
            assert!(posix(dir).is_err(), "{dir} must be refused");
        }
        assert!(posix("/").unwrap_err().contains("the root of the file system"));
        assert!(posix("/etc").unwrap_err().contains("a top-level directory"));
        assert!(posix("/etc/containerd").unwrap_err().contains("a system directory"));
        assert!(posix("/home/admin").unwrap_err().contains("a user's home directory"));
        assert!(posix("/proc/1").unwrap_err().contains("inside /proc"));
        for dir in [".", "./", "", "~", "~/certs.d", "a/../b"] {
            assert!(posix(dir).is_err(), "{dir:?} must be refused");
        }
        assert!(posix(".").unwrap_err().contains("home directory itself"));
    }

    #[test]
    fn the_defaults_and_directories_of_their_own_are_accepted_on_posix() {
        for dir in [
            "/etc/containerd/certs.d",
            "/etc/systemd/system",
            "/etc/systemd/system.conf.d",
            "/var/lib/winfleet",
            "/home/admin/certs.d",
            "/tmp/node-7/certs.d",
            "certs.d",
            "./payload/",
        ] {
            assert_eq!(posix(dir), Ok(()), "{dir}");
        }
    }

    #[test]
    fn drive_roots_windows_and_homes_are_refused_on_windows() {
        for dir in
            [r"C:\", "C:", "C:/", r"C:\Windows", r"c:\windows\system32", r"C:\k", r"C:\k\containerd", r"C:\Users"]
        {
            assert!(windows(dir).is_err(), "{dir} must be refused");
        }
        assert!(windows(r"C:\Users\Administrator").unwrap_err().contains("home"));
        assert!(windows(r"\\server\share\x").unwrap_err().contains("network path"));
        assert!(windows(r"\k\registries").unwrap_err().contains("no drive"));
        assert!(windows(r"D:\").unwrap_err().contains("root"));
        assert_eq!(windows(r"C:\k\containerd\registries"), Ok(()));
        assert_eq!(windows(r"D:\registries"), Ok(()));
        assert_eq!(windows(r"C:\Users\Administrator\registries"), Ok(()));
    }

    #[test]
    fn the_fleet_may_narrow_the_directories_to_a_list() {
        let allowed = vec!["/etc/containerd".to_owned(), "/var/lib/winfleet".to_owned()];
        assert_eq!(check_node_dir(Shell::Posix, "/etc/containerd/certs.d", &allowed), Ok(()));
        assert_eq!(check_node_dir(Shell::Posix, "/var/lib/winfleet", &allowed), Ok(()));
        let refused = check_node_dir(Shell::Posix, "/opt/registries", &allowed).unwrap_err();
        assert!(refused.contains("outside the directories the Fleet allows"), "{refused}");
        assert!(check_node_dir(Shell::Posix, "/var/lib/winfleet-other", &allowed).is_err());
        let windows = vec![r"C:\k\containerd".to_owned()];
        assert_eq!(check_node_dir(Shell::Powershell, r"c:/K/Containerd/Registries", &windows), Ok(()));
    }

    #[test]
    fn short_names_homes_alias_and_key_directories_are_refused_on_windows_issue_35() {
        for dir in [r"C:\PROGRA~1", r"C:\PROGRA~3\ssh", r"C:\k\REGIST~1"] {
            assert!(windows(dir).unwrap_err().contains("8.3 short name"), "{dir}");
        }
        assert!(windows(r"C:\ProgramData\ssh").unwrap_err().contains("belongs to the operating system"));
        assert!(windows(r"c:/programdata/SSH/winfleet").is_err());
        assert!(windows(r"C:\Documents and Settings").unwrap_err().contains("users' homes"));
        assert!(windows(r"C:\Documents and Settings\Administrator").unwrap_err().contains("home directory"));
        for dir in [r"C:\Users\Administrator\.ssh", r"C:\Users\Administrator\.SSH\x", r".ssh"] {
            assert!(windows(dir).unwrap_err().contains("keys"), "{dir}");
        }
        assert!(posix("/home/admin/.ssh").unwrap_err().contains("keys"));
        assert!(posix(".ssh/registries").unwrap_err().contains("keys"));
        assert_eq!(windows(r"C:\ProgramData\winfleet\registries"), Ok(()));
        assert_eq!(windows(r"C:\Documents and Settings\Administrator\registries"), Ok(()));
    }
}
