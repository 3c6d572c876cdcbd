//! Registry credentials from a dockerconfigjson pull secret (WMCO-SPEC 1.7,
//! decision 6). Credentials never reach `Debug`, `Display`, plans or logs.

use std::collections::BTreeMap;
use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};

/// What is wrong with a pull secret file (never quotes its content).
#[derive(Debug, thiserror::Error)]
pub enum PullSecretError {
    /// Not JSON, or not the dockerconfigjson shape.
    #[error("not a dockerconfigjson document (expected {{\"auths\": {{\"<registry>\": {{\"auth\": \"…\"}}}}}}): {0}")]
    Shape(String),
    /// An `auth` field that is not base64 of `user:password`.
    #[error("credentials for registry {0} are not base64 of \"user:password\"")]
    Auth(String),
}

/// The `authorization` header value per registry host, exactly as keyed in
/// the secret's `auths` map.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct PullSecret {
    headers: BTreeMap<String, String>,
}

impl fmt::Debug for PullSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PullSecret").field("registries", &self.headers.keys().collect::<Vec<_>>()).finish()
    }
}

#[derive(serde::Deserialize)]
struct DockerConfig {
    auths: BTreeMap<String, AuthEntry>,
}

#[derive(serde::Deserialize)]
struct AuthEntry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
}

impl PullSecret {
    /// Parses a `.dockerconfigjson` document.
    pub fn parse(json: &[u8]) -> Result<Self, PullSecretError> {
        // Only the position is reported: serde_json's messages can quote values.
        let config: DockerConfig = serde_json::from_slice(json)
            .map_err(|e| PullSecretError::Shape(format!("at line {} column {}", e.line(), e.column())))?;
        let mut headers = BTreeMap::new();
        for (registry, entry) in config.auths {
            let pair = match (&entry.auth, &entry.username, &entry.password) {
                (Some(auth), _, _) if !auth.is_empty() => {
                    let raw = STANDARD
                        .decode(auth.trim())
                        .or_else(|_| STANDARD_NO_PAD.decode(auth.trim()))
                        .map_err(|_| PullSecretError::Auth(registry.clone()))?;
                    let text = String::from_utf8(raw).map_err(|_| PullSecretError::Auth(registry.clone()))?;
                    if !text.contains(':') {
                        return Err(PullSecretError::Auth(registry));
                    }
                    text
                }
                (_, Some(user), Some(password)) => format!("{user}:{password}"),
                _ => continue,
            };
            headers.insert(registry, format!("Basic {}", STANDARD.encode(pair)));
        }
        Ok(Self { headers })
    }

    /// The header for a mirror's registry host (exact `host[:port]` match).
    pub fn authorization(&self, registry_host: &str) -> Option<&str> {
        self.headers.get(registry_host).map(String::as_str)
    }

    /// Every credential in the secret, in each form it could leak in (the
    /// header, its base64, `user:password`, the password), for redaction.
    pub fn secret_values(&self) -> Vec<String> {
        let mut values = Vec::new();
        for header in self.headers.values() {
            values.push(header.clone());
            let Some(encoded) = header.strip_prefix("Basic ") else { continue };
            values.push(encoded.to_owned());
            let Some(pair) = STANDARD.decode(encoded).ok().and_then(|raw| String::from_utf8(raw).ok()) else {
                continue;
            };
            if let Some((_, password)) = pair.split_once(':') {
                values.push(password.to_owned());
            }
            values.push(pair);
        }
        values
    }

    /// Whether the secret has no usable credentials.
    pub fn is_empty(&self) -> bool {
        self.headers.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auth_padded_unpadded_and_user_password_forms_give_the_same_header() {
        let padded = STANDARD.encode("u:p");
        let unpadded = STANDARD_NO_PAD.encode("u:p");
        let json = format!(
            r#"{{"auths":{{"a.io":{{"auth":"{padded}"}},"b.io":{{"auth":"{unpadded}"}},"c.io":{{"username":"u","password":"p"}}}}}}"#
        );
        let s = PullSecret::parse(json.as_bytes()).unwrap();
        let want = format!("Basic {padded}");
        for r in ["a.io", "b.io", "c.io"] {
            assert_eq!(s.authorization(r), Some(want.as_str()));
        }
        assert_eq!(s.authorization("a.io/org"), None);
    }

    #[test]
    fn debug_and_errors_never_show_credentials() {
        let s = PullSecret::parse(br#"{"auths":{"a.io":{"username":"u","password":"hunter2"}}}"#).unwrap();
        assert!(!format!("{s:?}").contains("hunter2"));
        let err = PullSecret::parse(br#"{"auths":{"a.io":{"auth":"hunter2!"}}}"#).unwrap_err();
        assert!(!err.to_string().contains("hunter2"));
        let err = PullSecret::parse(br#"{"auths":"hunter2"}"#).unwrap_err();
        assert!(!err.to_string().contains("hunter2"), "{err}");
    }
}
