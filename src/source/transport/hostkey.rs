//! Pinning the host key of an ssh Git server to the OpenSSH known_hosts
//! file given with `--git-known-hosts`. libssh2 hands over the raw key blob;
//! the matching (hashed `|1|` names, `[host]:port`, patterns, `@revoked`)
//! is the same as for the nodes ([`crate::known_hosts`]), except that
//! there is no trust-on-first-use: an unknown host is refused.

use russh::keys::PublicKey;

use crate::known_hosts::{HostKeyError, KnownHosts};

/// Checks the raw SSH public key blob `raw` presented by `host:port`;
/// the error is a sentence naming the host and the fingerprints.
pub(crate) fn verify(known: &KnownHosts, host: &str, port: u16, raw: Option<&[u8]>) -> Result<(), String> {
    let raw = raw.ok_or_else(|| format!("{} sent no host key", name(host, port)))?;
    let key = PublicKey::from_bytes(raw)
        .map_err(|e| format!("{} sent a host key that cannot be read: {e}", name(host, port)))?;
    known.verify(host, port, &key).map(|_| ()).map_err(|e| reason(&e))
}

fn reason(error: &HostKeyError) -> String {
    match error {
        HostKeyError::Mismatch { host, presented, recorded, file } => {
            format!("host key mismatch for {host}: it presented {presented}, but {file} records {recorded}")
        }
        HostKeyError::Unknown { host, presented, file } => format!(
            "host {host} is not in {file} (it presented {presented}); add its key there: Git hosts are never trusted on first use"
        ),
        HostKeyError::Revoked { host, presented, file } => {
            format!("the host key {presented} of {host} is marked @revoked in {file}")
        }
        HostKeyError::Record { host, file, reason } => format!("host {host}: {file}: {reason}"),
    }
}

fn name(host: &str, port: u16) -> String {
    if port == 22 { host.to_owned() } else { format!("[{host}]:{port}") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::known_hosts::fingerprint;

    const ED_A: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFWhSyoQKBl1f5qBFmDuAiBeHdkAg7sYV5DOLql+cwWM";
    const ED_B: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBNzjCwXWNPKTfvuMj6HLtbSWNkq65wTErnDLo+qZKQV";

    fn raw(text: &str) -> Vec<u8> {
        PublicKey::from_openssh(text).unwrap().to_bytes().unwrap()
    }

    fn known(content: &str) -> (tempfile::TempDir, KnownHosts) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("known_hosts");
        std::fs::write(&path, content).unwrap();
        let known = KnownHosts::load(&path, false).unwrap();
        (dir, known)
    }

    #[test]
    fn the_pinned_key_passes_and_any_other_is_refused_with_both_fingerprints() {
        let (_d, known) = known(&format!("[git.corp]:2222 {ED_A}\n"));
        assert_eq!(verify(&known, "git.corp", 2222, Some(&raw(ED_A))), Ok(()));
        let err = verify(&known, "git.corp", 2222, Some(&raw(ED_B))).unwrap_err();
        let presented = fingerprint(&PublicKey::from_openssh(ED_B).unwrap());
        let recorded = fingerprint(&PublicKey::from_openssh(ED_A).unwrap());
        assert!(err.contains("[git.corp]:2222") && err.contains(&presented) && err.contains(&recorded), "{err}");
    }

    #[test]
    fn an_unknown_host_is_refused_and_the_file_is_left_alone() {
        let (dir, known) = known(&format!("other {ED_A}\n"));
        let err = verify(&known, "git.corp", 22, Some(&raw(ED_A))).unwrap_err();
        assert!(err.starts_with("host git.corp is not in") && err.contains("never trusted on first use"), "{err}");
        assert_eq!(std::fs::read_to_string(dir.path().join("known_hosts")).unwrap(), format!("other {ED_A}\n"));
    }

    #[test]
    fn a_missing_or_garbled_key_is_refused() {
        let (_d, known) = known(&format!("git.corp {ED_A}\n"));
        assert_eq!(verify(&known, "git.corp", 22, None), Err("git.corp sent no host key".to_owned()));
        let err = verify(&known, "git.corp", 22, Some(b"\x00\x00\x00\x07garbage")).unwrap_err();
        assert!(err.contains("cannot be read"), "{err}");
    }
}
