//! Host key pinning from an OpenSSH known_hosts file (decision 11).
//!
//! A host with recorded keys must present one of them: anything else is
//! refused, naming the address and both fingerprints, whatever the key type
//! (a different type is not "new", it is a different server). A host with
//! no recorded key is refused, unless trust-on-first-use is on: then its key
//! is appended to the file and enforced from then on.
//!
//! Supported: plain and hashed (`|1|salt|hash`) host names, comma lists,
//! `*`/`?` patterns and `!` negation, `[host]:port`, and the `@revoked`
//! marker. `@cert-authority` lines are skipped (host certificates are not
//! trusted by CA). The `ssh-key` crate parses the lines; matching a host
//! against them (OpenSSH's rules, which the crate leaves out) is here.
//! russh's own `known_hosts` compares whole names only (no patterns, no
//! negation) and never matches a marker line, so `@revoked` is ignored
//! (docs/dependencies.md).

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use hmac::{KeyInit, Mac};
use russh::keys::{Algorithm, HashAlg, PublicKey};
use ssh_key::known_hosts::{HostPatterns, Marker};

/// Why a host key was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostKeyError {
    /// Keys are recorded for the host and this is none of them.
    #[error(
        "host key mismatch for {host}: it presented {presented}, but {file} records {recorded}; refusing to connect (if the host was really re-installed, remove its line from the file)"
    )]
    Mismatch {
        /// `host` or `[host]:port`.
        host: String,
        /// Fingerprint presented.
        presented: String,
        /// Fingerprints recorded, comma-separated.
        recorded: String,
        /// The known_hosts file.
        file: String,
    },
    /// The key is marked `@revoked`.
    #[error("host key {presented} of {host} is marked @revoked in {file}")]
    Revoked {
        /// `host` or `[host]:port`.
        host: String,
        /// Fingerprint presented.
        presented: String,
        /// The known_hosts file.
        file: String,
    },
    /// No key is recorded and trust-on-first-use is off.
    #[error("host {host} is not in {file} (it presented {presented}); add it, or pass --trust-on-first-use")]
    Unknown {
        /// `host` or `[host]:port`.
        host: String,
        /// Fingerprint presented.
        presented: String,
        /// The known_hosts file.
        file: String,
    },
    /// The file could not be written.
    #[error("could not record the host key of {host} in {file}: {reason}")]
    Record {
        /// `host` or `[host]:port`.
        host: String,
        /// The known_hosts file.
        file: String,
        /// The IO error.
        reason: String,
    },
}

/// One usable line: a pinned or revoked key and the hosts it is for.
#[derive(Debug, Clone)]
struct Entry {
    revoked: bool,
    patterns: HostPatterns,
    key: PublicKey,
}

/// A known_hosts file, read once and appended to under a lock.
#[derive(Debug)]
pub struct KnownHosts {
    path: PathBuf,
    trust_on_first_use: bool,
    entries: Mutex<Vec<Entry>>,
    /// The key each host (`host_name`) last presented and had accepted.
    accepted: Mutex<std::collections::BTreeMap<String, PublicKey>>,
}

/// How a host key was accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accepted {
    /// It was recorded.
    Known,
    /// It was recorded just now (trust-on-first-use).
    Learned,
}

