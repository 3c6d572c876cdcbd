//! The fleet key as the nodes and the cluster know it.

use super::Pool;

impl Pool {
    /// WMCO's `pub-key-hash` of the fleet key: the lower-case hex SHA-256
    /// of the public key in authorized_keys form (`<type> <base64>`).
    pub fn public_key_hash(&self) -> String {
        let public = self.key.public_key();
        let line = public.to_openssh().unwrap_or_default();
        let mut parts = line.split_whitespace();
        let text = format!("{} {}", parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
        crate::vocab::file::sha256_hex(text.as_bytes())
    }

    /// The fleet's public key in authorized_keys form (`<type> <base64>`).
    pub fn public_key_line(&self) -> String {
        let line = self.key.public_key().to_openssh().unwrap_or_default();
        line.split_whitespace().take(2).collect::<Vec<_>>().join(" ")
    }

    /// The fleet key's `SHA256:…` fingerprint.
    pub fn public_key_fingerprint(&self) -> String {
        crate::known_hosts::fingerprint(self.key.public_key())
    }
}
