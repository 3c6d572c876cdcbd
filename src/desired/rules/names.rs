//! Syntax of names: instance addresses, Kubernetes names, label keys and
//! values. Pure checks returning a reason.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::diagnostic::{shown, shown_bare};
use crate::vocab::Shell;

/// Checks an instance address and returns its canonical form: an IPv4
/// literal, or a DNS name in lower case without a trailing dot.
pub fn canonical_address(address: &str) -> Result<String, String> {
    if address.is_empty() {
        return Err("address is empty".into());
    }
    let bare = address.trim_start_matches('[').trim_end_matches(']');
    if bare.parse::<Ipv6Addr>().is_ok() {
        return Err(format!(
            "IPv6 address {address} is not supported: instances are reached over IPv4 (as WMCO does); use an IPv4 address or a DNS name"
        ));
    }
    if address.contains(':') {
        return Err(format!(
            "address {} must be a DNS name or an IPv4 address, without a port (set port in a WindowsInstanceList)",
            shown(address)
        ));
    }
    if address.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return address
            .parse::<Ipv4Addr>()
            .map(|ip| ip.to_string())
            .map_err(|_| format!("address {} is not a valid IPv4 address", shown(address)));
    }
    let name = address.strip_suffix('.').unwrap_or(address).to_ascii_lowercase();
    if name.len() > 253 || !name.split('.').all(is_dns_label) {
        return Err(format!(
            "address {} is not a valid DNS name (letters, digits and '-' in dot-separated labels of at most 63 characters)",
            shown(address)
        ));
    }
    Ok(name)
}

/// Refuses a canonical address no node can have: the unspecified address
/// and multicast or broadcast addresses always, the loopback network unless
/// the Fleet is a lab's (`spec.lab.allowLoopbackAddresses`).
pub fn check_reachable(canonical: &str, allow_loopback: bool) -> Result<(), String> {
    let ip = canonical.parse::<Ipv4Addr>().ok();
    if ip.is_some_and(|ip| ip.is_unspecified() || ip.is_broadcast() || ip.is_multicast()) {
        return Err(format!("address {canonical} cannot be a node's: it is not the address of one host"));
    }
    let loopback = ip.map_or(canonical == "localhost" || canonical.ends_with(".localhost"), |ip| ip.is_loopback());
    if loopback && !allow_loopback {
        return Err(format!(
            "address {canonical} is this machine's own loopback address, not a Windows node's \
             (a lab that simulates nodes here sets spec.lab.allowLoopbackAddresses: true in the Fleet)"
        ));
    }
    Ok(())
}

/// An RFC 1123 label (case-insensitive).
pub fn is_dns_label(label: &str) -> bool {
    !label.is_empty()
        && label.len() <= 63
        && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && !label.starts_with('-')
        && !label.ends_with('-')
}

/// A Kubernetes object name (RFC 1123 subdomain: lower case).
pub fn check_object_name(name: &str) -> Result<(), String> {
    let lower = |l: &str| is_dns_label(l) && !l.bytes().any(|b| b.is_ascii_uppercase());
    if name.is_empty() || name.len() > 253 || !name.split('.').all(lower) {
        return Err(format!(
            "name {} is not a valid Kubernetes name (lower-case letters, digits, '-' and '.', at most 253 characters)",
            shown(name)
        ));
    }
    Ok(())
}

/// A label or taint key: `[prefix/]name`.
pub fn check_label_key(key: &str) -> Result<(), String> {
    let (prefix, name) = key.rsplit_once('/').map_or((None, key), |(p, n)| (Some(p), n));
    if let Some(prefix) = prefix {
        let lower = |l: &str| is_dns_label(l) && !l.bytes().any(|b| b.is_ascii_uppercase());
        if prefix.is_empty() || prefix.len() > 253 || !prefix.split('.').all(lower) {
            return Err(format!("key {} has an invalid prefix (a lower-case DNS subdomain before '/')", shown(key)));
        }
    }
    if name.is_empty() || name.len() > 63 || !is_label_text(name) {
        return Err(format!(
            "key {} is invalid (at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit, after an optional DNS prefix and '/')",
            shown(key)
        ));
    }
    Ok(())
}

/// A label or taint value: empty, or at most 63 characters of label text.
pub fn check_label_value(value: &str) -> Result<(), String> {
    if value.is_empty() || (value.len() <= 63 && is_label_text(value)) {
        Ok(())
    } else {
        Err(format!(
            "value {} is invalid (at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit)",
            shown(value)
        ))
    }
}

fn is_label_text(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |x: &u8| x.is_ascii_alphanumeric();
    b.first().is_some_and(alnum)
        && b.last().is_some_and(alnum)
        && b.iter().all(|x| x.is_ascii_alphanumeric() || matches!(x, b'-' | b'_' | b'.'))
}

