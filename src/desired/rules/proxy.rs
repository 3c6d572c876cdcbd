//! Proxy rules and the node environment it gives (decision 8): values from
//! `spec`, verbatim, NO_PROXY comma-separated.

use std::collections::BTreeMap;

use std::net::{IpAddr, Ipv6Addr};

use super::names::check_object_name;
use crate::desired::Doc;
use crate::desired::kinds::proxy::Proxy;
use crate::diagnostic::{Diagnostic, shown, shown_bare};

/// Checks the Proxy (at most one) and returns the managed environment.
pub fn environment(docs: &[Doc<Proxy>], diagnostics: &mut Vec<Diagnostic>) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    let Some(first) = docs.first() else { return env };
    for extra in &docs[1..] {
        diagnostics.push(extra.error(
            "/metadata/name",
            format!("only one Proxy is allowed: {} already defines {}", first.path, shown(&first.value.metadata.name)),
        ));
    }
    if first.value.metadata.name != "cluster" {
        diagnostics.push(first.error(
            "/metadata/name",
            format!(
                "the Proxy must be named cluster, not {}: OpenShift reads the cluster-wide proxy from Proxy cluster \
                 only, and winfleet gives Windows nodes the same one",
                shown(&first.value.metadata.name)
            ),
        ));
    }
    let spec = &first.value.spec;
    let fields = [
        ("HTTP_PROXY", "/spec/httpProxy", &spec.http_proxy, &["http"][..]),
        ("HTTPS_PROXY", "/spec/httpsProxy", &spec.https_proxy, &["http", "https"][..]),
    ];
    for (name, pointer, value, schemes) in fields {
        let Some(value) = value.as_deref().filter(|v| !v.is_empty()) else { continue };
        match check_url(value, schemes) {
            Ok(()) => {
                if url::Url::parse(value).is_ok_and(|u| u.password().is_some()) {
                    let redacted = crate::node::display_env_value(value);
                    let shown = shown(&redacted);
                    diagnostics.push(first.warning(
                        pointer,
                        format!(
                            "proxy URL {shown} carries a password: it is committed in Git, readable by anyone who can \
                             read the repository, and it reaches every node's environment; prefer a proxy that \
                             authenticates the nodes another way, and rotate this password"
                        ),
                    ));
                }
                env.insert(name.to_owned(), value.to_owned());
            }
            Err(reason) => diagnostics.push(first.error(pointer, reason)),
        }
    }
    if let Some(value) = spec.no_proxy.as_deref().filter(|v| !v.is_empty()) {
        match check_no_proxy(value) {
            Ok(()) => {
                env.insert("NO_PROXY".to_owned(), value.to_owned());
            }
            Err(reasons) => diagnostics.extend(reasons.into_iter().map(|r| first.error("/spec/noProxy", r))),
        }
    }
    // OpenShift writes `trustedCA: {name: ""}` when there is none.
    if let Some(ca) = spec.trusted_ca.as_ref().filter(|ca| !ca.name.is_empty())
        && let Err(reason) = check_object_name(&ca.name)
    {
        diagnostics.push(first.error("/spec/trustedCA/name", format!("trustedCA: ConfigMap {reason}")));
    }
    env
}

fn check_url(value: &str, schemes: &[&str]) -> Result<(), String> {
    // Messages show the URL with its password redacted.
    let redacted = crate::node::display_env_value(value);
    let shown = shown(&redacted);
    if value.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("proxy URL {shown} contains white space or a control character"));
    }
    if !value.contains("://") {
        return Err(format!("proxy URL {shown} has no scheme: write {}://{}", schemes[0], shown_bare(&redacted)));
    }
    let url = url::Url::parse(value).map_err(|e| format!("proxy URL {shown} is not a valid URL: {e}"))?;
    if !schemes.contains(&url.scheme()) {
        return Err(format!("proxy URL {shown} must use {}, not {}", schemes.join(" or "), url.scheme()));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(format!("proxy URL {shown} has no host"));
    }
    if url.port() == Some(0) {
        return Err(format!("proxy URL {shown} has port 0: write the proxy's port, from 1 to 65535"));
    }
    if !matches!(url.path(), "" | "/") || url.query().is_some() || url.fragment().is_some() {
        return Err(format!("proxy URL {shown} must be scheme://[user:password@]host[:port], without a path"));
    }
    Ok(())
}

/// The longest `noProxy` accepted, in characters: Windows holds an
/// environment variable of at most 32,767 characters.
pub const MAX_NO_PROXY: usize = 32_767;

