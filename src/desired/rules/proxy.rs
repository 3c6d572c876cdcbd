//! Proxy rules and the node environment it gives (decision 8): values from
//! `spec`, verbatim, NO_PROXY comma-separated.

use std::collections::BTreeMap;

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
            format!("only one Proxy is allowed: {} already defines {}", first.path, first.value.metadata.name),
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
            Err(reason) => diagnostics.push(first.error("/spec/noProxy", reason)),
        }
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

fn check_no_proxy(value: &str) -> Result<(), String> {
    for entry in value.split(',') {
        if entry.is_empty() {
            return Err("noProxy has an empty entry (two commas in a row, or a comma at an end)".into());
        }
        if entry.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!(
                "noProxy entry {} contains white space; entries are separated by commas only",
                shown(entry)
            ));
        }
    }
    Ok(())
}
