//! `winfleet render` writes exactly the golden files: hosts.toml in WMCO's
//! format for the documentation's mirror examples and for each of winfleet's
//! decisions 1-5, and the environment file.
//!
//! Layout: tests/fixtures/render/<situation>/repo/… (the repository),
//! optional pull-secret.json, and expected/… (the render output tree).

mod support;

use std::collections::BTreeSet;
use std::process::Command;

#[test]
fn render_output_matches_the_golden_trees() {
    let mut failures = Vec::new();
    for case in support::cases("render") {
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        let out = tempfile::tempdir().unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_winfleet"));
        cmd.arg("render").arg("--repo").arg(case.join("repo")).arg("--output").arg(out.path());
        if case.join("pull-secret.json").exists() {
            cmd.arg("--pull-secret").arg(case.join("pull-secret.json"));
        }
        let run = cmd.output().unwrap();
        if !run.status.success() {
            failures.push(format!("{name}: render failed: {}", String::from_utf8_lossy(&run.stderr)));
            continue;
        }
        let actual: Vec<(String, Vec<u8>)> =
            support::tree(out.path()).into_iter().filter(|(p, _)| p != ".winfleet-render").collect();
        let expected_dir = case.join("expected");
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            let _ = std::fs::remove_dir_all(&expected_dir);
        }
        for (path, bytes) in &actual {
            if let Err(e) = support::check_golden(&expected_dir.join(path), &String::from_utf8_lossy(bytes)) {
                failures.push(format!("{name}: {e}"));
            }
        }
        let actual_paths: BTreeSet<&String> = actual.iter().map(|(p, _)| p).collect();
        let expected = if expected_dir.exists() { support::tree(&expected_dir) } else { Vec::new() };
        for (path, _) in &expected {
            if !actual_paths.contains(path) {
                failures.push(format!("{name}: expected {path} was not rendered"));
            }
        }
    }
    support::report(failures);
}

#[test]
fn a_second_render_replaces_the_first_but_never_a_foreign_directory() {
    let repo = support::fixture("render/docs-idms-example/repo");
    let out = tempfile::tempdir().unwrap();
    let render = |dir: &std::path::Path| {
        Command::new(env!("CARGO_BIN_EXE_winfleet"))
            .args(["render", "--repo"])
            .arg(&repo)
            .arg("--output")
            .arg(dir)
            .output()
            .unwrap()
    };
    assert!(render(out.path()).status.success());
    std::fs::write(out.path().join("10.1.42.1/stale"), "x").unwrap();
    assert!(render(out.path()).status.success());
    assert!(!out.path().join("10.1.42.1/stale").exists(), "the previous render is replaced whole");

    let foreign = tempfile::tempdir().unwrap();
    std::fs::write(foreign.path().join("precious.txt"), "keep").unwrap();
    let run = render(foreign.path());
    assert_eq!(run.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&run.stderr).contains("refusing to replace"));
    assert!(foreign.path().join("precious.txt").exists());
}
