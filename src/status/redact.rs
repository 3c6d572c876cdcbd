//! Redaction of free text before it reaches a status file: the secrets the
//! daemon knows (pull-secret auths, tokens) and the shapes of credentials
//! that leak through error messages whoever wrote them (a URL's password,
//! an `Authorization` header, a bearer token, a PEM private key).
//!
//! It works on ASCII markers only, so every cut falls on a character
//! boundary, and it never fails: text it does not recognise passes through.

/// What replaces a secret.
pub const REDACTED: &str = "[redacted]";

/// Listed secrets shorter than this are ignored: replacing `abc` everywhere
/// would mangle text without protecting anything.
pub const MIN_SECRET_LEN: usize = 4;

/// `text` with every listed secret and every recognised credential replaced
/// by [`REDACTED`].
pub fn redact(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_owned();
    let mut listed: Vec<&str> = secrets.iter().map(String::as_str).filter(|s| s.len() >= MIN_SECRET_LEN).collect();
    // Longest first: a secret that contains another must go whole.
    listed.sort_by_key(|s| std::cmp::Reverse(s.len()));
    for secret in listed {
        if out.contains(secret) {
            out = out.replace(secret, REDACTED);
        }
    }
    let out = private_keys(&out);
    let out = url_passwords(&out);
    let out = after_marker(&out, "authorization", true);
    after_marker(&out, "bearer ", false)
}

/// PEM private key blocks, `-----BEGIN … PRIVATE KEY-----` through the
/// matching END line (or the end of the text when it was cut off).
fn private_keys(text: &str) -> String {
    const BEGIN: &str = "-----BEGIN ";
    const END: &str = "-----END ";
    const TAIL: &str = "PRIVATE KEY-----";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(BEGIN) {
        let header_end = rest[start..].find('\n').map_or(rest.len(), |i| start + i);
        if !rest[start..header_end].contains(TAIL) {
            out.push_str(&rest[..start + BEGIN.len()]);
            rest = &rest[start + BEGIN.len()..];
            continue;
        }
        out.push_str(&rest[..start]);
        out.push_str("[redacted private key]");
        rest = match rest[start..].find(END) {
            Some(end) => {
                let from = start + end;
                match rest[from..].find(TAIL) {
                    Some(t) => &rest[from + t + TAIL.len()..],
                    None => "",
                }
            }
            None => "",
        };
    }
    out.push_str(rest);
    out
}

