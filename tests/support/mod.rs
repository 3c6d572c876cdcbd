//! Shared test support: golden files and fixture discovery.
//!
//! Golden files are compared byte for byte; run the tests with
//! `UPDATE_GOLDEN=1` to rewrite them after an intended change, then review
//! the diff like any other change.

#![allow(dead_code)]

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
    let expected = fs::read_to_string(path).map_err(|e| format!("{}: {e} (run with UPDATE_GOLDEN=1 to create it)", path.display()))?;
    if expected == actual {
        Ok(())
    } else {
        let diff = similar::TextDiff::from_lines(&expected, actual).unified_diff().header("expected", "actual").to_string();
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
