//! Nudging a git-sync sidecar: a verified push makes winfleet signal the
//! git-sync process beside it, so the push is fetched at once instead of at
//! git-sync's next `--period`.
//!
//! git-sync v4 runs a sync when it receives the signal named by its
//! `--sync-on-signal` flag (a name such as `SIGHUP` or `HUP`, or a number).
//! With `shareProcessNamespace: true` the pod's containers see each other's
//! processes, so winfleet finds git-sync by its process name
//! (`/proc/<pid>/comm`) and sends the same signal with kill(2).
//!
//! What it must never do: signal a process whose name is not the configured
//! one, signal itself, or send a signal git-sync cannot catch (SIGKILL and
//! SIGSTOP would kill or freeze the sidecar instead of waking it).

use std::path::{Path, PathBuf};
use std::str::FromStr;

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// The kernel keeps the first 15 bytes of a process name (TASK_COMM_LEN
/// 16, with the terminating NUL) in `/proc/<pid>/comm`.
const COMM_LEN: usize = 15;

/// The process name git-sync's image runs under (its entry point `/git-sync`).
pub const DEFAULT_PROCESS: &str = "git-sync";

/// A `--git-sync-signal` or `--git-sync-process` that cannot work.
#[derive(Debug, thiserror::Error)]
pub enum GitSyncSignalError {
    /// Not a signal name or number.
    #[error(
        "--git-sync-signal {0:?} is not a signal: give a name (SIGHUP or HUP) or a number, as for git-sync's --sync-on-signal"
    )]
    Unknown(String),
    /// A signal no process can catch.
    #[error(
        "--git-sync-signal {0}: git-sync cannot catch it, so it would stop git-sync instead of starting a sync; use SIGHUP"
    )]
    Uncatchable(&'static str),
    /// An empty name, or one with a `/` (a process name is a file name).
    #[error("--git-sync-process {0:?} is not a process name (the file name of git-sync's binary, without a directory)")]
    Process(String),
}

/// Which process to wake, with which signal.
#[derive(Clone, Debug)]
pub struct GitSyncSignal {
    signal: Signal,
    process: String,
    proc_root: PathBuf,
}

/// What one nudge did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Nudge {
    /// The processes signalled.
    pub signalled: Vec<i32>,
    /// The processes found but not signalled (they exited meanwhile, or
    /// belong to another user), with the reason.
    pub failed: Vec<(i32, Errno)>,
}

impl GitSyncSignal {
    /// `signal` as git-sync's `--sync-on-signal` takes it; `process` is the
    /// name git-sync runs under ([`DEFAULT_PROCESS`] in its image).
    pub fn new(signal: &str, process: &str) -> Result<Self, GitSyncSignalError> {
        let signal = parse_signal(signal)?;
        if process.is_empty() || process.contains('/') {
            return Err(GitSyncSignalError::Process(process.to_owned()));
        }
        Ok(Self { signal, process: process.to_owned(), proc_root: PathBuf::from("/proc") })
    }

    /// Looks for processes under `root` instead of `/proc` (for tests).
    pub fn with_proc_root(mut self, root: &Path) -> Self {
        self.proc_root = root.to_owned();
        self
    }

    /// The signal's name, such as `SIGHUP`.
    pub fn signal_name(&self) -> &'static str {
        self.signal.as_str()
    }

    /// The process name looked for.
    pub fn process(&self) -> &str {
        &self.process
    }

    /// Signals every process named [`GitSyncSignal::process`] (but never
    /// this one). Blocking: it reads `/proc`.
    pub fn nudge(&self) -> Nudge {
        let own = std::process::id();
        let mut nudge = Nudge::default();
        for pid in find(&self.proc_root, &self.process) {
            if u32::try_from(pid).is_ok_and(|pid| pid == own) {
                continue;
            }
            match kill(Pid::from_raw(pid), self.signal) {
                Ok(()) => nudge.signalled.push(pid),
                Err(errno) => nudge.failed.push((pid, errno)),
            }
        }
        nudge
    }
}

/// A signal by name (`SIGHUP`, `HUP`, any case) or number, as git-sync's
/// `--sync-on-signal` reads it; SIGKILL and SIGSTOP are refused.
pub fn parse_signal(text: &str) -> Result<Signal, GitSyncSignalError> {
    let unknown = || GitSyncSignalError::Unknown(text.to_owned());
    let trimmed = text.trim();
    let signal = match trimmed.parse::<i32>() {
        Ok(number) => Signal::try_from(number).map_err(|_| unknown())?,
        Err(_) => {
            let upper = trimmed.to_ascii_uppercase();
            let name = if upper.starts_with("SIG") { upper } else { format!("SIG{upper}") };
            Signal::from_str(&name).map_err(|_| unknown())?
        }
    };
    match signal {
        Signal::SIGKILL | Signal::SIGSTOP => Err(GitSyncSignalError::Uncatchable(signal.as_str())),
        signal => Ok(signal),
    }
}

