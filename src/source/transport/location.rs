//! What a Git URL says: where the repository is, which transport reaches
//! it, and how to show it without its userinfo. Pure: no IO.
//!
//! Hand-written: gix-url 0.40 reads `C:\repos\config` as ssh to host `c`,
//! `HTTP://host/x` as a helper scheme, refuses `/srv/http://x` and text
//! that is no URL (which must still be shown, redacted), re-serialises what
//! it parses (`%40`, `git+ssh://` → `ssh://`) where redaction must keep the
//! URL as written, and keeps only the decoded password where scrubbing
//! needs both forms (docs/dependencies.md).

/// The transport a URL selects, with what host-key pinning needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Location {
    /// `file://` or a plain path: no credentials, no network.
    Local,
    /// `ssh://[user@]host[:port]/path` or scp-like `[user@]host:path`.
    Ssh {
        /// Host name or address, without IPv6 brackets.
        host: String,
        /// TCP port (22 unless the URL says otherwise).
        port: u16,
    },
    /// `https://` (or `http://`): token through the credentials callback.
    Http,
    /// `git://`: anonymous and unauthenticated.
    Daemon,
}

/// Why a URL cannot be used.
pub(crate) type UrlProblem = String;

/// Classifies `url` the way Git does: a scheme when `://` is present, the
/// scp-like form when a `:` comes before the first `/`, a path otherwise.
pub(crate) fn classify(url: &str) -> Result<Location, UrlProblem> {
    if url.trim().is_empty() {
        return Err("the URL is empty".to_owned());
    }
    let Some((scheme, _)) = url.split_once("://") else {
        return Ok(scp_like(url).unwrap_or(Location::Local));
    };
    match scheme.to_ascii_lowercase().as_str() {
        "file" => Ok(Location::Local),
        "https" | "http" => Ok(Location::Http),
        "git" => Ok(Location::Daemon),
        "ssh" | "git+ssh" | "ssh+git" => ssh_url(url),
        other => Err(format!("the scheme {other}:// is not supported (use https://, ssh://, file:// or a path)")),
    }
}

fn ssh_url(url: &str) -> Result<Location, UrlProblem> {
    let parsed = url::Url::parse(url).map_err(|e| format!("not a valid ssh URL: {e}"))?;
    let host = match parsed.host() {
        Some(url::Host::Domain(name)) => name.to_owned(),
        Some(url::Host::Ipv4(ip)) => ip.to_string(),
        Some(url::Host::Ipv6(ip)) => ip.to_string(),
        None => return Err("the ssh URL has no host".to_owned()),
    };
    Ok(Location::Ssh { host, port: parsed.port().unwrap_or(22) })
}

/// `[user@]host:path`, as Git reads it: the part before the first `:`
/// contains no `/`, and is not a single letter (a Windows drive).
fn scp_like(url: &str) -> Option<Location> {
    let (authority, _path) = url.split_once(':')?;
    if authority.contains('/') || authority.len() < 2 && !authority.contains('@') {
        return None;
    }
    let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    (!host.is_empty()).then(|| Location::Ssh { host: host.to_owned(), port: 22 })
}

/// `url` without its userinfo (`https://user:secret@host/x` →
/// `https://host/x`; `git@host:x` → `host:x`), for messages and logs.
/// Works on text that is not a valid URL too, so nothing slips through.
pub fn redact_url(url: &str) -> String {
    if let Some(start) = url.find("://").map(|i| i + 3) {
        let rest = &url[start..];
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        return match rest[..end].rfind('@') {
            Some(at) => format!("{}{}", &url[..start], &rest[at + 1..]),
            None => url.to_owned(),
        };
    }
    if scp_like(url).is_some()
        && let Some((authority, path)) = url.split_once(':')
        && let Some((_, host)) = authority.rsplit_once('@')
    {
        return format!("{host}:{path}");
    }
    url.to_owned()
}

/// The userinfo of a `scheme://` URL (`user[:password]`), if any. A user
/// name alone can be a secret too: GitHub takes a token as the user name
/// (`https://<token>@github.com/org/repo.git`).
pub(crate) fn userinfo(url: &str) -> Option<&str> {
    let start = url.find("://")? + 3;
    let rest = &url[start..];
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    rest[..end].rsplit_once('@').map(|(userinfo, _)| userinfo)
}

/// Whether `url` is plain `http://`, where anything sent can be read on
/// the way.
pub(crate) fn is_plain_http(url: &str) -> bool {
    url.split_once("://").is_some_and(|(scheme, _)| scheme.eq_ignore_ascii_case("http"))
}

