//! Shared test support: golden files and fixture discovery.
//!
//! Golden files are compared byte for byte; run the tests with
//! `UPDATE_GOLDEN=1` to rewrite them after an intended change, then review
//! the diff like any other change.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::path::{Path, PathBuf};

/// The project root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A fixture directory under tests/fixtures.
pub fn fixture(rel: &str) -> PathBuf {
    root().join("tests/fixtures").join(rel)
}

/// The subdirectories of a fixture directory, sorted.
pub fn cases(rel: &str) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = fs::read_dir(fixture(rel))
        .unwrap_or_else(|e| panic!("reading fixtures {rel}: {e}"))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

/// Compares `actual` with the golden file, or rewrites it under UPDATE_GOLDEN.
/// Returns a description of the mismatch instead of panicking, so callers
/// can check every case and report all failures at once.
pub fn check_golden(path: &Path, actual: &str) -> Result<(), String> {
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, actual).unwrap();
        return Ok(());
    }
    let expected = fs::read_to_string(path)
        .map_err(|e| format!("{}: {e} (run with UPDATE_GOLDEN=1 to create it)", path.display()))?;
    if expected == actual {
        Ok(())
    } else {
        let diff =
            similar::TextDiff::from_lines(&expected, actual).unified_diff().header("expected", "actual").to_string();
        Err(format!("{} differs:\n{diff}", path.display()))
    }
}

/// Panics listing every failure, if any.
pub fn report(failures: Vec<String>) {
    if !failures.is_empty() {
        panic!("{} failure(s):\n\n{}", failures.len(), failures.join("\n\n"));
    }
}

/// Every file under `dir` as (relative path, contents), sorted.
pub fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let snapshot = winfleet::source::read_worktree(dir).unwrap();
    snapshot.files.into_iter().map(|f| (f.path, f.bytes)).collect()
}

/// What `winfleet import` writes for the WMCO cluster tests/import.rs and
/// tests/real_cluster_import.rs seed, in [`tree`] order.
pub const IMPORTED_WMCO_FILES: [&str; 9] = [
    ".winfleetignore",
    "README.md",
    "fleet.yaml",
    "instances/windows-instances.yaml",
    "machinesets/prod-7xk2p-windows-us-east-1a.yaml",
    "mirrors/idms-quay.yaml",
    "mirrors/itms-ubi.yaml",
    "proxy.yaml",
    "services/windows-services-10.19.0-4f1e0f9.yaml",
];

/// A real Git repository made by a test, with deterministic commits (fixed
/// author and time, so commit ids are the same on every run).
pub struct GitRepo {
    pub dir: tempfile::TempDir,
    pub repo: git2::Repository,
}

impl GitRepo {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let repo = git2::Repository::init(dir.path()).unwrap();
        Self { dir, repo }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Makes the work tree exactly `content` (a directory) and commits it.
    pub fn commit_dir(&self, content: &Path, message: &str) -> git2::Oid {
        for entry in fs::read_dir(self.path()).unwrap() {
            let path = entry.unwrap().path();
            if path.file_name().unwrap() != ".git" {
                if path.is_dir() { fs::remove_dir_all(&path).unwrap() } else { fs::remove_file(&path).unwrap() }
            }
        }
        for (rel, bytes) in tree(content) {
            let to = self.path().join(&rel);
            fs::create_dir_all(to.parent().unwrap()).unwrap();
            fs::write(to, bytes).unwrap();
        }
        self.commit_all(message)
    }

    /// Commits everything in the work tree (additions and removals).
    pub fn commit_all(&self, message: &str) -> git2::Oid {
        let mut index = self.repo.index().unwrap();
        index.add_all(["*"], git2::IndexAddOption::DEFAULT, None).unwrap();
        index.update_all(["*"], None).unwrap();
        index.write().unwrap();
        let tree = self.repo.find_tree(index.write_tree().unwrap()).unwrap();
        let sig =
            git2::Signature::new("winfleet test", "test@winfleet.invalid", &git2::Time::new(1_700_000_000, 0)).unwrap();
        let parent = self.repo.head().ok().and_then(|h| h.peel_to_commit().ok());
        let parents: Vec<&git2::Commit> = parent.iter().collect();
        self.repo.commit(Some("HEAD"), &sig, &sig, message, &tree, &parents).unwrap()
    }
}

/// Runs the winfleet binary; returns (exit code, stdout, stderr).
pub fn winfleet(args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_winfleet")).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
pub mod api;
pub mod apiserver;
pub mod bench_checks;
pub mod cluster;
pub mod containerd;
pub mod controlplane;
pub mod daemon;
pub mod engine;
pub mod fleet;
pub mod forge;
pub mod fuzz;
pub mod fuzz_node;
pub mod https_git;
pub mod identity;
pub mod join;
pub mod join_payload;
pub mod kubelet;
pub mod machine_api_real;
pub mod machine_bench;
pub mod machine_model;
pub mod machine_provider;
pub mod mirror_repo;
pub mod node_repo;
pub mod platform_cluster;
pub mod port;
pub mod powershell;
pub mod powershell_standin;
pub mod ps_catalogue;
pub mod ps_check;
pub mod ps_dotnet;
pub mod ps_scripts;
pub mod ps_variables;
pub mod registry;
pub mod remote;
pub mod signing;
pub mod status;
pub mod systemd_unit;
