//! `--repo-url URL --branch BRANCH`: the config repository fetched into a
//! bare cache repository. A poll costs one `ls-remote`; objects are fetched
//! only when the remote head moved. The same cache holds the status
//! branch for [`crate::status::publish`].

use std::path::{Path, PathBuf};

use git2::{Oid, Repository};

use super::transport::{self, GitAuth, GitError, redact_url};
use super::{Snapshot, SourceError};

/// Where the fetched head of the tracked branch is kept in the cache.
const CACHE_PREFIX: &str = "refs/winfleet/source/";

/// A remote config repository and its local cache. Its `Debug` output
/// shows the URL redacted.
pub struct RemoteSource {
    url: String,
    branch: String,
    cache: PathBuf,
    auth: GitAuth,
}

/// The outcome of [`RemoteSource::fetch`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fetched {
    /// The commit at the head of the branch (hex).
    pub revision: String,
    /// Whether objects were fetched; `false` when the head had not moved.
    pub fetched: bool,
}

impl RemoteSource {
    /// Uses the bare repository at `cache_dir`, creating it when absent.
    pub fn open(url: &str, branch: &str, cache_dir: &Path, auth: GitAuth) -> Result<Self, GitError> {
        if branch.is_empty() || !git2::Reference::is_valid_name(&format!("refs/heads/{branch}")) {
            return Err(GitError::Local {
                context: format!("tracking branch {branch:?} of {}", redact_url(url)),
                message: "not a valid branch name".to_owned(),
            });
        }
        open_cache(cache_dir)?;
        Ok(Self { url: url.to_owned(), branch: branch.to_owned(), cache: cache_dir.to_owned(), auth })
    }

    /// Asks the remote for the branch head (`ls-remote`) and fetches only
    /// when it differs from the cached one.
    pub fn fetch(&self) -> Result<Fetched, GitError> {
        let repo = open_cache(&self.cache)?;
        let remote_ref = format!("refs/heads/{}", self.branch);
        let cached_ref = format!("{CACHE_PREFIX}{}", self.branch);
        let Some(head) = transport::ls_remote(&repo, &self.url, &remote_ref, &self.auth)? else {
            return Err(GitError::BranchNotFound { url: redact_url(&self.url), branch: self.branch.clone() });
        };
        if cached(&repo, &cached_ref) == Some(head) {
            return Ok(Fetched { revision: head.to_string(), fetched: false });
        }
        let refspec = format!("+{remote_ref}:{cached_ref}");
        transport::fetch(&repo, &self.url, &[refspec.as_str()], &self.auth)?;
        // The head may have moved again since ls-remote: what was fetched counts.
        let revision = cached(&repo, &cached_ref)
            .ok_or_else(|| GitError::BranchNotFound { url: redact_url(&self.url), branch: self.branch.clone() })?;
        Ok(Fetched { revision: revision.to_string(), fetched: true })
    }

    /// The cache repository (bare).
    pub fn repo(&self) -> &Path {
        &self.cache
    }

    /// The repository URL (as given; use `redact_url` to show it).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The tracked branch.
    pub fn branch(&self) -> &str {
        &self.branch
    }

    /// The committed tree of `revision`, read from the cache.
    pub fn snapshot(&self, revision: &str) -> Result<Snapshot, SourceError> {
        let repo = Repository::open_bare(&self.cache)
            .map_err(|e| SourceError::git(format!("opening the Git cache at {}", self.cache.display()), &e))?;
        let id = repo
            .revparse_single(revision)
            .and_then(|object| object.peel_to_commit())
            .map(|commit| commit.id())
            .map_err(|e| SourceError::git(format!("resolving revision {revision}"), &e))?;
        super::read_commit(&repo, id)
    }
}

impl std::fmt::Debug for RemoteSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteSource")
            .field("url", &redact_url(&self.url))
            .field("branch", &self.branch)
            .field("cache", &self.cache)
            .field("auth", &self.auth)
            .finish()
    }
}

fn open_cache(dir: &Path) -> Result<Repository, GitError> {
    let context = || format!("opening the Git cache at {}", dir.display());
    match Repository::open_bare(dir) {
        Ok(repo) => Ok(repo),
        Err(e) if e.code() == git2::ErrorCode::NotFound => Repository::init_bare(dir)
            .map_err(|e| GitError::local(format!("creating the Git cache at {}", dir.display()), &e)),
        Err(e) => Err(GitError::local(context(), &e)),
    }
}

fn cached(repo: &Repository, refname: &str) -> Option<Oid> {
    repo.refname_to_id(refname).ok()
}

/// Whether every path that differs between the trees of `from` and `to`
/// lies under `status_path` (`status` → `status/…`), so that the new head
/// only carries status and must not trigger a round. The net difference
/// counts: a change and its revert in between cancel out. Equal trees
/// give `true` (nothing to reconcile either).
pub fn only_status_changes(repo: &Repository, from: Oid, to: Oid, status_path: &str) -> Result<bool, GitError> {
    let tree = |id: Oid| {
        repo.find_commit(id)
            .and_then(|commit| commit.tree())
            .map_err(|e| GitError::local(format!("reading commit {id}"), &e))
    };
    let (old, new) = (tree(from)?, tree(to)?);
    let diff = repo
        .diff_tree_to_tree(Some(&old), Some(&new), None)
        .map_err(|e| GitError::local(format!("comparing {from} with {to}"), &e))?;
    let prefix = status_path.trim_matches('/');
    if prefix.is_empty() {
        return Ok(diff.deltas().len() == 0);
    }
    let under = |path: Option<&Path>| {
        path.is_none_or(|p| {
            p.to_str().is_some_and(|p| p == prefix || p.strip_prefix(prefix).is_some_and(|r| r.starts_with('/')))
        })
    };
    Ok(diff.deltas().all(|delta| under(delta.old_file().path()) && under(delta.new_file().path())))
}
