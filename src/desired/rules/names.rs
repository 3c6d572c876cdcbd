//! Syntax of names: instance addresses, Kubernetes names, label keys and
//! values. Pure checks returning a reason.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::diagnostic::{shown, shown_bare};
use crate::vocab::Shell;

/// Checks an instance address and returns its canonical form: an IPv4
/// literal, or a DNS name in lower case without a trailing dot.
///
/// A name the resolver reads as a number (`0x7f000001`, `2130706433`,
/// `0177.1`: inet_aton's forms, which OpenSSH and Go's resolver accept) is an
/// IPv4 address in disguise: a loopback one is returned as its dotted form,
/// so that the loopback rule ([`check_reachable`]) and the duplicate check
/// see it; any other is refused with the dotted form to write instead.
pub fn canonical_address(address: &str) -> Result<String, String> {
    if address.is_empty() {
        return Err("address is empty".into());
    }
    let bare = address.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<Ipv6Addr>() {
        if is_link_local_v6(ip) {
            return Err(format!("address {} is an IPv6 link-local address: {LINK_LOCAL}", shown(address)));
        }
        return Err(format!(
            "IPv6 address {} is not supported: instances are reached over IPv4 (as WMCO does); use an IPv4 address or a DNS name",
            shown(address)
        ));
    }
    if address.contains(':') {
        return Err(format!(
            "address {} must be a DNS name or an IPv4 address, without a port (set port in a WindowsInstanceList)",
            shown(address)
        ));
    }
    if let Ok(ip) = address.parse::<Ipv4Addr>() {
        return Ok(ip.to_string());
    }
    if let Some(ip) = numeric_ipv4(address.strip_suffix('.').unwrap_or(address)) {
        if ip.is_loopback() {
            return Ok(ip.to_string());
        }
        return Err(format!(
            "address {} is the IPv4 address {ip} written as a number (the resolver reads it so): write {ip}",
            shown(address)
        ));
    }
    if address.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return Err(format!("address {} is not a valid IPv4 address", shown(address)));
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

/// Why no node has a link-local address.
const LINK_LOCAL: &str = "link-local addresses (169.254.0.0/16, fe80::/10) are not routed, and 169.254.169.254 is \
                          the cloud's metadata service, not a node";

fn is_link_local_v6(ip: Ipv6Addr) -> bool {
    (ip.segments()[0] & 0xffc0) == 0xfe80 || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_link_local())
}

/// An IPv4 address in one of the forms inet_aton accepts besides the
/// dotted decimal one: one to four parts, each decimal, octal (a leading
/// `0`) or hexadecimal (`0x`), the last one filling the remaining bytes.
fn numeric_ipv4(text: &str) -> Option<Ipv4Addr> {
    let parts: Vec<u64> = text.split('.').map(inet_number).collect::<Option<_>>()?;
    let (last, leading) = parts.split_last()?;
    if leading.len() > 3 || leading.iter().any(|p| *p > 255) {
        return None;
    }
    let room = 8 * (4 - leading.len() as u32);
    if *last >= 1u64 << room {
        return None;
    }
    let high = leading.iter().enumerate().fold(0u64, |acc, (i, p)| acc | (p << (24 - 8 * i as u32)));
    u32::try_from(high | last).ok().map(Ipv4Addr::from)
}

