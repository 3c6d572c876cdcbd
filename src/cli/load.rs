//! Reading and loading a revision, shared by the commands.

use std::path::Path;

use anyhow::Context;
use winfleet::desired::{self, LoadOptions, Loaded};
use winfleet::render::pull_secret::PullSecret;
use winfleet::source::{self, Snapshot};

/// Reads the working tree, or the committed tree of `rev`; then the
/// directory `path` of it (`--path`) without what `.winfleetignore` excludes.
pub fn snapshot(repo: &Path, path: Option<&str>, rev: Option<&str>) -> anyhow::Result<Snapshot> {
    let snapshot = match rev {
        Some(rev) => source::read_revision(repo, rev)?,
        None => source::read_worktree(repo)?,
    };
    source::select(snapshot, path).context("--path")
}

/// Reads several revisions of the repository together ([`source::read_revisions`]:
/// a file they share is read once), each selected as [`snapshot`] selects it.
/// The outer error is the repository's; each revision has its own result.
pub fn snapshots(repo: &Path, path: Option<&str>, revs: &[&str]) -> anyhow::Result<Vec<anyhow::Result<Snapshot>>> {
    let read = source::read_revisions(repo, revs)?;
    Ok(read.into_iter().map(|r| source::select(r?, path).context("--path")).collect())
}

/// Reads and loads a revision.
pub fn load(repo: &Path, path: Option<&str>, rev: Option<&str>, secret: Option<&PullSecret>) -> anyhow::Result<Loaded> {
    let snapshot = snapshot(repo, path, rev)?;
    Ok(desired::load(&snapshot, LoadOptions { pull_secret: secret }))
}

/// Reads a pull secret file.
pub fn pull_secret(path: &Path) -> anyhow::Result<PullSecret> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read pull secret {}", path.display()))?;
    PullSecret::parse(&bytes).with_context(|| format!("pull secret {}", path.display()))
}
