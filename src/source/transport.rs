//! Network Git: `ls-remote`, fetch and push over `file://` and plain paths
//! (no credentials), https (a token read from a file, given through the
//! credentials callback, never in a URL) and ssh (a deploy key, the server's
//! host key pinned to an OpenSSH known_hosts file: no trust-on-first-use).
//! A token or password never crosses plain `http://` unless
//! [`GitAuth::allow_insecure_http`] says so (issue 23, defect 6).
//!
//! Every function here blocks (libgit2); the daemon calls them from
//! `spawn_blocking`. Every failure is a [`GitError`] or [`PushError`] whose
//! text shows URLs without userinfo ([`redact_url`]) and never contains a
//! token or a key: secrets read during an operation are scrubbed from
//! whatever libgit2 or the server answers.

mod credentials;
mod hostkey;
mod location;

use std::cell::RefCell;
use std::path::PathBuf;

use git2::{
    AutotagOption, CertificateCheckStatus, Direction, ErrorCode, FetchOptions, Oid, ProxyOptions, PushOptions,
    RemoteCallbacks, Repository,
};

pub use location::redact_url;

use crate::known_hosts::KnownHosts;
use location::Location;

/// How winfleet authenticates to the Git server. It holds file paths only,
/// never their contents (each operation reads the files afresh, so rotated
/// Secrets are used), so its `Debug` output shows no secret.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GitAuth {
    /// A file holding an https access token (used as the password).
    pub token_file: Option<PathBuf>,
    /// A file holding the ssh deploy key (OpenSSH or PEM private key).
    pub ssh_key: Option<PathBuf>,
    /// The OpenSSH known_hosts file that pins the ssh server's host key;
    /// required for ssh URLs.
    pub known_hosts: Option<PathBuf>,
    /// Send a token or password over plain `http://` (the token file, or
    /// userinfo in the URL); refused otherwise, since anyone on the path
    /// reads it (`--allow-insecure-http`).
    pub allow_insecure_http: bool,
}

/// Why a Git operation failed. URLs are shown redacted; no variant carries
/// a secret.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// The URL's scheme or form is not usable.
    #[error("unsupported Git URL {url}: {reason}")]
    Url {
        /// The URL, redacted.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An ssh URL without `--git-known-hosts`.
    #[error(
        "{url} is reached over ssh, which needs --git-known-hosts: Git host keys are pinned, never trusted on first use"
    )]
    KnownHostsRequired {
        /// The URL, redacted.
        url: String,
    },
    /// The ssh server's host key is not the pinned one.
    #[error("refusing to talk to {url}: {reason}")]
    HostKey {
        /// The URL, redacted.
        url: String,
        /// The host, the fingerprints and the file.
        reason: String,
    },
    /// A credential file (token, key, known_hosts) could not be used.
    #[error("cannot read the {what} {path}: {reason}")]
    Credential {
        /// Which kind of file.
        what: &'static str,
        /// Its path.
        path: String,
        /// Why (an IO error, never the content).
        reason: String,
    },
    /// A token or password would cross plain `http://`, where anyone on
    /// the path reads it, and `--allow-insecure-http` is not given.
    #[error(
        "refusing to send the {credential} to {url} over plain http, where anyone on the path reads it: use https://, or pass --allow-insecure-http"
    )]
    InsecureHttp {
        /// The URL, redacted.
        url: String,
        /// Which credential: `token from <path>` or `credentials in the URL`.
        credential: String,
    },
    /// The server asked for a credential that is not configured.
    #[error("{url} asks for {asked}, and none is configured (set {option})")]
    MissingCredential {
        /// The URL, redacted.
        url: String,
        /// The kind of credential.
        asked: &'static str,
        /// The option that provides it.
        option: &'static str,
    },
    /// The server refused the credential offered.
    #[error("{url} refused the {offered}")]
    AuthRejected {
        /// The URL, redacted.
        url: String,
        /// What was offered (paths and user names only).
        offered: String,
    },
    /// The branch does not exist on the remote.
    #[error("branch {branch} does not exist on {url}")]
    BranchNotFound {
        /// The URL, redacted.
        url: String,
        /// The branch.
        branch: String,
    },
    /// libgit2 or the server reported a failure talking to the remote.
    #[error("{action} {url}: {message}")]
    Remote {
        /// What was being done ("fetching from", …).
        action: &'static str,
        /// The URL, redacted.
        url: String,
        /// libgit2's message, scrubbed.
        message: String,
    },
    /// A local repository operation failed.
    #[error("{context}: {message}")]
    Local {
        /// What was being done, with the path or revision.
        context: String,
        /// libgit2's message.
        message: String,
    },
}

