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

/// Issue 23, defect 5: hosts.toml files carry pull-secret `authorization`
/// headers and the environment file may carry a proxy password, so the
/// render output is the owner's alone: files 0600, directories 0700, also
/// when OUT already existed (an empty directory or a previous render).
#[cfg(unix)]
#[test]
fn issue_23_render_writes_credentials_readable_by_the_owner_only() {
    use std::os::unix::fs::PermissionsExt;

    let case = support::fixture("render/pull-secret-credentials");
    let parent = tempfile::tempdir().unwrap();
    let fresh = parent.path().join("new/out");
    let existing = parent.path().join("existing");
    std::fs::create_dir(&existing).unwrap();
    std::fs::set_permissions(&existing, std::fs::Permissions::from_mode(0o755)).unwrap();
    for out in [&fresh, &existing, &fresh] {
        let run = Command::new(env!("CARGO_BIN_EXE_winfleet"))
            .args(["render", "--repo"])
            .arg(case.join("repo"))
            .arg("--pull-secret")
            .arg(case.join("pull-secret.json"))
            .arg("--output")
            .arg(out)
            .output()
            .unwrap();
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        let mut wrong = Vec::new();
        let mut walk = vec![out.clone()];
        while let Some(dir) = walk.pop() {
            let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
            if mode != 0o700 {
                wrong.push(format!("{} is {mode:o}", dir.display()));
            }
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    walk.push(path);
                } else {
                    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
                    if mode != 0o600 {
                        wrong.push(format!("{} is {mode:o}", path.display()));
                    }
                }
            }
        }
        assert!(wrong.is_empty(), "render output must be 0600/0700:\n{}", wrong.join("\n"));
    }
    let created = std::fs::metadata(parent.path().join("new")).unwrap().permissions().mode() & 0o777;
    assert_eq!(created, 0o700, "a parent render creates is the owner's too");

    let help = Command::new(env!("CARGO_BIN_EXE_winfleet")).args(["render", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("0600") && help.contains("0700"), "render --help says who may read the output:\n{help}");
}
