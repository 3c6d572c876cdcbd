//! winfleet's own status commits, which the signature check passes over
//! (issue 35): with the status on the tracked branch they land between the
//! signed commits, unsigned (winfleet holds no signing key).
//!
//! A commit is one when it has exactly one parent, winfleet's status
//! author (`--status-author`) is its author and its committer, and every
//! path it changes lies in the status directory and is never read as
//! configuration ([`StatusCommits::holds`]). The author only says whose it
//! is; anyone can write a name, so the paths are what make passing over it
//! safe: such a commit cannot change what is applied, because the loader
//! skips the status directory. A merge, or a commit that touches anything
//! else, is checked like any other. Pure but for reading the two trees.

use std::path::Path;

use git2::{Oid, Repository};

/// How winfleet's own status commits are recognised.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusCommits {
    /// The status directory the loader skips (`status`), relative to the
    /// configuration's root; winfleet writes it at the repository root.
    pub path: String,
    /// The directory read as the configuration (`--path`), if not the root.
    pub selected: Option<String>,
    /// The status author's name.
    pub author_name: String,
    /// The status author's e-mail.
    pub author_email: String,
}

impl StatusCommits {
    /// Whether the repository path `path` lies in the status directory (as
    /// winfleet writes it, from the repository root) and is never read as
    /// configuration: outside the selected directory, or in the status
    /// directory under it too. With `--path fleet` and a status directory
    /// `fleet/status`, `fleet/status/x.yaml` is read (as `status/x.yaml`),
    /// so a commit touching it is checked.
    pub fn holds(&self, path: &str) -> bool {
        let status = self.path.trim_matches('/');
        if !under(path, status) {
            return false;
        }
        let selected = self.selected.as_deref().map(|d| d.trim_matches('/')).filter(|d| !d.is_empty());
        match selected.map(|dir| path.strip_prefix(dir).and_then(|rest| rest.strip_prefix('/'))) {
            None | Some(None) => true,
            Some(Some(inside)) => under(inside, status),
        }
    }

    /// Whether commit `id` is one of winfleet's status commits.
    pub fn is_one(&self, repo: &Repository, id: Oid) -> Result<bool, String> {
        let git = |e: git2::Error| format!("commit {}: {}", short(id), e.message());
        let commit = repo.find_commit(id).map_err(git)?;
        if commit.parent_count() != 1 {
            return Ok(false);
        }
        let winfleet = |who: git2::Signature<'_>| {
            who.name_bytes() == self.author_name.as_bytes() && who.email_bytes() == self.author_email.as_bytes()
        };
        if !winfleet(commit.author()) || !winfleet(commit.committer()) {
            return Ok(false);
        }
        let parent = commit.parent(0).and_then(|p| p.tree()).map_err(git)?;
        let diff = repo.diff_tree_to_tree(Some(&parent), Some(&commit.tree().map_err(git)?), None).map_err(git)?;
        let held = |path: Option<&Path>| path.is_none_or(|p| p.to_str().is_some_and(|p| self.holds(p)));
        Ok(diff.deltas().all(|delta| held(delta.old_file().path()) && held(delta.new_file().path())))
    }

    /// The commit whose signature vouches for `id`: `id` itself, or, when
    /// it is a status commit, the first commit below it (following the one
    /// parent) that is not: its tree, outside the status directory, is
    /// `id`'s.
    pub fn vouching(&self, repo: &Repository, id: Oid) -> Result<Oid, String> {
        let mut id = id;
        while self.is_one(repo, id)? {
            let commit = repo.find_commit(id).map_err(|e| format!("commit {}: {}", short(id), e.message()))?;
            id = commit.parent_id(0).map_err(|e| format!("commit {}: {}", short(id), e.message()))?;
        }
        Ok(id)
    }
}

/// Whether `path` lies under the directory `dir` (`status` → `status/…`).
fn under(path: &str, dir: &str) -> bool {
    !dir.is_empty() && path.strip_prefix(dir).is_some_and(|rest| rest.starts_with('/'))
}

