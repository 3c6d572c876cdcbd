//! Git's allowed-signers file for SSH signatures (ssh-keygen(1), "ALLOWED
//! SIGNERS"): `principals [options] keytype base64-key [comment]`, one per
//! line, `#` comments. Options understood: `namespaces="a,b"`,
//! `valid-after=` and `valid-before=` (`YYYYMMDD[HHMM[SS]][Z]`, read as
//! UTC); `cert-authority` is refused (certificates are not supported). A
//! bare public key line (`ssh-ed25519 AAAA… comment`) is accepted too, its
//! principal being the comment. Pure: parsing only.
//!
//! Hand-written: neither ssh-key (whose `PublicKey` reads the keys here) nor
//! russh parses an allowed-signers file (docs/dependencies.md).

use ssh_key::PublicKey;

/// One trusted SSH key.
#[derive(Clone, Debug)]
pub struct AllowedSigner {
    /// Who it is (the principals as written, or the key's comment).
    pub principals: String,
    /// The key.
    pub key: PublicKey,
    /// Namespaces it may sign for; empty = any.
    pub namespaces: Vec<String>,
    /// Not valid before this (seconds since the epoch).
    pub valid_after: Option<i64>,
    /// Not valid after this.
    pub valid_before: Option<i64>,
}

impl AllowedSigner {
    /// Whether it may sign in `namespace` at `time` (the commit's time).
    pub fn allows(&self, namespace: &str, time: i64) -> bool {
        let in_namespace = self.namespaces.is_empty() || self.namespaces.iter().any(|n| n == namespace);
        in_namespace && self.valid_after.is_none_or(|t| time >= t) && self.valid_before.is_none_or(|t| time <= t)
    }
}

/// Parses an allowed-signers text; errors name the line.
pub fn parse(text: &str) -> Result<Vec<AllowedSigner>, String> {
    let mut signers = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        signers.push(signer(line).map_err(|reason| format!("line {}: {reason}", i + 1))?);
    }
    Ok(signers)
}

fn signer(line: &str) -> Result<AllowedSigner, String> {
    let fields = split(line);
    let key_at = fields.iter().position(|f| is_key_type(f)).ok_or("no key type (ssh-ed25519, ssh-rsa, …)")?;
    let key_text = fields[key_at..].join(" ");
    let key = PublicKey::from_openssh(&key_text).map_err(|e| format!("the key does not parse: {e}"))?;
    let (principals, options) = match key_at {
        0 => (key.comment().to_string(), None),
        1 => (fields[0].clone(), None),
        2 => (fields[0].clone(), Some(fields[1].as_str())),
        _ => return Err("expected `principals [options] keytype key`".to_owned()),
    };
    let principals = if principals.is_empty() { key.fingerprint(Default::default()).to_string() } else { principals };
    let mut signer = AllowedSigner { principals, key, namespaces: Vec::new(), valid_after: None, valid_before: None };
    for option in options.map(split_options).unwrap_or_default() {
        let (name, value) = option.split_once('=').map_or((option.as_str(), ""), |(n, v)| (n, v));
        let value = value.trim_matches('"');
        match name.to_ascii_lowercase().as_str() {
            "namespaces" => signer.namespaces = value.split(',').map(str::to_owned).collect(),
            "valid-after" => signer.valid_after = Some(time(value)?),
            "valid-before" => signer.valid_before = Some(time(value)?),
            "cert-authority" => return Err("cert-authority: certificates are not supported".to_owned()),
            other => return Err(format!("unknown option {other:?}")),
        }
    }
    Ok(signer)
}

fn is_key_type(field: &str) -> bool {
    ["ssh-", "ecdsa-sha2-", "sk-ssh-", "sk-ecdsa-"].iter().any(|p| field.starts_with(p))
}

/// Whitespace-separated fields; double quotes group.
fn split(line: &str) -> Vec<String> {
    split_unquoted(line, char::is_whitespace)
}

/// Comma-separated options; double quotes group.
fn split_options(text: &str) -> Vec<String> {
    split_unquoted(text, |c| c == ',')
}

/// `text` split where `separates` holds outside double quotes; no empty parts.
fn split_unquoted(text: &str, separates: impl Fn(char) -> bool) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut quoted = false;
    for c in text.chars() {
        if c == '"' {
            quoted = !quoted;
        }
        match parts.last_mut() {
            Some(_) if separates(c) && !quoted => parts.push(String::new()),
            Some(part) => part.push(c),
            None => {}
        }
    }
    parts.into_iter().filter(|p| !p.is_empty()).collect()
}

/// `YYYYMMDD`, `YYYYMMDDHHMM` or `YYYYMMDDHHMMSS`, optionally with `Z`.
fn time(text: &str) -> Result<i64, String> {
    let digits = text.trim_end_matches(['Z', 'z']);
    let bad = || format!("{text:?} is not a time like 20260101 or 202601011200Z");
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let padded = match digits.len() {
        8 => format!("{digits}000000"),
        12 => format!("{digits}00"),
        14 => digits.to_owned(),
        _ => return Err(bad()),
    };
    let parsed = jiff::civil::DateTime::strptime("%Y%m%d%H%M%S", &padded).map_err(|_| bad())?;
    let instant = parsed.to_zoned(jiff::tz::TimeZone::UTC).map_err(|_| bad())?;
    Ok(instant.timestamp().as_second())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHqj3tG2yM0/L4kDgVVtqlwM0dY0ljzJIyQLhTdYPhA1";

    #[test]
    fn lines_with_and_without_options_and_bare_keys_are_read() {
        let text = format!(
            "# admins\nalice@corp.example {KEY}\n\
             ci@corp.example,bot@corp.example namespaces=\"git,file\",valid-after=\"20260101\" {KEY} ci key\n\
             {KEY} release-key\n"
        );
        let signers = parse(&text).unwrap();
        assert_eq!(signers.len(), 3);
        assert_eq!(signers[0].principals, "alice@corp.example");
        assert!(signers[0].allows("git", 0));
        assert_eq!(signers[1].namespaces, ["git", "file"]);
        assert!(signers[1].allows("git", 1_800_000_000));
        assert!(!signers[1].allows("git", 1_700_000_000), "before valid-after");
        assert!(!signers[1].allows("email", 1_800_000_000));
        assert_eq!(signers[2].principals, "release-key");
    }

    #[test]
    fn bad_lines_are_named() {
        assert_eq!(parse("\n\nalice").unwrap_err(), "line 3: no key type (ssh-ed25519, ssh-rsa, …)");
        let ca = format!("alice cert-authority {KEY}");
        assert!(parse(&ca).unwrap_err().contains("certificates are not supported"));
        let date = format!("alice valid-before=\"tomorrow\" {KEY}");
        assert!(parse(&date).unwrap_err().contains("is not a time"));
        assert!(parse("alice ssh-ed25519 AAAA").unwrap_err().contains("does not parse"));
    }
}
