//! `winfleet status` end to end: the binary reads status files that the
//! library rendered, committed with git2 on a status branch of a real
//! repository (local or remote-tracking), as a table or as JSON, and
//! exits 0 (all Ready), 3 (something not Ready or invalid) or 1 (error).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;

use serde_json::Value;
use support::{GitRepo, winfleet};
use winfleet::desired::kinds::fleet::DriftMode;
use winfleet::engine::report::{NodeReport, NodeResult, Stage};
use winfleet::reconcile::report::{ClusterReport, RoundReport};
use winfleet::status::{RoundInput, Status, render, to_files};

const REV1: &str = "1111111111111111111111111111111111111111";
const REV2: &str = "2222222222222222222222222222222222222222";

fn done(address: &str) -> NodeReport {
    NodeReport {
        result: NodeResult::Done { operations: Vec::new(), in_sync: 2, reboot_required: false },
        ..NodeReport::new(address)
    }
}

/// The status after one round over `nodes`, with MachineSet `win-a` and the
/// Node `win-<n>` for each.
fn status(nodes: Vec<NodeReport>, invalid: &[String]) -> Status {
    let instances: Vec<String> = nodes.iter().map(|n| n.address.clone()).collect();
    let mut cluster = ClusterReport { api: "https://api.test:6443".into(), ..ClusterReport::default() };
    for (k, address) in instances.iter().enumerate() {
        cluster.associated.insert(address.clone(), format!("win-{}", k + 1));
    }
    let report = RoundReport { dry_run: false, nodes, cluster: Some(cluster) };
    let input = RoundInput {
        now: jiff::Timestamp::from_second(1_700_000_000).unwrap(),
        attempted: if invalid.is_empty() { REV1 } else { REV2 },
        applied: Some(REV1),
        invalid,
        instances: &instances,
        machine_sets: &["win-a".to_owned()],
        report: Some(&report),
        drift_check: false,
        drift_mode: DriftMode::Correct,
        secrets: &[],
        suspended_by: None,
    };
    render(&Status::default(), &input)
}

/// Commits `files` under `dir/` as the only content of `refname` (an
/// orphan commit, as the status branch is).
fn commit_status(repo: &GitRepo, refname: &str, dir: &str, files: &BTreeMap<String, Vec<u8>>) {
    let git = &repo.repo;
    let mut paths: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for (path, bytes) in files {
        paths.insert(format!("{dir}/{path}"), bytes.clone());
    }
    let tree = git.find_tree(tree_of(git, &paths)).unwrap();
    let sig = git2::Signature::new("winfleet", "winfleet@test.invalid", &git2::Time::new(1_700_000_000, 0)).unwrap();
    git.commit(Some(refname), &sig, &sig, "status: test", &tree, &[]).unwrap();
}

/// A tree of `files` (paths with `/`), built level by level.
fn tree_of(git: &git2::Repository, files: &BTreeMap<String, Vec<u8>>) -> git2::Oid {
    let mut builder = git.treebuilder(None).unwrap();
    let mut subdirs: BTreeMap<String, BTreeMap<String, Vec<u8>>> = BTreeMap::new();
    for (path, bytes) in files {
        match path.split_once('/') {
            Some((dir, rest)) => {
                subdirs.entry(dir.to_owned()).or_default().insert(rest.to_owned(), bytes.clone());
            }
            None => {
                builder.insert(path, git.blob(bytes).unwrap(), 0o100644).unwrap();
            }
        }
    }
    for (dir, content) in subdirs {
        builder.insert(&dir, tree_of(git, &content), 0o040000).unwrap();
    }
    builder.write().unwrap()
}

fn repo_with(refname: &str, status: &Status) -> GitRepo {
    let repo = GitRepo::new();
    commit_status(&repo, refname, "status", &to_files(status));
    repo
}

fn run(repo: &GitRepo, extra: &[&str]) -> (i32, String, String) {
    let mut args = vec!["status", "--repo", repo.path().to_str().unwrap()];
    args.extend_from_slice(extra);
    winfleet(&args)
}

#[test]
fn a_ready_fleet_prints_its_tables_and_exits_0() {
    let repo = repo_with("refs/heads/winfleet/status", &status(vec![done("10.0.0.1"), done("10.0.0.2")], &[]));
    // MachineSet win-a is Ready too: the round had a cluster part.
    let (code, out, err) = run(&repo, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(&format!("Applied revision:   {REV1}")), "{out}");
    assert!(out.contains("Instances:          2 ready, 0 progressing"), "{out}");
    let lines: Vec<&str> = out.lines().collect();
    let header = lines.iter().position(|l| l.starts_with("ADDRESS")).expect(&out);
    assert_eq!(lines[header], "ADDRESS   PHASE  NODE   REVISION  MESSAGE");
    assert_eq!(lines[header + 1], "10.0.0.1  Ready  win-1  1111111");
    assert_eq!(lines[header + 2], "10.0.0.2  Ready  win-2  1111111");
    assert!(out.contains("MACHINESET  PHASE  REVISION  MESSAGE\nwin-a       Ready  1111111\n"), "{out}");
}