/// The secrets a URL itself carries (its password, raw and decoded), to be
/// scrubbed from any message that might echo them.
pub(crate) fn url_secrets(url: &str) -> Vec<String> {
    let Some(userinfo) = userinfo(url) else { return Vec::new() };
    let Some((_, password)) = userinfo.split_once(':') else { return Vec::new() };
    let mut secrets = vec![password.to_owned()];
    let decoded = url::form_urlencoded::parse(format!("p={password}").as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default();
    if decoded != password {
        secrets.push(decoded);
    }
    secrets.retain(|s| !s.is_empty());
    secrets
}

/// `message` with the raw URL replaced by its redacted form and every
/// secret replaced by `***`.
pub(crate) fn scrub(message: &str, url: &str, secrets: &[String]) -> String {
    let mut text = message.replace(url, &redact_url(url));
    for secret in secrets.iter().filter(|s| !s.is_empty()) {
        text = text.replace(secret.as_str(), "***");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_classified_like_git_does() {
        let ssh = |host: &str, port| Ok(Location::Ssh { host: host.to_owned(), port });
        assert_eq!(classify("file:///srv/repo.git"), Ok(Location::Local));
        assert_eq!(classify("/srv/repo.git"), Ok(Location::Local));
        assert_eq!(classify("./relative/repo"), Ok(Location::Local));
        assert_eq!(classify("C:\\repos\\config"), Ok(Location::Local));
        assert_eq!(classify("https://github.com/org/repo.git"), Ok(Location::Http));
        assert_eq!(classify("git://example.com/repo.git"), Ok(Location::Daemon));
        assert_eq!(classify("ssh://git@example.com/org/repo.git"), ssh("example.com", 22));
        assert_eq!(classify("ssh://u@127.0.0.1:2222/abs/repo.git"), ssh("127.0.0.1", 2222));
        assert_eq!(classify("ssh://[::1]:2200/repo.git"), ssh("::1", 2200));
        assert_eq!(classify("git@github.com:org/repo.git"), ssh("github.com", 22));
        assert_eq!(classify("gitlab.corp:group/repo.git"), ssh("gitlab.corp", 22));
        assert!(classify("ftp://example.com/repo.git").unwrap_err().contains("ftp://"));
        assert!(classify("").is_err());
        assert!(classify("ssh:///no-host").is_err());
    }

    #[test]
    fn userinfo_is_stripped_from_every_form() {
        assert_eq!(redact_url("https://user:secret@host/x"), "https://host/x");
        assert_eq!(redact_url("https://tok3n@host:8443/x?y=1"), "https://host:8443/x?y=1");
        assert_eq!(redact_url("https://a:b@c@host/x"), "https://host/x");
        assert_eq!(redact_url("ssh://git@example.com:22/x.git"), "ssh://example.com:22/x.git");
        assert_eq!(redact_url("git@github.com:org/x.git"), "github.com:org/x.git");
        assert_eq!(redact_url("https://host/path@with-at"), "https://host/path@with-at");
        assert_eq!(redact_url("/srv/repo.git"), "/srv/repo.git");
        assert_eq!(redact_url("not a url: user:pw@"), "not a url: user:pw@");
    }

    #[test]
    fn messages_lose_the_url_password_even_when_encoded() {
        let url = "https://bot:p%40ss%2Fword@host/x.git";
        let secrets = url_secrets(url);
        assert_eq!(secrets, vec!["p%40ss%2Fword".to_owned(), "p@ss/word".to_owned()]);
        let text = scrub(&format!("failed to fetch {url}: bad password p@ss/word"), url, &secrets);
        assert_eq!(text, "failed to fetch https://host/x.git: bad password ***");
        assert!(url_secrets("https://host/x").is_empty());
        assert!(url_secrets("https://user@host/x").is_empty());
    }

    #[test]
    fn userinfo_and_plain_http_are_read_from_the_authority_only() {
        assert_eq!(userinfo("https://bot:pw@host/x"), Some("bot:pw"));
        assert_eq!(userinfo("http://ghp_token@host/x"), Some("ghp_token"));
        assert_eq!(userinfo("https://host/path@with-at"), None);
        assert_eq!(userinfo("git@github.com:org/x.git"), None, "scp-like ssh: a user name, not a URL");
        assert!(is_plain_http("http://host/x") && is_plain_http("HTTP://host/x"));
        assert!(!is_plain_http("https://host/x") && !is_plain_http("/srv/http://x") && !is_plain_http("git@h:x"));
    }
}
