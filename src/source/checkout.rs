//! `--repo-path DIR`: a checkout maintained by someone else, usually the
//! git-sync sidecar. git-sync v4 keeps `<root>/<link>` as a symbolic link
//! to `<root>/.worktrees/<sha>` (a worktree of `<root>`'s repository) and
//! flips it atomically with rename(2); a plain git checkout works too.
//!
//! Only Git metadata and the object database are read, never the working
//! files: a worktree being written (or a half-flipped one) can never
//! produce a half-read revision.

use std::fs;
use std::path::{Path, PathBuf};

use git2::Repository;

use super::{Snapshot, SourceError};

/// A checkout on the local file system.
#[derive(Clone, Debug)]
pub struct CheckoutSource {
    path: PathBuf,
}

impl CheckoutSource {
    /// The checkout at `path` (git-sync's link, or any git checkout).
    pub fn new(path: &Path) -> Self {
        Self { path: path.to_owned() }
    }

    /// Resolves the link (if any) now, opens the repository there and
    /// returns its HEAD commit (hex).
    pub fn head(&self) -> Result<String, SourceError> {
        let repo = self.open()?;
        let commit = repo
            .head()
            .and_then(|head| head.peel_to_commit())
            .map_err(|e| SourceError::git(format!("reading HEAD of {}", self.path.display()), &e))?;
        Ok(commit.id().to_string())
    }

    /// The committed tree of `revision`, read from the object database.
    pub fn snapshot(&self, revision: &str) -> Result<Snapshot, SourceError> {
        let repo = self.open()?;
        let id = repo
            .revparse_single(revision)
            .and_then(|object| object.peel_to_commit())
            .map(|commit| commit.id())
            .map_err(|e| SourceError::git(format!("resolving revision {revision} in {}", self.path.display()), &e))?;
        super::read_commit(&repo, id)
    }

    /// What to watch for changes: for a link (or a path that does not exist
    /// yet), its parent directory (where the flip happens); for a plain checkout, its Git directory (HEAD)
    /// and, for a worktree, the common one (refs).
    pub fn watch_paths(&self) -> Vec<PathBuf> {
        // A link git-sync has not made yet (the sidecar starts alongside)
        // is watched through its directory like a link that exists.
        let is_link = fs::symlink_metadata(&self.path).map_or(true, |meta| meta.file_type().is_symlink());
        if is_link {
            let parent = self.path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
            return vec![parent.to_owned()];
        }
        match Repository::open(&self.path) {
            Ok(repo) => {
                let mut paths = vec![repo.path().to_owned()];
                if repo.commondir() != repo.path() {
                    paths.push(repo.commondir().to_owned());
                }
                paths
            }
            Err(_) => vec![self.path.join(".git")],
        }
    }

    /// The repository the link points at now.
    pub fn repository(&self) -> Result<Repository, SourceError> {
        self.open()
    }

    /// The URL of the checkout's `origin` remote, if it has one (where
    /// status is pushed by default).
    pub fn origin_url(&self) -> Option<String> {
        let repo = self.open().ok()?;
        let remote = repo.find_remote("origin").ok()?;
        remote.url().ok().map(str::to_owned)
    }

