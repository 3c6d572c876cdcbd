//! Reading the committed status files of a status branch with git2 (the
//! one piece of IO `winfleet status` needs; parsing is [`super::files`]).

use std::collections::BTreeMap;
use std::path::Path;

use git2::{ErrorCode, ObjectType, Repository, Tree};

use crate::source::tree_files;

/// Why the status files could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// No Git repository there.
    #[error("cannot open a Git repository at {dir}: {message}")]
    Open {
        /// The directory.
        dir: String,
        /// libgit2's message.
        message: String,
    },
    /// Neither the local nor the `origin` remote-tracking branch exists.
    #[error(
        "no status branch {branch:?} in {dir}: neither refs/heads/{branch} nor refs/remotes/origin/{branch} exists \
         (has the daemon published status yet? fetch it with `git fetch origin {branch}`)"
    )]
    NoBranch {
        /// The repository.
        dir: String,
        /// The branch.
        branch: String,
    },
    /// The branch has no status directory.
    #[error("{refname} has no directory {path:?}: no status was published under that path")]
    NoPath {
        /// The reference read.
        refname: String,
        /// The status path.
        path: String,
    },
    /// Git failed while reading.
    #[error("{context}: {message}")]
    Git {
        /// What was being read.
        context: String,
        /// libgit2's message.
        message: String,
    },
}

/// The status files of one commit of the status branch.
#[derive(Clone, Debug)]
pub struct Published {
    /// The reference read (`refs/heads/…` or `refs/remotes/origin/…`).
    pub refname: String,
    /// The status commit.
    pub commit: String,
    /// Files by path relative to the status directory.
    pub files: BTreeMap<String, Vec<u8>>,
}

/// Reads the files under `path` in the tree of `refs/heads/<branch>`, else
/// of `refs/remotes/origin/<branch>`.
pub fn read_branch(repo_dir: &Path, branch: &str, path: &str) -> Result<Published, ReadError> {
    let repo = Repository::discover(repo_dir)
        .map_err(|e| ReadError::Open { dir: repo_dir.display().to_string(), message: e.message().to_owned() })?;
    let candidates = [format!("refs/heads/{branch}"), format!("refs/remotes/origin/{branch}")];
    let mut found = None;
    for refname in candidates {
        match repo.find_reference(&refname) {
            Ok(reference) => {
                found = Some((refname, reference));
                break;
            }
            Err(e) if matches!(e.code(), ErrorCode::NotFound | ErrorCode::InvalidSpec) => {}
            Err(e) => return Err(git(format!("reading {refname}"), &e)),
        }
    }
    let Some((refname, reference)) = found else {
        return Err(ReadError::NoBranch { dir: repo_dir.display().to_string(), branch: branch.to_owned() });
    };
    let commit = reference.peel_to_commit().map_err(|e| git(format!("resolving {refname}"), &e))?;
    let root = commit.tree().map_err(|e| git(format!("reading the tree of {refname}"), &e))?;
    let dir = path.trim_matches('/');
    let tree = if dir.is_empty() {
        root
    } else {
        let no_path = || ReadError::NoPath { refname: refname.clone(), path: dir.to_owned() };
        let entry = root.get_path(Path::new(dir)).map_err(|_| no_path())?;
        if entry.kind() != Some(ObjectType::Tree) {
            return Err(no_path());
        }
        repo.find_tree(entry.id()).map_err(|e| git(format!("reading {dir} of {refname}"), &e))?
    };
    let files = blobs(&repo, &tree).map_err(|e| git(format!("reading {dir} of {refname}"), &e))?;
    Ok(Published { refname, commit: commit.id().to_string(), files })
}

/// Every blob under `tree` by relative path (symbolic links skipped).
fn blobs(repo: &Repository, tree: &Tree<'_>) -> Result<BTreeMap<String, Vec<u8>>, git2::Error> {
    Ok(tree_files(repo, tree)?.into_iter().map(|f| (f.path, f.bytes)).collect())
}

fn git(context: String, e: &git2::Error) -> ReadError {
    ReadError::Git { context, message: e.message().to_owned() }
}