impl GitError {
    /// A local repository failure with its context.
    pub(crate) fn local(context: impl Into<String>, e: &git2::Error) -> Self {
        GitError::Local { context: context.into(), message: e.message().to_owned() }
    }
}

/// Why a push failed.
#[derive(Debug, thiserror::Error)]
pub enum PushError {
    /// The remote reference moved since it was read (non-fast-forward,
    /// stale, or created meanwhile): fetch again, rebuild, retry.
    #[error("{url} rejected the update of {refname} (it moved meanwhile): {reason}")]
    Rejected {
        /// The URL, redacted.
        url: String,
        /// The remote reference.
        refname: String,
        /// The server's or libgit2's reason.
        reason: String,
    },
    /// The remote refused the update for another reason (a hook, a
    /// protected branch): retrying the same way will not help.
    #[error("{url} refused the update of {refname}: {reason}")]
    Refused {
        /// The URL, redacted.
        url: String,
        /// The remote reference.
        refname: String,
        /// The server's reason.
        reason: String,
    },
    /// The push could not be done at all.
    #[error(transparent)]
    Git(#[from] GitError),
}

/// The object id the remote has for `refname` (`refs/heads/main`), without
/// fetching any object; `None` when the remote has no such reference.
pub fn ls_remote(repo: &Repository, url: &str, refname: &str, auth: &GitAuth) -> Result<Option<Oid>, GitError> {
    let session = Session::new(url, auth)?;
    let mut remote = repo.remote_anonymous(url).map_err(|e| session.error("connecting to", &e))?;
    let connection = remote
        .connect_auth(Direction::Fetch, Some(session.callbacks()), Some(proxy()))
        .map_err(|e| session.error("connecting to", &e))?;
    let heads = connection.list().map_err(|e| session.error("listing the references of", &e))?;
    Ok(heads.iter().find(|head| head.name() == refname).map(|head| head.oid()))
}

/// Fetches `refspecs` (force refspecs such as
/// `+refs/heads/main:refs/winfleet/source/main`): full depth, no tags.
pub fn fetch(repo: &Repository, url: &str, refspecs: &[&str], auth: &GitAuth) -> Result<(), GitError> {
    let session = Session::new(url, auth)?;
    let mut remote = repo.remote_anonymous(url).map_err(|e| session.error("fetching from", &e))?;
    let mut options = FetchOptions::new();
    options.remote_callbacks(session.callbacks()).download_tags(AutotagOption::None).proxy_options(proxy());
    remote.fetch(refspecs, Some(&mut options), None).map_err(|e| session.error("fetching from", &e))
}

/// Pushes the commit `local` to `remote_ref` (`refs/heads/winfleet/status`)
/// without force: a remote reference that moved is [`PushError::Rejected`].
pub fn push(repo: &Repository, url: &str, local: Oid, remote_ref: &str, auth: &GitAuth) -> Result<(), PushError> {
    let session = Session::new(url, auth)?;
    let status: RefCell<Option<String>> = RefCell::new(None);
    let mut remote = repo.remote_anonymous(url).map_err(|e| session.error("pushing to", &e))?;
    let mut callbacks = session.callbacks();
    // libgit2 reports a reference the server declined here, and the push
    // itself still returns Ok.
    callbacks.push_update_reference(|_refname, message| {
        if let Some(message) = message {
            *status.borrow_mut() = Some(message.to_owned());
        }
        Ok(())
    });
    let mut options = PushOptions::new();
    options.remote_callbacks(callbacks).proxy_options(proxy());
    let refspec = format!("{local}:{remote_ref}");
    let result = remote.push(&[refspec.as_str()], Some(&mut options));
    drop(options);
    let rejected = |reason: &str| PushError::Rejected {
        url: redact_url(url),
        refname: remote_ref.to_owned(),
        reason: session.scrub(reason),
    };
    match result {
        Err(e) if e.code() == ErrorCode::NotFastForward => Err(rejected(e.message())),
        Err(e) => Err(PushError::Git(session.error("pushing to", &e))),
        Ok(()) => match status.into_inner() {
            None => Ok(()),
            Some(reason) if is_stale(&reason) => Err(rejected(&reason)),
            Some(reason) => Err(PushError::Refused {
                url: redact_url(url),
                refname: remote_ref.to_owned(),
                reason: session.scrub(&reason),
            }),
        },
    }
}

/// Whether a server's or libgit2's per-reference push status means "the
/// reference moved": git's receive-pack says `non-fast-forward`, `fetch
/// first` or `stale info`; a lost race on the ref lock reads `failed to
/// lock` / `cannot lock`; libgit2's local transport says the reference
/// already exists when it was created meanwhile.
fn is_stale(status: &str) -> bool {
    let status = status.to_ascii_lowercase();
    ["non-fast-forward", "fetch first", "stale", "failed to lock", "cannot lock", "already exists", "failed to update"]
        .iter()
        .any(|needle| status.contains(needle))
}

/// Proxies as git would find them (`http.proxy`, `https_proxy`, …).
fn proxy() -> ProxyOptions<'static> {
    let mut proxy = ProxyOptions::new();
    proxy.auto();
    proxy
}