/// The longest entry of `noProxy`: a DNS name (253) with a port.
pub const MAX_NO_PROXY_ENTRY: usize = 260;

fn check_no_proxy(value: &str) -> Result<(), Vec<String>> {
    if value.chars().count() > MAX_NO_PROXY {
        return Err(vec![format!(
            "noProxy {} is longer than {MAX_NO_PROXY} characters, the most a Windows environment variable holds",
            shown(value)
        )]);
    }
    let problems: Vec<String> = value.split(',').filter_map(|entry| check_no_proxy_entry(entry).err()).collect();
    if problems.is_empty() { Ok(()) } else { Err(problems) }
}

/// One entry: `*`, a domain (`example.com`, `.example.com`, `*.example.com`),
/// an IP address or a CIDR, optionally with a port, as Go's and curl's
/// NO_PROXY readers take them (OpenShift's Proxy admits the same).
fn check_no_proxy_entry(entry: &str) -> Result<(), String> {
    let shown = shown(entry);
    if entry.is_empty() {
        return Err("noProxy has an empty entry (two commas in a row, or a comma at an end)".into());
    }
    if entry.chars().any(|c| c.is_whitespace() || crate::diagnostic::is_unseen(c)) {
        return Err(format!(
            "noProxy entry {shown} contains white space or an invisible character; entries are separated by commas only"
        ));
    }
    if entry.chars().count() > MAX_NO_PROXY_ENTRY {
        return Err(format!("noProxy entry {shown} is longer than {MAX_NO_PROXY_ENTRY} characters"));
    }
    let host = entry.strip_prefix("*.").or_else(|| entry.strip_prefix('.')).unwrap_or(entry);
    let host = match host.rsplit_once(':') {
        Some((name, port))
            if (!name.contains(':') || name.ends_with(']')) && port.parse::<u16>().is_ok_and(|p| p > 0) =>
        {
            name
        }
        _ => host,
    };
    let bracketed = host.strip_prefix('[').and_then(|h| h.strip_suffix(']'));
    let label = |l: &str| {
        !l.is_empty() && l.len() <= 63 && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    let valid = entry == "*"
        || is_ip_or_cidr(entry)
        || bracketed.is_some_and(|h| h.parse::<Ipv6Addr>().is_ok())
        || (host.len() <= 253 && host.split('.').all(label));
    if valid {
        Ok(())
    } else {
        Err(format!(
            "noProxy entry {shown} is not a domain (example.com, .example.com), an IP address or a CIDR \
             (10.0.0.0/8), with an optional :port, nor *"
        ))
    }
}

/// `10.0.0.1`, `fd00::1`, `10.0.0.0/8`, `fd00::/8`.
fn is_ip_or_cidr(entry: &str) -> bool {
    let (ip, bits) = entry.split_once('/').map_or((entry, None), |(ip, bits)| (ip, Some(bits)));
    let Ok(ip) = ip.parse::<IpAddr>() else { return false };
    let most = if ip.is_ipv4() { 32 } else { 128 };
    bits.is_none_or(|b| {
        (1..=3).contains(&b.len()) && b.bytes().all(|c| c.is_ascii_digit()) && b.parse::<u8>().is_ok_and(|b| b <= most)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_proxy_takes_domains_addresses_cidrs_and_ports_only_issue_35() {
        let ok = ".cluster.local,.svc,10.0.0.0/16,172.30.0.0/16,localhost,127.0.0.1,api-int.prod.corp.example,\
                  *.example.com,*,fd00::1,fd00::/8,[fd00::1]:8080,proxy.corp:3128,under_score.example";
        assert_eq!(check_no_proxy(ok), Ok(()));
        for bad in
            ["${IFS}", "../", "a/b", "evil\u{202e}exe.example", "10.0.0.0/33", "10.0.0.0/", "a:0", "$(id)", "a..b"]
        {
            assert!(check_no_proxy(bad).is_err(), "{bad}");
        }
        let problems = check_no_proxy("${IFS},ok.example,../").unwrap_err();
        assert_eq!(problems.len(), 2, "each bad entry is its own problem: {problems:?}");
        let huge = check_no_proxy(&"a".repeat(1_000_000)).unwrap_err();
        assert_eq!(huge.len(), 1);
        assert!(huge[0].contains("(1000000 characters)") && huge[0].contains("32767"), "{}", huge[0]);
        let long = check_no_proxy(&format!("{}.example", "a".repeat(300))).unwrap_err();
        assert!(long[0].contains("longer than 260"), "{long:?}");
    }
}
