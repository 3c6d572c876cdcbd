//! Committing the status files to Git and pushing them, with
//! fetch-rebuild-retry when another writer moved the branch.
//!
//! The status commit's tree is the branch tip's tree with the status
//! directory replaced wholesale (so a file no longer written disappears)
//! and every other path untouched: on a dedicated branch that is only the
//! status directory, on the tracked branch the config is kept as it is at
//! the tip. A tree equal to the tip's is not committed, so an unchanged
//! fleet makes no commit. It never force-pushes.

mod tree;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use git2::{Oid, Repository, Signature};

use crate::source::transport::{self, GitAuth, GitError, PushError, redact_url};

/// Attempts before giving up on a branch that keeps moving.
const ATTEMPTS: u32 = 5;
/// Where the status branch tip is kept in the cache repository.
const CACHE_PREFIX: &str = "refs/winfleet/status/";

/// Where and as whom the status is published. Its `Debug` output shows
/// the URL redacted.
#[derive(Clone)]
pub struct StatusTarget {
    /// The repository URL.
    pub url: String,
    /// Credentials for it.
    pub auth: GitAuth,
    /// The branch (`winfleet/status`, or the tracked branch itself).
    pub branch: String,
    /// The status directory in that branch (`status`).
    pub path: String,
    /// Author and committer name.
    pub author_name: String,
    /// Author and committer e-mail.
    pub author_email: String,
}

impl std::fmt::Debug for StatusTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatusTarget")
            .field("url", &redact_url(&self.url))
            .field("auth", &self.auth)
            .field("branch", &self.branch)
            .field("path", &self.path)
            .field("author_name", &self.author_name)
            .field("author_email", &self.author_email)
            .finish()
    }
}

/// One set of status files to publish.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StatusCommit {
    /// Contents by path relative to the status directory
    /// (`summary.yaml`, `instances/10.0.0.1.yaml`).
    pub files: BTreeMap<String, Vec<u8>>,
    /// The whole commit message, trailer included.
    pub message: String,
}

/// What [`publish`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Published {
    /// The branch already holds exactly these files: no commit.
    Unchanged,
    /// A commit was pushed.
    Committed {
        /// The commit (hex).
        commit: String,
        /// Pushes it took (1 unless another writer got in between).
        attempts: u32,
    },
}

/// Why the status was not published.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// A status file path (or the status directory) is refused.
    #[error("refusing status path {path:?}: {reason}")]
    Path {
        /// The path as given.
        path: String,
        /// Why.
        reason: &'static str,
    },
    /// Reading or fetching the branch failed.
    #[error("status branch {branch}: {source}")]
    Git {
        /// The branch.
        branch: String,
        /// What failed.
        source: GitError,
    },
    /// The push failed for a reason other than a moved branch.
    #[error("status branch {branch}: {source}")]
    Push {
        /// The branch.
        branch: String,
        /// What failed.
        source: PushError,
    },
    /// Another writer moved the branch before every attempt.
    #[error("status branch {branch} of {url} kept moving: gave up after {attempts} attempts")]
    Contended {
        /// The URL, redacted.
        url: String,
        /// The branch.
        branch: String,
        /// Attempts made.
        attempts: u32,
    },
    /// Building the commit in the cache repository failed.
    #[error("building the status commit for {branch}: {context}: {message}")]
    Build {
        /// The branch.
        branch: String,
        /// What was being done.
        context: &'static str,
        /// libgit2's message.
        message: String,
    },
}

/// Fetches the branch, commits `commit`'s files on its tip (no parent
/// when the branch does not exist yet) and pushes; when the push is
/// rejected because the branch moved, fetches again, rebuilds on the new
/// tip and retries (up to 5 attempts, with a short jittered pause).
pub fn publish(repo: &Repository, target: &StatusTarget, commit: &StatusCommit) -> Result<Published, PublishError> {
    publish_with(repo, target, commit, &mut |_| {})
}

/// [`publish`], calling `before_push(attempt)` after each commit is built
/// and before it is pushed: the seam through which tests let another
/// writer win the race.
pub fn publish_with(
    repo: &Repository,
    target: &StatusTarget,
    commit: &StatusCommit,
    before_push: &mut dyn FnMut(u32),
) -> Result<Published, PublishError> {
    let status_dir =
        tree::components(&target.path).map_err(|reason| PublishError::Path { path: target.path.clone(), reason })?;
    let build = |context: &'static str| {
        let branch = target.branch.clone();
        move |e: git2::Error| PublishError::Build { branch, context, message: e.message().to_owned() }
    };
    let status_tree = tree::write_files(repo, &commit.files).map_err(|e| match e {
        tree::TreeError::Path(path, reason) => PublishError::Path { path, reason },
        tree::TreeError::Git(e) => build("writing the status files")(e),
    })?;
    let signature = Signature::now(&target.author_name, &target.author_email).map_err(build("the author"))?;
    for attempt in 1..=ATTEMPTS {
        let tip = fetch_tip(repo, target)?;
        let tip = tip.map(|id| repo.find_commit(id)).transpose().map_err(build("reading the branch tip"))?;
        let base = tip.as_ref().map(|c| c.tree()).transpose().map_err(build("reading the branch tip"))?;
        if tip.is_none() && status_tree.is_none() {
            return Ok(Published::Unchanged);
        }
        let root = tree::graft(repo, base.as_ref(), &status_dir, status_tree).map_err(build("grafting the status"))?;
        if base.as_ref().is_some_and(|b| b.id() == root) {
            return Ok(Published::Unchanged);
        }
        let root = repo.find_tree(root).map_err(build("grafting the status"))?;
        let parents: Vec<&git2::Commit> = tip.iter().collect();
        let id =
            repo.commit(None, &signature, &signature, &commit.message, &root, &parents).map_err(build("committing"))?;
        before_push(attempt);
        match transport::push(repo, &target.url, id, &remote_ref(target), &target.auth) {
            Ok(()) => {
                // The pushed commit is the tip now: the next round's
                // ls-remote finds it and fetches nothing.
                repo.reference(&cache_ref(target), id, true, "winfleet: status pushed")
                    .map_err(build("recording the tip"))?;
                return Ok(Published::Committed { commit: id.to_string(), attempts: attempt });
            }
            Err(PushError::Rejected { .. }) if attempt < ATTEMPTS => pause(attempt),
            Err(PushError::Rejected { .. }) => break,
            Err(source) => return Err(PublishError::Push { branch: target.branch.clone(), source }),
        }
    }
    Err(PublishError::Contended { url: redact_url(&target.url), branch: target.branch.clone(), attempts: ATTEMPTS })
}

