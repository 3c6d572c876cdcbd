//! Suspending winfleet out of band: `winfleet suspend` / `winfleet resume`
//! for an emergency (a bad commit already merged, Git unreachable), beside
//! the Fleet's `spec.suspend` that does the same through Git.
//!
//! While suspended, rounds run as dry runs: they observe every node and the
//! cluster and report drift, and change nothing. Suspending takes effect
//! before the next node is touched (a round in progress finishes the node
//! scripts already running and starts no more); resuming runs one round
//! that applies the revision in force, with whatever arrived meanwhile.
//!
//! The state lives where every replica sees it: with leader election, in
//! the Lease's [`ANNOTATION`] (the leader writes its state at every
//! renewal, followers adopt what they read, so a new leader keeps a
//! suspension); without, in a file in the cache directory, so a restarted
//! process stays suspended. Requests carry a bearer token
//! (`--control-token-file`) compared in constant time.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::http::HeaderMap;
use subtle::ConstantTimeEq;
use tokio::sync::watch;

/// The Lease annotation holding the reason while suspended.
pub const ANNOTATION: &str = "winfleet.io/suspended";

/// The longest reason kept (longer ones are cut).
const MAX_REASON: usize = 200;

/// Whether winfleet is suspended out of band, and why; shared by the
/// control endpoint, the Lease and the loop.
#[derive(Clone, Debug)]
pub struct Suspension {
    state: Arc<watch::Sender<Option<String>>>,
    file: Option<PathBuf>,
}

impl Suspension {
    /// Not suspended; kept in memory only.
    pub fn new() -> Self {
        Self { state: Arc::new(watch::Sender::new(None)), file: None }
    }

    /// Kept in `file` as well: read now (a restart stays suspended),
    /// written at every change.
    pub fn persisted(file: &Path) -> Self {
        let reason = std::fs::read_to_string(file).ok().map(|r| clean(&r));
        Self { state: Arc::new(watch::Sender::new(reason)), file: Some(file.to_owned()) }
    }

    /// The reason, while suspended.
    pub fn reason(&self) -> Option<String> {
        self.state.borrow().clone()
    }

    /// Follows every change.
    pub fn subscribe(&self) -> watch::Receiver<Option<String>> {
        self.state.subscribe()
    }

    /// Suspends (Some) or resumes (None); true when that changed anything.
    pub fn set(&self, reason: Option<&str>) -> bool {
        let reason = reason.map(clean);
        let changed = self.state.send_if_modified(|r| {
            *r != reason && {
                r.clone_from(&reason);
                true
            }
        });
        if changed && let Some(file) = &self.file {
            let written = match &reason {
                Some(reason) => std::fs::write(file, reason),
                None => std::fs::remove_file(file).or_else(|e| match e.kind() {
                    std::io::ErrorKind::NotFound => Ok(()),
                    _ => Err(e),
                }),
            };
            if let Err(e) = written {
                tracing::warn!(file = %file.display(), error = %e, "cannot record the suspension; a restart forgets it");
            }
        }
        changed
    }
}

impl Default for Suspension {
    fn default() -> Self {
        Self::new()
    }
}

/// The reason as it is kept and shown: as written when it is at most
/// [`MAX_REASON`] characters a reader can all see, else through the one
/// rule for shown values ([`crate::diagnostic::shown_bare`]: cut with its
/// size, invisible characters as `<U+0007>`), so a 1 MB reason never
/// reaches a log line, an answer, the Lease or status whole. Cleaning a
/// cleaned reason changes nothing (a restart reads it back). An empty
/// reason reads "no reason given".
fn clean(reason: &str) -> String {
    let text = reason.trim();
    if text.is_empty() {
        return "no reason given".to_owned();
    }
    let plain =
        text.chars().take(MAX_REASON + 1).count() <= MAX_REASON && !text.chars().any(crate::diagnostic::is_unseen);
    if plain { text.to_owned() } else { crate::diagnostic::shown_bare(text) }
}

/// The authentication scheme and the space after it.
const BEARER: &[u8] = b"bearer ";

