//! `--trusted-keys`: `validate --rev`, `plan`, `render` and `apply` accept
//! only commits signed by a trusted key (see `winfleet::source::signed`),
//! with the daemon's rule, so CI checks a pull request's head the way the
//! daemon will: winfleet's own status commits are passed over, and with
//! `--verify-mode all-since-last-applied` the start (`--verify-since`) must
//! be a signed ancestor of the head. What the daemon reads back from its
//! status branch the CLI does not: without `--verify-since` it checks the
//! head and says that the rest was not checked (exit status 4).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use winfleet::source::signed::{self, Policy, Range, StatusCommits, TrustedKeys, VerifyMode};

use super::{load, output};

/// The exit status when the signature policy could not be checked.
pub const NOT_CHECKED: u8 = 4;

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
    /// The last applied revision, for --verify-mode all-since-last-applied: outside the daemon
    /// (without it only the head is checked, exit status 4), and for a daemon that cannot read
    /// it back from the status branch (it applies nothing until one or the other names it).
    #[arg(long, value_name = "REV", env = "WINFLEET_VERIFY_SINCE")]
    pub verify_since: Option<String>,
    /// Author of status commits, "Name <email>": its commits that touch only the status
    /// directory need no signature.
    #[arg(
        long,
        value_name = "AUTHOR",
        env = "WINFLEET_STATUS_AUTHOR",
        default_value = "winfleet <winfleet@localhost>"
    )]
    pub status_author: String,
}

/// Why a revision is not accepted.
#[derive(Debug)]
pub enum Refused {
    /// A commit that must be signed is not, by a trusted key (exit 1).
    Untrusted(String),
    /// What must be signed could not be told (exit [`NOT_CHECKED`]).
    NotChecked(String),
}

impl Refused {
    /// Says why on stderr (`what` names the revision when it helps) and
    /// gives the exit status.
    pub fn report(&self, what: &str) -> ExitCode {
        match self {
            Refused::Untrusted(why) => {
                output::error(&format!("untrusted: {what}{why}"));
                ExitCode::from(1)
            }
            Refused::NotChecked(why) => {
                output::error(&format!("not checked: {what}{why}"));
                ExitCode::from(NOT_CHECKED)
            }
        }
    }
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

    /// Checks `rev` of `repo` (its configuration under `path`) when keys
    /// were given, as the daemon would: Ok(Err) when it is refused.
    pub fn check(&self, repo: &Path, path: Option<&str>, rev: Option<&str>) -> anyhow::Result<Result<(), Refused>> {
        let Some(Policy { keys, mode, since }) = self.keys()? else { return Ok(Ok(())) };
        let Some(rev) = rev else { bail!("--trusted-keys checks a commit: give the revision (--rev)") };
        let git = git2::Repository::open(repo).with_context(|| format!("opening {}", repo.display()))?;
        let id = |rev: &str| -> anyhow::Result<git2::Oid> {
            let commit = git.revparse_single(rev).and_then(|o| o.peel_to_commit());
            Ok(commit.with_context(|| format!("resolving revision {rev}"))?.id())
        };
        let head = id(rev)?;
        let status = self.status_commits(repo, path, rev)?;
        let range = match (mode, since) {
            (VerifyMode::Head, _) => Range::Head,
            (VerifyMode::AllSinceLastApplied, Some(since)) => {
                let base = id(&since)?;
                if let Err(why) = signed::check_base(&git, &keys, head, base, "--verify-since", Some(&status)) {
                    return Ok(Err(Refused::Untrusted(why)));
                }
                Range::Since(base)
            }
            (VerifyMode::AllSinceLastApplied, None) => {
                let signers = signed::verify_range(&git, &keys, head, Range::Head, Some(&status));
                let signer = match signers {
                    Ok(signers) => signers.into_iter().map(|(_, who)| who).collect::<Vec<_>>().join(", "),
                    Err(why) => return Ok(Err(Refused::Untrusted(why))),
                };
                return Ok(Err(Refused::NotChecked(format!(
                    "--verify-mode all-since-last-applied needs every commit after the last applied revision \
                     signed; the daemon reads that revision back from its status branch, this command does not: \
                     name it with --verify-since REV (`winfleet status` shows it as the applied revision). \
                     Only the head was checked (signed by {signer})"
                ))));
            }
        };
        Ok(signed::verify_range(&git, &keys, head, range, Some(&status)).map(|_| ()).map_err(Refused::Untrusted))
    }

    /// winfleet's status commits as `rev`'s Fleet places them (the
    /// directory its loader skips, as in the daemon).
    fn status_commits(&self, repo: &Path, path: Option<&str>, rev: &str) -> anyhow::Result<StatusCommits> {
        let (author_name, author_email) = author(&self.status_author)?;
        let loaded = load::load(repo, path, Some(rev), None)?;
        Ok(StatusCommits { path: loaded.status_path, selected: path.map(str::to_owned), author_name, author_email })
    }
}

/// "Name <email>".
pub fn author(text: &str) -> anyhow::Result<(String, String)> {
    let parsed = text
        .split_once('<')
        .and_then(|(name, rest)| Some((name.trim(), rest.strip_suffix('>')?.trim())))
        .filter(|(name, email)| !name.is_empty() && email.contains('@'));
    let Some((name, email)) = parsed else { bail!("--status-author {text:?} is not \"Name <email>\"") };
    Ok((name.to_owned(), email.to_owned()))
}
