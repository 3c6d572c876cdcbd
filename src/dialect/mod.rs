//! Shell dialects: one observation script and one apply script per node and
//! round, rendered from the [`NodeSpec`] and the planned [`Change`]s. Pure.
//!
//! Every value that comes from the repository (directories, registry names,
//! file contents, proxy values) is embedded base64-encoded and decoded on the
//! node; the only other things a script contains are fixed text and change
//! indexes. Reports come back as NUL-terminated tokens
//! ([`crate::node::facts`], [`crate::node::outcome`]).
//!
//! - [`posix`]: `/bin/sh` (Linux nodes and the test fleet); runs for real in
//!   the tests.
//! - [`powershell`]: Windows PowerShell 5.1 on the nodes' default cmd.exe
//!   shell; covered by golden files.
//! - systemd's formats (units, the posix environment drop-in) are in
//!   [`crate::vocab::systemd`].

pub mod containers;
pub mod posix;
pub mod posix_lifecycle;
pub mod posix_lifecycle_apply;
pub mod posix_values;
pub mod powershell;
pub mod powershell_lifecycle;
pub mod powershell_lifecycle_observe;
pub mod trust;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use crate::lifecycle::change::LifecycleChange;
use crate::node::NodeSpec;
use crate::node::facts::NodeFacts;
use crate::node::plan::Change;
use crate::vocab::Shell;
pub use posix_lifecycle::ObserveList;

/// A command to run on a node, with its script on standard input (the
/// command line stays short and fixed: cmd.exe limits it to 8191 bytes).
/// `Debug` shows the command and the input's size only: the input may
/// carry registry credentials (base64 is not redaction).
#[derive(Clone, PartialEq, Eq)]
pub struct Script {
    /// The fixed command line.
    pub command: &'static str,
    /// The script, fed on standard input.
    pub input: String,
}

impl std::fmt::Debug for Script {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Script").field("command", &self.command).field("input_bytes", &self.input.len()).finish()
    }
}

/// A shell that reads scripts on standard input, as a dialect speaks to
/// it: the node's kept shell ([`crate::ssh::Conversation`]).
#[derive(Clone, Copy, Debug)]
pub struct Interpreter {
    /// The command that starts the shell.
    pub command: &'static str,
    /// The line that makes the shell print `marker` (random bytes, NULs
    /// among them) exactly, once the script before it has finished.
    pub end_line: fn(marker: &[u8]) -> String,
}

/// How a node's kept shell is started and told to mark a script's end.
pub fn interpreter(shell: Shell) -> Interpreter {
    match shell {
        Shell::Posix => posix::INTERPRETER,
        Shell::Powershell => powershell::INTERPRETER,
    }
}

/// The observation script for a node of `spec`'s dialect; with a
/// lifecycle list, the lifecycle's facts too.
pub fn observe(spec: &NodeSpec, lifecycle: Option<&ObserveList>) -> Script {
    match spec.shell {
        Shell::Posix => posix::observe(spec, lifecycle),
        Shell::Powershell => powershell::observe(spec, lifecycle),
    }
}

/// The preparation script of the lifecycle changes (directories, upload
/// staging), run before the uploads; `None` when nothing needs preparing.
pub fn prepare(spec: &NodeSpec, lifecycle: &[(usize, &LifecycleChange<'_>)]) -> Option<Script> {
    match spec.shell {
        Shell::Posix => posix::prepare(spec, lifecycle),
        Shell::Powershell => powershell::prepare(spec, lifecycle),
    }
}

/// The apply script for `changes` (planned from `facts`) and the lifecycle
/// changes (with their indexes after the others); change `i` reports its
/// outcome as `op i`.
pub fn apply(
    spec: &NodeSpec,
    facts: &NodeFacts,
    changes: &[Change<'_>],
    lifecycle: &[(usize, &LifecycleChange<'_>)],
) -> Script {
    match spec.shell {
        Shell::Posix => posix::apply(spec, facts, changes, lifecycle),
        Shell::Powershell => powershell::apply(spec, changes, lifecycle),
    }
}

/// The reboot command: `Restart-Computer -Force` on Windows (WMCO's),
/// `systemctl reboot` on posix. It returns at once; the connection drops
/// when the node goes down.
pub fn reboot(shell: Shell) -> Script {
    match shell {
        Shell::Posix => Script { command: posix::COMMAND, input: "exec systemctl reboot\n".into() },
        Shell::Powershell => {
            Script { command: powershell::COMMAND, input: powershell::wrap("Restart-Computer -Force") }
        }
    }
}

/// Base64 of a value, the only form repository values take in a script.
pub(crate) fn b64(value: &str) -> String {
    STANDARD.encode(value.as_bytes())
}

/// The indexes of the environment changes (applied together on posix).
pub(crate) fn env_indexes(changes: &[Change<'_>]) -> Vec<usize> {
    changes.iter().enumerate().filter(|(_, c)| c.needs_reboot()).map(|(i, _)| i).collect()
}
