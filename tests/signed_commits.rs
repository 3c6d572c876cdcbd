//! Signed-commit verification with commits signed by the git CLI: SSH
//! signatures made with ssh-keygen keys and OpenPGP signatures made with
//! GnuPG, in real repositories; `winfleet validate --rev --trusted-keys`
//! and the daemon refuse what is unsigned, untrusted or tampered with.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use support::daemon::*;
use support::fleet::TestFleet;
use support::remote::git;
use support::signing::*;
use winfleet::daemon::round::RoundKind;
use winfleet::daemon::{self, Config};
use winfleet::source::signed::{Policy, TrustedKeys};

#[test]
fn ssh_and_openpgp_signatures_by_trusted_keys_are_accepted_and_others_refused() {
    let repo = new_repo();
    let keys = tempfile::tempdir().unwrap();
    let (alice, alice_public) = ssh_key(keys.path(), "alice");
    let (mallory, _) = ssh_key(keys.path(), "mallory");
    let gpg = Gpg::new("CI Bot <ci@corp.example>", "never");
    let trusted = keys.path().join("trusted");
    std::fs::create_dir(&trusted).unwrap();
    std::fs::write(trusted.join("allowed_signers"), format!("alice@corp.example {alice_public}\n")).unwrap();
    std::fs::write(trusted.join("ci.asc"), gpg.public()).unwrap();
    let dir = repo.path();

    let by_alice = commit(dir, "fleet.yaml", FLEET, Sign::Ssh(&alice), None);
    assert_eq!(validate(dir, &by_alice, &trusted, &[]).0, 0);
    let by_ci = commit(dir, "notes.txt", "ci\n", Sign::Gpg(&gpg), None);
    assert_eq!(validate(dir, &by_ci, &trusted, &[]).0, 0);

    let by_mallory = commit(dir, "notes.txt", "mallory\n", Sign::Ssh(&mallory), None);
    let (code, err) = validate(dir, &by_mallory, &trusted, &[]);
    assert_eq!(code, 1);
    assert!(err.contains("is signed by SSH key SHA256:") && err.contains("which is not trusted"), "{err}");
    assert!(err.contains("trusted: SSH: alice@corp.example; OpenPGP: "), "names the trusted keys: {err}");

    let unsigned = commit(dir, "notes.txt", "nobody\n", Sign::No, None);
    let (code, err) = validate(dir, &unsigned, &trusted, &[]);
    assert_eq!(code, 1);
    assert!(err.contains(&format!("commit {} is not signed", &unsigned[..7])), "{err}");
}

#[test]
fn a_commit_changed_after_signing_is_refused() {
    let repo = new_repo();
    let keys = tempfile::tempdir().unwrap();
    let (alice, alice_public) = ssh_key(keys.path(), "alice");
    let gpg = Gpg::new("CI Bot <ci@corp.example>", "never");
    let allowed = keys.path().join("allowed_signers");
    std::fs::write(&allowed, format!("alice@corp.example {alice_public}\n{}", "")).unwrap();
    let armored = keys.path().join("ci.asc");
    std::fs::write(&armored, gpg.public()).unwrap();
    let dir = repo.path();
    for (signed, keys) in [
        (commit(dir, "fleet.yaml", FLEET, Sign::Ssh(&alice), None), &allowed),
        (commit(dir, "notes.txt", "ci\n", Sign::Gpg(&gpg), None), &armored),
    ] {
        // The same object with another message, the signature kept.
        let object = git(dir, &["cat-file", "commit", &signed]);
        let tampered = object.replacen("change ", "CHANGE ", 1);
        let file = keys.with_extension("tampered");
        std::fs::write(&file, format!("{tampered}\n")).unwrap();
        let forged = git(dir, &["hash-object", "-t", "commit", "-w", file.to_str().unwrap()]);
        assert_eq!(validate(dir, &signed, keys, &[]).0, 0);
        let (code, err) = validate(dir, &forged, keys, &[]);
        assert_eq!(code, 1);
        assert!(err.contains("does not verify: the commit was changed after it was signed"), "{err}");
    }
}

#[test]
fn only_the_head_is_checked_unless_every_commit_since_the_last_applied_must_be_signed() {
    let repo = new_repo();
    let keys = tempfile::tempdir().unwrap();
    let (alice, alice_public) = ssh_key(keys.path(), "alice");
    let allowed = keys.path().join("allowed_signers");
    std::fs::write(&allowed, format!("alice@corp.example {alice_public}\n")).unwrap();
    let dir = repo.path();
    let applied = commit(dir, "fleet.yaml", FLEET, Sign::Ssh(&alice), None);
    let unsigned = commit(dir, "notes.txt", "unsigned\n", Sign::No, None);
    let head = commit(dir, "notes.txt", "signed\n", Sign::Ssh(&alice), None);
    assert_eq!(validate(dir, &head, &allowed, &[]).0, 0, "the head is signed");
    let all = ["--verify-mode", "all-since-last-applied", "--verify-since", applied.as_str()];
    let (code, err) = validate(dir, &head, &allowed, &all);
    assert_eq!(code, 1);
    assert!(err.contains(&format!("commit {} is not signed", &unsigned[..7])), "{err}");
}

