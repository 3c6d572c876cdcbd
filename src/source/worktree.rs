//! Reading a directory as it is on disk.

use std::fs;
use std::path::Path;

use super::{Snapshot, SourceError, SourceFile};

/// A walk's error as the IO error under it, said once: the `ignore`
/// crate's own message names the path two more times.
fn walk_error(dir: &Path, error: &ignore::Error) -> SourceError {
    let mut path = dir.display().to_string();
    let mut inner = error;
    loop {
        match inner {
            ignore::Error::WithPath { path: at, err } => {
                path = at.display().to_string();
                inner = err;
            }
            ignore::Error::WithDepth { err, .. } | ignore::Error::WithLineNumber { err, .. } => inner = err,
            _ => break,
        }
    }
    let source = match inner.io_error() {
        Some(io) => os_error(io).map_or_else(|| std::io::Error::from(io.kind()), std::io::Error::from_raw_os_error),
        None => std::io::Error::other(inner.to_string()),
    };
    SourceError::Io { path, source }
}

/// The operating system's error code under `error` (walkdir wraps it).
fn os_error(error: &std::io::Error) -> Option<i32> {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = cause {
        if let Some(code) = current.downcast_ref::<std::io::Error>().and_then(std::io::Error::raw_os_error) {
            return Some(code);
        }
        cause = current.source();
    }
    None
}

/// Reads every regular file under `dir` except the `.git` directory and
/// what Git ignores there (`.gitignore` files, `.git/info/exclude`; the
/// `ignore` crate's walk). Symbolic links are not followed, so nothing
/// outside the repository is read; their paths are kept in
/// [`Snapshot::links`].
pub fn read_worktree(dir: &Path) -> Result<Snapshot, SourceError> {
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| SourceError::Io { path, source }
    };
    let walk = ignore::WalkBuilder::new(dir)
        .hidden(false)
        .ignore(false)
        .parents(false)
        .git_global(false)
        .git_ignore(true)
        .git_exclude(true)
        .require_git(false)
        .follow_links(false)
        .filter_entry(|entry| entry.depth() != 1 || entry.file_name() != ".git")
        .build();
    let mut files = Vec::new();
    let mut links = Vec::new();
    for entry in walk {
        let entry = entry.map_err(|e| walk_error(dir, &e))?;
        let is_link = entry.path_is_symlink();
        if !is_link && !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let path = entry.path();
        let Ok(rel) = path.strip_prefix(dir) else { continue };
        let rel = rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/");
        if is_link {
            links.push(rel);
            continue;
        }
        let bytes = fs::read(path).map_err(io(path))?;
        files.push(SourceFile { path: rel, bytes });
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    links.sort();
    Ok(Snapshot { revision: None, files, links })
}
