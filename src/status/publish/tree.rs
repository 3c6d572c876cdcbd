//! Building trees for the status commit: the status files as a tree of
//! regular blobs, grafted at the status path into the branch tip's tree
//! with everything else kept. File paths are checked first: no `..`, no
//! `.`/`.git`, no absolute path, no empty component.

use std::collections::BTreeMap;

use git2::{ObjectType, Oid, Repository, Tree};

const BLOB: i32 = 0o100644;
const TREE: i32 = 0o040000;

/// The components of a relative `/`-separated path, or why it is refused.
pub(crate) fn components(path: &str) -> Result<Vec<&str>, &'static str> {
    if path.is_empty() {
        return Err("it is empty");
    }
    if path.starts_with('/') {
        return Err("it is absolute");
    }
    if path.contains('\0') {
        return Err("it contains a NUL byte");
    }
    let parts: Vec<&str> = path.split('/').collect();
    for part in &parts {
        match *part {
            "" => return Err("it has an empty component"),
            "." | ".." => return Err("it has a . or .. component"),
            _ if part.eq_ignore_ascii_case(".git") => return Err("it has a .git component"),
            _ => {}
        }
    }
    Ok(parts)
}

enum Node<'a> {
    File(&'a [u8]),
    Dir(BTreeMap<&'a str, Node<'a>>),
}

/// Why the status tree could not be built.
pub(crate) enum TreeError {
    /// A file path is refused.
    Path(String, &'static str),
    /// libgit2 failed writing an object.
    Git(git2::Error),
}

impl From<git2::Error> for TreeError {
    fn from(e: git2::Error) -> Self {
        TreeError::Git(e)
    }
}

/// Writes `files` (relative paths → contents) as a tree; `None` when there
/// are no files.
pub(crate) fn write_files(repo: &Repository, files: &BTreeMap<String, Vec<u8>>) -> Result<Option<Oid>, TreeError> {
    let mut root = BTreeMap::new();
    for (path, bytes) in files {
        let parts = components(path).map_err(|reason| TreeError::Path(path.clone(), reason))?;
        insert(&mut root, &parts, bytes).map_err(|reason| TreeError::Path(path.clone(), reason))?;
    }
    if root.is_empty() {
        return Ok(None);
    }
    Ok(Some(write_dir(repo, &root)?))
}

fn insert<'a>(dir: &mut BTreeMap<&'a str, Node<'a>>, parts: &[&'a str], bytes: &'a [u8]) -> Result<(), &'static str> {
    let Some((first, rest)) = parts.split_first() else { return Err("it is empty") };
    if rest.is_empty() {
        return match dir.insert(first, Node::File(bytes)) {
            None => Ok(()),
            Some(_) => Err("it is also a directory of another status file"),
        };
    }
    match dir.entry(first).or_insert_with(|| Node::Dir(BTreeMap::new())) {
        Node::Dir(child) => insert(child, rest, bytes),
        Node::File(_) => Err("a parent of it is also a status file"),
    }
}

fn write_dir(repo: &Repository, dir: &BTreeMap<&str, Node>) -> Result<Oid, git2::Error> {
    let mut builder = repo.treebuilder(None)?;
    for (name, node) in dir {
        match node {
            Node::File(bytes) => builder.insert(name, repo.blob(bytes)?, BLOB)?,
            Node::Dir(child) => builder.insert(name, write_dir(repo, child)?, TREE)?,
        };
    }
    builder.write()
}

/// The tree `base` (none: empty) with the entry at `path` replaced by the
/// tree `new`, or removed when `new` is `None`; directories left empty
/// disappear. Returns the new root tree.
pub(crate) fn graft(
    repo: &Repository,
    base: Option<&Tree>,
    path: &[&str],
    new: Option<Oid>,
) -> Result<Oid, git2::Error> {
    match replace(repo, base, path, new)? {
        Some(root) => Ok(root),
        None => repo.treebuilder(None)?.write(),
    }
}

