//! Signed-commit verification (Flux's `verify`, Argo CD's source
//! integrity, ansible-pull's `--verify-commit`): the commit winfleet
//! applies must be signed by a trusted key.
//!
//! - SSH signatures (git's `gpg.format=ssh`, SSHSIG, namespace `git`),
//!   trusted keys in git's allowed-signers format ([`allowed`]), verified
//!   with the `ssh-key` crate;
//! - OpenPGP signatures, trusted keys as armored public key blocks
//!   ([`openpgp`], rPGP).
//!
//! Trusted keys come from files or directories given on the command line
//! (a mounted Secret), never from the repository being verified. Only the
//! head is checked, as Flux does, unless every commit since the last
//! applied one must be signed ([`VerifyMode::AllSinceLastApplied`]; which
//! commits that is, is a [`Range`]). winfleet's own status commits are
//! passed over ([`status_commits`]): they cannot change what is applied.
//! Nothing cryptographic is written here: parsing the allowed-signers
//! format and choosing which commits to check is.

pub mod allowed;
mod openpgp;
pub mod status_commits;

use std::path::{Path, PathBuf};

use git2::{Oid, Repository};
use pgp::composed::SignedPublicKey;
use ssh_key::{HashAlg, SshSig};

use allowed::AllowedSigner;
pub use status_commits::StatusCommits;

/// Which commits must be signed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum VerifyMode {
    /// The head commit only.
    #[default]
    Head,
    /// Every commit after the last applied one, up to the head.
    AllSinceLastApplied,
}

/// What `--trusted-keys`, `--verify-mode` and `--verify-since` ask for.
#[derive(Clone, Debug)]
pub struct Policy {
    /// The trusted keys.
    pub keys: TrustedKeys,
    /// Which commits must be signed.
    pub mode: VerifyMode,
    /// The last applied revision as the admin names it (`--verify-since`):
    /// where [`VerifyMode::AllSinceLastApplied`] starts when nothing was
    /// applied in this process yet; before the status branch's record.
    pub since: Option<String>,
}

impl Policy {
    /// Head-only verification with `keys`.
    pub fn head(keys: TrustedKeys) -> Self {
        Self { keys, mode: VerifyMode::Head, since: None }
    }
}

/// Which commits up to the head are checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Range {
    /// The head alone.
    Head,
    /// Every commit reachable from the head and not from this one (the
    /// last applied revision); the head alone when it is this one.
    Since(Oid),
    /// Every commit reachable from the head: nothing was applied before.
    History,
}

/// The keys whose signatures are trusted.
#[derive(Clone, Debug)]
pub struct TrustedKeys {
    ssh: Vec<AllowedSigner>,
    pgp: Vec<SignedPublicKey>,
}

impl TrustedKeys {
    /// Reads every file given, and every file in every directory given:
    /// armored OpenPGP key blocks, or allowed-signers lines.
    pub fn load(paths: &[PathBuf]) -> Result<Self, String> {
        let mut keys = Self { ssh: Vec::new(), pgp: Vec::new() };
        for path in paths {
            let files = if path.is_dir() {
                let entries = std::fs::read_dir(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
                let mut files: Vec<PathBuf> =
                    entries.flatten().map(|e| e.path()).filter(|p| p.is_file() && !is_hidden(p)).collect();
                files.sort();
                files
            } else {
                vec![path.clone()]
            };
            for file in files {
                keys.add(&file)?;
            }
        }
        if keys.ssh.is_empty() && keys.pgp.is_empty() {
            return Err("no trusted key in the --trusted-keys files".to_owned());
        }
        Ok(keys)
    }

    fn add(&mut self, file: &Path) -> Result<(), String> {
        let text = std::fs::read_to_string(file).map_err(|e| format!("reading {}: {e}", file.display()))?;
        let context = |e: String| format!("{}: {e}", file.display());
        if text.contains("-----BEGIN PGP PUBLIC KEY BLOCK-----") {
            self.pgp.extend(openpgp::keys(&text).map_err(context)?);
        } else {
            self.ssh.extend(allowed::parse(&text).map_err(context)?);
        }
        Ok(())
    }

    /// The trusted keys, for messages.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if !self.ssh.is_empty() {
            let names: Vec<&str> = self.ssh.iter().map(|s| s.principals.as_str()).collect();
            parts.push(format!("SSH: {}", names.join(", ")));
        }
        if !self.pgp.is_empty() {
            let names: Vec<String> = self.pgp.iter().map(openpgp::name).collect();
            parts.push(format!("OpenPGP: {}", names.join(", ")));
        }
        parts.join("; ")
    }

    /// Who signed commit `id`, or why it is not trusted.
    pub fn check(&self, repo: &Repository, id: Oid) -> Result<String, String> {
        let short = &id.to_string()[..7];
        let commit = repo.find_commit(id).map_err(|e| format!("commit {short}: {}", e.message()))?;
        let time = commit.committer().when().seconds();
        let (signature, data) = match repo.extract_signature(&id, None) {
            Ok(found) => found,
            Err(e) if e.code() == git2::ErrorCode::NotFound => {
                return Err(format!("commit {short} is not signed"));
            }
            Err(e) => return Err(format!("commit {short}: reading its signature: {}", e.message())),
        };
        let signature = String::from_utf8_lossy(&signature);
        let verdict = if signature.contains("-----BEGIN SSH SIGNATURE-----") {
            self.ssh_signer(&signature, &data, time)
        } else if signature.contains("-----BEGIN PGP SIGNATURE-----") {
            openpgp::verify(&self.pgp, &signature, &data, time)
        } else {
            Err("its signature is neither SSH nor OpenPGP (X.509 signatures are not supported)".to_owned())
        };
        verdict.map_err(|why| format!("commit {short}: {why}"))
    }

    fn ssh_signer(&self, pem: &str, data: &[u8], time: i64) -> Result<String, String> {
        let signature = SshSig::from_pem(pem).map_err(|e| format!("its SSH signature does not parse: {e}"))?;
        if signature.namespace() != "git" {
            return Err(format!("its SSH signature is for namespace {:?}, not \"git\"", signature.namespace()));
        }
        let fingerprint = signature.public_key().fingerprint(HashAlg::Sha256);
        let mut known = self.ssh.iter().filter(|s| s.key.key_data() == signature.public_key()).peekable();
        if known.peek().is_none() {
            return Err(format!("it is signed by SSH key {fingerprint}, which is not trusted"));
        }
        let mut refusal = String::new();
        for signer in known {
            if !signer.allows("git", time) {
                refusal = format!(
                    "SSH key {fingerprint} ({}) may not sign Git commits at the commit's time",
                    signer.principals
                );
                continue;
            }
            return match signer.key.verify("git", data, &signature) {
                Ok(()) => Ok(signer.principals.clone()),
                Err(_) => Err(format!(
                    "its SSH signature by {fingerprint} ({}) does not verify: the commit was changed after it was signed",
                    signer.principals
                )),
            };
        }
        Err(refusal)
    }
}