fn short(id: Oid) -> String {
    id.to_string().chars().take(7).collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn rule(path: &str, selected: Option<&str>) -> StatusCommits {
        StatusCommits {
            path: path.to_owned(),
            selected: selected.map(str::to_owned),
            author_name: "winfleet".to_owned(),
            author_email: "winfleet@localhost".to_owned(),
        }
    }

    #[test]
    fn only_paths_in_the_status_directory_that_the_loader_skips_are_held() {
        let root = rule("status", None);
        assert!(root.holds("status/summary.yaml"));
        assert!(root.holds("status/instances/10.0.0.1.yaml"));
        assert!(!root.holds("status"), "a file named like the directory is not in it");
        assert!(!root.holds("statusx/summary.yaml"));
        assert!(!root.holds("fleet.yaml"));
        let nested = rule("ops/status/", None);
        assert!(nested.holds("ops/status/summary.yaml"));
        assert!(!nested.holds("ops/fleet.yaml"));
    }

    #[test]
    fn with_a_selected_directory_a_status_file_inside_it_counts_only_where_the_loader_skips_it_too() {
        // Status written at the root, configuration read from fleet/.
        assert!(rule("status", Some("fleet")).holds("status/summary.yaml"));
        // fleet/status/ is read as status/ and skipped: held.
        assert!(rule("status", Some("fleet/")).holds("status/summary.yaml"));
        // Status written at fleet/x, read as x/…, which the loader (skipping
        // fleet/x/… relative to fleet/) reads as configuration: not held.
        assert!(!rule("fleet/x", Some("fleet")).holds("fleet/x/instances.yaml"));
        // A status directory outside the selected one is never read.
        assert!(rule("ops/status", Some("fleet")).holds("ops/status/summary.yaml"));
    }

    /// A repository with one commit (`fleet.yaml`); commits made by `who`.
    struct Repo {
        _dir: tempfile::TempDir,
        repo: Repository,
    }

    impl Repo {
        fn new() -> Self {
            let dir = tempfile::tempdir().unwrap();
            let repo = Repository::init(dir.path()).unwrap();
            let this = Self { _dir: dir, repo };
            this.commit(("admin", "admin@corp.example"), &[("fleet.yaml", "kind: Fleet\n")], &[]);
            this
        }

        fn head(&self) -> Oid {
            self.repo.head().unwrap().target().unwrap()
        }

        /// Commits `files` on top of `extra_parents` and the head.
        fn commit(&self, who: (&str, &str), files: &[(&str, &str)], extra_parents: &[Oid]) -> Oid {
            let head = self.repo.head().ok().and_then(|h| h.peel_to_commit().ok());
            let mut builder = git2::build::TreeUpdateBuilder::new();
            for (path, content) in files {
                let blob = self.repo.blob(content.as_bytes()).unwrap();
                builder.upsert(*path, blob, git2::FileMode::Blob);
            }
            let base = match &head {
                Some(commit) => commit.tree().unwrap(),
                None => self.repo.find_tree(self.repo.treebuilder(None).unwrap().write().unwrap()).unwrap(),
            };
            let tree = self.repo.find_tree(builder.create_updated(&self.repo, &base).unwrap()).unwrap();
            let signature = git2::Signature::now(who.0, who.1).unwrap();
            let extra: Vec<git2::Commit<'_>> =
                extra_parents.iter().map(|p| self.repo.find_commit(*p).unwrap()).collect();
            let parents: Vec<&git2::Commit<'_>> = head.iter().chain(extra.iter()).collect();
            self.repo.commit(Some("HEAD"), &signature, &signature, "change", &tree, &parents).unwrap()
        }
    }

    const WINFLEET: (&str, &str) = ("winfleet", "winfleet@localhost");

    #[test]
    fn a_status_only_commit_by_winfleet_is_one_and_vouched_for_by_the_commit_below_it() {
        let repo = Repo::new();
        let signed = repo.head();
        let first = repo.commit(WINFLEET, &[("status/summary.yaml", "a\n")], &[]);
        let second = repo.commit(WINFLEET, &[("status/summary.yaml", "b\n")], &[]);
        let rule = rule("status", None);
        assert!(rule.is_one(&repo.repo, first).unwrap());
        assert_eq!(rule.vouching(&repo.repo, second).unwrap(), signed);
        assert!(!rule.is_one(&repo.repo, signed).unwrap(), "the root commit has no parent");
    }

    #[test]
    fn a_status_commit_with_another_file_by_someone_else_or_a_merge_is_not_one() {
        let repo = Repo::new();
        let rule = rule("status", None);
        let sneaked = repo.commit(WINFLEET, &[("status/summary.yaml", "a\n"), ("mirrors.yaml", "evil\n")], &[]);
        assert!(!rule.is_one(&repo.repo, sneaked).unwrap(), "a file outside the status directory");
        let someone = repo.commit(("mallory", "winfleet@localhost"), &[("status/summary.yaml", "b\n")], &[]);
        assert!(!rule.is_one(&repo.repo, someone).unwrap(), "another author");
        assert_eq!(rule.vouching(&repo.repo, someone).unwrap(), someone);
        // A side commit (anyone's), merged by a status-only merge commit.
        let main = repo.head();
        let side = repo.commit(("mallory", "m@corp.example"), &[("mirrors.yaml", "evil2\n")], &[]);
        repo.repo.reference("refs/heads/side", side, true, "side").unwrap();
        repo.repo.set_head_detached(main).unwrap();
        let merge = repo.commit(WINFLEET, &[("status/summary.yaml", "c\n")], &[side]);
        assert!(!rule.is_one(&repo.repo, merge).unwrap(), "a merge");
    }
}
