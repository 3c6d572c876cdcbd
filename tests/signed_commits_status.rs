//! Signed commits and winfleet's own status commits (issue 35): with the
//! status on the tracked branch, winfleet's unsigned status commits never
//! block a signed commit, while running or after a restart; a commit
//! dressed as one that carries anything else, a merge, or a record forged
//! on the tracked branch, do not get past the check; a restart reads the
//! status branch the Fleet configures; and `winfleet validate` applies the
//! daemon's rule or says what it could not check.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;
use std::process::Command;

use support::daemon::*;
use support::remote::{Remote, git};
use support::signing::*;
use winfleet::daemon::Config;
use winfleet::daemon::round::RoundKind;
use winfleet::source::signed::Policy;

/// The status author of the test daemons (support::daemon::config).
const WINFLEET: (&str, &str) = ("winfleet", "winfleet@test.invalid");

/// Status on the tracked branch.
const STATUS_ON_MAIN: &str = "  status:\n    branch: main\n";

/// Brings the working clone up to the remote's main (the daemon's status
/// commits included).
fn pull(remote: &Remote) {
    git(&remote.work, &["pull", "-q", "--ff-only", "origin", "main"]);
}

/// Commits `files` unsigned as `who` and pushes main; the commit id.
fn commit_as(remote: &Remote, who: (&str, &str), files: &[(&str, &str)]) -> String {
    for (path, content) in files {
        let path = remote.work.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    git(&remote.work, &["add", "-A"]);
    let out = Command::new("git")
        .current_dir(&remote.work)
        .args(["-c", &format!("user.name={}", who.0), "-c", &format!("user.email={}", who.1)])
        .args(["commit", "-q", "-m", "status: forged"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    git(&remote.work, &["push", "-q", "origin", "main"]);
    git(&remote.work, &["rev-parse", "HEAD"])
}

/// Puts main back at `tip` (force-pushed).
fn reset(remote: &Remote, tip: &str) {
    git(&remote.work, &["reset", "-q", "--hard", tip]);
    git(&remote.work, &["push", "-q", "-f", "origin", "main"]);
}

/// `summary.yaml` on main with its `lastAppliedRevision` replaced.
fn summary_naming(remote: &Remote, revision: &str) -> String {
    let summary = remote.show("main", "status/summary.yaml").unwrap();
    let kept = summary.lines().filter(|l| !l.starts_with("lastAppliedRevision:"));
    std::iter::once(format!("lastAppliedRevision: {revision}"))
        .chain(kept.map(str::to_owned))
        .map(|l| l + "\n")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_35_status_commits_on_the_tracked_branch_never_block_a_signed_commit_running_or_after_a_restart() {
    let Signed { fleet, keys: _keys, remote, key, allowed } = signed_with(STATUS_ON_MAIN);
    let mut handle = start(&fleet, Config { verify: all_since(&allowed), ..config(&remote) }).await;
    let record = next(&mut handle.records).await;
    assert_eq!(record.kind, RoundKind::Commit);
    let status = record.status_commit.expect("status lands on main");
    assert_eq!(remote.tip("main").as_deref(), Some(status.as_str()));

    // Running: a signed commit on top of winfleet's unsigned status commit.
    pull(&remote);
    let second = signed_push(&remote, "mirrors.yaml", &mirrors("mirror2.corp.example/quay"), &key);
    assert_eq!(push_hook(&handle).await, 202);
    let record = next(&mut handle.records).await;
    assert_eq!((record.kind, record.revision.as_str()), (RoundKind::Commit, second.as_str()));
    assert!(hosts_toml(&fleet, 0).unwrap().contains("mirror2.corp.example"));
    stop(handle).await;

    // After a restart (a new cache): the head is winfleet's status commit.
    let status = remote.tip("main").unwrap();
    assert_ne!(status, second, "the status of the second round landed on main");
    let mut handle = start(&fleet, Config { verify: all_since(&allowed), ..config(&remote) }).await;
    let record = next(&mut handle.records).await;
    assert_eq!((record.kind, record.revision.as_str()), (RoundKind::Commit, status.as_str()));
    pull(&remote);
    let third = signed_push(&remote, "mirrors.yaml", &mirrors("mirror3.corp.example/quay"), &key);
    assert_eq!(push_hook(&handle).await, 202);
    let record = next(&mut handle.records).await;
    assert_eq!((record.kind, record.revision.as_str()), (RoundKind::Commit, third.as_str()));
    assert!(hosts_toml(&fleet, 0).unwrap().contains("mirror3.corp.example"));

    // Dressed as winfleet's status commit, with a configuration file in it.
    pull(&remote);
    let trusted = remote.tip("main").unwrap();
    let summary = summary_naming(&remote, &third);
    let evil = mirrors("evil.example/quay");
    let sneaked = commit_as(&remote, WINFLEET, &[("status/summary.yaml", &summary), ("mirrors.yaml", &evil)]);
    assert_eq!(push_hook(&handle).await, 202);
    let record = next(&mut handle.records).await;
    assert_eq!((record.kind, record.revision.as_str()), (RoundKind::Invalid, sneaked.as_str()));
    assert!(!hosts_toml(&fleet, 0).unwrap().contains("evil.example"), "nothing of it applied");

    // A merge by winfleet's author that changes only status against its
    // first parent is checked too.
    reset(&remote, &trusted);
    git(&remote.work, &["checkout", "-q", "-b", "side"]);
    let side = signed_push_to(&remote, "side", "NOTES.txt", "side\n", &key);
    git(&remote.work, &["checkout", "-q", "main"]);
    std::fs::write(remote.work.join("status/summary.yaml"), summary_naming(&remote, &third)).unwrap();
    git(&remote.work, &["add", "-A"]);
    let tree = git(&remote.work, &["write-tree"]);
    let merge = commit_tree_as(&remote.work, WINFLEET, &tree, &[&trusted, &side]);
    reset(&remote, &merge);
    assert_eq!(push_hook(&handle).await, 202);
    let record = next(&mut handle.records).await;
    assert_eq!((record.kind, record.revision.as_str()), (RoundKind::Invalid, merge.as_str()));
    let summary = remote.show("main", "status/summary.yaml").unwrap();
    assert!(summary.contains(&format!("commit {} is not signed", &merge[..7])), "{summary}");
    stop(handle).await;
}

/// Like [`signed_push`], on `branch`.
fn signed_push_to(remote: &Remote, branch: &str, file: &str, content: &str, key: &Path) -> String {
    let id = commit(&remote.work, file, content, Sign::Ssh(key), None);
    git(&remote.work, &["push", "-q", "origin", branch]);
    id
}

/// `git commit-tree` as `who`: a commit of `tree` with `parents`.
fn commit_tree_as(work: &Path, who: (&str, &str), tree: &str, parents: &[&str]) -> String {
    let mut command = Command::new("git");
    command.current_dir(work).args(["commit-tree", tree, "-m", "status: merge"]);
    for parent in parents {
        command.args(["-p", parent]);
    }
    let out = command
        .env("GIT_AUTHOR_NAME", who.0)
        .env("GIT_AUTHOR_EMAIL", who.1)
        .env("GIT_COMMITTER_NAME", who.0)
        .env("GIT_COMMITTER_EMAIL", who.1)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_35_a_record_forged_on_the_tracked_branch_does_not_hide_an_unsigned_commit_after_a_restart() {
    let Signed { fleet, keys: _keys, remote, key, allowed } = signed_with(STATUS_ON_MAIN);
    let mut handle = start(&fleet, Config { verify: all_since(&allowed), ..config(&remote) }).await;
    assert_eq!(next(&mut handle.records).await.kind, RoundKind::Commit);
    stop(handle).await;

    // While no daemon runs: an unsigned commit, a signed one on top, and a
    // status commit in winfleet's name recording the signed one as applied.
    pull(&remote);
    let unsigned =
        commit_as(&remote, ("mallory", "m@corp.example"), &[("mirrors.yaml", &mirrors("evil.example/quay"))]);
    let signed = signed_push(&remote, "NOTES.txt", "signed on top\n", &key);
    let forged = commit_as(&remote, WINFLEET, &[("status/summary.yaml", &summary_naming(&remote, &signed))]);
    let mut handle = start(&fleet, Config { verify: all_since(&allowed), ..config(&remote) }).await;
    let record = next(&mut handle.records).await;
    assert_eq!((record.kind, record.revision.as_str()), (RoundKind::Invalid, forged.as_str()));
    assert!(!hosts_toml(&fleet, 0).unwrap().contains("evil.example"), "nothing of it applied");
    let summary = remote.show("main", "status/summary.yaml").unwrap();
    assert!(summary.contains(&format!("commit {} is not signed", &unsigned[..7])), "{summary}");
    assert!(!summary.contains(&format!("lastAppliedRevision: {signed}")), "not put in force: {summary}");
    stop(handle).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_35_a_restart_reads_the_record_on_the_status_branch_the_fleet_configures() {
    let fleet = support::fleet::TestFleet::start(1);
    // The first commit is not signed: checking the whole history refuses.
    let remote = remote(&fleet, "  status:\n    branch: ops/status\n");
    let (key, allowed) = alice(&remote);
    let start_at = signed_push(&remote, "NOTES.txt", "start\n", &key);
    let applied = signed_push(&remote, "NOTES.txt", "applied\n", &key);
    let since = all_since(&allowed).map(|p| Policy { since: Some(start_at.clone()), ..p });
    let mut handle = start(&fleet, Config { verify: since, ..config(&remote) }).await;
    let record = next(&mut handle.records).await;
    assert_eq!((record.kind, record.revision.as_str()), (RoundKind::Commit, applied.as_str()));
    stop(handle).await;
    let summary = remote.show("ops/status", "status/summary.yaml").unwrap();
    assert!(summary.contains(&format!("lastAppliedRevision: {applied}")), "{summary}");
    assert!(remote.tip("winfleet/status").is_none());

    let next_signed = signed_push(&remote, "mirrors.yaml", &mirrors("mirror2.corp.example/quay"), &key);
    let mut handle = start(&fleet, Config { verify: all_since(&allowed), ..config(&remote) }).await;
    let record = next(&mut handle.records).await;
    assert_eq!((record.kind, record.revision.as_str()), (RoundKind::Commit, next_signed.as_str()));
    assert!(hosts_toml(&fleet, 0).unwrap().contains("mirror2.corp.example"));
    stop(handle).await;
}

/// A repository: a signed commit, an unsigned one, a signed head; Alice's
/// allowed-signers file. (repository, keys dir, [applied, unsigned, head], allowed, key)
struct History {
    repo: tempfile::TempDir,
    _keys: tempfile::TempDir,
    applied: String,
    unsigned: String,
    head: String,
    allowed: std::path::PathBuf,
    key: std::path::PathBuf,
}

fn history() -> History {
    let repo = new_repo();
    let keys = tempfile::tempdir().unwrap();
    let (key, public) = ssh_key(keys.path(), "alice");
    let allowed = keys.path().join("allowed_signers");
    std::fs::write(&allowed, format!("alice@corp.example {public}\n")).unwrap();
    let dir = repo.path();
    let applied = commit(dir, "fleet.yaml", FLEET, Sign::Ssh(&key), None);
    let unsigned = commit(dir, "notes.txt", "unsigned\n", Sign::No, None);
    let head = commit(dir, "notes.txt", "signed\n", Sign::Ssh(&key), None);
    History { repo, _keys: keys, applied, unsigned, head, allowed, key }
}

const ALL: [&str; 2] = ["--verify-mode", "all-since-last-applied"];

#[test]
fn issue_35_validate_without_verify_since_checks_the_head_and_exits_4_saying_the_rest_was_not_checked() {
    let h = history();
    let (code, err) = validate(h.repo.path(), &h.head, &h.allowed, &ALL);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("not checked: ") && err.contains("--verify-since REV"), "{err}");
    assert!(err.contains("Only the head was checked (signed by alice@corp.example)"), "{err}");
    // An unsigned head is refused outright.
    let (code, err) = validate(h.repo.path(), &h.unsigned, &h.allowed, &ALL);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains(&format!("commit {} is not signed", &h.unsigned[..7])), "{err}");
}

#[test]
fn issue_35_validate_refuses_a_verify_since_that_names_an_unsigned_commit_as_the_daemon_does() {
    let h = history();
    let (code, err) =
        validate(h.repo.path(), &h.head, &h.allowed, &[&ALL[..], &["--verify-since", &h.unsigned]].concat());
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("(--verify-since) is not signed by a trusted key"), "{err}");
    let (code, err) =
        validate(h.repo.path(), &h.head, &h.allowed, &[&ALL[..], &["--verify-since", &h.applied]].concat());
    assert_eq!(code, 1, "the unsigned commit after it: {err}");
}

#[test]
fn issue_35_validate_passes_over_winfleets_status_commits_as_the_daemon_does() {
    let h = history();
    let dir = h.repo.path();
    // A signed base, then winfleet's status commit on it as the head.
    git(dir, &["reset", "-q", "--hard", &h.applied]);
    let base = commit(dir, "notes.txt", "signed\n", Sign::Ssh(&h.key), None);
    std::fs::create_dir_all(dir.join("status")).unwrap();
    std::fs::write(dir.join("status/summary.yaml"), format!("lastAppliedRevision: {base}\n")).unwrap();
    git(dir, &["add", "-A"]);
    let out = Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=winfleet", "-c", "user.email=winfleet@localhost", "commit", "-q", "-m", "status"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let status = git(dir, &["rev-parse", "HEAD"]);
    let since = [&ALL[..], &["--verify-since", &h.applied]].concat();
    for extra in [&[][..], &since[..]] {
        let (code, err) = validate(dir, &status, &h.allowed, extra);
        assert_eq!(code, 0, "{extra:?}: {err}");
    }
    // The same commit by another author is checked.
    let (code, err) = validate(dir, &status, &h.allowed, &["--status-author", "ops <ops@corp.example>"]);
    assert_eq!(code, 1, "{err}");
}