impl KnownHosts {
    /// Reads `path` (a missing file is empty). Lines that cannot be parsed
    /// are skipped, as OpenSSH does.
    pub fn load(path: &Path, trust_on_first_use: bool) -> std::io::Result<Self> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(e),
        };
        let entries = ssh_key::known_hosts::KnownHosts::new(&text).filter_map(|line| usable(line.ok()?)).collect();
        Ok(Self { path: path.to_owned(), trust_on_first_use, entries: Mutex::new(entries), accepted: Mutex::default() })
    }

    /// Checks the key `host:port` presented; with trust-on-first-use, an
    /// unknown host's key is recorded.
    pub fn verify(&self, host: &str, port: u16, key: &PublicKey) -> Result<Accepted, HostKeyError> {
        let accepted = self.check(host, port, key)?;
        let mut keys = self.accepted.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        keys.insert(host_name(host, port), key.clone());
        Ok(accepted)
    }

    /// The key `host:port` presented last and had accepted by
    /// [`Self::verify`] (`None`: no connection yet): the host key the
    /// Node's `ssh-host-key` annotation pins, as WMCO's does.
    pub fn accepted(&self, host: &str, port: u16) -> Option<PublicKey> {
        let keys = self.accepted.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        keys.get(&host_name(host, port)).cloned()
    }

    fn check(&self, host: &str, port: u16, key: &PublicKey) -> Result<Accepted, HostKeyError> {
        let name = host_name(host, port);
        let presented = fingerprint(key);
        let file = self.path.display().to_string();
        let mut entries = self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let matching: Vec<&Entry> = entries.iter().filter(|e| host_matches(&e.patterns, &name)).collect();
        if matching.iter().any(|e| e.revoked && same_key(&e.key, key)) {
            return Err(HostKeyError::Revoked { host: name, presented, file });
        }
        let pinned: Vec<&&Entry> = matching.iter().filter(|e| !e.revoked).collect();
        if pinned.iter().any(|e| same_key(&e.key, key)) {
            return Ok(Accepted::Known);
        }
        if !pinned.is_empty() {
            let recorded = pinned.iter().map(|e| fingerprint(&e.key)).collect::<Vec<_>>().join(", ");
            return Err(HostKeyError::Mismatch { host: name, presented, recorded, file });
        }
        if !self.trust_on_first_use {
            return Err(HostKeyError::Unknown { host: name, presented, file });
        }
        let record = |reason: String| HostKeyError::Record { host: name.clone(), file: file.clone(), reason };
        let line = format!("{name} {}\n", key.to_openssh().map_err(|e| record(e.to_string()))?);
        append(&self.path, &line).map_err(|e| record(e.to_string()))?;
        entries.push(Entry { revoked: false, patterns: HostPatterns::Patterns(vec![name.clone()]), key: key.clone() });
        Ok(Accepted::Learned)
    }
}

impl KnownHosts {
    /// The host key algorithms recorded for `host:port`, to offer first in
    /// the key exchange (as OpenSSH does): a host recorded only with its
    /// RSA or ECDSA key must not be asked for its Ed25519 key and then
    /// refused for presenting it.
    pub fn recorded_algorithms(&self, host: &str, port: u16) -> Vec<Algorithm> {
        let name = host_name(host, port);
        let entries = self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut algorithms = Vec::new();
        for entry in entries.iter().filter(|e| !e.revoked && host_matches(&e.patterns, &name)) {
            let found = match entry.key.algorithm() {
                Algorithm::Rsa { .. } => vec![
                    Algorithm::Rsa { hash: Some(HashAlg::Sha512) },
                    Algorithm::Rsa { hash: Some(HashAlg::Sha256) },
                    Algorithm::Rsa { hash: None },
                ],
                other => vec![other],
            };
            for algorithm in found {
                if !algorithms.contains(&algorithm) {
                    algorithms.push(algorithm);
                }
            }
        }
        algorithms
    }
}

/// `SHA256:…` as OpenSSH prints it.
pub fn fingerprint(key: &PublicKey) -> String {
    key.fingerprint(HashAlg::Sha256).to_string()
}

fn same_key(a: &PublicKey, b: &PublicKey) -> bool {
    a.key_data() == b.key_data()
}

fn host_name(host: &str, port: u16) -> String {
    if port == 22 { host.to_owned() } else { format!("[{host}]:{port}") }
}

fn append(path: &Path, line: &str) -> std::io::Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    let mut file = OpenOptions::new().create(true).append(true).open(path)?;
    let needs_newline = std::fs::read(path).map(|b| b.last().is_some_and(|&c| c != b'\n')).unwrap_or(false);
    if needs_newline {
        file.write_all(b"\n")?;
    }
    file.write_all(line.as_bytes())?;
    file.sync_data()
}

/// A parsed line as winfleet uses it (`@cert-authority` lines are not).
fn usable(entry: ssh_key::known_hosts::Entry) -> Option<Entry> {
    let revoked = match entry.marker() {
        None => false,
        Some(Marker::Revoked) => true,
        Some(Marker::CertAuthority) => return None,
    };
    Some(Entry { revoked, patterns: entry.host_patterns().clone(), key: entry.public_key().clone() })
}

