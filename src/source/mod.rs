//! Source: read a config repository, either the working tree of a directory
//! or the committed tree of a revision (git2), into a [`Snapshot`].
//!
//! This is the only stage of `validate`/`render`/`plan` that touches the
//! file system or Git; everything after it is pure.

pub mod checkout;
mod git;
pub mod remote;
mod select;
pub mod signed;
pub mod transport;
mod worktree;

pub use checkout::CheckoutSource;
pub use git::{read_commit, tree_files};
pub use git::{read_revision, read_revisions};
pub use remote::{Fetched, RemoteSource, only_status_changes};
pub use select::{IGNORE_FILE, select};
pub use transport::{GitAuth, GitError, PushError, redact_url};
pub use worktree::read_worktree;

/// One file of the repository.
#[derive(Clone, Debug)]
pub struct SourceFile {
    /// Repository-relative path, `/`-separated.
    pub path: String,
    /// Contents.
    pub bytes: Vec<u8>,
}

/// Every file of a repository at one point, sorted by path.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// The commit, when read from Git.
    pub revision: Option<String>,
    /// The files (the `.git` directory excluded).
    pub files: Vec<SourceFile>,
    /// Repository-relative paths of the symbolic links, which are never
    /// followed (a link may point outside the repository): the loader
    /// reports those it would otherwise have read as configuration.
    pub links: Vec<String>,
}

/// Why a repository could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// A file or directory could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// What was being read.
        path: String,
        /// The IO error.
        source: std::io::Error,
    },
    /// Git could not open the repository or find the revision.
    #[error("{context}: {message}")]
    Git {
        /// What was being done.
        context: String,
        /// libgit2's message.
        message: String,
    },
    /// `--path` or `.winfleetignore` cannot be used.
    #[error("{path}: {reason}")]
    Path {
        /// The directory or file.
        path: String,
        /// Why.
        reason: String,
    },
}

impl SourceError {
    fn git(context: impl Into<String>, e: &git2::Error) -> Self {
        SourceError::Git { context: context.into(), message: e.message().to_owned() }
    }
}
