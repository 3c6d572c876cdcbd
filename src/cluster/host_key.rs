//! WMCO's SSH host key annotations on a Node (`pkg/windows/hostkey.go`):
//! `windowsmachineconfig.openshift.io/ssh-host-key`, the host's public key
//! in SSH wire format, base64-encoded (Go's
//! `base64.StdEncoding.EncodeToString(key.Marshal())`: the second field of
//! an OpenSSH public key line), and `…/ssh-host-key-type`, its algorithm
//! (`key.Type()`: `ssh-ed25519`, `ecdsa-sha2-nistp256`, `ssh-rsa`). WMCO
//! pins the first key it sees and writes both on the Node when it
//! configures it; tools read them to pin the host. winfleet writes the key
//! its known_hosts accepted on the connection that configured the node
//! ([`crate::known_hosts::KnownHosts::accepted`]), at the join, beside
//! WMCO's `pub-key-hash`. Pure.

use russh::keys::PublicKey;

use super::NodeObs;

/// The host's public key, base64 of its SSH wire format.
pub const SSH_HOST_KEY_ANNOTATION: &str = "windowsmachineconfig.openshift.io/ssh-host-key";
/// The host key's algorithm.
pub const SSH_HOST_KEY_TYPE_ANNOTATION: &str = "windowsmachineconfig.openshift.io/ssh-host-key-type";

/// Both annotations for `key`, as WMCO writes them (`None` when the key
/// cannot be encoded).
pub fn annotations(key: &PublicKey) -> Option<[(&'static str, String); 2]> {
    let line = key.to_openssh().ok()?;
    let wire = line.split_whitespace().nth(1)?.to_owned();
    Some([(SSH_HOST_KEY_ANNOTATION, wire), (SSH_HOST_KEY_TYPE_ANNOTATION, key.algorithm().as_str().to_owned())])
}

/// The annotations the Node lacks or has otherwise: none without a key.
/// The key winfleet verified is the truth (its known_hosts), so a
/// different recorded key is replaced, as it would be after the host's
/// key changed and known_hosts was updated.
pub fn missing(key: Option<&PublicKey>, node: &NodeObs) -> Vec<(&'static str, String)> {
    key.and_then(annotations)
        .into_iter()
        .flatten()
        .filter(|(name, value)| node.annotations.get(*name) != Some(value))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ED25519: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPHlXYhS41U/iNaIrk0CbYE/wwLfRjaWviqY3mBS9Dtu host";

    #[test]
    fn the_key_is_base64_wire_format_and_its_type_the_algorithm_as_wmco_writes_them() {
        let key = PublicKey::from_openssh(ED25519).unwrap();
        let [(k1, v1), (k2, v2)] = annotations(&key).unwrap();
        assert_eq!(
            (k1, v1.as_str()),
            (SSH_HOST_KEY_ANNOTATION, "AAAAC3NzaC1lZDI1NTE5AAAAIPHlXYhS41U/iNaIrk0CbYE/wwLfRjaWviqY3mBS9Dtu")
        );
        assert_eq!((k2, v2.as_str()), (SSH_HOST_KEY_TYPE_ANNOTATION, "ssh-ed25519"));
    }

    #[test]
    fn only_annotations_the_node_lacks_or_has_otherwise_are_written() {
        let key = PublicKey::from_openssh(ED25519).unwrap();
        let mut node = NodeObs::default();
        assert_eq!(missing(Some(&key), &node).len(), 2);
        assert_eq!(missing(None, &node), []);
        for (name, value) in annotations(&key).unwrap() {
            node.annotations.insert(name.to_owned(), value);
        }
        assert_eq!(missing(Some(&key), &node), []);
        node.annotations.insert(SSH_HOST_KEY_TYPE_ANNOTATION.to_owned(), "ssh-rsa".to_owned());
        assert_eq!(missing(Some(&key), &node), [(SSH_HOST_KEY_TYPE_ANNOTATION, "ssh-ed25519".to_owned())]);
    }
}