/// `scheme://user:password@host` keeps the user; an `http(s)` URL whose
/// user part has no password is a token (`https://TOKEN@github.com`) and
/// goes whole. `ssh://git@host` is left alone.
fn url_passwords(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(sep) = rest.find("://") {
        let scheme_start = rest[..sep]
            .char_indices()
            .rev()
            .find(|(_, c)| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
            .map_or(0, |(i, c)| i + c.len_utf8());
        let scheme = rest[scheme_start..sep].to_ascii_lowercase();
        let authority_start = sep + 3;
        let authority_len = rest[authority_start..]
            .find(|c: char| c == '/' || c == '?' || c == '#' || c.is_whitespace() || c == '"' || c == '\'')
            .unwrap_or(rest.len() - authority_start);
        let authority = &rest[authority_start..authority_start + authority_len];
        out.push_str(&rest[..authority_start]);
        match authority.rfind('@') {
            Some(at) => {
                let userinfo = &authority[..at];
                match userinfo.find(':') {
                    Some(colon) => {
                        out.push_str(&userinfo[..=colon]);
                        out.push_str(REDACTED);
                    }
                    None if scheme == "http" || scheme == "https" => out.push_str(REDACTED),
                    None => out.push_str(userinfo),
                }
                out.push_str(&authority[at..]);
            }
            None => out.push_str(authority),
        }
        rest = &rest[authority_start + authority_len..];
    }
    out.push_str(rest);
    out
}

/// The value after `marker` (ASCII, matched case-insensitively). With
/// `separator`, the marker must be followed by `:` or `=` (a header or a
/// field, not the word in prose) and the value runs to the end of the line
/// or a closing quote; without, it is one word (a bearer token).
fn after_marker(text: &str, marker: &str, separator: bool) -> String {
    let lower = text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut search = 0;
    while let Some(found) = lower[search..].find(marker) {
        let mut i = search + found + marker.len();
        let bytes = lower.as_bytes();
        if separator {
            while i < bytes.len() && matches!(bytes[i], b'"' | b'\'' | b' ' | b'\t') {
                i += 1;
            }
            if i >= bytes.len() || !matches!(bytes[i], b':' | b'=') {
                search = i.max(search + found + 1);
                continue;
            }
            i += 1;
        }
        while i < bytes.len() && matches!(bytes[i], b'"' | b'\'' | b' ' | b'\t') {
            i += 1;
        }
        let quoted = i > 0 && matches!(bytes[i - 1], b'"' | b'\'');
        let end = lower[i..]
            .find(|c: char| {
                c == '\n' || c == '\r' || (quoted && (c == '"' || c == '\'')) || (!separator && c.is_whitespace())
            })
            .map_or(lower.len(), |e| i + e);
        if end > i && &text[i..end] != REDACTED {
            out.push_str(&text[copied..i]);
            out.push_str(REDACTED);
            copied = end;
        }
        search = end.max(i);
    }
    out.push_str(&text[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(text: &str) -> String {
        redact(text, &[])
    }

    #[test]
    fn listed_secrets_go_and_short_ones_are_ignored() {
        let secrets = vec!["s3cr3t-token".to_owned(), "abc".to_owned()];
        assert_eq!(redact("token s3cr3t-token, abc", &secrets), "token [redacted], abc");
    }

    #[test]
    fn a_secret_containing_another_goes_whole() {
        let secrets = vec!["abcd".to_owned(), "abcdefgh".to_owned()];
        assert_eq!(redact("x abcdefgh y", &secrets), "x [redacted] y");
    }

    #[test]
    fn url_passwords_keep_the_user() {
        assert_eq!(
            plain("fetch https://bot:hunter22@git.example.com/r.git failed"),
            "fetch https://bot:[redacted]@git.example.com/r.git failed"
        );
    }

    #[test]
    fn an_https_token_as_user_goes_whole_and_ssh_users_stay() {
        assert_eq!(plain("https://ghp_abcdef@github.com/x"), "https://[redacted]@github.com/x");
        assert_eq!(plain("ssh://git@github.com/x"), "ssh://git@github.com/x");
        assert_eq!(plain("see https://example.com/a@b"), "see https://example.com/a@b");
    }

    #[test]
    fn authorization_headers_and_bearer_tokens_go() {
        assert_eq!(plain("Authorization: Basic dXNlcjpwdw==\nnext"), "Authorization: [redacted]\nnext");
        assert_eq!(plain(r#"{"authorization":"Bearer xyz"} tail"#), r#"{"authorization":"[redacted]"} tail"#);
        assert_eq!(plain("got 401 for bearer abc.def"), "got 401 for bearer [redacted]");
        assert_eq!(plain("no authorization configured"), "no authorization configured");
    }

    #[test]
    fn private_key_blocks_go_even_when_cut_off() {
        let key = "a\n-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----\nb";
        assert_eq!(plain(key), "a\n[redacted private key]\nb");
        assert_eq!(plain("x -----BEGIN RSA PRIVATE KEY-----\nMIIE"), "x [redacted private key]");
        let cert = "-----BEGIN CERTIFICATE-----\nMII\n-----END CERTIFICATE-----";
        assert_eq!(plain(cert), cert);
    }

    #[test]
    fn redaction_is_idempotent_and_keeps_unicode() {
        let once = plain("é Authorization: x https://u:p@h ü");
        assert_eq!(plain(&once), once);
        assert_eq!(once, "é Authorization: [redacted]");
    }
}