fn replace(
    repo: &Repository,
    base: Option<&Tree>,
    path: &[&str],
    new: Option<Oid>,
) -> Result<Option<Oid>, git2::Error> {
    let mut builder = repo.treebuilder(base)?;
    if let Some((first, rest)) = path.split_first() {
        let replacement = if rest.is_empty() {
            new
        } else {
            let child = match base.and_then(|tree| tree.get_name(first)) {
                Some(entry) if entry.kind() == Some(ObjectType::Tree) => Some(repo.find_tree(entry.id())?),
                _ => None,
            };
            replace(repo, child.as_ref(), rest, new)?
        };
        match replacement {
            Some(id) => builder.insert(first, id, TREE).map(|_| ())?,
            None if builder.get(first)?.is_some() => builder.remove(first)?,
            None => {}
        }
    }
    let id = builder.write()?;
    Ok((!builder.is_empty()).then_some(id))
}

/// Every regular file under the tree `tree`, by path relative to it.
pub(crate) fn read_files(repo: &Repository, tree: &Tree) -> Result<BTreeMap<String, Vec<u8>>, git2::Error> {
    let mut files = BTreeMap::new();
    collect(repo, tree, "", &mut files)?;
    Ok(files)
}

fn collect(
    repo: &Repository,
    tree: &Tree,
    prefix: &str,
    files: &mut BTreeMap<String, Vec<u8>>,
) -> Result<(), git2::Error> {
    for entry in tree.iter() {
        let Ok(name) = entry.name() else { continue };
        let path = format!("{prefix}{name}");
        match entry.kind() {
            Some(ObjectType::Tree) => collect(repo, &repo.find_tree(entry.id())?, &format!("{path}/"), files)?,
            // 0o120000 = symbolic link: not a status file.
            Some(ObjectType::Blob) if entry.filemode() != 0o120000 => {
                files.insert(path, repo.find_blob(entry.id())?.content().to_vec());
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(list: &[(&str, &str)]) -> BTreeMap<String, Vec<u8>> {
        list.iter().map(|(p, c)| ((*p).to_owned(), c.as_bytes().to_vec())).collect()
    }

    #[test]
    fn unsafe_paths_are_refused() {
        assert_eq!(components("instances/10.0.0.1.yaml"), Ok(vec!["instances", "10.0.0.1.yaml"]));
        for (path, reason) in [
            ("", "it is empty"),
            ("/etc/passwd", "it is absolute"),
            ("a//b", "it has an empty component"),
            ("a/", "it has an empty component"),
            ("../escape", "it has a . or .. component"),
            ("a/./b", "it has a . or .. component"),
            (".GIT/config", "it has a .git component"),
            ("a\0b", "it contains a NUL byte"),
        ] {
            assert_eq!(components(path), Err(reason), "{path:?}");
        }
    }

    #[test]
    fn a_path_that_is_both_file_and_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init_bare(dir.path()).unwrap();
        for list in [[("a", "1"), ("a/b", "2")], [("a/b", "2"), ("a", "1")]] {
            match write_files(&repo, &files(&list)) {
                Err(TreeError::Path(path, _)) => assert!(path == "a" || path == "a/b"),
                _ => panic!("{list:?} was accepted"),
            }
        }
    }

    #[test]
    fn grafting_replaces_only_the_status_directory() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init_bare(dir.path()).unwrap();
        let base = write_files(&repo, &files(&[("fleet.yaml", "f"), ("ops/status/old.yaml", "o"), ("ops/keep", "k")]))
            .ok()
            .flatten()
            .unwrap();
        let base = repo.find_tree(base).unwrap();
        let status = write_files(&repo, &files(&[("summary.yaml", "s"), ("instances/a.yaml", "a")])).ok().flatten();
        let root = repo.find_tree(graft(&repo, Some(&base), &["ops", "status"], status).unwrap()).unwrap();
        let all: Vec<String> = read_files(&repo, &root).unwrap().into_keys().collect();
        assert_eq!(all, ["fleet.yaml", "ops/keep", "ops/status/instances/a.yaml", "ops/status/summary.yaml"]);

        let emptied = repo.find_tree(graft(&repo, Some(&root), &["ops", "status"], None).unwrap()).unwrap();
        let all: Vec<String> = read_files(&repo, &emptied).unwrap().into_keys().collect();
        assert_eq!(all, ["fleet.yaml", "ops/keep"]);
        let nothing = repo.find_tree(graft(&repo, None, &["status"], None).unwrap()).unwrap();
        assert_eq!(nothing.len(), 0);
    }
}
