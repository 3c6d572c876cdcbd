//! Reading the committed tree of a revision with git2.

use std::collections::HashMap;
use std::path::Path;

use git2::{ObjectType, Oid, Repository, Tree, TreeWalkMode, TreeWalkResult};

use super::{Snapshot, SourceError, SourceFile};

/// Reads every blob of the tree of `rev` (symbolic links and submodules skipped).
pub fn read_revision(repo_dir: &Path, rev: &str) -> Result<Snapshot, SourceError> {
    let repo = open(repo_dir)?;
    let commit = find_commit(&repo, rev)?;
    read_commit(&repo, commit.id())
}

/// Reads several revisions of one repository (a plan's base and head), each
/// as [`read_revision`] would: the repository is opened once and a blob that
/// several revisions hold (every file a pull request leaves alone) is read
/// and checked once, so the cost follows what differs between them. The
/// outer error is the repository's; each revision has its own result.
pub fn read_revisions(repo_dir: &Path, revs: &[&str]) -> Result<Vec<Result<Snapshot, SourceError>>, SourceError> {
    let repo = open(repo_dir)?;
    let mut blobs = Blobs::kept();
    Ok(revs.iter().map(|rev| read_with(&repo, find_commit(&repo, rev)?.id(), &mut blobs)).collect())
}

/// Reads every blob of the tree of the commit `id` of an open repository,
/// from its object database only (the working files are never read).
pub fn read_commit(repo: &Repository, id: Oid) -> Result<Snapshot, SourceError> {
    read_with(repo, id, &mut Blobs::default())
}

fn read_with(repo: &Repository, id: Oid, blobs: &mut Blobs) -> Result<Snapshot, SourceError> {
    let rev = id.to_string();
    let commit = repo.find_commit(id).map_err(|e| SourceError::git(format!("finding commit {rev}"), &e))?;
    let tree = commit.tree().map_err(|e| SourceError::git(format!("reading the tree of {rev}"), &e))?;
    let (mut files, links) =
        walk(repo, &tree, blobs).map_err(|e| SourceError::git(format!("reading the tree of {rev}"), &e))?;
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
    walk(repo, tree, &mut Blobs::default())
}

/// Blob contents by id. Reading a blob inflates it and checks its hash;
/// when several trees are read, each blob's bytes are kept so a blob that
/// another tree holds too is copied, not read again.
#[derive(Default)]
struct Blobs {
    keep: bool,
    by_id: HashMap<Oid, Vec<u8>>,
    /// How many blobs were read from the object database.
    read: usize,
}

impl Blobs {
    fn kept() -> Self {
        Blobs { keep: true, ..Blobs::default() }
    }

    fn bytes(&mut self, repo: &Repository, id: Oid) -> Result<Vec<u8>, git2::Error> {
        if let Some(bytes) = self.by_id.get(&id) {
            return Ok(bytes.clone());
        }
        let bytes = repo.find_blob(id)?.content().to_vec();
        self.read += 1;
        if self.keep {
            self.by_id.insert(id, bytes.clone());
        }
        Ok(bytes)
    }
}

fn walk(repo: &Repository, tree: &Tree<'_>, blobs: &mut Blobs) -> Result<(Vec<SourceFile>, Vec<String>), git2::Error> {
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
        match blobs.bytes(repo, entry.id()) {
            Ok(bytes) => {
                files.push(SourceFile { path: format!("{dir}{name}"), bytes });
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

#[cfg(test)]
#[path = "git_tests.rs"]
mod tests;