/// One operation's view of the remote: its transport, its credentials,
/// and the first precise failure a callback found (libgit2 only passes a
/// generic one back).
struct Session<'a> {
    url: &'a str,
    location: Location,
    auth: &'a GitAuth,
    known_hosts: Option<KnownHosts>,
    failure: RefCell<Option<GitError>>,
    secrets: RefCell<Vec<String>>,
    offered: RefCell<Vec<credentials::Answer>>,
}

impl<'a> Session<'a> {
    fn new(url: &'a str, auth: &'a GitAuth) -> Result<Self, GitError> {
        let location = location::classify(url).map_err(|reason| GitError::Url { url: redact_url(url), reason })?;
        if let Some(credential) = credentials::exposed_over_plain_http(url, auth) {
            return Err(GitError::InsecureHttp { url: redact_url(url), credential });
        }
        let known_hosts = match (&location, &auth.known_hosts) {
            (Location::Ssh { .. }, None) => return Err(GitError::KnownHostsRequired { url: redact_url(url) }),
            (Location::Ssh { .. }, Some(path)) => {
                Some(KnownHosts::load(path, false).map_err(|e| GitError::Credential {
                    what: "known_hosts file",
                    path: path.display().to_string(),
                    reason: e.to_string(),
                })?)
            }
            _ => None,
        };
        Ok(Session {
            url,
            location,
            auth,
            known_hosts,
            failure: RefCell::new(None),
            secrets: RefCell::new(location::url_secrets(url)),
            offered: RefCell::new(Vec::new()),
        })
    }

