//! Reading a directory as it is on disk.

use std::fs;
use std::path::Path;

use super::{Snapshot, SourceError, SourceFile};

/// Reads every regular file under `dir`, except the `.git` directory.
/// Symbolic links are not followed, so nothing outside the repository is read.
pub fn read_worktree(dir: &Path) -> Result<Snapshot, SourceError> {
    let mut files = Vec::new();
    walk(dir, "", &mut files)?;
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(Snapshot { revision: None, files })
}

fn walk(dir: &Path, prefix: &str, files: &mut Vec<SourceFile>) -> Result<(), SourceError> {
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| SourceError::Io { path, source }
    };
    for entry in fs::read_dir(dir).map_err(io(dir))? {
        let entry = entry.map_err(io(dir))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if prefix.is_empty() && name == ".git" {
            continue;
        }
        let path = entry.path();
        let rel = if prefix.is_empty() { name } else { format!("{prefix}/{name}") };
        let kind = entry.file_type().map_err(io(&path))?;
        if kind.is_dir() {
            walk(&path, &rel, files)?;
        } else if kind.is_file() {
            let bytes = fs::read(&path).map_err(io(&path))?;
            files.push(SourceFile { path: rel, bytes });
        }
    }
    Ok(())
}