#[test]
fn an_openpgp_key_expired_at_the_commits_time_is_refused() {
    let repo = new_repo();
    let gpg = Gpg::new("Short Lived <short@corp.example>", "1y");
    let keys = tempfile::tempdir().unwrap();
    let armored = keys.path().join("short.asc");
    std::fs::write(&armored, gpg.public()).unwrap();
    let later = commit(repo.path(), "fleet.yaml", FLEET, Sign::Gpg(&gpg), Some("2035-01-01T00:00:00Z"));
    let (code, err) = validate(repo.path(), &later, &armored, &[]);
    assert_eq!(code, 1);
    assert!(err.contains("had expired when the commit was made"), "{err}");
    let now = commit(repo.path(), "notes.txt", "now\n", Sign::Gpg(&gpg), None);
    assert_eq!(validate(repo.path(), &now, &armored, &[]).0, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_applies_only_signed_heads_and_reports_who_did_not_sign() {
    let fleet = TestFleet::start(1);
    let remote = remote(&fleet, "");
    let (alice, allowed) = alice(&remote);
    let signed = signed_push(&remote, "NOTES.txt", "signed\n", &alice);
    let trusted = TrustedKeys::load(&[allowed]).unwrap();
    let pod = Some(("winfleet".to_owned(), "winfleet-7d9f-abcde".to_owned()));
    let config = Config { verify: Some(Policy::head(trusted)), pod, ..config(&remote) };
    let api = support::apiserver::ApiServer::new();
    let cluster = Some(winfleet::cluster::connect::Cluster { client: api.client(), url: "in-memory".into() });
    let mut handle = daemon::start(config, cluster, pool(&fleet)).await.unwrap();
    let record = next(&mut handle.records).await;
    assert_eq!((record.kind, record.revision.as_str()), (RoundKind::Commit, signed.as_str()));

    let unsigned = remote.push(&[("mirrors.yaml", &mirrors("mirror2.corp.example/quay"))], &[], "unsigned");
    assert_eq!(push_hook(&handle).await, 202);
    let record = next(&mut handle.records).await;
    assert_eq!((record.kind, record.revision.as_str()), (RoundKind::Invalid, unsigned.as_str()));
    assert!(hosts_toml(&fleet, 0).unwrap().contains("mirror.corp.example/v2/quay"), "nothing of it applied");
    let summary = remote.show("winfleet/status", "status/summary.yaml").unwrap();
    assert!(summary.contains(&format!("lastAppliedRevision: {signed}")), "{summary}");
    assert!(summary.contains("is not signed; only commits signed by a trusted key are applied"), "{summary}");
    let events = api.list("events.k8s.io/v1", "Event");
    let refused = events.iter().find(|e| e["reason"] == "RevisionUntrusted").expect("an Event on the daemon's Pod");
    assert_eq!(refused["regarding"]["kind"], "Pod");
    assert_eq!(refused["regarding"]["name"], "winfleet-7d9f-abcde");
    assert_eq!(refused["type"], "Warning");
    let note = refused["note"].as_str().unwrap();
    assert!(
        note.contains(&format!("revision {} is not applied", &unsigned[..7])) && note.contains("is not signed"),
        "{note}"
    );

    let fixed = signed_push(&remote, "notes.txt", "signed again\n", &alice);
    assert_eq!(push_hook(&handle).await, 202);
    let record = next(&mut handle.records).await;
    assert_eq!((record.kind, record.revision.as_str()), (RoundKind::Commit, fixed.as_str()));
    assert!(hosts_toml(&fleet, 0).unwrap().contains("mirror2.corp.example/v2/quay"));
    stop(handle).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_23_after_a_restart_every_commit_since_the_revision_the_status_branch_records_must_be_signed() {
    let Signed { fleet, keys: _keys, remote, key, allowed } = signed();
    let applied = remote.tip("main").unwrap();
    let mut handle = start(&fleet, Config { verify: all_since(&allowed), ..config(&remote) }).await;
    let record = next(&mut handle.records).await;
    assert_eq!((record.kind, record.revision.as_str()), (RoundKind::Commit, applied.as_str()));
    stop(handle).await;

    // While no daemon runs (a restart, a leader handover: the cache is an
    // emptyDir), a signed merge brings in an unsigned commit.
    let (unsigned, merge) =
        signed_merge_of_an_unsigned_commit(&remote.work, &key, "mirrors.yaml", &mirrors("evil.example/quay"));
    let mut handle = start(&fleet, Config { verify: all_since(&allowed), ..config(&remote) }).await;
    let record = next(&mut handle.records).await;
    assert_eq!((record.kind, record.revision.as_str()), (RoundKind::Invalid, merge.as_str()));
    assert!(!hosts_toml(&fleet, 0).unwrap().contains("evil.example"), "nothing of the merge applied");
    let summary = remote.show("winfleet/status", "status/summary.yaml").unwrap();
    assert!(summary.contains(&format!("commit {} is not signed", &unsigned[..7])), "{summary}");
    assert!(summary.contains(&format!("lastAppliedRevision: {applied}")), "{summary}");
    stop(handle).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_23_the_revision_the_status_branch_records_counts_only_as_a_signed_ancestor_of_the_head() {
    let Signed { fleet, keys: _keys, remote, key, allowed } = signed();
    let base = remote.tip("main").unwrap();
    let applied = signed_push(&remote, "NOTES.txt", "applied\n", &key);
    let mut handle = start(&fleet, Config { verify: all_since(&allowed), ..config(&remote) }).await;
    assert_eq!(next(&mut handle.records).await.revision, applied);
    stop(handle).await;

    // History rewritten: the revision recorded is no ancestor of the head,
    // so which commits are new cannot be told.
    git(&remote.work, &["reset", "-q", "--hard", &base]);
    let rewritten = commit(&remote.work, "NOTES.txt", "rewritten\n", Sign::Ssh(&key), None);
    git(&remote.work, &["push", "-q", "-f", "origin", "main"]);
    let mut handle = start(&fleet, Config { verify: all_since(&allowed), ..config(&remote) }).await;
    let record = next(&mut handle.records).await;
    assert_eq!((record.kind, record.revision.as_str()), (RoundKind::Invalid, rewritten.as_str()));
    let summary = remote.show("winfleet/status", "status/summary.yaml").unwrap();
    assert!(
        summary.contains(&format!("{} (the status branch's lastAppliedRevision) is not an ancestor", &applied[..7])),
        "{summary}"
    );
    assert!(summary.contains("--verify-since"), "says how to go on: {summary}");
    stop(handle).await;

    // The status branch names an unsigned commit (written by someone else):
    // it would hide that commit from the check.
    let (unsigned, merge) =
        signed_merge_of_an_unsigned_commit(&remote.work, &key, "mirrors.yaml", &mirrors("evil.example/quay"));
    let other = remote.scratch("other");
    git(&other, &["clone", "-q", "-b", "winfleet/status", remote.bare.to_str().unwrap(), "c"]);
    let clone = other.join("c");
    let summary = std::fs::read_to_string(clone.join("status/summary.yaml")).unwrap();
    let kept = summary.lines().filter(|l| !l.starts_with("lastAppliedRevision:"));
    let forged: String = std::iter::once(format!("lastAppliedRevision: {unsigned}"))
        .chain(kept.map(str::to_owned))
        .map(|l| l + "\n")
        .collect();
    std::fs::write(clone.join("status/summary.yaml"), forged).unwrap();
    git(&clone, &["commit", "-q", "-am", "forged"]);
    git(&clone, &["push", "-q", "origin", "winfleet/status"]);
    let mut handle = start(&fleet, Config { verify: all_since(&allowed), ..config(&remote) }).await;
    let record = next(&mut handle.records).await;
    assert_eq!((record.kind, record.revision.as_str()), (RoundKind::Invalid, merge.as_str()));
    assert!(!hosts_toml(&fleet, 0).unwrap().contains("evil.example"), "nothing of the merge applied");
    let summary = remote.show("winfleet/status", "status/summary.yaml").unwrap();
    assert!(summary.contains(&format!("commit {} is not signed", &unsigned[..7])), "{summary}");
    assert!(!summary.contains(&format!("lastAppliedRevision: {unsigned}")), "not put in force: {summary}");
    stop(handle).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_23_a_daemon_that_cannot_read_the_last_applied_revision_applies_nothing_until_verify_since_names_it() {
    let Signed { fleet, keys: _keys, remote, key, allowed } = signed();
    let base = remote.tip("main").unwrap();
    let head = signed_push(&remote, "NOTES.txt", "signed\n", &key);
    let unreadable = Some(format!("file://{}", remote.scratch("no-such-status").join("missing.git").display()));
    let first = Config { verify: all_since(&allowed), status_url: unreadable.clone(), ..config(&remote) };
    let mut handle = start(&fleet, first).await;
    let record = next(&mut handle.records).await;
    assert_eq!((record.kind, record.revision.as_str()), (RoundKind::Invalid, head.as_str()));
    assert!(hosts_toml(&fleet, 0).is_none(), "nothing applied");
    stop(handle).await;

    // The admin names the last applied revision.
    let verify = all_since(&allowed).map(|p| Policy { since: Some(base[..10].to_owned()), ..p });
    let mut handle = start(&fleet, Config { verify, status_url: unreadable, ..config(&remote) }).await;
    let record = next(&mut handle.records).await;
    assert_eq!((record.kind, record.revision.as_str()), (RoundKind::Commit, head.as_str()));
    assert!(hosts_toml(&fleet, 0).is_some());
    stop(handle).await;
}
