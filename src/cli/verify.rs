//! `--trusted-keys`: `validate --rev`, `plan` and `run` accept only commits
//! signed by a trusted key (see `winfleet::source::signed`), so CI checks a
//! pull request's head the way the daemon will.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use winfleet::source::signed::{self, Policy, TrustedKeys, VerifyMode};

/// The signature requirement.
#[derive(Debug, Default, clap::Args)]
pub struct VerifyArgs {
    /// Accept only commits signed by one of these keys: git allowed-signers files (SSH signatures)
    /// or armored OpenPGP public keys; a directory reads every file in it. Repeatable; never
    /// read from the repository being verified.
    #[arg(long = "trusted-keys", value_name = "PATH", env = "WINFLEET_TRUSTED_KEYS", value_delimiter = ',')]
    pub trusted_keys: Vec<PathBuf>,
    /// Which commits must be signed: the head only (as Flux), or every commit after the last
    /// applied one (the daemon reads it back from the status branch after a restart;
    /// `--verify-since` outside the daemon).
    #[arg(long, value_enum, env = "WINFLEET_VERIFY_MODE", default_value_t = VerifyMode::Head)]
    pub verify_mode: VerifyMode,
    /// The last applied revision, for --verify-mode all-since-last-applied: outside the daemon,
    /// and for a daemon that cannot read it back from the status branch (it applies nothing
    /// until one or the other names it).
    #[arg(long, value_name = "REV", env = "WINFLEET_VERIFY_SINCE")]
    pub verify_since: Option<String>,
}

impl VerifyArgs {
    /// The trusted keys, the mode and `--verify-since`, when keys were given.
    pub fn keys(&self) -> anyhow::Result<Option<Policy>> {
        if self.trusted_keys.is_empty() {
            return Ok(None);
        }
        let keys = TrustedKeys::load(&self.trusted_keys).map_err(anyhow::Error::msg).context("--trusted-keys")?;
        Ok(Some(Policy { keys, mode: self.verify_mode, since: self.verify_since.clone() }))
    }

    /// Checks `rev` of `repo` when keys were given: Ok(Err(why)) when it
    /// is not trusted.
    pub fn check(&self, repo: &Path, rev: Option<&str>) -> anyhow::Result<Result<(), String>> {
        let Some(Policy { keys, mode, .. }) = self.keys()? else { return Ok(Ok(())) };
        let Some(rev) = rev else { bail!("--trusted-keys checks a commit: give the revision (--rev)") };
        let git = git2::Repository::open(repo).with_context(|| format!("opening {}", repo.display()))?;
        let id = |rev: &str| -> anyhow::Result<git2::Oid> {
            let commit = git.revparse_single(rev).and_then(|o| o.peel_to_commit());
            Ok(commit.with_context(|| format!("resolving revision {rev}"))?.id())
        };
        let since = self.verify_since.as_deref().map(id).transpose()?;
        Ok(signed::verify(&git, &keys, id(rev)?, mode, since).map(|_| ()))
    }
}
