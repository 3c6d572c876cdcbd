//! Every invalid-repository fixture is rejected with exactly the diagnostics
//! in its `expected.txt` (text and location), and nothing is rendered.
//!
//! Layout: tests/fixtures/invalid/<situation>/repo/… is the repository,
//! tests/fixtures/invalid/<situation>/expected.txt the diagnostics, one per
//! line, as `winfleet validate` prints them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use winfleet::desired::{LoadOptions, MAX_FILE_BYTES, load};
use winfleet::source::{Snapshot, SourceFile, read_revision, read_worktree, select};

#[test]
fn every_invalid_fixture_is_rejected_with_its_exact_diagnostics() {
    let cases = support::cases("invalid");
    assert!(cases.len() >= 50, "expected at least 50 invalid fixtures, found {}", cases.len());
    let mut failures = Vec::new();
    for case in cases {
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        let snapshot = read_worktree(&case.join("repo")).unwrap();
        let loaded = load(&snapshot, LoadOptions::default());
        if loaded.desired.is_some() || loaded.errors() == 0 {
            failures.push(format!("{name}: accepted, but it is an invalid fixture"));
            continue;
        }
        let actual: String = loaded.diagnostics.iter().map(|d| format!("{d}\n")).collect();
        if let Err(e) = support::check_golden(&case.join("expected.txt"), &actual) {
            failures.push(format!("{name}: {e}"));
        }
    }
    support::report(failures);
}

/// A commit whose `fleet.yaml` is a file and `list.yaml` and
/// `config/more.yml` are symbolic links (one to a file beside it, one out
/// of the repository); `notes.md` is a link too, but not configuration.
fn commit_with_links(dir: &std::path::Path) {
    let repo = git2::Repository::init(dir).unwrap();
    let blob = |bytes: &[u8]| repo.blob(bytes).unwrap();
    let mut config = repo.treebuilder(None).unwrap();
    config.insert("more.yml", blob(b"../../../etc/passwd"), 0o120000).unwrap();
    config.insert("README.md", blob(b"# config"), 0o100644).unwrap();
    let config = config.write().unwrap();
    let mut root = repo.treebuilder(None).unwrap();
    let fleet = b"apiVersion: winfleet.io/v1alpha1\nkind: Fleet\nmetadata:\n  name: prod\n";
    root.insert("fleet.yaml", blob(fleet), 0o100644).unwrap();
    root.insert("instances.txt", blob(b"apiVersion: v1\n"), 0o100644).unwrap();
    root.insert("list.yaml", blob(b"instances.txt"), 0o120000).unwrap();
    root.insert("notes.md", blob(b"instances.txt"), 0o120000).unwrap();
    root.insert("config", config, 0o040000).unwrap();
    let tree = repo.find_tree(root.write().unwrap()).unwrap();
    let who = git2::Signature::now("t", "t@example.com").unwrap();
    repo.commit(Some("HEAD"), &who, &who, "links", &tree, &[]).unwrap();
}

#[test]
fn a_committed_symbolic_link_to_yaml_is_reported_at_its_path_issue_35() {
    let dir = tempfile::tempdir().unwrap();
    commit_with_links(dir.path());
    let snapshot = read_revision(dir.path(), "HEAD").unwrap();
    assert_eq!(snapshot.links, ["config/more.yml", "list.yaml", "notes.md"]);
    let loaded = load(&snapshot, LoadOptions::default());
    let errors: Vec<String> = loaded.diagnostics.iter().filter(|d| d.is_error()).map(ToString::to_string).collect();
    assert_eq!(errors.len(), 2, "{errors:#?}");
    assert!(errors[0].starts_with("config/more.yml:1:1: this YAML file is a symbolic link"), "{}", errors[0]);
    assert!(errors[1].starts_with("list.yaml:1:1: this YAML file is a symbolic link"), "{}", errors[1]);
    assert!(loaded.desired.is_none());
    // Under --path, the link is reported relative to the directory read.
    let selected = select(snapshot, Some("config")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(selected.links, ["more.yml"]);
}

#[test]
fn a_file_over_the_size_limit_is_refused_before_it_is_parsed_naming_the_limit_issue_35() {
    let huge =
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: {}\n", "b".repeat(MAX_FILE_BYTES));
    let files = vec![SourceFile { path: "big.yaml".into(), bytes: huge.into_bytes() }];
    let loaded = load(&Snapshot { revision: None, files, links: Vec::new() }, LoadOptions::default());
    let text: Vec<String> = loaded.diagnostics.iter().map(ToString::to_string).collect();
    assert_eq!(text.len(), 1, "{text:#?}");
    let size = MAX_FILE_BYTES + 63;
    assert!(
        text[0].starts_with(&format!("big.yaml:1:1: the file is {size} bytes, more than the 16 MiB")),
        "{}",
        text[0]
    );
}