/// The pids under `proc_root` whose `comm` is `name` (compared on the first
/// 15 bytes, as the kernel keeps them), in ascending order. Entries that
/// vanish or cannot be read are skipped: processes come and go while this
/// reads.
pub fn find(proc_root: &Path, name: &str) -> Vec<i32> {
    let wanted = &name.as_bytes()[..name.len().min(COMM_LEN)];
    let Ok(entries) = std::fs::read_dir(proc_root) else { return Vec::new() };
    let mut pids: Vec<i32> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse::<i32>().ok().filter(|pid| *pid > 0)?;
            let comm = std::fs::read(entry.path().join("comm")).ok()?;
            let comm = comm.strip_suffix(b"\n").unwrap_or(&comm);
            (comm == wanted).then_some(pid)
        })
        .collect();
    pids.sort_unstable();
    pids
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn signals_are_named_the_way_git_sync_names_them() {
        for text in ["SIGHUP", "HUP", "hup", "sighup", " SIGHUP ", "1"] {
            assert_eq!(parse_signal(text).unwrap(), Signal::SIGHUP, "{text}");
        }
        assert_eq!(parse_signal("USR1").unwrap(), Signal::SIGUSR1);
    }

    #[test]
    fn unknown_and_uncatchable_signals_are_refused() {
        for text in ["", "SIGNOPE", "0", "65", "-1", "HUP1"] {
            assert!(matches!(parse_signal(text), Err(GitSyncSignalError::Unknown(_))), "{text}");
        }
        for text in ["SIGKILL", "kill", "9", "STOP", "19"] {
            assert!(matches!(parse_signal(text), Err(GitSyncSignalError::Uncatchable(_))), "{text}");
        }
    }

    #[test]
    fn a_process_name_is_a_file_name() {
        assert!(matches!(GitSyncSignal::new("HUP", ""), Err(GitSyncSignalError::Process(_))));
        assert!(matches!(GitSyncSignal::new("HUP", "/git-sync"), Err(GitSyncSignalError::Process(_))));
        let signal = GitSyncSignal::new("HUP", DEFAULT_PROCESS).unwrap();
        assert_eq!((signal.signal_name(), signal.process()), ("SIGHUP", "git-sync"));
    }

    fn fake_proc(entries: &[(&str, &str)]) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        for (pid, comm) in entries {
            std::fs::create_dir(root.path().join(pid)).unwrap();
            std::fs::write(root.path().join(pid).join("comm"), comm).unwrap();
        }
        root
    }

    #[test]
    fn processes_are_found_by_their_exact_name_only() {
        let root = fake_proc(&[
            ("1", "pause\n"),
            ("7", "git-sync\n"),
            ("12", "git\n"),
            ("30", "git-sync\n"),
            ("31", "git-sync-helper\n"),
            ("self", "git-sync\n"),
            ("0", "git-sync\n"),
        ]);
        std::fs::create_dir(root.path().join("40")).unwrap(); // exited: no comm
        assert_eq!(find(root.path(), "git-sync"), vec![7, 30]);
        assert_eq!(find(root.path(), "pause"), vec![1]);
        assert!(find(root.path(), "winfleet").is_empty());
        assert!(find(&root.path().join("absent"), "git-sync").is_empty());
    }

    #[test]
    fn a_long_name_matches_the_kernels_truncated_one() {
        let root = fake_proc(&[("5", "git-sync-sideca\n")]);
        assert_eq!(find(root.path(), "git-sync-sidecar"), vec![5]);
    }

    #[test]
    fn nudging_without_a_matching_process_signals_nothing() {
        let root = fake_proc(&[("1", "pause\n")]);
        let signal = GitSyncSignal::new("HUP", "git-sync").unwrap().with_proc_root(root.path());
        assert_eq!(signal.nudge(), Nudge::default());
    }

    #[test]
    fn the_daemon_never_signals_itself() {
        let own = std::process::id().to_string();
        let root = fake_proc(&[(own.as_str(), "git-sync\n")]);
        let signal = GitSyncSignal::new("HUP", "git-sync").unwrap().with_proc_root(root.path());
        assert_eq!(signal.nudge(), Nudge::default());
    }
}
