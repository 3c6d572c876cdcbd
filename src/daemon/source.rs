//! Where the daemon's revisions come from: a remote it fetches itself, or a
//! checkout someone else maintains. Both give a revision and its committed
//! tree (never a working tree), and a bare cache repository for status.

use std::path::{Path, PathBuf};
use std::time::Duration;

use git2::{Oid, Repository};

use crate::source::checkout::CheckoutSource;
use crate::source::remote::{self, RemoteSource};
use crate::source::signed::{self, Range, StatusCommits, TrustedKeys};
use crate::source::transport::GitAuth;
use crate::source::{Snapshot, SourceError};

/// Longest a Git operation (fetch, read, push) may take.
pub const GIT_TIMEOUT: Duration = Duration::from_secs(120);

/// The short form of a revision.
pub fn short(revision: &str) -> &str {
    revision.get(..7).unwrap_or(revision)
}

/// How the source is configured.
#[derive(Debug)]
pub enum SourceConfig {
    /// `--repo-url URL --branch BRANCH`: fetched into `cache_dir`.
    Remote {
        /// The repository URL (file://, https, ssh).
        url: String,
        /// The tracked branch.
        branch: String,
    },
    /// `--repo-path DIR`: a checkout (or git-sync link) watched for changes.
    Checkout {
        /// The checkout or the git-sync link.
        path: PathBuf,
    },
}

/// The open source.
pub enum Source {
    /// Fetched by winfleet.
    Remote(RemoteSource),
    /// Maintained by someone else.
    Checkout(CheckoutSource),
}

/// Why the source could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SourceFailure {
    /// Reading a revision.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// Fetching or opening a repository.
    #[error("{0}")]
    Git(String),
}

impl Source {
    /// Opens the source (a remote's cache repository is created when absent).
    pub fn open(config: &SourceConfig, cache_dir: &Path, auth: &GitAuth) -> Result<Self, SourceFailure> {
        Ok(match config {
            SourceConfig::Remote { url, branch } => Source::Remote(
                RemoteSource::open(url, branch, &cache_dir.join("source.git"), auth.clone())
                    .map_err(|e| SourceFailure::Git(e.to_string()))?,
            ),
            SourceConfig::Checkout { path } => Source::Checkout(CheckoutSource::new(path)),
        })
    }

    /// The newest revision (fetching it when the remote head moved).
    pub fn head(&self) -> Result<String, SourceFailure> {
        match self {
            Source::Remote(remote) => Ok(remote.fetch().map_err(|e| SourceFailure::Git(e.to_string()))?.revision),
            Source::Checkout(checkout) => Ok(checkout.head()?),
        }
    }

    /// The committed tree of `revision`.
    pub fn snapshot(&self, revision: &str) -> Result<Snapshot, SourceFailure> {
        Ok(match self {
            Source::Remote(remote) => remote.snapshot(revision)?,
            Source::Checkout(checkout) => checkout.snapshot(revision)?,
        })
    }

    /// When `revision` was committed (its committer time, Unix seconds).
    pub fn committed_at(&self, revision: &str) -> Result<i64, SourceFailure> {
        let repo = self.repository()?;
        let commit = repo
            .revparse_single(revision)
            .and_then(|object| object.peel_to_commit())
            .map_err(|e| SourceFailure::Git(format!("resolving revision {revision}: {}", e.message())))?;
        Ok(commit.committer().when().seconds())
    }

    /// The repository the revisions are read from.
    fn repository(&self) -> Result<Repository, SourceFailure> {
        Ok(match self {
            Source::Remote(remote) => {
                Repository::open(remote.repo()).map_err(|e| SourceFailure::Git(e.message().to_owned()))?
            }
            Source::Checkout(checkout) => checkout.repository()?,
        })
    }

    /// Checks the signatures of `range` up to `revision`, passing over
    /// winfleet's own `status` commits: Ok with each commit's signer, or
    /// Err with why the revision is not trusted.
    pub fn verify(
        &self,
        keys: &TrustedKeys,
        revision: &str,
        range: Range,
        status: &StatusCommits,
    ) -> Result<Result<Vec<String>, String>, SourceFailure> {
        let repo = self.repository()?;
        let git = |e: git2::Error| SourceFailure::Git(e.message().to_owned());
        let head = Oid::from_str(revision).map_err(git)?;
        let checked = signed::verify_range(&repo, keys, head, range, Some(status));
        Ok(checked.map(|ok| ok.into_iter().map(|(_, who)| who).collect()))
    }

    /// Resolves `base` (a revision read back as the last applied one; `from`
    /// says where) and checks it may start the commits verified up to
    /// `revision` ([`signed::check_base`]): Ok with its id, or Err with why not.
    pub fn check_base(
        &self,
        keys: &TrustedKeys,
        revision: &str,
        base: &str,
        from: &str,
        status: &StatusCommits,
    ) -> Result<Result<Oid, String>, SourceFailure> {
        let repo = self.repository()?;
        let git = |e: git2::Error| SourceFailure::Git(e.message().to_owned());
        let head = Oid::from_str(revision).map_err(git)?;
        let Ok(base) = repo.revparse_single(base).and_then(|o| o.peel_to_commit()).map(|c| c.id()) else {
            return Ok(Err(format!(
                "the last applied revision {} ({from}) is not an ancestor of the head {} (it is not in the repository), \
                 so which commits are new cannot be told",
                short(base),
                short(revision)
            )));
        };
        Ok(signed::check_base(&repo, keys, head, base, from, Some(status)).map(|()| base))
    }

    /// Whether `revision` (or, for one of winfleet's `status` commits, the
    /// commit below it) is signed by one of `keys`: Err with why not.
    pub fn check_signed(
        &self,
        keys: &TrustedKeys,
        revision: &str,
        status: &StatusCommits,
    ) -> Result<Result<(), String>, SourceFailure> {
        let repo = self.repository()?;
        let git = |e: git2::Error| SourceFailure::Git(e.message().to_owned());
        let id = Oid::from_str(revision).map_err(git)?;
        Ok(signed::check_vouched(&repo, keys, id, Some(status)).map(|_| ()))
    }

    /// Whether everything between `from` and `to` only touched `status_path`.
    pub fn only_status_changes(&self, from: &str, to: &str, status_path: &str) -> Result<bool, SourceFailure> {
        let git = |e: git2::Error| SourceFailure::Git(e.message().to_owned());
        let repo = self.repository()?;
        let (from, to) = (Oid::from_str(from).map_err(git)?, Oid::from_str(to).map_err(git)?);
        remote::only_status_changes(&repo, from, to, status_path).map_err(|e| SourceFailure::Git(e.to_string()))
    }

    /// Where status commits are pushed by default: the remote itself, or the
    /// checkout's `origin`.
    pub fn default_status_url(&self) -> Option<String> {
        match self {
            Source::Remote(remote) => Some(remote.url().to_owned()),
            Source::Checkout(checkout) => checkout.origin_url(),
        }
    }

    /// Whether watching the file system makes sense (checkouts only).
    pub fn watch_paths(&self) -> Vec<PathBuf> {
        match self {
            Source::Remote(_) => Vec::new(),
            Source::Checkout(checkout) => checkout.watch_paths(),
        }
    }
}