#[test]
fn a_failed_instance_exits_3_and_shows_its_error() {
    let failed = NodeReport {
        result: NodeResult::Failed { stage: Stage::Observe, reason: "ssh: connection refused".into() },
        ..NodeReport::new("10.0.0.2")
    };
    let repo = repo_with("refs/heads/winfleet/status", &status(vec![done("10.0.0.1"), failed], &[]));
    let (code, out, err) = run(&repo, &[]);
    assert_eq!(code, 3, "{out}{err}");
    assert!(out.contains("10.0.0.2  Failed  win-2  -         observe failed: ssh: connection refused"), "{out}");
}

#[test]
fn an_invalid_revision_exits_3_and_lists_its_diagnostics() {
    let invalid = vec!["fleet.yaml:4: /spec/rollout/maxParallel: must be at least 1".to_owned()];
    let repo = repo_with("refs/heads/winfleet/status", &status(vec![done("10.0.0.1")], &invalid));
    let (code, out, err) = run(&repo, &[]);
    assert_eq!(code, 3, "{out}{err}");
    assert!(out.contains("Invalid revision 2222222: 1 error(s); nothing of it was applied\n  fleet.yaml:4:"), "{out}");
}

#[test]
fn json_is_versioned_and_carries_every_record() {
    let repo = repo_with("refs/heads/winfleet/status", &status(vec![done("10.0.0.1")], &[]));
    let (code, out, err) = run(&repo, &["--output", "json"]);
    assert_eq!(code, 0, "{err}");
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["formatVersion"], 1);
    assert_eq!(doc["source"]["ref"], "refs/heads/winfleet/status");
    assert_eq!(doc["summary"]["lastRound"], "Succeeded");
    assert_eq!(doc["summary"]["instances"]["ready"], 1);
    assert_eq!(doc["instances"][0]["address"], "10.0.0.1");
    assert_eq!(doc["instances"][0]["node"], "win-1");
    assert_eq!(doc["instances"][0]["conditions"][0]["status"], "True");
    assert_eq!(doc["instances"][0]["conditions"][0]["lastTransitionTime"], "2023-11-14T22:13:20Z");
    assert_eq!(doc["machineSets"][0]["name"], "win-a");
}

#[test]
fn the_remote_tracking_branch_is_read_when_there_is_no_local_one() {
    let repo = repo_with("refs/remotes/origin/winfleet/status", &status(vec![done("10.0.0.1")], &[]));
    let (code, out, err) = run(&repo, &["--output", "json"]);
    assert_eq!(code, 0, "{err}");
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["source"]["ref"], "refs/remotes/origin/winfleet/status");
}

#[test]
fn another_branch_and_path_can_be_named() {
    let repo = GitRepo::new();
    commit_status(&repo, "refs/heads/ops/fleet", "reports/win", &to_files(&status(vec![done("10.0.0.9")], &[])));
    let (code, out, err) = run(&repo, &["--branch", "ops/fleet", "--path", "reports/win"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("10.0.0.9  Ready"), "{out}");
    let (code, _, err) = run(&repo, &["--branch", "ops/fleet"]);
    assert_eq!(code, 1);
    assert!(err.contains("refs/heads/ops/fleet has no directory \"status\""), "{err}");
}

#[test]
fn a_missing_status_branch_is_a_clear_error() {
    let repo = GitRepo::new();
    std::fs::write(repo.path().join("fleet.yaml"), "kind: Fleet\n").unwrap();
    repo.commit_all("config");
    let (code, out, err) = run(&repo, &[]);
    assert_eq!((code, out.as_str()), (1, ""));
    assert!(err.contains("no status branch \"winfleet/status\""), "{err}");
    assert!(err.contains("refs/remotes/origin/winfleet/status"), "{err}");
}

#[test]
fn repo_url_fetches_only_the_status_branch_and_reads_it() {
    let repo = repo_with("refs/heads/winfleet/status", &status(vec![done("10.0.0.1")], &[]));
    let url = format!("file://{}", repo.path().display());
    let (code, out, err) = winfleet(&["status", "--repo-url", &url]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("10.0.0.1  Ready  win-1  1111111"), "{out}");
    let (code, _, err) = winfleet(&["status", "--repo-url", &url, "--branch", "nope"]);
    assert_eq!(code, 1);
    assert!(err.contains("nope"), "{err}");
}

#[test]
fn repo_url_errors_never_show_credentials() {
    let (code, _, err) = winfleet(&["status", "--repo-url", "https://bot:hunter2@127.0.0.1:9/fleet.git"]);
    assert_eq!(code, 1);
    assert!(err.contains("cannot fetch winfleet/status"), "{err}");
    assert!(!err.contains("hunter2"), "{err}");
}

#[test]
fn a_partly_failed_round_or_a_refused_deconfigure_exits_3_with_every_instance_ready() {
    let mut partly = status(vec![done("10.0.0.1")], &[]);
    partly.summary.last_round = winfleet::status::model::RoundResult::PartiallyFailed;
    let (code, out, err) = run(&repo_with("refs/heads/winfleet/status", &partly), &[]);
    assert_eq!(code, 3, "{out}{err}");
    let mut refused = status(vec![done("10.0.0.1")], &[]);
    refused.summary.deconfigure_refused = Some("more than prune.maxRemovalPercent".into());
    let (code, out, err) = run(&repo_with("refs/heads/winfleet/status", &refused), &[]);
    assert_eq!(code, 3, "{out}{err}");
    assert!(out.contains("Deconfigure refused: more than prune.maxRemovalPercent"), "{out}");
}
