//! Status written back to Git (docs/daemon.md): what the
//! fleet looks like after each round, as YAML files under the status path
//! of the status branch, and `winfleet status` reading them back.
//!
//! - [`model`]: the files as data.
//! - [`render()`]: previous status + a round ([`RoundInput`]) → next status;
//!   pure, the verdicts per instance ([`verdict`]) and MachineSet
//!   ([`machineset`]) are documented tables.
//! - [`redact`](mod@redact): no secret reaches a file.
//! - [`files`]: status ↔ deterministic YAML files (byte-identical for an
//!   unchanged fleet, so no commit is made).
//! - [`summary`]: counts, the one-line summary, the commit message.
//! - [`read`]: the files of a status branch (git2), for `winfleet status`.
//! - [`publish`]: commits and pushes the files.
//! - [`disagrees`]: the summary's `ClusterDisagrees` condition.
//! - [`left`]: hosts left configured when they left the repository with no
//!   Node to drain them.
//!
//! Nothing here but [`read`] and [`publish`] does IO.

pub mod disagrees;
pub mod files;
pub mod left;
pub mod machineset;
pub mod model;
pub mod publish;
pub mod read;
pub mod redact;
pub mod render;
pub mod summary;
pub mod verdict;

pub use files::{from_files, to_files};
pub use model::Status;
pub use redact::redact;
pub use render::{RoundInput, render};
pub use summary::{commit_message, summary_line};