fn is_hidden(path: &Path) -> bool {
    path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with('.'))
}

/// Checks every commit of `range` up to `head` but winfleet's own status
/// commits (`status`, when the status may be on the tracked branch; a head
/// that is one is vouched for by the commit below it): each commit's
/// signer, or the first refusal.
pub fn verify_range(
    repo: &Repository,
    keys: &TrustedKeys,
    head: Oid,
    range: Range,
    status: Option<&StatusCommits>,
) -> Result<Vec<(Oid, String)>, String> {
    let commits = commits(repo, head, range, status)?;
    let untrusted = |why: String| {
        let why = format!("{why}; only commits signed by a trusted key are applied (trusted: {})", keys.describe());
        match range {
            Range::History => format!(
                "{why}; no trusted record of the last applied revision, so every commit of the history was checked \
                 (--verify-since names the last trusted revision)"
            ),
            Range::Head | Range::Since(_) => why,
        }
    };
    commits.into_iter().map(|id| keys.check(repo, id).map(|signer| (id, signer)).map_err(untrusted)).collect()
}

/// Who signed the commit that vouches for `id` ([`StatusCommits::vouching`]:
/// `id`, or the first commit below winfleet's status commits), or why it is
/// not trusted.
pub fn check_vouched(
    repo: &Repository,
    keys: &TrustedKeys,
    id: Oid,
    status: Option<&StatusCommits>,
) -> Result<String, String> {
    let id = match status {
        Some(status) => status.vouching(repo, id)?,
        None => id,
    };
    keys.check(repo, id)
}

/// The commits of `range` up to `head` that must be signed, newest first:
/// winfleet's status commits left out (the head alone: the one vouching
/// for it).
fn commits(repo: &Repository, head: Oid, range: Range, status: Option<&StatusCommits>) -> Result<Vec<Oid>, String> {
    let vouching = |id: Oid| match status {
        Some(status) => status.vouching(repo, id),
        None => Ok(id),
    };
    let hide = match range {
        Range::Head => return Ok(vec![vouching(head)?]),
        Range::Since(since) if since == head => return Ok(vec![vouching(head)?]),
        Range::Since(since) => Some(since),
        Range::History => None,
    };
    let git = |e: git2::Error| e.message().to_owned();
    let mut walk = repo.revwalk().map_err(git)?;
    walk.push(head).map_err(git)?;
    if let Some(since) = hide {
        walk.hide(since).map_err(|e| format!("the last applied revision {}: {}", short(since), e.message()))?;
    }
    let mut checked = Vec::new();
    for id in walk {
        let id = id.map_err(git)?;
        let passed_over = match status {
            Some(status) => status.is_one(repo, id)?,
            None => false,
        };
        if !passed_over {
            checked.push(id);
        }
    }
    Ok(checked)
}

/// Whether `base`, read back as the last applied revision (`from` says
/// where: the status branch, `--verify-since`), may start the range of
/// commits checked up to `head`: a commit of the head's history (else which
/// commits are new cannot be told) signed by a trusted key (every applied
/// head was, or, for one of winfleet's status commits applied after a
/// restart, the commit below it: [`check_vouched`]). Err says why not.
pub fn check_base(
    repo: &Repository,
    keys: &TrustedKeys,
    head: Oid,
    base: Oid,
    from: &str,
    status: Option<&StatusCommits>,
) -> Result<(), String> {
    let named = format!("the last applied revision {} ({from})", short(base));
    let ancestor = base == head || repo.graph_descendant_of(head, base).unwrap_or(false);
    if !ancestor {
        return Err(format!(
            "{named} is not an ancestor of the head {}, so which commits are new cannot be told",
            short(head)
        ));
    }
    check_vouched(repo, keys, base, status)
        .map(|_| ())
        .map_err(|why| format!("{named} is not signed by a trusted key: {why}"))
}

/// The short form of a commit id.
fn short(id: Oid) -> String {
    id.to_string().chars().take(7).collect()
}
