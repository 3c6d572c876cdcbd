//! A Git remote for daemon tests: a bare repository reached over file://
//! and a working clone the test commits and pushes from (the git CLI, as a
//! cluster admin's merge would).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// A bare remote and a clone of it.
pub struct Remote {
    dir: tempfile::TempDir,
    /// The bare repository.
    pub bare: PathBuf,
    /// The working clone.
    pub work: PathBuf,
}

pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=admin", "-c", "user.email=admin@corp.example", "-c", "init.defaultBranch=main"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

impl Remote {
    /// A remote whose `main` holds `files`.
    pub fn new(files: &[(&str, &str)]) -> Self {
        let dir = tempfile::Builder::new().prefix("winfleet-remote-").tempdir().unwrap();
        let bare = dir.path().join("fleet.git");
        let work = dir.path().join("work");
        std::fs::create_dir_all(&bare).unwrap();
        git(&bare, &["init", "-q", "--bare", "-b", "main"]);
        git(dir.path(), &["clone", "-q", bare.to_str().unwrap(), "work"]);
        git(&work, &["checkout", "-q", "-b", "main"]);
        let remote = Self { dir, bare, work };
        remote.push(files, &[], "fleet");
        remote
    }

    /// The URL the daemon fetches.
    pub fn url(&self) -> String {
        format!("file://{}", self.bare.display())
    }

    /// A scratch directory beside the remote.
    pub fn scratch(&self, name: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::create_dir_all(&path).unwrap();
        path
    }

    /// Writes `files`, removes `removed`, commits and pushes main; the new head.
    pub fn push(&self, files: &[(&str, &str)], removed: &[&str], message: &str) -> String {
        for (rel, content) in files {
            let path = self.work.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, content).unwrap();
        }
        for rel in removed {
            std::fs::remove_file(self.work.join(rel)).unwrap();
        }
        git(&self.work, &["add", "-A"]);
        git(&self.work, &["commit", "-q", "--allow-empty", "-m", message]);
        git(&self.work, &["push", "-q", "origin", "HEAD:main"]);
        git(&self.work, &["rev-parse", "HEAD"])
    }

    /// The tip of a branch of the remote.
    pub fn tip(&self, branch: &str) -> Option<String> {
        let out = Command::new("git")
            .current_dir(&self.bare)
            .args(["rev-parse", "--verify", "-q", &format!("refs/heads/{branch}")])
            .output()
            .unwrap();
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// A file on a branch of the remote.
    pub fn show(&self, branch: &str, path: &str) -> Option<String> {
        let out =
            Command::new("git").current_dir(&self.bare).args(["show", &format!("{branch}:{path}")]).output().unwrap();
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The full message of a commit of the remote.
    pub fn message(&self, commit: &str) -> String {
        git(&self.bare, &["log", "-1", "--format=%B", commit])
    }

    /// Number of commits on a branch.
    pub fn count(&self, branch: &str) -> usize {
        git(&self.bare, &["rev-list", "--count", &format!("refs/heads/{branch}")]).parse().unwrap()
    }
}

/// A git-sync style checkout: `root/current` → `root/.worktrees/<sha>`.
pub struct GitSync {
    root: PathBuf,
    repo: PathBuf,
}

impl GitSync {
    pub fn new(dir: &Path, files: &[(&'static str, String)]) -> Self {
        let repo = dir.join("upstream");
        std::fs::create_dir_all(&repo).unwrap();
        git(&repo, &["init", "-q", "-b", "main"]);
        let sync = Self { root: dir.join("git"), repo };
        std::fs::create_dir_all(sync.root.join(".worktrees")).unwrap();
        git(&sync.root, &["init", "-q"]);
        sync.publish(files);
        sync
    }

    /// Commits upstream, fetches into the root, adds a worktree and flips
    /// the link (rename over it); the new revision.
    pub fn publish(&self, files: &[(&'static str, String)]) -> String {
        let sha = self.commit_upstream(files);
        git(&self.root, &["fetch", "-q", self.repo.to_str().unwrap(), "main"]);
        let worktree = self.root.join(".worktrees").join(&sha);
        git(&self.root, &["worktree", "add", "-q", "--detach", worktree.to_str().unwrap(), &sha]);
        let tmp = self.root.join(".current.tmp");
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(Path::new(".worktrees").join(&sha), &tmp).unwrap();
        std::fs::rename(&tmp, self.link()).unwrap();
        sha
    }

    pub fn link(&self) -> PathBuf {
        self.root.join("current")
    }

    /// Commits upstream only (a push git-sync has not fetched yet); the
    /// new revision.
    pub fn commit_upstream(&self, files: &[(&'static str, String)]) -> String {
        for (rel, content) in files {
            std::fs::write(self.repo.join(rel), content).unwrap();
        }
        git(&self.repo, &["add", "-A"]);
        git(&self.repo, &["commit", "-q", "--allow-empty", "-m", "change"]);
        git(&self.repo, &["rev-parse", "HEAD"])
    }

    /// git-sync's `--root` (holding the link and the worktrees).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The upstream repository git-sync fetches from.
    pub fn upstream(&self) -> &Path {
        &self.repo
    }
}

/// `git daemon` serving a [`Remote`]'s bare repository over git://, pushes
/// allowed: unlike file://, where libgit2 writes the refs itself, a push
/// here goes through git-receive-pack and runs the repository's hooks.
pub struct GitDaemon {
    child: std::process::Child,
    /// `git://127.0.0.1:<port>/fleet.git`.
    pub url: String,
}

impl GitDaemon {
    /// Serves `remote` until dropped.
    pub fn serve(remote: &Remote) -> Self {
        let port = super::port::free_port();
        let base = remote.dir.path().display().to_string();
        // git-daemon itself, not `git daemon` (which forks it): dropping
        // this must stop the server, not only its parent.
        let exec_path = git(Path::new("."), &["--exec-path"]);
        let child = Command::new(Path::new(&exec_path).join("git-daemon"))
            .args(["--reuseaddr", "--listen=127.0.0.1", &format!("--port={port}")])
            .args([format!("--base-path={base}"), "--export-all".into(), "--enable=receive-pack".into(), base])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("git daemon");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(std::time::Instant::now() < deadline, "git daemon did not listen on {port}");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        Self { child, url: format!("git://127.0.0.1:{port}/fleet.git") }
    }
}

impl Drop for GitDaemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