    fn callbacks(&self) -> RemoteCallbacks<'_> {
        let mut callbacks = RemoteCallbacks::new();
        callbacks.credentials(|_url, username, allowed| {
            let answer = credentials::choose(&self.location, username, allowed, self.auth)
                .map_err(|missing| self.fail(self.missing(missing)))?;
            // libgit2 asks again after the server refused an answer; giving
            // the same one again would loop forever.
            if self.offered.borrow().contains(&answer) {
                let offered = credentials::describe(&answer);
                return Err(self.fail(GitError::AuthRejected { url: redact_url(self.url), offered }));
            }
            self.offered.borrow_mut().push(answer.clone());
            credentials::materialize(&answer, &mut self.secrets.borrow_mut()).map_err(|e| self.fail(e))
        });
        callbacks.certificate_check(|cert, _host| {
            // X.509 (https): libgit2's own verification against the system CAs.
            let Some(hostkey) = cert.as_hostkey() else { return Ok(CertificateCheckStatus::CertificatePassthrough) };
            let (Location::Ssh { host, port }, Some(known)) = (&self.location, &self.known_hosts) else {
                return Err(self.fail(GitError::KnownHostsRequired { url: redact_url(self.url) }));
            };
            hostkey::verify(known, host, *port, hostkey.hostkey())
                .map(|()| CertificateCheckStatus::CertificateOk)
                .map_err(|reason| self.fail(GitError::HostKey { url: redact_url(self.url), reason }))
        });
        callbacks
    }

    /// The failure when the server asks for a credential that is not
    /// configured. libgit2 offers a URL's own userinfo first and asks only
    /// once the server refused it: then some credential was configured,
    /// and it is that one the server refused.
    fn missing(&self, missing: credentials::Missing) -> GitError {
        let url = redact_url(self.url);
        if self.location == Location::Http && location::userinfo(self.url).is_some() {
            return GitError::AuthRejected { url, offered: credentials::URL_CREDENTIALS.to_owned() };
        }
        GitError::MissingCredential { url, asked: missing.asked, option: missing.option }
    }

    /// Records the precise failure; returns the error that aborts libgit2.
    fn fail(&self, error: GitError) -> git2::Error {
        let mut failure = self.failure.borrow_mut();
        if failure.is_none() {
            *failure = Some(error);
        }
        git2::Error::from_str("aborted by winfleet")
    }

    /// The failure of an operation: a callback's precise one if any.
    fn error(&self, action: &'static str, e: &git2::Error) -> GitError {
        self.failure.borrow_mut().take().unwrap_or_else(|| GitError::Remote {
            action,
            url: redact_url(self.url),
            message: self.scrub(e.message()),
        })
    }

    fn scrub(&self, message: &str) -> String {
        location::scrub(message, self.url, &self.secrets.borrow())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_statuses_are_told_from_refusals() {
        for stale in ["non-fast-forward", "fetch first", "stale info", "failed to lock", "reference already exists"] {
            assert!(is_stale(stale), "{stale}");
        }
        for refused in ["pre-receive hook declined", "protected branch hook declined", "funny refname"] {
            assert!(!is_stale(refused), "{refused}");
        }
    }

    #[test]
    fn an_ssh_url_without_known_hosts_is_refused_before_connecting() {
        let auth = GitAuth { ssh_key: Some("/k".into()), ..GitAuth::default() };
        let err = Session::new("ssh://git:pw@git.corp/x.git", &auth).err().unwrap().to_string();
        assert_eq!(
            err,
            "ssh://git.corp/x.git is reached over ssh, which needs --git-known-hosts: Git host keys are pinned, never trusted on first use"
        );
        assert!(Session::new("git@git.corp:x.git", &auth).is_err());
        assert!(Session::new("file:///srv/x.git", &auth).is_ok());
    }

    #[test]
    fn auth_debug_shows_paths_only() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "ghp_supersecret").unwrap();
        let auth = GitAuth { token_file: Some(token), ..GitAuth::default() };
        let text = format!("{auth:?}");
        assert!(text.contains("token") && !text.contains("ghp_supersecret"), "{text}");
    }
}
