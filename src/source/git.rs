//! Reading the committed tree of a revision with git2.

use std::path::Path;

use git2::{ObjectType, Oid, Repository, Tree, TreeWalkMode, TreeWalkResult};

use super::{Snapshot, SourceError, SourceFile};

/// Reads every blob of the tree of `rev` (symbolic links and submodules skipped).
pub fn read_revision(repo_dir: &Path, rev: &str) -> Result<Snapshot, SourceError> {
    let repo = open(repo_dir)?;
    let commit = find_commit(&repo, rev)?;
    read_commit(&repo, commit.id())
}

/// Reads every blob of the tree of the commit `id` of an open repository,
/// from its object database only (the working files are never read).
pub fn read_commit(repo: &Repository, id: Oid) -> Result<Snapshot, SourceError> {
    let rev = id.to_string();
    let commit = repo.find_commit(id).map_err(|e| SourceError::git(format!("finding commit {rev}"), &e))?;
    let tree = commit.tree().map_err(|e| SourceError::git(format!("reading the tree of {rev}"), &e))?;
    let (mut files, links) =
        tree_entries(repo, &tree).map_err(|e| SourceError::git(format!("reading the tree of {rev}"), &e))?;
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(Snapshot { revision: Some(rev), files, links })
}

/// Every blob under `tree` with its path relative to it (symbolic links
/// and submodules skipped: a link's "content" is a path, never config).
pub fn tree_files(repo: &Repository, tree: &Tree<'_>) -> Result<Vec<SourceFile>, git2::Error> {
    tree_entries(repo, tree).map(|(files, _)| files)
}

/// [`tree_files`], and the paths of the symbolic links it skipped.
pub fn tree_entries(repo: &Repository, tree: &Tree<'_>) -> Result<(Vec<SourceFile>, Vec<String>), git2::Error> {
    let mut files = Vec::new();
    let mut links = Vec::new();
    let mut failure = None;
    tree.walk(TreeWalkMode::PreOrder, |dir, entry| {
        if entry.kind() != Some(ObjectType::Blob) {
            return TreeWalkResult::Ok;
        }
        let Ok(name) = entry.name() else { return TreeWalkResult::Ok };
        if entry.filemode() == 0o120000 {
            links.push(format!("{dir}{name}"));
            return TreeWalkResult::Ok;
        }
        match repo.find_blob(entry.id()) {
            Ok(blob) => {
                files.push(SourceFile { path: format!("{dir}{name}"), bytes: blob.content().to_vec() });
                TreeWalkResult::Ok
            }
            Err(e) => {
                failure = Some(e);
                TreeWalkResult::Abort
            }
        }
    })?;
    links.sort();
    failure.map_or(Ok((files, links)), Err)
}

fn open(repo_dir: &Path) -> Result<Repository, SourceError> {
    Repository::discover(repo_dir)
        .map_err(|e| SourceError::git(format!("opening a Git repository at {}", repo_dir.display()), &e))
}

fn find_commit<'r>(repo: &'r Repository, rev: &str) -> Result<git2::Commit<'r>, SourceError> {
    repo.revparse_single(rev)
        .and_then(|o| o.peel_to_commit())
        .map_err(|e| SourceError::git(format!("resolving revision {rev}"), &e))
}