/// The status files on the branch now (to keep transition times across a
/// restart); empty when the branch or the status directory is absent.
pub fn read_current(repo: &Repository, target: &StatusTarget) -> Result<BTreeMap<String, Vec<u8>>, PublishError> {
    read_branch(repo, target).map(|read| read.files)
}

/// What the status branch holds now.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BranchFiles {
    /// The status files, by path relative to the status directory.
    pub files: BTreeMap<String, Vec<u8>>,
    /// Whether the tip holds nothing but the status directory (a dedicated
    /// status branch, or none yet): false when the status is on the
    /// tracked branch, where anyone who pushes the configuration can write
    /// it too.
    pub only_status: bool,
}

/// The status files on the branch now, and whether it holds nothing else.
pub fn read_branch(repo: &Repository, target: &StatusTarget) -> Result<BranchFiles, PublishError> {
    let components =
        tree::components(&target.path).map_err(|reason| PublishError::Path { path: target.path.clone(), reason })?;
    let Some(tip) = fetch_tip(repo, target)? else {
        return Ok(BranchFiles { only_status: true, ..BranchFiles::default() });
    };
    let build = |e: git2::Error| PublishError::Build {
        branch: target.branch.clone(),
        context: "reading the status files",
        message: e.message().to_owned(),
    };
    let root = repo.find_commit(tip).and_then(|c| c.tree()).map_err(build)?;
    let only_status = holds_only(repo, &root, &components);
    let entry = match root.get_path(Path::new(&target.path)) {
        Ok(entry) => entry,
        Err(e) if e.code() == git2::ErrorCode::NotFound => {
            return Ok(BranchFiles { files: BTreeMap::new(), only_status });
        }
        Err(e) => return Err(build(e)),
    };
    let files = match entry.to_object(repo).map_err(build)?.into_tree() {
        Ok(dir) => tree::read_files(repo, &dir).map_err(build)?,
        Err(_) => BTreeMap::new(),
    };
    Ok(BranchFiles { files, only_status })
}

/// Whether `root` holds nothing but the directory `components` names
/// (each level one entry, the next component).
fn holds_only(repo: &Repository, root: &git2::Tree<'_>, components: &[&str]) -> bool {
    let Some((first, rest)) = components.split_first() else { return true };
    let only = root.len() == 1 && root.get(0).is_some_and(|e| e.name_bytes() == first.as_bytes());
    if !only || rest.is_empty() {
        return only;
    }
    let below = root.get(0).and_then(|e| e.to_object(repo).ok()).and_then(|o| o.into_tree().ok());
    below.is_some_and(|tree| holds_only(repo, &tree, rest))
}

/// The branch tip on the remote, its objects fetched into the cache when
/// missing; `None` when the branch does not exist.
fn fetch_tip(repo: &Repository, target: &StatusTarget) -> Result<Option<Oid>, PublishError> {
    let git = |source| PublishError::Git { branch: target.branch.clone(), source };
    let (remote_ref, cache_ref) = (remote_ref(target), cache_ref(target));
    let Some(head) = transport::ls_remote(repo, &target.url, &remote_ref, &target.auth).map_err(git)? else {
        return Ok(None);
    };
    if repo.find_commit(head).is_ok() {
        return Ok(Some(head));
    }
    let refspec = format!("+{remote_ref}:{cache_ref}");
    transport::fetch(repo, &target.url, &[refspec.as_str()], &target.auth).map_err(git)?;
    // The branch may have moved again since ls-remote: what was fetched counts.
    let fetched =
        repo.refname_to_id(&cache_ref).map_err(|e| git(GitError::local(format!("reading {cache_ref}"), &e)))?;
    Ok(Some(fetched))
}

fn remote_ref(target: &StatusTarget) -> String {
    format!("refs/heads/{}", target.branch)
}

fn cache_ref(target: &StatusTarget) -> String {
    format!("{CACHE_PREFIX}{}", target.branch)
}

/// A short pause, growing with the attempt and jittered, so that two
/// writers that collided do not collide again in lockstep.
fn pause(attempt: u32) {
    std::thread::sleep(Duration::from_millis(fastrand::u64(20..=120) * u64::from(attempt)));
}