/// OpenSSH's host matching: a hashed name is that one name; in a list,
/// any positive match and no negated match.
fn host_matches(patterns: &HostPatterns, name: &str) -> bool {
    match patterns {
        HostPatterns::HashedName { salt, hash } => {
            let Ok(mac) = <hmac::Hmac<sha1::Sha1> as KeyInit>::new_from_slice(salt) else { return false };
            mac.chain_update(name.as_bytes()).verify_slice(hash).is_ok()
        }
        HostPatterns::Patterns(list) => {
            let mut matched = false;
            for pattern in list {
                if let Some(negated) = pattern.strip_prefix('!') {
                    if glob(negated.as_bytes(), name.as_bytes()) {
                        return false;
                    }
                } else {
                    matched |= glob(pattern.as_bytes(), name.as_bytes());
                }
            }
            matched
        }
    }
}

/// `*` and `?` wildcards, case-insensitive (host names).
fn glob(pattern: &[u8], name: &[u8]) -> bool {
    match (pattern.split_first(), name.split_first()) {
        (None, None) => true,
        (Some((b'*', rest)), _) => glob(rest, name) || (!name.is_empty() && glob(pattern, &name[1..])),
        (Some((b'?', rest)), Some((_, name_rest))) => glob(rest, name_rest),
        (Some((p, rest)), Some((n, name_rest))) => p.eq_ignore_ascii_case(n) && glob(rest, name_rest),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;

    use super::*;

    const ED_A: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFWhSyoQKBl1f5qBFmDuAiBeHdkAg7sYV5DOLql+cwWM";
    const ED_B: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBNzjCwXWNPKTfvuMj6HLtbSWNkq65wTErnDLo+qZKQV";

    fn key(text: &str) -> PublicKey {
        PublicKey::from_openssh(text).unwrap()
    }

    fn file(content: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("known_hosts");
        std::fs::write(&path, content).unwrap();
        (dir, path)
    }

    #[test]
    fn recorded_keys_are_enforced() {
        let (_d, path) = file(&format!("# comment\n[10.0.0.5]:2222,other {ED_A}\ngarbage line\n"));
        let known = KnownHosts::load(&path, false).unwrap();
        assert_eq!(known.verify("10.0.0.5", 2222, &key(ED_A)), Ok(Accepted::Known));
        let err = known.verify("10.0.0.5", 2222, &key(ED_B)).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("[10.0.0.5]:2222") && text.contains(&fingerprint(&key(ED_A))), "{text}");
        assert!(text.contains(&fingerprint(&key(ED_B))), "{text}");
        assert!(matches!(known.verify("10.0.0.5", 22, &key(ED_A)), Err(HostKeyError::Unknown { .. })));
    }

    #[test]
    fn trust_on_first_use_records_then_enforces() {
        let (_d, path) = file(&format!("elsewhere {ED_B}"));
        let known = KnownHosts::load(&path, true).unwrap();
        assert_eq!(known.verify("node1", 22, &key(ED_A)), Ok(Accepted::Learned));
        assert_eq!(known.verify("node1", 22, &key(ED_A)), Ok(Accepted::Known));
        assert!(matches!(known.verify("node1", 22, &key(ED_B)), Err(HostKeyError::Mismatch { .. })));
        assert_eq!(known.recorded_algorithms("node1", 22), vec![Algorithm::Ed25519]);
        assert_eq!(known.recorded_algorithms("nobody", 22), Vec::new());
        let again = KnownHosts::load(&path, false).unwrap();
        assert_eq!(again.verify("node1", 22, &key(ED_A)), Ok(Accepted::Known));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), format!("elsewhere {ED_B}\nnode1 {ED_A}\n"));
    }

    #[test]
    fn hashed_names_patterns_and_revocation() {
        // `ssh-keygen -H` form of "node1", salt "salt-salt-salt-salt!".
        let salt = b"salt-salt-salt-salt!";
        let mac = <hmac::Hmac<sha1::Sha1> as KeyInit>::new_from_slice(salt).unwrap().chain_update(b"node1");
        let hashed = format!("|1|{}|{}", STANDARD.encode(salt), STANDARD.encode(mac.finalize().into_bytes()));
        let (_d, path) = file(&format!("{hashed} {ED_A}\n*.lab,!bad.lab {ED_A}\n@revoked * {ED_B}\n"));
        let known = KnownHosts::load(&path, true).unwrap();
        assert_eq!(known.verify("node1", 22, &key(ED_A)), Ok(Accepted::Known));
        assert_eq!(known.verify("w1.LAB", 22, &key(ED_A)), Ok(Accepted::Known));
        assert_eq!(known.verify("bad.lab", 22, &key(ED_A)), Ok(Accepted::Learned));
        assert!(matches!(known.verify("new", 22, &key(ED_B)), Err(HostKeyError::Revoked { .. })));
    }
}
