//! Verifying push notifications: is this request authentic, and does it ask
//! for a round of the tracked branch?
//!
//! Pure: [`verify`] looks only at the headers and the raw body, so every
//! sender (GitHub, GitLab, a generic signer) is unit-tested without sockets;
//! `http.rs` turns a [`Verdict`] into a response and a trigger.
//!
//! What it must never do: accept a request before its authentication
//! header checked out (authentication comes first, parsing second), compare
//! secrets in variable time, or put the secret or a signature into an error,
//! a reason or `Debug` output.

use std::fmt;
use std::path::{Path, PathBuf};

use axum::http::HeaderMap;
use hmac::{Hmac, KeyInit, Mac};
use serde_json::Value;
use sha2::Sha256;
use subtle::ConstantTimeEq;

use crate::diagnostic::shown;

/// The largest body accepted, in bytes (1 MiB); larger ones get 413.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

const GITHUB_SIGNATURE: &str = "x-hub-signature-256";
const GITHUB_EVENT: &str = "x-github-event";
const GITLAB_TOKEN: &str = "x-gitlab-token";
const GITLAB_EVENT: &str = "x-gitlab-event";
const GENERIC_SIGNATURE: &str = "x-winfleet-signature";

/// Loading the webhook secret failed.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// The secret file could not be read.
    #[error("reading the webhook secret file {path}: {source}")]
    Read {
        /// The secret file.
        path: PathBuf,
        /// Why it could not be read.
        source: std::io::Error,
    },
    /// The secret file holds nothing but whitespace.
    #[error("the webhook secret file {path} is empty")]
    Empty {
        /// The secret file.
        path: PathBuf,
    },
}

/// The shared secret and the branch whose pushes start a round.
#[derive(Clone)]
pub struct WebhookConfig {
    /// The HMAC key (GitHub, generic) or token (GitLab). Never printed.
    secret: Vec<u8>,
    /// The tracked branch, without `refs/heads/`.
    pub branch: String,
}

impl WebhookConfig {
    /// Reads the secret from `path` (a mounted Kubernetes Secret, say),
    /// trimming trailing whitespace such as the newline editors add.
    pub fn from_file(path: &Path, branch: &str) -> Result<Self, WebhookError> {
        let bytes = std::fs::read(path).map_err(|source| WebhookError::Read { path: path.to_owned(), source })?;
        let secret = bytes.trim_ascii_end();
        if secret.is_empty() {
            return Err(WebhookError::Empty { path: path.to_owned() });
        }
        Ok(Self::new(secret.to_vec(), branch))
    }

    /// A config from a secret already in memory. `branch` may be given as
    /// `main` or `refs/heads/main`. An empty secret authenticates nothing:
    /// [`verify`] then refuses every request.
    pub fn new(secret: Vec<u8>, branch: &str) -> Self {
        let branch = branch.strip_prefix("refs/heads/").unwrap_or(branch);
        Self { secret, branch: branch.to_owned() }
    }

    fn tracked_ref(&self) -> String {
        format!("refs/heads/{}", self.branch)
    }
}

impl fmt::Debug for WebhookConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebhookConfig").field("secret", &"<redacted>").field("branch", &self.branch).finish()
    }
}

/// What a webhook request amounts to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Authentic, and a push to the tracked branch (or a generic nudge).
    Trigger,
    /// Authentic, but nothing to do; the reason is safe to show the sender.
    Ignored(String),
    /// GitHub's `ping` after a webhook is created: answer, start no round.
    Ping,
    /// No recognised authentication header, or a wrong signature or token.
    Unauthorized,
    /// Authentic, but the body or headers do not make sense.
    BadRequest(String),
}

/// Authenticates the request, then decides whether it asks for a round.
///
/// The authentication header picks the sender: `X-Hub-Signature-256`
/// (GitHub), `X-Gitlab-Token` (GitLab), `X-Winfleet-Signature` (generic).
/// Nothing in the body is looked at before authentication succeeds.
pub fn verify(config: &WebhookConfig, headers: &HeaderMap, body: &[u8]) -> Verdict {
    if config.secret.is_empty() {
        return Verdict::Unauthorized;
    }
    if let Some(signature) = headers.get(GITHUB_SIGNATURE) {
        if !signature_matches(&config.secret, signature.as_bytes(), body) {
            return Verdict::Unauthorized;
        }
        github(config, headers, body)
    } else if let Some(token) = headers.get(GITLAB_TOKEN) {
        if !bool::from(config.secret.as_slice().ct_eq(token.as_bytes())) {
            return Verdict::Unauthorized;
        }
        gitlab(config, headers, body)
    } else if let Some(signature) = headers.get(GENERIC_SIGNATURE) {
        if !signature_matches(&config.secret, signature.as_bytes(), body) {
            return Verdict::Unauthorized;
        }
        generic(config, body)
    } else {
        Verdict::Unauthorized
    }
}

