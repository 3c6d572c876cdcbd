//! Signed-commit verification with commits signed by the git CLI: SSH
//! signatures made with ssh-keygen keys and OpenPGP signatures made with
//! GnuPG, in real repositories; `winfleet validate --rev --trusted-keys`
//! and the daemon refuse what is unsigned, untrusted or tampered with.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::daemon::*;
use support::fleet::TestFleet;
use support::remote::git;
use winfleet::daemon::round::RoundKind;
use winfleet::daemon::{self, Config};
use winfleet::source::signed::{Policy, TrustedKeys, VerifyMode};

/// A throwaway ed25519 key: (private key file, public key line).
fn ssh_key(dir: &Path, name: &str) -> (PathBuf, String) {
    let key = dir.join(name);
    let out = Command::new("ssh-keygen").args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f"]).arg(&key).output();
    assert!(out.unwrap().status.success());
    let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
    (key, public.trim().to_owned())
}

/// A GnuPG home with one signing key: (home, fingerprint, armored public key).
struct Gpg {
    home: tempfile::TempDir,
    fingerprint: String,
}

impl Gpg {
    fn new(uid: &str, expire: &str) -> Self {
        let home = tempfile::Builder::new().prefix("gpg").tempdir_in("/tmp").unwrap();
        let mut gpg = Self { home, fingerprint: String::new() };
        gpg.run(&["--quick-gen-key", uid, "ed25519", "sign", expire]);
        let listing = gpg.run(&["--list-keys", "--with-colons"]);
        gpg.fingerprint = listing.lines().find_map(|l| l.strip_prefix("fpr:")).unwrap().trim_matches(':').to_owned();
        gpg
    }

    fn run(&self, args: &[&str]) -> String {
        let out = Command::new("gpg")
            .args(["--batch", "--pinentry-mode", "loopback", "--passphrase", ""])
            .args(args)
            .env("GNUPGHOME", self.home.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "gpg {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn public(&self) -> String {
        self.run(&["--armor", "--export", &self.fingerprint])
    }
}

impl Drop for Gpg {
    fn drop(&mut self) {
        let _ = Command::new("gpgconf").args(["--kill", "gpg-agent"]).env("GNUPGHOME", self.home.path()).output();
    }
}

/// How a commit is signed.
enum Sign<'a> {
    No,
    Ssh(&'a Path),
    Gpg(&'a Gpg),
}

/// Commits `file` with `content` in `repo`, signed as asked; the commit id.
fn commit(repo: &Path, file: &str, content: &str, sign: Sign<'_>, date: Option<&str>) -> String {
    std::fs::write(repo.join(file), content).unwrap();
    git(repo, &["add", "-A"]);
    let mut command = Command::new("git");
    command.current_dir(repo).args(["-c", "user.name=admin", "-c", "user.email=admin@corp.example"]);
    match &sign {
        Sign::No => {}
        Sign::Ssh(key) => {
            command.args(["-c", "gpg.format=ssh", "-c"]).arg(format!("user.signingkey={}", key.display()));
        }
        Sign::Gpg(gpg) => {
            command.args(["-c", "gpg.format=openpgp", "-c", &format!("user.signingkey={}", gpg.fingerprint)]);
            command.env("GNUPGHOME", gpg.home.path());
        }
    }
    if let Some(date) = date {
        command.env("GIT_COMMITTER_DATE", date).env("GIT_AUTHOR_DATE", date);
    }
    command.args(["commit", "-q", "-m", &format!("change {file}")]);
    if !matches!(sign, Sign::No) {
        command.arg("-S");
    }
    let out = command.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    git(repo, &["rev-parse", "HEAD"])
}

fn new_repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q", "-b", "main"]);
    dir
}

/// `winfleet validate --rev REV --trusted-keys KEYS [extra]`: (exit, stderr).
fn validate(repo: &Path, rev: &str, keys: &Path, extra: &[&str]) -> (i32, String) {
    let mut args = vec!["validate", "--repo", repo.to_str().unwrap(), "--rev", rev, "--trusted-keys"];
    args.push(keys.to_str().unwrap());
    args.extend_from_slice(extra);
    let (code, _, err) = support::winfleet(&args);
    (code, err)
}

const FLEET: &str = "apiVersion: winfleet.io/v1alpha1\nkind: Fleet\nmetadata:\n  name: f\nspec:\n  lab: {allowLoopbackAddresses: true}\n";

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

/// `git` in `dir` as the admin, signing with the SSH `key`.
fn git_signing(dir: &Path, key: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=admin", "-c", "user.email=admin@corp.example", "-c", "gpg.format=ssh", "-c"])
        .arg(format!("user.signingkey={}", key.display()))
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    git(dir, &["rev-parse", "HEAD"])
}

/// A remote for `fleet` whose whole history is signed by `key` (its first
/// commit signed again and force-pushed).
fn signed_remote(fleet: &TestFleet, key: &Path) -> support::remote::Remote {
    let remote = remote(fleet, "");
    git_signing(&remote.work, key, &["commit", "-q", "--amend", "--no-edit", "-S"]);
    git(&remote.work, &["push", "-q", "-f", "origin", "HEAD:main"]);
    remote
}

/// An unsigned commit writing `file` on a side branch, merged into main by
/// a merge commit `key` signs, pushed: (unsigned, merge).
fn signed_merge_of_an_unsigned_commit(work: &Path, key: &Path, file: &str, content: &str) -> (String, String) {
    git(work, &["checkout", "-q", "-b", "side"]);
    let unsigned = commit(work, file, content, Sign::No, None);
    git(work, &["checkout", "-q", "main"]);
    let merge = git_signing(work, key, &["merge", "-q", "--no-ff", "-S", "-m", "merge side", "side"]);
    git(work, &["push", "-q", "origin", "main"]);
    (unsigned, merge)
}

/// Alice's key, trusted: (her private key, the allowed-signers file).
fn alice(remote: &support::remote::Remote) -> (PathBuf, PathBuf) {
    let keys = remote.scratch("keys");
    let (alice, alice_public) = ssh_key(&keys, "alice");
    let allowed = keys.join("allowed_signers");
    std::fs::write(&allowed, format!("alice@corp.example {alice_public}\n")).unwrap();
    (alice, allowed)
}

/// Commits `file` with `content` signed by the SSH `key` and pushes it;
/// the commit id.
fn signed_push(remote: &support::remote::Remote, file: &str, content: &str, key: &Path) -> String {
    let id = commit(&remote.work, file, content, Sign::Ssh(key), None);
    git(&remote.work, &["push", "-q", "origin", "main"]);
    id
}

/// One sshd node, a remote whose whole history Alice signed, and her
/// trusted key (its files live in `keys`, kept while the test runs).
struct Signed {
    remote: support::remote::Remote,
    keys: support::remote::Remote,
    fleet: TestFleet,
    key: PathBuf,
    allowed: PathBuf,
}

fn signed() -> Signed {
    let fleet = TestFleet::start(1);
    let keys = remote(&fleet, "");
    let (key, allowed) = alice(&keys);
    let remote = signed_remote(&fleet, &key);
    Signed { remote, keys, fleet, key, allowed }
}

/// Every commit since the last applied one must be signed.
fn all_since(allowed: &Path) -> Option<Policy> {
    let keys = TrustedKeys::load(&[allowed.to_owned()]).unwrap();
    Some(Policy { keys, mode: VerifyMode::AllSinceLastApplied, since: None })
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
