//! Syntax of names: instance addresses, Kubernetes names, label keys and
//! values. Pure checks returning a reason.

use std::net::{Ipv4Addr, Ipv6Addr};

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
            "address {address:?} must be a DNS name or an IPv4 address, without a port (set port in a WindowsInstanceList)"
        ));
    }
    if address.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return address
            .parse::<Ipv4Addr>()
            .map(|ip| ip.to_string())
            .map_err(|_| format!("address {address:?} is not a valid IPv4 address"));
    }
    let name = address.strip_suffix('.').unwrap_or(address).to_ascii_lowercase();
    if name.len() > 253 || !name.split('.').all(is_dns_label) {
        return Err(format!(
            "address {address:?} is not a valid DNS name (letters, digits and '-' in dot-separated labels of at most 63 characters)"
        ));
    }
    Ok(name)
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
            "name {name:?} is not a valid Kubernetes name (lower-case letters, digits, '-' and '.', at most 253 characters)"
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
            return Err(format!("key {key:?} has an invalid prefix (a lower-case DNS subdomain before '/')"));
        }
    }
    if name.is_empty() || name.len() > 63 || !is_label_text(name) {
        return Err(format!(
            "key {key:?} is invalid (at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit, after an optional DNS prefix and '/')"
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
            "value {value:?} is invalid (at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit)"
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
pub fn check_username(username: &str) -> Result<(), String> {
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
        return Err(format!("username {username:?} has leading or trailing spaces"));
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
        assert!(check_username("Administrator").is_ok());
        assert!(check_username("Administrator\n").unwrap_err().contains("|-"));
        assert!(check_username("").is_err());
    }
}