/// `sha256=<hex>` is HMAC-SHA256(secret, body), compared in constant time.
fn signature_matches(secret: &[u8], header: &[u8], body: &[u8]) -> bool {
    let Some(hex) = header.strip_prefix(b"sha256=") else { return false };
    let Some(tag) = decode_hex(hex.trim_ascii()) else { return false };
    let Ok(mac) = <Hmac<Sha256> as KeyInit>::new_from_slice(secret) else { return false };
    mac.chain_update(body).verify_slice(&tag).is_ok()
}

fn decode_hex(hex: &[u8]) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    hex.chunks_exact(2).map(|pair| Some(nibble(pair[0])? << 4 | nibble(pair[1])?)).collect()
}

fn nibble(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        b'A'..=b'F' => Some(digit - b'A' + 10),
        _ => None,
    }
}

fn event<'h>(headers: &'h HeaderMap, name: &str) -> Result<&'h str, Verdict> {
    let value = headers.get(name).ok_or_else(|| Verdict::BadRequest(format!("missing {name} header")))?;
    value.to_str().map_err(|_| Verdict::BadRequest(format!("{name} header is not text")))
}

fn github(config: &WebhookConfig, headers: &HeaderMap, body: &[u8]) -> Verdict {
    match event(headers, GITHUB_EVENT) {
        Err(verdict) => verdict,
        Ok("ping") => Verdict::Ping,
        Ok("push") => push(config, body),
        Ok(other) => Verdict::Ignored(format!("GitHub event {} does not start a round", shown(other))),
    }
}

fn gitlab(config: &WebhookConfig, headers: &HeaderMap, body: &[u8]) -> Verdict {
    match event(headers, GITLAB_EVENT) {
        Err(verdict) => verdict,
        Ok("Push Hook") => push(config, body),
        // A system hook carries every kind of event; only its pushes count.
        Ok("System Hook") => match json(body) {
            Err(verdict) => verdict,
            Ok(value) if is_system_push(&value) => push_ref(config, &value),
            Ok(_) => Verdict::Ignored("GitLab system hook is not a push".to_owned()),
        },
        Ok(other) => Verdict::Ignored(format!("GitLab event {} does not start a round", shown(other))),
    }
}

fn is_system_push(value: &Value) -> bool {
    ["event_name", "object_kind"].iter().any(|key| value.get(key).and_then(Value::as_str) == Some("push"))
}

/// A GitHub or GitLab push: its `ref` must be the tracked branch.
fn push(config: &WebhookConfig, body: &[u8]) -> Verdict {
    match json(body) {
        Ok(value) => push_ref(config, &value),
        Err(verdict) => verdict,
    }
}

fn push_ref(config: &WebhookConfig, value: &Value) -> Verdict {
    match string_field(value, "ref") {
        Err(verdict) => verdict,
        Ok(None) => Verdict::BadRequest("push event without a ref".to_owned()),
        Ok(Some(git_ref)) if git_ref == config.tracked_ref() => Verdict::Trigger,
        Ok(Some(git_ref)) => {
            Verdict::Ignored(format!("push to {}, not the tracked branch {}", shown(git_ref), shown(&config.branch)))
        }
    }
}

/// A generic signer: an empty body, or JSON whose `ref` or `branch` (if
/// present) names the tracked branch, as `main` or `refs/heads/main`.
fn generic(config: &WebhookConfig, body: &[u8]) -> Verdict {
    if body.trim_ascii().is_empty() {
        return Verdict::Trigger;
    }
    let value = match json(body) {
        Ok(value) => value,
        Err(verdict) => return verdict,
    };
    for key in ["ref", "branch"] {
        match string_field(&value, key) {
            Err(verdict) => return verdict,
            Ok(None) => {}
            Ok(Some(named)) if named == config.branch || named == config.tracked_ref() => {}
            Ok(Some(named)) => {
                return Verdict::Ignored(format!(
                    "{key} {} is not the tracked branch {}",
                    shown(named),
                    shown(&config.branch)
                ));
            }
        }
    }
    Verdict::Trigger
}

fn json(body: &[u8]) -> Result<Value, Verdict> {
    serde_json::from_slice(body).map_err(|error| {
        Verdict::BadRequest(format!("the body is not JSON ({error}); send it with content type application/json"))
    })
}

/// A string field of a JSON object; absent (or not an object) is `None`.
fn string_field<'v>(value: &'v Value, key: &str) -> Result<Option<&'v str>, Verdict> {
    match value.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(_) => Err(Verdict::BadRequest(format!("{key} is not a string"))),
    }
}

#[cfg(test)]
#[path = "webhook_tests.rs"]
mod tests;