/// The control token, read from a file (a mounted Secret).
#[derive(Clone)]
pub struct ControlToken(Vec<u8>);

impl ControlToken {
    /// Reads the token from `path`, trimming the trailing newline.
    pub fn from_file(path: &Path) -> Result<Self, String> {
        let bytes =
            std::fs::read(path).map_err(|e| format!("reading the control token file {}: {e}", path.display()))?;
        let token = bytes.trim_ascii();
        if token.is_empty() {
            return Err(format!("the control token file {} is empty", path.display()));
        }
        Ok(Self(token.to_vec()))
    }

    /// A token already in memory.
    pub fn new(token: &[u8]) -> Self {
        Self(token.to_vec())
    }

    /// Whether the request carries `Authorization: Bearer <token>`. The
    /// scheme is matched case-insensitively (RFC 9110, section 11.1:
    /// `bearer` is as good as `Bearer`; issue 23, defect 11).
    pub fn admits(&self, headers: &HeaderMap) -> bool {
        let Some(value) = headers.get(axum::http::header::AUTHORIZATION) else { return false };
        let Some((scheme, given)) = value.as_bytes().split_at_checked(BEARER.len()) else { return false };
        if !scheme.eq_ignore_ascii_case(BEARER) {
            return false;
        }
        bool::from(self.0.as_slice().ct_eq(given.trim_ascii()))
    }
}

impl std::fmt::Debug for ControlToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ControlToken(<redacted>)")
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_suspension_is_kept_in_its_file_across_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("suspended");
        let first = Suspension::persisted(&file);
        assert_eq!(first.reason(), None);
        assert!(first.set(Some("bad commit 4b825dc\nmerged")));
        assert!(!first.set(Some("bad commit 4b825dc\nmerged")), "the same reason changes nothing");
        let shown = "bad commit 4b825dc<U+000A>merged";
        assert_eq!(Suspension::persisted(&file).reason().as_deref(), Some(shown));
        assert!(first.set(None));
        assert_eq!(Suspension::persisted(&file).reason(), None);
        assert!(Suspension::new().set(Some("  ")));
    }

    #[test]
    fn only_the_bearer_token_is_admitted() {
        let token = ControlToken::new(b"s3cret");
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(axum::http::header::AUTHORIZATION, value.parse().unwrap());
            token.admits(&headers)
        };
        assert!(with("Bearer s3cret"));
        assert!(!with("Bearer s3cre"));
        assert!(!with("Basic s3cret"));
        assert!(!token.admits(&HeaderMap::new()));
        assert_eq!(format!("{token:?}"), "ControlToken(<redacted>)");
    }

    #[test]
    fn issue_23_the_bearer_scheme_is_case_insensitive() {
        let token = ControlToken::new(b"s3cret");
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(axum::http::header::AUTHORIZATION, value.parse().unwrap());
            token.admits(&headers)
        };
        // RFC 9110 section 11.1: the authentication scheme is case-insensitive.
        for scheme in ["bearer", "BEARER", "bEaReR"] {
            assert!(with(&format!("{scheme} s3cret")), "{scheme}");
        }
        assert!(with("Bearer  s3cret"), "one or more spaces separate the scheme");
        assert!(!with("bearer s3cre"));
        assert!(!with("bearers3cret"));
        assert!(!with("bearer"));
    }

    #[test]
    fn a_huge_or_invisible_reason_is_kept_cut_with_its_size_issue_35() {
        let huge = clean(&format!("freeze{}", "x".repeat(1_000_000)));
        assert!(huge.ends_with("… (1000006 characters)") && huge.len() < MAX_REASON, "{huge}");
        assert_eq!(clean(&huge), huge, "cleaning again changes nothing");
        assert_eq!(clean("bad\ncommit\u{202e}"), "bad<U+000A>commit<U+202E>");
        assert_eq!(clean("  "), "no reason given");
        assert_eq!(clean(&"y".repeat(MAX_REASON)), "y".repeat(MAX_REASON));
    }
}
