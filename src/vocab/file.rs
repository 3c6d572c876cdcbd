//! The files winfleet writes on nodes, and where: [`ManagedFile`] (exact
//! content with its redacted display form and SHA-256), [`node_path`] and
//! [`sha256_hex`]. Pure.

use std::fmt;

use sha2::{Digest, Sha256};

use super::Shell;

/// A file winfleet writes, with the form it may be displayed in.
///
/// `content` is the exact bytes for the node; `display` replaces secrets
/// (registry credentials) with `<redacted>`. `Debug` shows only the display
/// form, so a stray `{:?}` cannot leak a credential.
#[derive(Clone, PartialEq, Eq)]
pub struct ManagedFile {
    content: String,
    redacted: Option<String>,
    sha256: String,
}

impl ManagedFile {
    /// A file without secrets.
    pub fn plain(content: String) -> Self {
        Self { sha256: sha256_hex(content.as_bytes()), content, redacted: None }
    }

    /// A file with secrets, and its redacted form.
    pub fn with_secret(content: String, redacted: String) -> Self {
        Self { sha256: sha256_hex(content.as_bytes()), content, redacted: Some(redacted) }
    }

    /// A secret file shown as every secret generated file is ([`redacted`]).
    pub fn secret(content: String) -> Self {
        let display = redacted(&content);
        Self::with_secret(content, display)
    }

    /// Lower-case hex SHA-256 of the exact content (what nodes report).
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// The exact bytes to write on the node.
    pub fn content(&self) -> &str {
        &self.content
    }

    /// The form safe to show in plans, logs and status.
    pub fn display(&self) -> &str {
        self.redacted.as_deref().unwrap_or(&self.content)
    }
}

impl fmt::Debug for ManagedFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ManagedFile").field(&self.display()).finish()
    }
}

/// Lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut hex = String::with_capacity(64);
    for b in digest {
        hex.push(char::from_digit(u32::from(b >> 4), 16).unwrap_or('0'));
        hex.push(char::from_digit(u32::from(b & 0xf), 16).unwrap_or('0'));
    }
    hex
}

/// A path on a node: `dir` joined with `parts` by the dialect's separator.
pub fn node_path(shell: Shell, dir: &str, parts: &[&str]) -> String {
    let sep = match shell {
        Shell::Powershell => '\\',
        Shell::Posix => '/',
    };
    let mut path = dir.trim_end_matches(sep).to_owned();
    for part in parts {
        path.push(sep);
        path.push_str(part);
    }
    path
}

/// How a secret file is displayed in plans, logs, status and Events:
/// `<redacted> sha256:<12 hex>`.
pub fn redacted(content: &str) -> String {
    format!("<redacted> sha256:{}", &sha256_hex(content.as_bytes())[..12])
}