    fn open(&self) -> Result<Repository, SourceError> {
        let resolved = fs::canonicalize(&self.path)
            .map_err(|source| SourceError::Io { path: self.path.display().to_string(), source })?;
        Repository::open(&resolved).map_err(|e| {
            let context = format!("opening the checkout {} (-> {})", self.path.display(), resolved.display());
            match e.code() {
                // libgit2 refuses a repository owned by another user, as git does.
                git2::ErrorCode::Owner => SourceError::Git {
                    context,
                    message: format!(
                        "{} (run winfleet with git-sync's user id, or list the directory under safe.directory in its global git config)",
                        e.message()
                    ),
                },
                _ => SourceError::git(context, &e),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;
    use std::process::Command;

    use git2::Oid;

    use super::*;

    /// A git-sync root: a repository with commits, worktrees under
    /// `.worktrees/<sha>`, and the link `config` flipped by rename(2).
    struct GitSync {
        root: tempfile::TempDir,
        repo: Repository,
    }

    impl GitSync {
        fn new() -> Self {
            let root = tempfile::tempdir().unwrap();
            let repo = Repository::init(root.path()).unwrap();
            Self { root, repo }
        }

        fn commit(&self, files: &[(&str, &str)]) -> Oid {
            let mut builder = self.repo.treebuilder(None).unwrap();
            for (name, text) in files {
                builder.insert(name, self.repo.blob(text.as_bytes()).unwrap(), 0o100644).unwrap();
            }
            let tree = self.repo.find_tree(builder.write().unwrap()).unwrap();
            let sig = git2::Signature::new("t", "t@example.invalid", &git2::Time::new(1_700_000_000, 0)).unwrap();
            let parent = self.repo.head().ok().and_then(|h| h.peel_to_commit().ok());
            let parents: Vec<&git2::Commit> = parent.iter().collect();
            self.repo.commit(Some("HEAD"), &sig, &sig, "c", &tree, &parents).unwrap()
        }

        /// `git worktree add --detach .worktrees/<sha> <sha>`, as git-sync does.
        fn worktree(&self, id: Oid) -> PathBuf {
            let rel = format!(".worktrees/{id}");
            let out = Command::new("git")
                .current_dir(self.root.path())
                .args(["worktree", "add", "--detach", &rel, &id.to_string()])
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            self.root.path().join(rel)
        }

        /// Points `config` at the worktree: a new link renamed over the old.
        fn flip(&self, id: Oid) {
            let tmp = self.root.path().join(".config.tmp");
            symlink(format!(".worktrees/{id}"), &tmp).unwrap();
            fs::rename(&tmp, self.link()).unwrap();
        }

        fn link(&self) -> PathBuf {
            self.root.path().join("config")
        }
    }

    fn content(snapshot: &Snapshot) -> Vec<(String, String)> {
        snapshot.files.iter().map(|f| (f.path.clone(), String::from_utf8_lossy(&f.bytes).into_owned())).collect()
    }

    #[test]
    fn head_follows_the_git_sync_link_across_a_flip() {
        let sync = GitSync::new();
        let first = sync.commit(&[("fleet.yaml", "one\n")]);
        sync.worktree(first);
        sync.flip(first);
        let source = CheckoutSource::new(&sync.link());
        assert_eq!(source.head().unwrap(), first.to_string());

        let second = sync.commit(&[("fleet.yaml", "two\n")]);
        sync.worktree(second);
        assert_eq!(source.head().unwrap(), first.to_string(), "the link has not flipped yet");
        sync.flip(second);
        assert_eq!(source.head().unwrap(), second.to_string());
        assert_eq!(content(&source.snapshot(&second.to_string()).unwrap()), [("fleet.yaml".into(), "two\n".into())]);
        // The old revision is still readable from the shared object database.
        assert_eq!(content(&source.snapshot(&first.to_string()).unwrap()), [("fleet.yaml".into(), "one\n".into())]);
        assert_eq!(source.watch_paths(), vec![sync.root.path().to_owned()]);
    }

    #[test]
    fn the_snapshot_is_the_commit_even_while_the_working_files_are_rewritten() {
        let sync = GitSync::new();
        let id = sync.commit(&[("fleet.yaml", "committed\n"), ("instances.yaml", "a: 1\n")]);
        let worktree = sync.worktree(id);
        sync.flip(id);
        fs::write(worktree.join("fleet.yaml"), "\u{0}garbage, half written").unwrap();
        fs::remove_file(worktree.join("instances.yaml")).unwrap();
        fs::write(worktree.join("extra.yaml"), "not committed").unwrap();
        let source = CheckoutSource::new(&sync.link());
        let snapshot = source.snapshot(&source.head().unwrap()).unwrap();
        assert_eq!(snapshot.revision, Some(id.to_string()));
        assert_eq!(
            content(&snapshot),
            [("fleet.yaml".into(), "committed\n".into()), ("instances.yaml".into(), "a: 1\n".into())]
        );
    }

    #[test]
    fn a_plain_checkout_is_read_from_its_head_and_watched_through_its_git_dir() {
        let sync = GitSync::new();
        let id = sync.commit(&[("fleet.yaml", "plain\n")]);
        let source = CheckoutSource::new(sync.root.path());
        assert_eq!(source.head().unwrap(), id.to_string());
        let git_dir = fs::canonicalize(sync.root.path().join(".git")).unwrap();
        let watched: Vec<PathBuf> = source.watch_paths().iter().map(|p| fs::canonicalize(p).unwrap()).collect();
        assert_eq!(watched, vec![git_dir.clone()]);

        // A worktree checkout: its own git dir (HEAD) and the common one (refs).
        let worktree = sync.worktree(id);
        let watched: Vec<PathBuf> =
            CheckoutSource::new(&worktree).watch_paths().iter().map(|p| fs::canonicalize(p).unwrap()).collect();
        assert_eq!(watched, vec![git_dir.join(format!("worktrees/{id}")), git_dir]);
    }

    #[test]
    fn a_missing_checkout_or_revision_is_an_error_naming_it() {
        let sync = GitSync::new();
        let missing = CheckoutSource::new(&sync.link());
        let text = missing.head().unwrap_err().to_string();
        assert!(text.contains(&sync.link().display().to_string()), "{text}");

        let id = sync.commit(&[("a.yaml", "a\n")]);
        let source = CheckoutSource::new(sync.root.path());
        let text = source.snapshot("0123456789012345678901234567890123456789").unwrap_err().to_string();
        assert!(text.contains("0123456789012345678901234567890123456789"), "{text}");
        assert_eq!(source.snapshot(&id.to_string()).unwrap().files.len(), 1);
    }
}
