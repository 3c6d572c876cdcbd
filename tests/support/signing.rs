//! Signing commits for the signed-commit tests: throwaway SSH keys and
//! GnuPG homes, commits signed by the git CLI, remotes whose whole history
//! a trusted key signed, and `winfleet validate` with trusted keys.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use winfleet::source::signed::{Policy, TrustedKeys, VerifyMode};

use super::daemon::remote;
use super::fleet::TestFleet;
use super::remote::{Remote, git};

/// A throwaway ed25519 key: (private key file, public key line).
pub fn ssh_key(dir: &Path, name: &str) -> (PathBuf, String) {
    let key = dir.join(name);
    let out = Command::new("ssh-keygen").args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f"]).arg(&key).output();
    assert!(out.unwrap().status.success());
    let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
    (key, public.trim().to_owned())
}

/// A GnuPG home with one signing key: (home, fingerprint, armored public key).
pub struct Gpg {
    pub home: tempfile::TempDir,
    pub fingerprint: String,
}

impl Gpg {
    pub fn new(uid: &str, expire: &str) -> Self {
        let home = tempfile::Builder::new().prefix("gpg").tempdir_in("/tmp").unwrap();
        let mut gpg = Self { home, fingerprint: String::new() };
        gpg.run(&["--quick-gen-key", uid, "ed25519", "sign", expire]);
        let listing = gpg.run(&["--list-keys", "--with-colons"]);
        gpg.fingerprint = listing.lines().find_map(|l| l.strip_prefix("fpr:")).unwrap().trim_matches(':').to_owned();
        gpg
    }

    pub fn run(&self, args: &[&str]) -> String {
        let out = Command::new("gpg")
            .args(["--batch", "--pinentry-mode", "loopback", "--passphrase", ""])
            .args(args)
            .env("GNUPGHOME", self.home.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "gpg {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn public(&self) -> String {
        self.run(&["--armor", "--export", &self.fingerprint])
    }
}

impl Drop for Gpg {
    fn drop(&mut self) {
        let _ = Command::new("gpgconf").args(["--kill", "gpg-agent"]).env("GNUPGHOME", self.home.path()).output();
    }
}

/// How a commit is signed.
pub enum Sign<'a> {
    No,
    Ssh(&'a Path),
    Gpg(&'a Gpg),
}

/// Commits `file` with `content` in `repo`, signed as asked; the commit id.
pub fn commit(repo: &Path, file: &str, content: &str, sign: Sign<'_>, date: Option<&str>) -> String {
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

pub fn new_repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q", "-b", "main"]);
    dir
}

/// `winfleet validate --rev REV --trusted-keys KEYS [extra]`: (exit, stderr).
pub fn validate(repo: &Path, rev: &str, keys: &Path, extra: &[&str]) -> (i32, String) {
    let mut args = vec!["validate", "--repo", repo.to_str().unwrap(), "--rev", rev, "--trusted-keys"];
    args.push(keys.to_str().unwrap());
    args.extend_from_slice(extra);
    let (code, _, err) = super::winfleet(&args);
    (code, err)
}

pub const FLEET: &str = "apiVersion: winfleet.io/v1alpha1\nkind: Fleet\nmetadata:\n  name: f\nspec:\n  lab: {allowLoopbackAddresses: true}\n";

/// `git` in `dir` as the admin, signing with the SSH `key`.
pub fn git_signing(dir: &Path, key: &Path, args: &[&str]) -> String {
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
pub fn signed_remote(fleet: &TestFleet, key: &Path, extra_fleet: &str) -> Remote {
    let remote = remote(fleet, extra_fleet);
    git_signing(&remote.work, key, &["commit", "-q", "--amend", "--no-edit", "-S"]);
    git(&remote.work, &["push", "-q", "-f", "origin", "HEAD:main"]);
    remote
}

/// An unsigned commit writing `file` on a side branch, merged into main by
/// a merge commit `key` signs, pushed: (unsigned, merge).
pub fn signed_merge_of_an_unsigned_commit(work: &Path, key: &Path, file: &str, content: &str) -> (String, String) {
    git(work, &["checkout", "-q", "-b", "side"]);
    let unsigned = commit(work, file, content, Sign::No, None);
    git(work, &["checkout", "-q", "main"]);
    let merge = git_signing(work, key, &["merge", "-q", "--no-ff", "-S", "-m", "merge side", "side"]);
    git(work, &["push", "-q", "origin", "main"]);
    (unsigned, merge)
}

/// Alice's key, trusted: (her private key, the allowed-signers file).
pub fn alice(remote: &Remote) -> (PathBuf, PathBuf) {
    let keys = remote.scratch("keys");
    let (alice, alice_public) = ssh_key(&keys, "alice");
    let allowed = keys.join("allowed_signers");
    std::fs::write(&allowed, format!("alice@corp.example {alice_public}\n")).unwrap();
    (alice, allowed)
}

/// Commits `file` with `content` signed by the SSH `key` and pushes it;
/// the commit id.
pub fn signed_push(remote: &Remote, file: &str, content: &str, key: &Path) -> String {
    let id = commit(&remote.work, file, content, Sign::Ssh(key), None);
    git(&remote.work, &["push", "-q", "origin", "main"]);
    id
}

/// One sshd node, a remote whose whole history Alice signed, and her
/// trusted key (its files live in `keys`, kept while the test runs).
pub struct Signed {
    pub remote: Remote,
    pub keys: Remote,
    pub fleet: TestFleet,
    pub key: PathBuf,
    pub allowed: PathBuf,
}

pub fn signed() -> Signed {
    signed_with("")
}

/// [`signed`] with `extra_fleet` appended to the Fleet's spec.
pub fn signed_with(extra_fleet: &str) -> Signed {
    let fleet = TestFleet::start(1);
    let keys = remote(&fleet, "");
    let (key, allowed) = alice(&keys);
    let remote = signed_remote(&fleet, &key, extra_fleet);
    Signed { remote, keys, fleet, key, allowed }
}

/// Every commit since the last applied one must be signed.
pub fn all_since(allowed: &Path) -> Option<Policy> {
    let keys = TrustedKeys::load(&[allowed.to_owned()]).unwrap();
    Some(Policy { keys, mode: VerifyMode::AllSinceLastApplied, since: None })
}