/// A username: not empty, no control characters (a `|` block scalar leaves
/// a trailing newline, which WMCO would take as part of the name).
pub fn check_username(username: &str, shell: Shell) -> Result<(), String> {
    if username.is_empty() {
        return Err("username is empty".into());
    }
    if username.ends_with('\n') {
        return Err("username ends with a line break: write the value with the `|-` block style, not `|`".into());
    }
    if username.chars().any(char::is_control) {
        return Err("username contains a control character".into());
    }
    if username.trim() != username {
        return Err(format!("username {} has leading or trailing spaces", shown(username)));
    }
    match shell {
        // Windows refuses these in account names; `DOMAIN\user` and
        // `user@domain` (one of each at most) name domain accounts, which
        // Windows' OpenSSH server accepts.
        Shell::Powershell => {
            if let Some(c) = username.chars().find(|c| "\"/[]:;|=,+*?<>".contains(*c)) {
                return Err(format!(
                    "username {} contains '{c}', which Windows does not allow in an account name",
                    shown(username)
                ));
            }
            let domain_parts = |sep: char| username.split(sep).count() > 2 || username.split(sep).any(str::is_empty);
            if (username.contains('@') && domain_parts('@')) || (username.contains('\\') && domain_parts('\\')) {
                return Err(format!(
                    "username {} is not an account name: a domain account is written user@domain or DOMAIN\\user",
                    shown(username)
                ));
            }
        }
        // A posix account name: no blank, no `@` (ssh would take what
        // follows for the host), no `:` or `/` (passwd's separators).
        Shell::Posix => {
            if let Some(c) = username.chars().find(|c| c.is_whitespace() || "@:/\\".contains(*c)) {
                return Err(format!(
                    "username {} contains '{}', which a posix account name cannot hold",
                    shown(username),
                    shown_bare(&c.to_string())
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_canonical_and_ipv4_or_dns_only() {
        assert_eq!(canonical_address("WIN-01.Corp.Example.").unwrap(), "win-01.corp.example");
        assert_eq!(canonical_address("10.1.42.1").unwrap(), "10.1.42.1");
        assert!(canonical_address("fe80::1").unwrap_err().contains("IPv6"));
        assert!(canonical_address("[::1]").unwrap_err().contains("IPv6"));
        assert!(canonical_address("10.1.42.256").is_err());
        assert!(canonical_address("host:22").unwrap_err().contains("port"));
        assert!(canonical_address("../etc").is_err());
        assert!(canonical_address("a b").is_err());
        assert!(canonical_address("").is_err());
    }

    #[test]
    fn label_keys_and_values_follow_kubernetes() {
        assert!(check_label_key("example.com/team").is_ok());
        assert!(check_label_key("team").is_ok());
        assert!(check_label_key("Example.com/team").is_err());
        assert!(check_label_key("example.com/").is_err());
        assert!(check_label_value("").is_ok());
        assert!(check_label_value("a b").is_err());
    }

    #[test]
    fn usernames_reject_the_block_scalar_newline() {
        for shell in [Shell::Powershell, Shell::Posix] {
            assert!(check_username("Administrator", shell).is_ok());
            assert!(check_username("Administrator\n", shell).unwrap_err().contains("|-"));
            assert!(check_username("", shell).is_err());
        }
    }

    #[test]
    fn usernames_hold_what_the_nodes_account_names_can() {
        // Windows: spaces and domain accounts are account names; its
        // refused characters are not.
        for ok in ["John Smith", "admin@corp.example", r"CORP\admin", "capi"] {
            assert_eq!(check_username(ok, Shell::Powershell), Ok(()), "{ok}");
        }
        for bad in ["a:b", "a/b", "a*", "a@b@c", "@corp", r"CORP\", "x<y"] {
            assert!(check_username(bad, Shell::Powershell).is_err(), "{bad}");
        }
        // posix: no blank or @.
        assert!(check_username("john smith", Shell::Posix).unwrap_err().contains("' '"));
        assert!(check_username("admin@corp", Shell::Posix).unwrap_err().contains("'@'"));
        assert_eq!(check_username("svc-win_1", Shell::Posix), Ok(()));
    }

    #[test]
    fn no_node_has_the_unspecified_or_loopback_address_outside_a_lab() {
        assert!(check_reachable("0.0.0.0", true).unwrap_err().contains("not the address of one host"));
        assert!(check_reachable("255.255.255.255", true).is_err());
        assert!(check_reachable("224.0.0.1", true).is_err());
        for loopback in ["127.0.0.1", "127.1.2.3", "localhost", "node.localhost"] {
            assert!(check_reachable(loopback, false).unwrap_err().contains("allowLoopbackAddresses"), "{loopback}");
            assert_eq!(check_reachable(loopback, true), Ok(()));
        }
        assert_eq!(check_reachable("10.1.42.1", false), Ok(()));
        assert_eq!(check_reachable("win-01.corp.example", false), Ok(()));
    }
}
