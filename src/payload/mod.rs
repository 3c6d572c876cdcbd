//! The payload: the files a node needs to become a Windows worker
//! (kubelet, containerd, kube-proxy, hybrid-overlay-node, CNI plugins,
//! csi-proxy, windows_exporter, kube-log-runner, scripts), as WMCO ships
//! them in its image under `/payload`.
//!
//! The bytes come from a directory on the machine that runs winfleet
//! (`--payload-dir`); the repository pins their exact content with the
//! Fleet's `spec.payload.digest`, a digest over a canonical manifest
//! ([`manifest`]). A directory whose digest differs from the pin is never
//! used to configure or upgrade a node ([`Payload::check_pin`]).
//!
//! - [`manifest`]: the canonical manifest and digest (pure).
//! - [`layout`]: where each file goes on a node (pure).
//! - [`dir`]: reading a directory (IO).
//! - [`kubelet_version`]: the kubelet's version, from its build information.

pub mod dir;
pub mod kubelet_version;
pub mod layout;
pub mod manifest;

use std::path::{Path, PathBuf};

/// One file of the payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PayloadFile {
    /// Path relative to the payload directory (`/`-separated); for WMCO's
    /// `.tar.gz` entries, the path of the file inside, without `.tar.gz`.
    pub rel: String,
    /// Lower-case hex SHA-256.
    pub sha256: String,
    /// Size in bytes.
    pub size: u64,
    /// Permission bits to give it on posix nodes (`0o755` or `0o644`).
    pub mode: u32,
    /// The local file with exactly these bytes (unpacked when needed).
    pub source: PathBuf,
}

/// A directory entry that is not a payload file, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    /// Relative path.
    pub path: String,
    /// Why it is left out.
    pub reason: String,
}

/// A payload directory, read.
#[derive(Debug)]
pub struct Payload {
    /// The directory.
    pub dir: PathBuf,
    /// `sha256:<hex>` of [`Self::manifest`].
    pub digest: String,
    /// The canonical manifest text.
    pub manifest: String,
    /// The files, sorted by relative path.
    pub files: Vec<PayloadFile>,
    /// Entries that are not payload files.
    pub skipped: Vec<Skipped>,
    /// The version the payload's kubelet (`kubelet.exe`, or `kubelet` on
    /// posix test nodes) carries in its build information
    /// ([`kubelet_version`]); `None` when it has no kubelet or its kubelet
    /// does not say.
    pub kubelet_version: Option<String>,
    /// What the directory looked like when read.
    pub fingerprint: dir::Fingerprint,
    /// Unpacked archives live here as long as the payload does.
    _scratch: tempfile::TempDir,
}

/// Why a payload directory cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PayloadError {
    /// Reading failed.
    #[error("payload {}: {source}", path.display())]
    Io {
        /// What was being read.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A WMCO archive that is not one file.
    #[error("payload archive {}: {reason}", path.display())]
    Archive {
        /// The archive.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A name or layout problem.
    #[error("payload: {0}")]
    Layout(String),
    /// Two entries give the same file (`x` and `x.tar.gz`).
    #[error("payload: {0} is given twice (as a file and as a .tar.gz archive?)")]
    Duplicate(String),
    /// The directory is not the pinned payload.
    #[error(
        "the payload directory {dir} has digest {found}, but the repository pins {pinned} \
         (spec.payload.digest): nothing is configured or upgraded with it; use the pinned payload, \
         or pin this one after review (winfleet payload digest {dir})"
    )]
    Pin {
        /// The directory.
        dir: String,
        /// Its digest.
        found: String,
        /// The pin.
        pinned: String,
    },
}

impl Payload {
    /// Reads a payload directory.
    pub fn load(dir: &Path) -> Result<Payload, PayloadError> {
        dir::load(dir)
    }

    /// Whether this is the payload the repository pins.
    pub fn check_pin(&self, pinned: &str) -> Result<(), PayloadError> {
        if self.digest == pinned {
            Ok(())
        } else {
            Err(PayloadError::Pin {
                dir: self.dir.display().to_string(),
                found: self.digest.clone(),
                pinned: pinned.to_owned(),
            })
        }
    }

    /// Whether the directory changed since it was read (files added,
    /// removed, resized or modified): the daemon then reads it again.
    pub fn is_stale(&self) -> bool {
        dir::fingerprint(&self.dir).map_or(true, |now| now != self.fingerprint)
    }

    /// Total size in bytes.
    pub fn size(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }
}
