//! The part of a repository winfleet reads: `--path DIR` (Flux's
//! `spec.path`, Argo CD's `path`), so the configuration can live beside
//! other files, and `.winfleetignore` at that directory's root (gitignore
//! syntax, Flux's `.sourceignore` convention), for working trees and Git
//! trees alike. Pure: it filters a snapshot already read.

use std::path::Path;

use ignore::gitignore::GitignoreBuilder;

use super::{Snapshot, SourceError};

/// The ignore file read at the root of the selected directory.
pub const IGNORE_FILE: &str = ".winfleetignore";

/// Keeps the files under `dir` (paths made relative to it) that
/// `.winfleetignore` does not exclude.
pub fn select(snapshot: Snapshot, dir: Option<&str>) -> Result<Snapshot, SourceError> {
    let dir = match dir.map(normalize).transpose()? {
        Some(dir) if !dir.is_empty() => dir,
        _ => return ignore(snapshot),
    };
    let prefix = format!("{dir}/");
    let revision = snapshot.revision;
    let files: Vec<_> = snapshot
        .files
        .into_iter()
        .filter_map(|mut file| {
            file.path = file.path.strip_prefix(&prefix)?.to_owned();
            Some(file)
        })
        .collect();
    if files.is_empty() {
        return Err(SourceError::Path { path: dir, reason: "the repository has no file under it".to_owned() });
    }
    let links = snapshot.links.into_iter().filter_map(|link| Some(link.strip_prefix(&prefix)?.to_owned())).collect();
    ignore(Snapshot { revision, files, links })
}

/// `./config/` → `config`; an absolute path or `..` is refused.
fn normalize(dir: &str) -> Result<String, SourceError> {
    let trimmed = dir.trim_start_matches("./").trim_matches('/');
    let refuse = |reason: &str| SourceError::Path { path: dir.to_owned(), reason: reason.to_owned() };
    if dir.starts_with('/') {
        return Err(refuse("it must be relative to the repository root"));
    }
    if trimmed.split('/').any(|c| c == "..") {
        return Err(refuse("it must stay inside the repository (no ..)"));
    }
    Ok(trimmed.split('/').filter(|c| !c.is_empty() && *c != ".").collect::<Vec<_>>().join("/"))
}

fn ignore(snapshot: Snapshot) -> Result<Snapshot, SourceError> {
    let Some(file) = snapshot.files.iter().find(|f| f.path == IGNORE_FILE) else { return Ok(snapshot) };
    let root = Path::new("/repository");
    let mut builder = GitignoreBuilder::new(root);
    for line in String::from_utf8_lossy(&file.bytes).lines() {
        builder.add_line(None, line).map_err(|e| SourceError::Path {
            path: IGNORE_FILE.to_owned(),
            reason: format!("line {line:?} is not a gitignore pattern: {e}"),
        })?;
    }
    let matcher =
        builder.build().map_err(|e| SourceError::Path { path: IGNORE_FILE.to_owned(), reason: e.to_string() })?;
    let revision = snapshot.revision;
    let kept = |path: &str| !matcher.matched_path_or_any_parents(root.join(path), false).is_ignore();
    let files = snapshot.files.into_iter().filter(|f| kept(&f.path)).collect();
    let links = snapshot.links.into_iter().filter(|l| kept(l)).collect();
    Ok(Snapshot { revision, files, links })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::source::SourceFile;

    fn snapshot(paths: &[&str]) -> Snapshot {
        let file = |p: &&str| SourceFile { path: (*p).to_owned(), bytes: b"x".to_vec() };
        Snapshot { revision: None, files: paths.iter().map(file).collect(), links: Vec::new() }
    }

    fn paths(s: &Snapshot) -> Vec<&str> {
        s.files.iter().map(|f| f.path.as_str()).collect()
    }

    #[test]
    fn a_directory_is_selected_and_made_the_root() {
        let s = snapshot(&["README.md", "clusters/prod/fleet.yaml", "clusters/prod/x/i.yaml", "clusters/prodx/a.yaml"]);
        let selected = select(s, Some("./clusters/prod/")).unwrap();
        assert_eq!(paths(&selected), ["fleet.yaml", "x/i.yaml"]);
    }

    #[test]
    fn bad_and_empty_directories_are_refused() {
        let error = |dir: &str| select(snapshot(&["a/b.yaml"]), Some(dir)).unwrap_err().to_string();
        assert!(error("../etc").contains("no .."), "{}", error("../etc"));
        assert!(error("/etc").contains("relative"));
        assert!(error("c").contains("no file under it"));
        assert_eq!(paths(&select(snapshot(&["a/b.yaml"]), Some(".")).unwrap()), ["a/b.yaml"]);
    }

    #[test]
    fn the_ignore_file_excludes_what_it_matches() {
        let mut s = snapshot(&["fleet.yaml", "drafts/x.yaml", "old.yaml", "keep/old.yaml", "ci/job.yaml"]);
        s.files.push(SourceFile { path: IGNORE_FILE.into(), bytes: b"# drafts\ndrafts/\n/old.yaml\nci\n".to_vec() });
        let selected = select(s, None).unwrap();
        assert_eq!(paths(&selected), ["fleet.yaml", "keep/old.yaml", IGNORE_FILE]);
    }
}
