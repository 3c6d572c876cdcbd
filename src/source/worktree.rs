//! Reading a directory as it is on disk.

use std::fs;
use std::path::Path;

use super::{Snapshot, SourceError, SourceFile};

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
        let entry = entry.map_err(|e| SourceError::Io {
            path: dir.display().to_string(),
            source: std::io::Error::other(e.to_string()),
        })?;
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