fn inet_number(part: &str) -> Option<u64> {
    let (digits, radix) = match part.strip_prefix("0x").or_else(|| part.strip_prefix("0X")) {
        Some(hex) => (hex, 16),
        None if part.len() > 1 && part.starts_with('0') => (&part[1..], 8),
        None => (part, 10),
    };
    // Hex `0x` alone is 0 for inet_aton; so is an empty octal tail.
    if digits.is_empty() {
        return (radix != 10).then_some(0);
    }
    if digits.len() > 12 || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

/// Host names the resolvers of the common systems map to the loopback
/// address (`/etc/hosts` of Debian, Red Hat and SUSE, and RFC 6761's
/// `localhost.` domain).
const LOOPBACK_NAMES: &[&str] = &[
    "localhost",
    "localhost.localdomain",
    "localhost4",
    "localhost4.localdomain4",
    "localhost6",
    "localhost6.localdomain6",
    "ip6-localhost",
    "ip6-loopback",
    "ipv6-localhost",
    "ipv6-loopback",
    "loopback",
];

/// Refuses a canonical address no node can have: the unspecified address,
/// multicast or broadcast addresses and link-local ones (the cloud's
/// metadata service among them) always, the loopback network and the names
/// resolvers give it ([`LOOPBACK_NAMES`]) unless the Fleet is a lab's
/// (`spec.lab.allowLoopbackAddresses`).
pub fn check_reachable(canonical: &str, allow_loopback: bool) -> Result<(), String> {
    let ip = canonical.parse::<Ipv4Addr>().ok();
    if ip.is_some_and(|ip| ip.is_unspecified() || ip.is_broadcast() || ip.is_multicast()) {
        return Err(format!("address {canonical} cannot be a node's: it is not the address of one host"));
    }
    if ip.is_some_and(|ip| ip.is_link_local()) {
        return Err(format!("address {canonical} cannot be a node's: {LINK_LOCAL}"));
    }
    let loopback =
        ip.map_or(LOOPBACK_NAMES.contains(&canonical) || canonical.ends_with(".localhost"), |ip| ip.is_loopback());
    if loopback && !allow_loopback {
        return Err(format!(
            "address {} is this machine's own loopback address, not a Windows node's \
             (a lab that simulates nodes here sets spec.lab.allowLoopbackAddresses: true in the Fleet)",
            shown_bare(canonical)
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

/// The longest username accepted: a user principal name (`user@domain`)
/// holds at most 104 characters on Windows; posix names are shorter still.
pub const MAX_USERNAME: usize = 104;

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
    // ssh reads `-oProxyCommand=…` as an option wherever a user name can
    // stand on its command line, and git, scp and PowerShell do the same.
    if username.starts_with('-') {
        return Err(format!(
            "username {} starts with '-', which ssh and the node's tools would read as an option",
            shown(username)
        ));
    }
    if username.chars().count() > MAX_USERNAME {
        return Err(format!(
            "username {} is longer than {MAX_USERNAME} characters (Windows' limit for a user principal name)",
            shown(username)
        ));
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
        // follows for the host), no `:` or `/` (passwd's separators), and
        // nothing beyond POSIX's portable name characters (letters, digits,
        // `.`, `_`, `-`; useradd's trailing `$`), so no glob such as `*`.
        Shell::Posix => {
            let portable = |c: char| c.is_ascii_alphanumeric() || "._-".contains(c);
            let body = username.strip_suffix('$').unwrap_or(username);
            if let Some(c) = body.chars().find(|c| !portable(*c)) {
                return Err(format!(
                    "username {} contains '{}', which a posix account name cannot hold \
                     (letters, digits, '.', '_' and '-' only)",
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

    #[test]
    fn addresses_the_resolver_reads_as_numbers_are_ipv4_in_disguise_issue_35() {
        for loopback in ["0x7f000001", "2130706433", "0177.0.0.1", "0x7f.1", "127.1", "0X7F.0.0.1", "017700000001"] {
            assert_eq!(canonical_address(loopback).as_deref(), Ok("127.0.0.1"), "{loopback}");
            assert!(check_reachable("127.0.0.1", false).unwrap_err().contains("allowLoopbackAddresses"));
        }
        assert_eq!(canonical_address("0x7f000002").as_deref(), Ok("127.0.0.2"));
        let other = canonical_address("0x0a010101").unwrap_err();
        assert!(other.contains("written as a number") && other.ends_with("write 10.1.1.1"), "{other}");
        assert!(canonical_address("010.1.1.1").unwrap_err().contains("write 8.1.1.1"));
        assert!(canonical_address("0xa9fea9fe").unwrap_err().contains("169.254.169.254"));
        assert!(canonical_address("4294967296").unwrap_err().contains("not a valid IPv4 address"));
        // Names that only look numeric stay names.
        assert_eq!(canonical_address("deadbeef").as_deref(), Ok("deadbeef"));
        assert_eq!(canonical_address("1e100.net").as_deref(), Ok("1e100.net"));
    }

    #[test]
    fn the_names_resolvers_give_the_loopback_address_fall_under_the_loopback_rule_issue_35() {
        for name in ["ip6-localhost", "ip6-loopback", "localhost.localdomain", "localhost6", "localhost4"] {
            let canonical = canonical_address(name).unwrap();
            assert!(check_reachable(&canonical, false).unwrap_err().contains("loopback"), "{name}");
            assert_eq!(check_reachable(&canonical, true), Ok(()), "{name}");
        }
        assert_eq!(check_reachable("localhost-win.corp.example", false), Ok(()));
    }

    #[test]
    fn link_local_addresses_and_the_metadata_service_are_refused_even_in_a_lab_issue_35() {
        for address in ["169.254.169.254", "169.254.0.1"] {
            let refused = check_reachable(address, true).unwrap_err();
            assert!(refused.contains("link-local") && refused.contains("metadata service"), "{refused}");
        }
        for v6 in ["fe80::1", "[fe80::a9fe:a9fe]", "::ffff:169.254.169.254", "febf::1"] {
            assert!(canonical_address(v6).unwrap_err().contains("link-local"), "{v6}");
        }
        assert!(canonical_address("fec0::1").unwrap_err().contains("not supported"));
    }

    #[test]
    fn usernames_that_read_as_options_or_globs_are_refused_issue_35() {
        for shell in [Shell::Powershell, Shell::Posix] {
            for bad in ["-oProxyCommand=x", "--help", "-"] {
                assert!(check_username(bad, shell).unwrap_err().contains("option"), "{bad}");
            }
            assert!(check_username("*", shell).is_err());
            assert!(check_username(&"a".repeat(MAX_USERNAME + 1), shell).unwrap_err().contains("longer than"));
            assert_eq!(check_username(&"a".repeat(MAX_USERNAME), shell), Ok(()));
        }
        for bad in ["a?", "a[b]", "a$b", "a;b", "é"] {
            assert!(check_username(bad, Shell::Posix).is_err(), "{bad}");
        }
        assert_eq!(check_username("machine$", Shell::Posix), Ok(()));
    }
}
